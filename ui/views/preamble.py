"""The opening of the pages that read one run along the length (Attention, Carrier, Dilution), written once."""

from __future__ import annotations

from lengen_core.training import Run
from ui.address import stop
from ui.widgets import require_length_task, require_single_head, run_summary, selected_run


def page_run(single_head: bool = False) -> Run:
    """The selected run with its summary and verdict, or the page stops with what to do instead: no run is
    selected, the run is on a delay task (its length never changes: the Delays page) or, with `single_head`,
    it is not the minimal head on the retrieval task that the page's closed-form analyses read (the Transformer
    page). The single-head pages (Carrier, Dilution) summarise the run before they check it; Attention checks
    first, so a delay task's run shows only the pointer there."""
    run = selected_run()
    if run is None:
        stop()
    if single_head:
        run_summary(run)
        require_single_head(run)
    else:
        require_length_task(run)
        run_summary(run)
    return run
