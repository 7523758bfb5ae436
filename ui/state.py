"""Session state: the selected run follows the person from page to page, and the URL follows both.

A first visit selects the RoPE preset. The sidebar shows the selected run's id, a selector of
every preset and stored run (each label unique: the selector's value travels by label), and the
run as a download. Only the person changes the selected run: a page, a rerun or a link already
applied never does. The query string holds the selected run's
config (`lengen.share`) and the page's view settings, so a pasted link opens the same run and
view: a link's run is selected when it is stored here; otherwise the Train page opens with the
link's config in its form. A bad link is a message at the top of the page and changes nothing.

A link is applied once: the session remembers what it last wrote into the URL, and only query
values it did not write count as a new link (page navigation clears the query string; that is not
a new link either; nor are the address's values of keys this session changed and has not written yet).
Nothing here writes the address as it goes: the run's changes are written at its end, in one step
(`ui.address`), so Back and Forward only ever restore whole links.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from lengen.presets import DEFAULT_PRESET, preset_ids
from lengen.share import (
    CONFIG_KEYS,
    RUN_KEY,
    config_from_query,
    config_to_query,
    has_config,
    run_archive_chunks,
    view_bool,
    view_choice,
    view_int,
    view_run_ids,
)
from lengen.share import run_id_from_query as link_run_id
from lengen.store import StoreError
from lengen_core.config import ConfigError, RunConfig
from ui.address import drop_from_link, in_link, pending, set_in_link
from ui.downloads import download_url
from ui.runs import is_stored, load_run, run_labels, run_options, stores

RUN_KEY_STATE = "run_id"
PICKER_KEY = "_run_picker"
LINK_CONFIG_KEY = "link_config"  # a linked config not trained here yet: the Train form starts from it
WRITTEN_KEY = "_link_written"  # query values this session wrote last
NOTICES_KEY = "_link_notices"  # messages about the link, shown at the top of the next page drawn
SELECTION_KEYS = {*CONFIG_KEYS, RUN_KEY}
TRAIN_PAGE = "pages/train.py"


def selected_run_id() -> str | None:
    if RUN_KEY_STATE not in st.session_state:
        st.session_state[RUN_KEY_STATE] = preset_ids().get(DEFAULT_PRESET)
    return st.session_state[RUN_KEY_STATE]


def select_run(run_id: str | None) -> None:
    st.session_state[RUN_KEY_STATE] = run_id
    st.session_state.pop(LINK_CONFIG_KEY, None)


def linked_config() -> RunConfig | None:
    """The config of a link that is not trained here yet, if one is waiting."""
    return st.session_state.get(LINK_CONFIG_KEY)


def notify(message: str) -> None:
    st.session_state.setdefault(NOTICES_KEY, []).append(message)


def plain(text: str) -> str:
    """Text shown verbatim by markdown elements: link values are anyone's text."""
    return "".join("\\" + c if c in "\\`*_{}[]()<>#+-.!|~$:" else c for c in text)


def _query() -> dict[str, list[str]]:
    return {key: st.query_params.get_all(key) for key in st.query_params}


def _written() -> dict[str, list[str]]:
    return st.session_state.setdefault(WRITTEN_KEY, {})


def _is_new(params: dict[str, list[str]], keys: set[str]) -> bool:
    """Does the URL carry values for `keys` that this session did not write? (Keys with a change not written
    yet are this session's: the address shows their old values until the run ends.)"""
    keys = set(keys) - pending()
    ours = {key: values for key, values in _written().items() if key in keys}
    theirs = {key: values for key, values in params.items() if key in keys}
    return bool(theirs) and theirs != ours


def _follow_link() -> None:
    """Select the run a new link names, or queue its config for the Train page; report what fails."""
    params = _query()
    if not _is_new(params, SELECTION_KEYS):
        return
    _written().update({key: values for key, values in params.items() if key in SELECTION_KEYS})
    try:
        run_id = link_run_id(params)
        config = config_from_query(params) if has_config(params) else None
    except (ConfigError, StoreError) as error:
        notify(f"This link cannot be opened: {error}. Nothing was changed.")
        return
    described = None if config is None else config.run_id()
    if run_id is not None and is_stored(run_id):  # the run a link names wins over the one its settings describe
        select_run(run_id)
        return
    if config is None:
        notify(f"This link names the run {run_id!r}, which is not stored here. Nothing was changed.")
        return
    if run_id is not None and run_id != described:
        notify(f"This link names the run {run_id!r}, which is not stored here; its settings were used instead.")
    if is_stored(described):
        select_run(described)
        return
    st.session_state[LINK_CONFIG_KEY] = config
    notify("This link's run is not trained here yet: the form below holds its config and seed. "
           "Press Train to train it (or change the settings first).")
    st.switch_page(TRAIN_PAGE)


def _show_in_link(params: dict[str, str | list[str]], keys: set[str]) -> None:
    """Make the URL's values for `keys` exactly `params` (a list: the key repeated), and remember them.
    The address shows them when the run ends (ui.address.write_link)."""
    written = _written()
    for key in keys - set(params):
        written.pop(key, None)
        if in_link(key):
            drop_from_link(key)
    for key, value in params.items():
        values = [value] if isinstance(value, str) else list(value)
        written[key] = values
        if in_link(key) != values:
            set_in_link(key, values)


def _link_of_selection() -> dict[str, str]:
    config = linked_config()
    if config is None and (run_id := selected_run_id()) is not None:
        try:
            config = load_run(run_id).config
        except StoreError:
            return {}
    return {} if config is None else config_to_query(config)


