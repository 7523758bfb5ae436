"""The address bar: one write per script run, and one history entry per navigation a person makes.

Every `st.query_params[key] = value` is a message of its own, and Streamlit's browser side pushes a
history entry for each one that changes the address: a page visit that wrote its run's 14 settings and two
view settings key by key left about 16 entries, the first 15 of them half-written links. Back then
restored a link with some settings missing (read with the defaults of an older link) and followed it, to
Train with a config no one chose. So nothing here writes the address as it goes:

    set_in_link("step", "2")      # a change, kept in session state until the run ends
    drop_from_link("term")        # the same, for a parameter to remove
    in_link("step")               # the value this run will leave: its own change, else the address's
    write_link()                  # the router, when the run ends: every change at once, or nothing
    stop()                        # a page that ends early: its link written, then st.stop()

A change made in a callback (before the run) or in a run that a rerun interrupts waits for the next run's
end; `pending()` names what is waiting, so the address's stale values of those keys are not mistaken for
a new link (ui.state).

That leaves two entries for a visit: Streamlit's own for the page's path (it clears the query string as it
changes page), then the run's link. `remember_gestures` installs a script in the page that keeps a pushed
entry only when a person did something (a click, a key) since the last one, and otherwise replaces the
current entry: the page's path and its link become one entry, and a change no one made (a training that
ends and selects its run) changes the current entry instead of adding one. Back and Forward rerun the page
from the address (Streamlit replaces, never pushes, while it follows history), so each entry restores
the page and view it names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import streamlit as st

CHANGES_KEY = "_link_changes"  # name -> the values this run leaves (None: removed), written at its end
INSTALLED_KEY = "_link_gestures"  # this browser tab has the script of `remember_gestures`

# Keep a pushed history entry only after a person's gesture; replace the current entry otherwise. A gesture
# counts for GESTURE_MS: long enough for a page a slow shared server takes seconds to run.
GESTURE_MS = 60_000
GESTURE_SCRIPT = """<style>[data-testid="stElementContainer"]:has(script[data-lengen-history]) { display: none; }</style>
<script data-lengen-history>
(function () {
  if (window.__lengenHistory) return;
  window.__lengenHistory = true;
  let gestureAt = -Infinity;
  const seen = () => { gestureAt = Date.now(); };
  for (const kind of ["pointerdown", "keydown"]) window.addEventListener(kind, seen, true);
  const push = history.pushState.bind(history), replace = history.replaceState.bind(history);
  history.pushState = function (state, title, url) {
    const person = Date.now() - gestureAt < %d;
    gestureAt = -Infinity;
    return person ? push(state, title, url) : replace(state, title, url);
  };
})();
</script>""" % GESTURE_MS


def _changes() -> dict[str, list[str] | None]:
    return st.session_state.setdefault(CHANGES_KEY, {})


def set_in_link(name: str, value: str | Sequence[str]) -> None:
    """The address will show `value` for `name` (a sequence: the name repeated) once this run ends."""
    _changes()[name] = [value] if isinstance(value, str) else list(value)


def drop_from_link(name: str) -> None:
    """The address will not show `name` once this run ends."""
    _changes()[name] = None


def in_link(name: str) -> list[str]:
    """The values of `name` this run leaves in the address: its own change, else what the address holds."""
    changes = _changes()
    if name in changes:
        return list(changes[name] or [])
    return st.query_params.get_all(name)


def pending() -> set[str]:
    """The parameters changed and not written yet."""
    return set(_changes())


def write_link() -> None:
    """Write this run's changes into the address in one step (one message, so one history entry at most);
    nothing when they leave it as it is."""
    changes = st.session_state.pop(CHANGES_KEY, None)
    if not changes:
        return
    now = {key: st.query_params.get_all(key) for key in st.query_params}
    after = dict(now)
    for name, values in changes.items():
        if values is None or not values:
            after.pop(name, None)
        else:
            after[name] = values
    if after != now:
        st.query_params.from_dict({key: values[0] if len(values) == 1 else values for key, values in after.items()})


def stop() -> NoReturn:
    """`st.stop()` with the run's link written first: once a stop is asked for, Streamlit sends no other message
    of the run (each one raises the stop before it is sent), so the router's `write_link` at the end would be
    lost and the address would keep a page's half-changed link. Pages and ui/ call this, never st.stop()
    (tests/unit/test_address.py checks)."""
    write_link()
    st.stop()


def remember_gestures() -> None:
    """Install `GESTURE_SCRIPT` in this browser tab on a session's first run (the page keeps it across runs).
    Its slot is made on every run, so the page's elements keep their places (as ui.early's)."""
    slot = st.empty()
    if not st.session_state.get(INSTALLED_KEY):
        st.session_state[INSTALLED_KEY] = True
        slot.html(GESTURE_SCRIPT, unsafe_allow_javascript=True)
