"""The link a run leaves in the address, as AppTest sees it.

The app writes a run's URL changes when its router (app.py) ends the run (ui.address.write_link). AppTest runs a
page it switched to without the router (its `pages/` folder puts it in Streamlit's first multipage mode), so the
changes of such a run are still waiting in session state: `address(app)` applies them, as the router would."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from ui.address import CHANGES_KEY


def address(app: AppTest) -> dict[str, list[str]]:
    """The query parameters the run leaves: the address's, with the run's own changes not written yet."""
    params = {key: [value] if isinstance(value, str) else list(value) for key, value in app.query_params.items()}
    changes = app.session_state[CHANGES_KEY] if CHANGES_KEY in app.session_state else {}
    for name, values in changes.items():
        if values:
            params[name] = list(values)
        else:
            params.pop(name, None)
    return params
