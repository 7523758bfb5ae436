"""What a class watches while a run trains: the carrier s(Δ) and an attention map, read from the weights
as they are at a step (a `LiveView`). Both read the weights and change nothing, and draw no random number
from any stream of the training: a watched run ends with the same weights as an unwatched one.

The minimal single head on the retrieval task (the Carrier and Attention pages' single head): s(Δ)
from the weights for RoPE (as `lengen_core.analysis.carrier` computes its analytic carrier), else the mean
recorded logit at each offset over `MEASURED_SAMPLES` sequences; the map is the head's attention on one
sequence `VIEW_MULTIPLE` × the training length long, pooled to `VIEW_CELLS` cells. A transformer (or
a 0-layer run on the shift task) has no carrier from the weights: its view is the head that puts most
weight on t − k, as the Transformer page finds it (`lengen_core.analysis.heads.analyse_heads`, on
`HEAD_SAMPLES` sequences), with that head's measured s(Δ) over the training range and its map.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from lengen_core.analysis.carrier import carrier_values, mean_logit_matrix, token_coefficients
from lengen_core.analysis.heads import analyse_heads
from lengen_core.analysis.heatmap import Heatmap, attention_heatmap
from lengen_core.config import RunConfig
from lengen_core.models.initial import initial_model

VIEW_EVERY = 20  # steps between views while a training runs; a paused one gets a view of where it stopped
VIEW_MULTIPLE, VIEW_CELLS, MEASURED_SAMPLES = 4, 64, 256
HEAD_SAMPLES = 32  # sequences per view of a transformer's heads (the Transformer page uses 256)


@dataclass(frozen=True)
class LiveView:
    step: int  # steps done when it was read
    offsets: np.ndarray  # Δ = 0 … n−1
    carrier: np.ndarray  # s(Δ), (n,)
    analytic: bool  # read from the weights (RoPE), or measured from recorded logits
    heatmap: Heatmap  # at VIEW_MULTIPLE × the training length
    head: tuple[int, int] | None = None  # a transformer's: (layer, head) of the head drawn
    target_weight: float | None = None  # that head's mean weight on t − k over the supervised queries
    task: str = "retrieval"  # the run's task: retrieval scores the last query alone, shift every t ≥ k


def view_due(steps_done: int, last_view_step: int, paused: bool) -> bool:
    """A view now: every VIEW_EVERY steps, and once where a paused training stopped."""
    if steps_done == last_view_step or steps_done == 0:
        return False
    return paused or steps_done - last_view_step >= VIEW_EVERY


@torch.no_grad()
def live_view(model: torch.nn.Module, config: RunConfig, step: int) -> LiveView:
    """The view at `step`: the minimal head's, or a transformer's head that attends most to t − k."""
    if not config.single_head:
        return _head_view(model, config, step)
    was_training = model.training
    model.eval()
    try:
        L = config.task.train_length
        if getattr(model.encoding, "rotary", False):
            size = max(128, 2 * L)  # the Carrier page's offsets
            coefficients = token_coefficients(model).mean(dim=(0, 1)).cpu()  # (D/2,) complex
            values = carrier_values(coefficients, model.encoding.frequencies.cpu(), torch.arange(size)).numpy()
        else:
            size = L if getattr(model.encoding, "trained_positions", False) else max(128, 2 * L)
            matrix = mean_logit_matrix(model, config, size, MEASURED_SAMPLES)  # (size, size)
            values = np.array([np.diagonal(matrix, -d).mean() for d in range(size)])
        heatmap = attention_heatmap(model, config, _view_length(config), max_cells=VIEW_CELLS)
    finally:
        model.train(was_training)
    return LiveView(step, np.arange(len(values)), values, getattr(model.encoding, "rotary", False), heatmap,
                    task=config.task.task)


def starting_view(config: RunConfig, weights: Mapping[str, torch.Tensor] | None = None) -> LiveView:
    """The view at step 0, before a training's first step: the seed's initialisation (or `weights`, those of
    the run it continues), as the training will start from them. A class watching a training that starts
    paused sees the untrained model before the first Step; nothing here touches the training's streams."""
    model = initial_model(config)
    if weights:
        model.load_state_dict(weights)
    return live_view(model, config, 0)


def _view_length(config: RunConfig) -> int:
    length = VIEW_MULTIPLE * config.task.train_length
    if config.model.encoding == "learned":  # a learned table ends at max_positions
        length = min(length, config.model.max_positions)
    return length


@torch.no_grad()
def _head_view(model: torch.nn.Module, config: RunConfig, step: int) -> LiveView:
    was_training = model.training
    model.eval()
    try:
        reports = analyse_heads(model, config, samples=HEAD_SAMPLES)
        best = max(reports, key=lambda report: report.target_weight)
        heatmap = attention_heatmap(model, config, _view_length(config), max_cells=VIEW_CELLS, layer=best.layer,
                                    head=best.head)
    finally:
        model.train(was_training)
    return LiveView(step, np.arange(len(best.carrier)), best.carrier, False, heatmap, (best.layer, best.head),
                    best.target_weight, config.task.task)
