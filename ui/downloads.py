"""A stored run as a zip, streamed from disk by a route of the app's own server.

Streamlit's `st.download_button` cannot stream: whatever its data (bytes, a file, or a callable run
on click), the bytes are read whole into its in-memory media store and served from there
(streamlit 1.67: `runtime/download_data_util.py` `convert_data_to_bytes_and_infer_mime` reads a file
object whole, `runtime/media_file_manager.py` `execute_deferred` stores that, and
`web/server/starlette/starlette_routes.py` `create_media_routes` answers with `Response(content)`).
A 1 GB run would hold 1 GB of the server's memory per click. So the server is `serve.py`, Streamlit's
`st.App` of `app.py` with `routes()` added, started by `streamlit run serve.py`: GET
`<baseUrlPath>/download/<run_id>.zip` answers a stored run, made by `run_archive_chunks` a megabyte
at a time as it is read, each piece sent before the next is read.

Only a stored run's zip can be fetched: the id must match the store's strict pattern (no path is
built from anything else), and the run must be in the person's store or the presets; anything else
is 404. Nothing is written: the presets stay read-only, and no temporary copy competes with the
store's quota or a container's small /tmp. A download counts as a use of the run for eviction.

Under plain `streamlit run app.py` (or `AppTest`) there is no such route; the sidebar then offers
runs up to `MAX_IN_MEMORY_BYTES` through `st.download_button`, held in memory while served.
"""

from __future__ import annotations

from typing import Any

ROUTE = "/download/{run_id}.zip"
_mounted_base: str | None = None  # the server's baseUrlPath once `routes()` has mounted the route


def routes(base_url_path: str = "") -> list[Any]:
    """The download route for `st.App(..., routes=...)`, under the server's `server.baseUrlPath`."""
    from starlette.routing import Route

    global _mounted_base
    base = "/" + base_url_path.strip("/") if base_url_path.strip("/") else ""
    _mounted_base = base
    return [Route(base + ROUTE, _download, methods=["GET"])]


def download_url(run_id: str) -> str | None:
    """The path that streams `run_id`'s zip, or None when this server has no download route."""
    return None if _mounted_base is None else _mounted_base + ROUTE.format(run_id=run_id)


def _download(request) -> Any:
    # Imported here: the server answers its health check before torch is loaded.
    from starlette.responses import PlainTextResponse, StreamingResponse

    from lengen.share import run_archive_chunks
    from lengen.store import StoreError, check_run_id
    from ui.runs import stores

    run_id = request.path_params["run_id"]
    try:
        check_run_id(run_id)
        store = next((s for s in stores() if s.exists(run_id)), None)
        if store is None:
            return PlainTextResponse("No such run.", status_code=404)
        pieces = run_archive_chunks(store, run_id)
    except StoreError:  # a bad id, or a run evicted or damaged since it was listed
        return PlainTextResponse("No such run.", status_code=404)
    headers = {"Content-Disposition": f'attachment; filename="{run_id}.zip"', "Cache-Control": "no-store",
               "X-Content-Type-Options": "nosniff"}
    return StreamingResponse(pieces, media_type="application/zip", headers=headers)
