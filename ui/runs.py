"""Cached access to runs and to every analysis of a run, keyed by run id and arguments.

Models are loaded once per process (`st.cache_resource`) and shared between sessions, so nothing
here or in a page may change a model in place; analyses are plain data (`st.cache_data`).
"""

from __future__ import annotations

import streamlit as st

from lengen_core.carrier import Carrier, extract_carrier
from lengen_core.dilution import Prediction, predict
from lengen_core.evaluate import LengthError, LengthReport, check_lengths, evaluate
from lengen_core.fit import FitResult, fit_dilution
from lengen_core.heatmap import Heatmap, attention_heatmap
from lengen_core.store import RunStore, StoreError
from lengen_core.training import Run
from ui.presets import PRESET_ROOT, preset_ids


def stores() -> list[RunStore]:
    """The person's store first (runs trained here), then the presets shipped with the app."""
    return [RunStore(), RunStore(root=PRESET_ROOT)]


def stored_run_ids() -> list[str]:
    summaries = [s for store in stores() for s in store.list_runs()]
    return [s.run_id for s in sorted(summaries, key=lambda s: s.created, reverse=True)]


@st.cache_resource(show_spinner="Loading run…", max_entries=32)
def load_run(run_id: str) -> Run:
    for store in stores():
        if store.exists(run_id):
            run = store.load(run_id)
            run.model.eval()
            run.model.requires_grad_(False)
            return run
    raise StoreError(f"no run named {run_id} in {', '.join(str(s.root) for s in stores())}")


def run_label(run_id: str) -> str:
    presets = {v: k for k, v in preset_ids().items()}
    if run_id in presets:
        return f"Preset: {presets[run_id]}"
    try:
        config = load_run(run_id).config
    except StoreError:
        return run_id
    task, model, train = config.task, config.model, config.train
    return f"{model.encoding}·{model.attention} k={task.offset} L={task.train_length} seed {train.seed} · {train.steps} steps"


@st.cache_data(show_spinner="Evaluating…", max_entries=64)
def evaluation(run_id: str, lengths: tuple[int, ...], samples: int = 256) -> list[LengthReport]:
    run = load_run(run_id)
    return evaluate(run.model, run.config, list(lengths), samples=samples)


@st.cache_data(show_spinner="Fitting the dilution law…", max_entries=64)
def fitted_law(run_id: str, lengths: tuple[int, ...], samples: int = 256) -> FitResult:
    """The law fitted to `evaluation(run_id, lengths, samples)`, gated by the run's verdict."""
    run = load_run(run_id)
    reports = evaluation(run_id, lengths, samples)
    return fit_dilution(lengths, [r.target_mass for r in reports], [r.target_mass_sem for r in reports],
                        run.config.task.train_length, run.config.task.vocab_size, run.verdict)


@st.cache_data(show_spinner="Predicting from the weights…", max_entries=64)
def prediction(run_id: str, lengths: tuple[int, ...]) -> list[Prediction]:
    run = load_run(run_id)
    return predict(run.model, run.config, list(lengths))


@st.cache_data(show_spinner="Extracting the carrier…", max_entries=64)
def carrier(run_id: str, search_length: int) -> Carrier:
    run = load_run(run_id)
    return extract_carrier(run.model, run.config, search_length=search_length)


@st.cache_data(show_spinner="Computing attention…", max_entries=64)
def heatmap(run_id: str, length: int, max_cells: int = 256) -> Heatmap:
    run = load_run(run_id)
    return attention_heatmap(run.model, run.config, length, max_cells=max_cells)


def allowed_lengths(run_id: str, lengths: list[int]) -> list[int]:
    """The lengths the run's encoding accepts (a learned table ends at `max_positions`)."""
    run = load_run(run_id)
    allowed = []
    for length in lengths:
        try:
            check_lengths(run.config, run.model, [length])
        except LengthError:
            continue
        allowed.append(length)
    return allowed
