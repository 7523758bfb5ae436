"""Preset runs shipped in `assets/presets/` (the run store's layout), so the app has charts offline.

Rebuild them with `python -m scripts.build_presets`: fixed seeds, default config, so anyone can check
that a rebuilt preset has the same run id (the id is a hash of the config and seed).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from lengen import store
from lengen.first_visit import FIRST_VISIT_LONGEST, FIRST_VISIT_SAMPLES, ladder
from lengen.sweep import SweepGrid
from lengen_core.analysis.evaluate import doublings
from lengen_core.config import RunConfig, with_changes
from lengen_core.optimisation import TrainingTrace

PRESET_ROOT = store.PRESET_ROOT  # the read-only store of the presets (lengen.store.preset_store)
SCIENCE_DOCUMENT = Path(__file__).resolve().parent.parent / "docs" / "science.md"


def science_document() -> str:
    """The lab's science document (docs/science.md, shipped in the image), as markdown."""
    try:
        return SCIENCE_DOCUMENT.read_text(encoding="utf-8")
    except OSError:
        return f"The science document is missing from this installation (expected at `{SCIENCE_DOCUMENT}`)."
PRESET_SEED = 0
# The inference rules' longest length on Dilution and Compare (and the command line's `evaluate --rule`, the API's
# rule_curve). A rule is read afresh (nothing is measured before a person picks it) and costs an evaluation and a
# sweep over the keys for every length: up to 2^16 that was about 60 s a rule on two shared cores, up to 2^14 a
# quarter of it (the two longest lengths are three quarters of the tokens). The page's own curve stays at its
# lengths; the rules' "none" row is the run at the rules' lengths, so its m_out is fitted to those.
RULE_LONGEST = 1 << 14

# label -> config; the first is selected on a first visit.
PRESETS: dict[str, RunConfig] = {
    "RoPE": with_changes(RunConfig(), encoding="rope", attention="softmax", seed=PRESET_SEED),
    "Learned (APE)": with_changes(RunConfig(), encoding="learned", attention="softmax", seed=PRESET_SEED),
    "RoPE + linear attention": with_changes(RunConfig(), encoding="rope", attention="linear", seed=PRESET_SEED),
    # C8: the same story in a 2-layer, 2-head transformer trained on the full-sequence shift task.
    "Transformer RoPE": with_changes(RunConfig(), task="shift", n_layers=2, n_heads=2, encoding="rope",
                                     seed=PRESET_SEED),
    "Transformer learned": with_changes(RunConfig(), task="shift", n_layers=2, n_heads=2, encoding="learned",
                                        seed=PRESET_SEED),
}
DEFAULT_PRESET = "RoPE"

# The shipped delay runs (scripts.build_presets --delays): the minimal head at L 32, V 16, d_model 64, on
# delays 2-8, the encodings the claim (C10) compares; the page opens them with one click.
DELAY_BASE = with_changes(RunConfig(), task="delay-copy", delays="2-8", train_length=32, vocab_size=16, d_model=64,
                          max_positions=64, steps=1_000, seed=0)
DELAY_PRESETS: dict[str, RunConfig] = {
    "Delay-copy RoPE": DELAY_BASE,
    "Delay-copy NoPE": with_changes(DELAY_BASE, encoding="nope"),
    "Delay-copy ALiBi": with_changes(DELAY_BASE, encoding="alibi"),
    "Delay-copy learned": with_changes(DELAY_BASE, encoding="learned"),
    "Selective-copy RoPE": with_changes(DELAY_BASE, task="selective-copy"),
    "Selective-copy learned": with_changes(DELAY_BASE, task="selective-copy", encoding="learned"),
}


# The Delays page's data-diversity sweep (scripts.build_presets --delays; its cells are shipped, not its runs): how
# many delays training saw (1, 3, 7, 15, all from delay 2), three encodings that find the source by position, 2 seeds.
DIVERSITY_GRID = SweepGrid(encodings=("rope", "learned", "sinusoidal"), seeds=(0, 1), train_lengths=(32,),
                           delay_sets=("2", "2-4", "2-8", "2-16"), samples=128,
                           base=(("task", "delay-copy"), ("d_model", 64), ("steps", 1_000)))


def delay_presets() -> dict[str, str]:
    """label -> run id of the shipped delay runs (the Delays page's)."""
    return {label: config.run_id() for label, config in DELAY_PRESETS.items()}


