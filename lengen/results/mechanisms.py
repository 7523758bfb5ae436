"""The answers of the analyses of a run's mechanism: `carrier`, `heads` and `absolute` (the position probe of a
transformer run, or the softmax denominators of the minimal head)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from lengen.results.common import Where, field_lines, verdict_json
from lengen_core.analysis.absolute import AbsolutePosition, probe_finding
from lengen_core.analysis.carrier import ALIGNMENT_MARGIN, Carrier, CarrierMetrics
from lengen_core.analysis.heads import HeadReport
from lengen_core.analysis.verdict import Verdict


def carrier_metrics(metrics: CarrierMetrics) -> dict[str, Any]:
    """The metric names of the command line (alignment for `aligned`), trained and baseline alike."""
    values = vars(metrics).copy()
    values["alignment"] = values.pop("aligned")
    return values


@dataclass(frozen=True)
class CarrierResult:
    """`carrier`: the carrier kernel of a run, its metrics and their untrained baseline."""

    run_id: str
    verdict: Verdict | None
    carrier: Carrier
    where: Where

    def to_json(self) -> dict[str, Any]:
        carrier = self.carrier
        return {
            "run_id": self.run_id, "verdict": verdict_json(self.verdict), "source": carrier.source,
            "offset": carrier.offset, "alignment_margin_needed": ALIGNMENT_MARGIN,
            **carrier_metrics(carrier.metrics), "baseline": carrier_metrics(carrier.baseline),
            # every metric is exact (from the weights, no sampling): the interval a difference must leave is the
            # baseline's spread over untrained initialisations of the same config, not a sampling error
            "metrics_exact": True,
            "baseline_range": {name: list(value) if isinstance(value, tuple) else value
                               for name, value in dataclasses.asdict(carrier.baseline_range).items()},
            "spectrum": [{"frequency": float(w), "amplitude": float(a)}
                         for w, a in zip(carrier.frequencies, carrier.amplitudes)],
            "carrier": [float(v) for v in carrier.values[: 4 * carrier.train_length]],
            "singular_values": [float(s) for s in carrier.singular_values[:32]],
            "near_recurrences": [vars(r) for r in carrier.near_recurrences],
            **self.where.to_json(),
        }

    def text(self) -> str:
        answer = self.to_json()
        skip = {"verdict", "baseline", "baseline_range", "spectrum", "carrier", "singular_values", "near_recurrences"}
        spread = answer["baseline_range"]
        return "\n".join([
            *field_lines(answer, skip), f"verdict: {answer['verdict']['reason']}",
            "untrained baseline: " + ", ".join(f"{k} {v}" for k, v in answer["baseline"].items()),
            f"untrained range over {spread['seeds']} initialisations (seeds from {spread['first_seed']}): "
            + ", ".join(f"{k} {v[0]:g} to {v[1]:g}" for k, v in spread.items() if isinstance(v, list)),
            (f"near_recurrences: {len(answer['near_recurrences'])} (first offsets "
             f"{[r['offset'] for r in answer['near_recurrences'][:5]]})")])


@dataclass(frozen=True)
class Heads:
    """`heads`: each head's carrier, which heads carry the rule and which are pinned to a key."""

    run_id: str
    heads: tuple[HeadReport, ...]
    where: Where

    def to_json(self) -> dict[str, Any]:
        heads = [{**{key: value for key, value in vars(h).items() if key != "carrier"},
                  "carrier": [float(v) for v in h.carrier]} for h in self.heads]
        return {"run_id": self.run_id, "heads": heads,
                "carrier_heads": [[h.layer, h.head] for h in self.heads if h.is_carrier],
                "pinned_heads": [[h.layer, h.head] for h in self.heads if h.pinned_key is not None],
                **self.where.to_json()}

    def text(self) -> str:
        return "\n".join([*(_head_line(h) for h in self.heads), f"device: {self.where.device_name}"])