def _picked(options: list[str]) -> None:
    if st.session_state.get(PICKER_KEY) in options:  # a run id, never a stale label
        select_run(st.session_state[PICKER_KEY])


def run_sidebar() -> None:
    """Follow a new link, then show the selected run, a selector of runs and the run as a zip."""
    _follow_link()
    for message in st.session_state.pop(NOTICES_KEY, []):
        st.warning(plain(message), icon=":material/link_off:")
    options = run_options()
    current = selected_run_id()
    if current is not None and current not in options:
        options.insert(0, current)
    if options:
        if st.session_state.get(PICKER_KEY) != current:
            st.session_state[PICKER_KEY] = current if current in options else options[0]
        labels = run_labels(options)
        st.sidebar.selectbox(
            "Selected run", options, key=PICKER_KEY, format_func=labels.__getitem__, on_change=_picked,
            args=(options,),
            help="Every page shows this run. Presets ship with the app; runs you train are added here.",
        )
        current = selected_run_id()
        st.sidebar.caption(labels.get(current, current))  # whole and wrapped: a narrow box may cut its end
        st.sidebar.caption(f"Run id: `{current}`")
        _download(current)
    else:
        st.sidebar.info("No run yet: train one on the Train page.")
    st.sidebar.caption("The address bar holds a link to this run and view: copy it to share them.")
    _show_in_link(_link_of_selection(), SELECTION_KEYS)


MAX_IN_MEMORY_BYTES = 256 << 20  # without the streaming route, a download is held in the server's memory


def _download(run_id: str | None) -> None:
    """The selected run as a zip: streamed from disk by the server's own route (`ui.downloads`,
    under `streamlit run serve.py`), else through Streamlit's in-memory download button, bounded."""
    store = next((s for s in stores() if run_id is not None and s.exists(run_id)), None)
    if store is None:
        return
    label, icon = "Download this run (zip)", ":material/download:"
    about = "config.json, weights.safetensors and metrics.json: load it with lengen.store.RunStore."
    if (url := download_url(run_id)) is not None:
        st.sidebar.link_button(label, url, icon=icon, help=about)
        return
    size = sum(f.stat().st_size for f in store.run_dir(run_id).iterdir() if f.is_file())
    if size > MAX_IN_MEMORY_BYTES:
        st.sidebar.caption(f"This run is {size / 2**20:,.0f} MB, over the {MAX_IN_MEMORY_BYTES >> 20} MB this server "
                           "offers as a download (served with `streamlit run serve.py`, it streams any size).")
        return
    st.sidebar.download_button(label, data=lambda: b"".join(run_archive_chunks(store, run_id)),
                               file_name=f"{run_id}.zip", mime="application/zip", on_click="ignore", icon=icon,
                               key="download-run", help=about)


def view_setting(key: str, name: str, read: Callable[[dict[str, list[str]]], Any], default: Any) -> None:
    """Before drawing the widget `key`: start it from a new link's `name`, else from `default`.

    A bad value is a warning here, beside the control, and the widget keeps its value.
    """
    params = _query()
    if _is_new(params, {name}):
        _written()[name] = params[name]
        try:
            st.session_state[key] = read(params)
        except ConfigError as error:
            message = f"{error}; kept {st.session_state.get(key, default)}."
            st.warning(plain(message[:1].upper() + message[1:]), icon=":material/link_off:")
    if key not in st.session_state:
        st.session_state[key] = default


def new_link_values(name: str) -> list[str] | None:
    """The values of `name` in a new link, remembered as applied; None when the URL holds none or only
    what this session wrote. For settings read by a widget of their own (`ui.rules.select`)."""
    params = _query()
    if not _is_new(params, {name}):
        return None
    _written()[name] = params[name]
    return params[name]


def view_number(key: str, name: str, low: int, high: int, default: int, choices: Sequence[int] | None = None) -> None:
    """`view_setting` for a whole number in [low, high] (and among `choices`)."""
    view_setting(key, name, lambda params: view_int(params, name, low, high, default, choices), default)


def view_flag(key: str, name: str, default: bool) -> None:
    """`view_setting` for an on/off switch (true or false in the link)."""
    view_setting(key, name, lambda params: view_bool(params, name, default), default)


def view_option(key: str, name: str, choices: Sequence[str], default: str) -> None:
    """`view_setting` for one of `choices`; a value the widget no longer offers falls back to `default`."""
    if st.session_state.get(key, default) not in choices:
        st.session_state[key] = default
    view_setting(key, name, lambda params: view_choice(params, name, choices, default), default)


def view_runs(key: str, name: str, known: Sequence[str], default: Sequence[str]) -> None:
    """`view_setting` for runs named by a repeated parameter (`compare=A&compare=B`).

    Each value that names no run here is a warning of its own and is dropped; the others are kept.
    A link whose every value is dropped keeps the widget as it was.
    """
    params = _query()
    if _is_new(params, {name}):
        _written()[name] = params[name]
        kept, dropped = view_run_ids(params, name, known)
        for message in dropped:
            st.warning(plain(message[:1].upper() + message[1:] + "; dropped."), icon=":material/link_off:")
        if kept:
            st.session_state[key] = list(kept)
    if key not in st.session_state:
        st.session_state[key] = list(default)


def show_view(name: str, value: str | Sequence[str] | None) -> None:
    """After drawing a widget: the URL shows its value (a list: the name repeated; None or []: nothing)."""
    _show_in_link({} if value is None or (not isinstance(value, str) and not value) else {name: value}, {name})