PRECOMPUTED = store.PRECOMPUTED_ROOT  # <run id>.json: what the first visits compute, shipped (scripts.build_presets)
TRACES = PRECOMPUTED / "traces"  # <run id>-every<N>.json: the optimisation experiment's trainings, shipped
# The length ladders the pages measure on (each a run's allowed lengths of lengen_core.analysis.evaluate.doublings)
START_LENGTHS, START_SAMPLES = doublings(16, 9), 128  # the Start page's picture: 16 … 4,096, the end of the learned table
SWEEP_LENGTHS = doublings(16, 13)  # the Sweeps page's lengths (16 … 65,536), those up to its longest; the preset sweep's
HEATMAP_MULTIPLES = doublings(1, 7)  # the Attention page's heatmap lengths, × the training length (1 … 64)
TRANSFORMER_MULTIPLES = doublings(1, 5)  # the Transformer page's test lengths, × the training length (1 … 16)
POSITION_MULTIPLES = (1, 4)  # the Transformer page's accuracy by position: at L_train and 4 L_train
LESSON_MULTIPLES = doublings(1, 5)  # a lesson's heatmap and argmax trace, × the training length (1 … 16)
# The choices of a longest length (or a search's end): powers of two from the first, as many as given
LONGEST_CHOICES = doublings(1 << 6, 11)  # Compare's and the lessons' longest length: 64 … 65,536
DILUTION_LONGEST_CHOICES = doublings(1 << 6, 15)  # the Dilution page's: 64 … 2^20
SWEEP_LONGEST_CHOICES = doublings(1 << 8, 9)  # the Sweeps page's: 256 … 65,536
CARRIER_SEARCHES = doublings(1 << 10, 11)  # the Carrier page's near-recurrence search: 1,024 … 2^20
# The Dilution page's and Compare's default view: the one default request, defined in the core because the
# training side measures it before a run is saved (lengen.first_visit)
DILUTION_LONGEST, DILUTION_SAMPLES = FIRST_VISIT_LONGEST, FIRST_VISIT_SAMPLES

# The Theory page's optimisation experiment (C1, ui.theory.gradients), on the Learned (APE) preset's config: the
# preset's own training replayed with each position row's gradient recorded (every GRADIENT_EVERY steps), and a
# training of DRIFT_STEPS steps from the constructed head (every DRIFT_EVERY), accuracy at L_train and 4× on the
# way over TRACE_SAMPLES sequences. Both ship with the presets (`shipped_trace`), so a first visit trains nothing.
OPTIMISATION_START = PRESETS["Learned (APE)"]
OPTIMISATION_CONSTRUCTED = with_changes(OPTIMISATION_START, init="constructed", steps=0)
DRIFT_STEPS, DRIFT_EVERY, GRADIENT_EVERY, TRACE_SAMPLES = 400, 20, 10, 256
OPTIMISATION_DRIFT = with_changes(OPTIMISATION_CONSTRUCTED, steps=DRIFT_STEPS, keep_training=True)
TRACE_LENGTHS = (OPTIMISATION_START.task.train_length, 4 * OPTIMISATION_START.task.train_length)
TRACE_ROWS = 4 * OPTIMISATION_START.task.train_length  # rows of the gradient map shipped and shown
OPTIMISATION_TRACES = ((OPTIMISATION_START, GRADIENT_EVERY), (OPTIMISATION_DRIFT, DRIFT_EVERY))  # (config, every)


def dilution_lengths(config: RunConfig, longest: int = DILUTION_LONGEST) -> tuple[int, ...]:
    """The Dilution page's lengths: k + 1, then the training length doubled, up to `longest`
    (lengen.first_visit.ladder, the default request's)."""
    return ladder(config, longest)


@functools.cache
def precomputed(run_id: str) -> dict:
    """A preset's shipped results (lengen.first_visit.to_dict's form): {"evaluations": {samples:
    {length: LengthReport fields}}, "predictions": {length: Prediction fields}, "horizon": …}; empty for
    any other run or a missing file."""
    path = PRECOMPUTED / f"{run_id}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def trace_path(config: RunConfig, every: int) -> Path:
    return TRACES / f"{config.run_id()}-every{every}.json"


@functools.cache
def _trace_file(config: RunConfig, every: int) -> TrainingTrace | None:
    try:
        return TrainingTrace.from_dict(json.loads(trace_path(config, every).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def shipped_trace(config: RunConfig, every: int, lengths: tuple[int, ...], samples: int) -> TrainingTrace | None:
    """The optimisation experiment's trace of `config` recorded every `every` steps, shipped with the presets
    (scripts.build_presets), when it was made with these evaluation `lengths` and `samples`; else None."""
    trace = _trace_file(config, every)
    if trace is None or trace.config != config or trace.lengths != tuple(lengths):
        return None
    if any(report.samples != samples for reports in trace.evaluations for report in reports):
        return None
    return trace


def single_head_presets() -> dict[str, str]:
    """label -> run id of the minimal-head presets (the single-head pages' and Compare's defaults)."""
    return {label: PRESETS[label].run_id() for label in PRESETS if PRESETS[label].single_head}


def transformer_presets() -> dict[str, str]:
    """label -> run id of the multi-layer presets (the Transformer page's)."""
    return {label: PRESETS[label].run_id() for label in PRESETS if not PRESETS[label].model.minimal}


def preset_ids() -> dict[str, str]:
    """label -> run id."""
    return {label: config.run_id() for label, config in PRESETS.items()}
