"""What a run shows, read the way the app's pages read it (lengen.api re-exports these): its evaluation, its one
measurement (lengen_core.measure), under an inference rule, its carrier, heads, heatmap, delays, and a comparison.

Each makes the page's call at the page's defaults, and takes back what the run was stored with (a preset's
shipped numbers, those a run was saved with: lengen.first_visit; the rules shipped with a preset:
lengen.shipped_rules) only where that answers exactly the question asked, so it gives the page's numbers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lengen.api.runs import RunLike, as_run, shipped, stored_data
from lengen.first_visit import (
    FIRST_VISIT_CARRIER_SEARCH,
    FIRST_VISIT_LONGEST,
    FIRST_VISIT_SAMPLES,
    allowed,
    carrier_from_dict,
    ladder,
    request_lengths,
)
from lengen.presets import RULE_LONGEST
from lengen.shipped_rules import shipped_rule
from lengen.store import RunStore
from lengen_core.analysis.carrier import Carrier, extract_carrier
from lengen_core.analysis.delays import DELAY_SAMPLES, DELAY_SEED, DelayCurve, delay_curve
from lengen_core.analysis.evaluate import LengthReport
from lengen_core.analysis.evaluate import evaluate as evaluate_at
from lengen_core.analysis.heads import HeadReport, analyse_heads
from lengen_core.analysis.heatmap import Heatmap, attention_heatmap
from lengen_core.analysis.rules import InferenceRule, NoRule, parse_rule, under_rule
from lengen_core.measure import EVALUATION_SEED, Measurement
from lengen_core.measure import measure as measure_run
from lengen_core.training import Run

DEFAULT_SAMPLES = FIRST_VISIT_SAMPLES  # sequences per length of the default request (Dilution and Compare)
DEFAULT_LONGEST = FIRST_VISIT_LONGEST  # its longest length, 2^16
CARRIER_SEARCH = FIRST_VISIT_CARRIER_SEARCH  # how far the Carrier page looks for near-recurrences by default
HEATMAP_CELLS = 256  # the Attention page's heatmap: at most this many pooled cells a side
Rule = InferenceRule | str | None  # a rule, its label ("log-n", "ntk:4"), or None: the run as trained


def evaluate(run: RunLike, lengths: Sequence[int] | None = None, samples: int = DEFAULT_SAMPLES,
             seed: int = EVALUATION_SEED, store: RunStore | None = None) -> list[LengthReport]:
    """Accuracy and target mass at each length alone, without the prediction, the law or the horizons (the
    Start page's picture, a lesson's accuracy chart). `lengths` None: the default request's. Single-head runs."""
    run = as_run(run, store)
    lengths = tuple(request_lengths(run) if lengths is None else lengths)
    known = shipped(run, store)
    stored = {} if known is None or seed != EVALUATION_SEED else known.evaluations.get(samples, {})
    missing = [n for n in lengths if n not in stored]
    # one call for every length not stored: each length draws its sequences from its own seed, as the app's do
    found = dict(zip(missing, evaluate_at(run.model, run.config, missing, samples=samples, seed=seed),
                     strict=True)) if missing else {}
    return [stored[n] if n in stored else found[n] for n in lengths]


def measure(run: RunLike, lengths: Sequence[int] | None = None, samples: int = DEFAULT_SAMPLES, rule: Rule = None,
            seed: int = EVALUATION_SEED, *, predict: bool = True, horizon: bool = True, store: RunStore | None = None,
            progress: Callable[[int, int], None] | None = None) -> Measurement:
    """The run measured at `lengths` under `rule`: evaluation, prediction from the weights, the dilution law and
    the horizons (lengen_core.measure.measure, the one measurement of the app, the command line and a sweep).
    `lengths` None: the default request (k + 1, then L_train doubled up to 2^16, those the encoding allows), which
    the Dilution and Compare pages open with; a transformer's: 1 to 16 × L_train (the Transformer page's).
    `predict` False skips the prediction (and the law, which reads it), `horizon` False the predicted horizon's
    search (up to 2^20 tokens: most of a default run's seconds). `progress` hears (keys done, keys in all)."""
    run = as_run(run, store)
    ruled = _rule(rule)
    lengths = tuple(default_lengths(run, ruled) if lengths is None else lengths)
    if not ruled.trivial and (found := shipped_rule(run, ruled.label, lengths, samples, seed)) is not None:
        return found  # shipped with a preset, computed by this same call
    return measure_run(run, lengths, samples, ruled, seed, shipped=shipped(run, store), predict=predict,
                       search=horizon, progress=progress)


