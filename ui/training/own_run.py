"""Settings that name a run stored here: the Train form says that Train opens it, and offers a seed of one's own.

A newcomer pressing Train on the form's first settings (the selected preset's) got "already trained: opened the
stored run" and no training, and had to guess that the seed must change. The form now says so under its button
before anyone presses it, and one click takes the first seed after the form's whose run is not stored here.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from lengen_core.config import SETTINGS, RunConfig, with_changes
from ui.runs import is_stored

SEEDS_LOOKED_AT = 1_000  # how far past the form's seed a seed not trained here is looked for


def stored(config: RunConfig) -> bool:
    """Is a run of exactly this config and seed stored here (Train would open it)?"""
    return is_stored(config.run_id())


def untrained_seed(config: RunConfig) -> int | None:
    """The first seed after `config`'s whose run is not stored here (None: none within SEEDS_LOOKED_AT)."""
    last = min(config.train.seed + SEEDS_LOOKED_AT, SETTINGS["seed"].high)
    return next((seed for seed in range(config.train.seed + 1, last + 1) if not stored(with_changes(config, seed=seed))),
                None)


def offer_own_run(config: RunConfig, where, take_seed: Callable[[int], None] | None, compact: bool = False) -> None:
    """When `config` is stored: say in `where` that Train opens it, and, where the seed can change (`take_seed`,
    the form's callback that sets it; None when a lesson fixes or hides the seed), offer the first seed not
    trained here in one click. `compact`: one line beside the button (a lesson on a projector)."""
    if not stored(config):
        where.empty()
        return
    text = f"These settings and seed are already trained here (`{config.run_id()}`): **Train opens that run**."
    seed = untrained_seed(config) if take_seed is not None else None
    if compact:
        with where.container():
            if seed is None:
                st.caption("Already trained here: **Train opens that run**.")
            else:
                st.button(f"Already trained: use seed {seed:,}", key="train-new-seed", on_click=take_seed, args=(seed,))
        return
    with where.container():
        if seed is None:
            st.info(text + (" Change a setting to train a new one." if take_seed else ""), icon=":material/inventory_2:")
            return
        st.info(text + f" To train your own, take seed {seed:,} (not trained here yet).", icon=":material/inventory_2:")
        st.button(f"Use seed {seed:,}", key="train-new-seed", icon=":material/casino:", on_click=take_seed, args=(seed,),
                  help="Sets the seed; then press Train to train a run of your own with these settings.")