def _head_line(head: HeadReport) -> str:
    line = (f"layer {head.layer} head {head.head}: argmax offset {head.argmax_offset}, "
            f"Toeplitz {head.toeplitz_fraction:.3f}, rank {head.effective_rank}, weight on k {head.target_weight:.3f}")
    if head.is_carrier:
        line += "  carrier"
    if head.pinned_key is not None:
        line += f"  pinned at key {head.pinned_key}"
    return line


@dataclass(frozen=True)
class Absolute:
    """`absolute` on a transformer run: the position probe per layer with its untrained range, the interventions,
    and per head the mean sink weight and ln Z_t at a few query positions."""

    run_id: str
    found: AbsolutePosition
    where: Where

    def to_json(self) -> dict[str, Any]:
        found = self.found
        probe, positions = found.probe, sorted({0, 1, found.length - 1, found.sink_length - 1})
        heads = [{"layer": layer, "head": head, "sink": {t: float(found.sink[layer, head, t]) for t in positions},
                  "log_denominator": None if found.log_denominator is None else
                  {t: float(found.log_denominator[layer, head, t]) for t in positions},
                  "exact_log_denominator": None if found.exact_log_denominator is None or layer > 0 else
                  {t: float(found.exact_log_denominator[head, t]) for t in positions}}
                 for layer in range(found.sink.shape[0]) for head in range(found.sink.shape[1])]
        return {"run_id": self.run_id, "length": found.length, "samples": found.samples,
                "sink_length": found.sink_length,
                "probe": {"r2": list(probe.r2), "untrained_low": list(probe.baseline_low),
                          "untrained_high": list(probe.baseline_high), "untrained_seeds": list(probe.seeds),
                          "margin": probe.margin, "beats": [None, *probe.beats], "finding": probe_finding(probe)},
                "interventions": [{"name": v.name, "accuracy": v.accuracy, "r2": list(v.r2), "reason": v.reason}
                                  for v in found.variants],
                "heads": heads, **self.where.to_json()}

    def text(self) -> str:
        answer = self.to_json()
        probe = answer["probe"]
        lines = [(f"position probe at length {answer['length']} ({answer['samples']} sequences), held-out R² by "
                  "layer (0: embeddings), untrained range in brackets:")]
        lines += [f"  layer {i}: {r:.3f} [{low:.3f} to {high:.3f}]"
                  + ("  (the embeddings, not part of the claim)" if beat is None else "  beats" if beat else "")
                  for i, (r, low, high, beat) in enumerate(zip(probe["r2"], probe["untrained_low"],
                                                                probe["untrained_high"], probe["beats"], strict=True))]
        lines.append(probe["finding"][:1].upper() + probe["finding"][1:])
        for v in answer["interventions"]:
            lines.append(f"{v['name']}: " + (v["reason"] if v["accuracy"] is None else
                                             f"accuracy {v['accuracy']:.3f}, R² " + ", ".join(f"{r:.3f}" for r in v["r2"])))
        for h in answer["heads"]:
            sink = ", ".join(f"t={t} {w:.3f}" for t, w in h["sink"].items())
            lines.append(f"layer {h['layer']} head {h['head']}: weight on key 0 {sink}")
        return "\n".join([*lines, f"device: {self.where.device_name}"])


@dataclass(frozen=True)
class Denominators:
    """`absolute` on the minimal head: no residual stream to probe, so the softmax denominators alone, ln Z_t
    measured at a few query positions and, for RoPE, exact."""

    run_id: str
    sink_length: int
    samples: int
    log_denominator: dict[int, float]
    exact_log_denominator: dict[int, float] | None
    where: Where

    NOTE = "the minimal head has no residual stream: no probe, no sink, no interventions"

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "sink_length": self.sink_length, "samples": self.samples,
                "log_denominator": self.log_denominator, "exact_log_denominator": self.exact_log_denominator,
                "note": self.NOTE, **self.where.to_json()}

    def text(self) -> str:
        exact = self.exact_log_denominator or {}
        return "\n".join([f"ln Z_t at t = {t}: measured {v:.3f}" + (f", exact {exact[t]:.3f}" if t in exact else "")
                          for t, v in self.log_denominator.items()] + [self.NOTE, f"device: {self.where.device_name}"])