def rule_curve(run: RunLike, rule: InferenceRule | str, lengths: Sequence[int] | None = None,
               samples: int = DEFAULT_SAMPLES, store: RunStore | None = None) -> Measurement:
    """The run read under an inference rule, no retraining (docs/rules.md), as the Dilution page's rules read it:
    `lengths` None is the default request's up to RULE_LONGEST. The rule "none" gives the run as trained at the
    same lengths: the curve to set beside it."""
    run = as_run(run, store)
    if lengths is None:
        lengths = tuple(n for n in request_lengths(run) if n <= RULE_LONGEST)  # "none" too: the curve beside it
    return measure(run, lengths, samples, rule, store=store)


def carrier(run: RunLike, search_length: int = CARRIER_SEARCH, store: RunStore | None = None) -> Carrier:
    """The head's positional rule s(Δ), its spectrum, singular values, Toeplitz fraction and near-recurrences
    searched up to `search_length`, beside the untrained baseline (lengen_core.analysis.carrier): the carrier the
    run was stored with where it answers that search, else extracted from the weights. Single-head runs."""
    run = as_run(run, store)
    stored = carrier_from_dict((stored_data(run.run_id, store) or {}).get("carrier"), search_length)
    return stored if stored is not None else extract_carrier(run.model, run.config, search_length=search_length)


def heads(run: RunLike, store: RunStore | None = None) -> list[HeadReport]:
    """A transformer's heads, each with its carrier measured from recorded logits: which carry the offset, which
    pin to a key (lengen_core.analysis.heads; the Transformer page's grid)."""
    run = as_run(run, store)
    return analyse_heads(run.model, run.config)


def heatmap(run: RunLike, length: int, *, layer: int = 0, head: int = 0, rule: Rule = None,
            max_cells: int = HEATMAP_CELLS, store: RunStore | None = None) -> Heatmap:
    """One sequence's attention at `length` (queries × keys, max-pooled to `max_cells` a side), every query's
    argmax key and a zoom on the last queries, of head `head` of layer `layer`, under `rule` (None: as trained):
    the Attention page's."""
    run = as_run(run, store)
    ruled = _rule(rule)
    model = run.model if ruled.trivial else under_rule(run.model, ruled, length)
    return attention_heatmap(model, run.config, length, max_cells=max_cells, layer=layer, head=head)


def delays(run: RunLike, delays: Sequence[int] | str | None = None, samples: int = DELAY_SAMPLES,
           seed: int = DELAY_SEED, store: RunStore | None = None) -> DelayCurve:
    """A delay task's run (delay-copy, selective-copy) at its training length against the delay: accuracy and the
    head's attention on the source at each delay, seen in training or not (C10; the Delays page's). `delays`
    None: every delay the context holds; else a list or a spec such as "9-30"."""
    run = as_run(run, store)
    return delay_curve(run.model, run.config, delays, samples, seed)


@dataclass(frozen=True)
class Comparison:
    """One run of a comparison, read the same way whatever its model: its measurement at the doubling lengths,
    and its positional rule (a single head's carrier; a transformer's heads, the likeliest carrier head first)."""

    run: Run
    measurement: Measurement
    carrier: Carrier | None  # a single head's; None for a transformer
    heads: tuple[HeadReport, ...] = ()  # a transformer's

    @property
    def m_out(self) -> float | None:
        law = self.measurement.fit.fit
        return None if law is None else law.m_out


def compare(runs: Sequence[RunLike], longest: int = DEFAULT_LONGEST, samples: int = DEFAULT_SAMPLES,
            store: RunStore | None = None) -> dict[str, Comparison]:
    """Each run measured at L_train doubled up to `longest` (a transformer's up to 16 × L_train), with its carrier,
    keyed by run id: the Compare page's request, so at its defaults the Dilution page's numbers too."""
    found = {}
    for item in runs:
        run = as_run(item, store)
        m = measure(run, allowed(run, ladder(run.config, longest, offset=False)), samples, store=store)
        if run.config.single_head:
            found[run.run_id] = Comparison(run, m, carrier(run, store=store))
        else:
            ranked = sorted(heads(run), key=lambda h: (h.is_carrier, h.target_weight), reverse=True)
            found[run.run_id] = Comparison(run, m, None, tuple(ranked))
    return found


def _rule(rule: Rule) -> InferenceRule:
    if rule is None:
        return NoRule()
    return parse_rule(rule) if isinstance(rule, str) else rule


def default_lengths(run: Run, rule: InferenceRule | None = None) -> tuple[int, ...]:
    """The lengths a reader asks of `run` when none are given, the app's request: a single head's default
    request (k + 1, then L_train doubled up to 2^16, those its encoding allows: the Dilution and Compare pages'
    first view), a transformer's 1 … 16 × L_train (the Transformer page's; lengen.first_visit.ladder), and under
    an inference rule those up to RULE_LONGEST, where the pages read their rules. The command line's `evaluate`
    and this API's measure and rule_curve all ask these."""
    lengths = request_lengths(run)
    if rule is not None and not rule.trivial and run.config.single_head:
        lengths = tuple(n for n in lengths if n <= RULE_LONGEST)
    return lengths
