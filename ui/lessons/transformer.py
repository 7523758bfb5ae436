"""Lesson elements from the Transformer page: every head's carrier, the carrier head's attention, accuracy at
every position past the training length, and the position probe of each layer (ui.lessons.elements)."""

from __future__ import annotations

import pandas as pd

from lengen.presets import POSITION_MULTIPLES
from ui.analyses import head_attention, heads, length_multiples, sequence_evaluation
from ui.captions import accuracy as accuracy_captions
from ui.captions import attention as attention_captions
from ui.captions import mechanism as mechanism_captions
from ui.charts import transformer as transformer_charts
from ui.lessons.files import Step
from ui.lessons.frame import Projector, draw, preset_run
from ui.transformer import absolute


def head_carriers(step: Step, presenting: Projector | None) -> None:
    """Every head's carrier in a transformer, carrier heads and pinned heads marked (the Transformer page's)."""
    run = preset_run(step)
    model, k = run.config.model, run.config.task.offset
    reports = heads(run.run_id)
    carriers = transformer_charts.carrier_table(reports)
    draw(transformer_charts.head_grid(carriers, model.n_layers, model.n_heads, k),
          mechanism_captions.head_grid_caption(reports, model.encoding, model.attention,
                                               None if run.verdict is None else run.verdict.learned),
          carriers, "head-carriers", run.run_id, presenting)


def head_attention_map(step: Step, presenting: Projector | None) -> None:
    """The carrier head's attention (the strongest head when none carries) at `multiple` × the training length."""
    run = preset_run(step)
    L_train, k = run.config.task.train_length, run.config.task.offset
    reports = heads(run.run_id)
    best = max(reports, key=lambda h: (h.is_carrier, h.target_weight))
    length = step.option("multiple") * L_train
    weights = head_attention(run.run_id, length, best.layer, best.head)
    name = f"L{best.layer} H{best.head}"
    draw(transformer_charts.head_attention(weights, length, L_train, f"{name} at L = {length}"),
          f"{name}: " + attention_captions.trace_caption(attention_captions.weights_trace(weights, L_train, k), None,
                                                        None if run.verdict is None else run.verdict.learned,
                                                        last_query_only=False) + " Mean |weight| over 16 sequences.",
          pd.DataFrame(weights).rename_axis("query").reset_index(), f"head-attention-{length}", run.run_id, presenting)


def accuracy_by_position(step: Step, presenting: Projector | None) -> None:
    """A transformer's accuracy at every position of sequences 4× the training length (the Transformer page's)."""
    run = preset_run(step)
    task, samples = run.config.task, 64
    evaluated = sequence_evaluation(run.run_id, length_multiples(run.run_id, POSITION_MULTIPLES), samples)
    table, longest = transformer_charts.position_table(evaluated), evaluated[-1]
    draw(transformer_charts.accuracy_by_position(table, task.train_length, 1 / task.vocab_size),
          accuracy_captions.position_caption(longest.positions, longest.accuracy_by_position, longest.length,
                                             task.train_length, 1 / task.vocab_size, samples,
                                             run.config.model.encoding, run.config.model.attention,
                                             None if run.verdict is None else run.verdict.learned),
          table, "accuracy-by-position", run.run_id, presenting)


def position_probe(step: Step, presenting: Projector | None) -> None:
    """The position probe of each layer against its untrained seeds, at 1× and 4× L_train (the Transformer page's)."""
    run = preset_run(step)
    found, refused = absolute.probes(run)
    if refused:
        raise refused[0]
    draw(*absolute.probe_chart(found), "absolute-probe", run.run_id, presenting)

