"""The lab's public Python API: one door for a researcher's script or notebook, making the calls the app's pages
and the command line make.

    from lengen import api

    rope = api.load(api.single_head_presets()["RoPE"])      # a shipped run, offline; or any stored run's id
    m = api.measure(rope)                                   # the Dilution page's numbers: m.fit, m.predicted_horizon
    table = api.dilution_table(m)                           # what ui.charts.common.dilution draws
    mine = api.train(encoding="learned", d_model=32, steps=300)   # a Run, stored in $LENGEN_HOME
    api.rule_curve(rope, "log-n"), api.carrier(rope), api.heatmap(rope, 64), api.compare([rope, mine])
    api.sweep(api.shipped_sweeps()[0]).collapse.result      # a grid of runs and its data collapse

Every function takes a `Run` or a run id (read from the person's store, `$LENGEN_HOME`, then the presets shipped
in assets/presets) and answers with a typed result, re-exported here so a script never imports lengen_core's
modules, whose names move. The defaults are the app's: asked what a page asks, a function gives that page's
numbers, because it makes the page's call (lengen_core.measure.measure, extract_carrier, attention_heatmap,
delay_curve, lengen.sweep.run_sweep) and takes back what was measured before (a preset's shipped numbers, those
a run was saved with) only where they answer exactly the question asked. Nothing here is cached, priced against
a server's budgets or printed: a script runs what it asks, as the command line does without `--budget`.

    runs      list the runs; open one (`load`); `train` one, or `train_longer`
    reading   `evaluate`, `measure`, `rule_curve`, `carrier`, `heads`, `heatmap`, `delays`, `compare`
    sweeps    `sweep` a grid (with its collapse); the grids that ship (`shipped_sweeps`)
    tables    the tables the lab's plotly builders in ui/charts draw: `accuracy_table`, `curve_table`,
              `dilution_table`

docs/api.md is the guide; examples/lab.ipynb the worked notebook.
"""

from lengen.api.reading import (
    CARRIER_SEARCH,
    DEFAULT_LONGEST,
    DEFAULT_SAMPLES,
    RULE_LONGEST,
    Comparison,
    carrier,
    compare,
    default_lengths,
    delays,
    evaluate,
    heads,
    heatmap,
    measure,
    rule_curve,
)
from lengen.api.runs import TrainingProgress, load, runs, train, train_longer
from lengen.api.sweeps import Sweep, shipped_sweeps, sweep
from lengen.api.tables import DilutionTable, accuracy_table, curve_table, dilution_table
from lengen.presets import (
    DELAY_PRESETS,
    PRESETS,
    START_LENGTHS,
    START_SAMPLES,
    delay_presets,
    preset_ids,
    single_head_presets,
    transformer_presets,
)
from lengen.store import RunStore, RunSummary, StoreError
from lengen.sweep import SweepCollapse, SweepGrid, SweepProgress, SweepResult
from lengen_core.analysis.carrier import Carrier
from lengen_core.analysis.collapse import Collapse
from lengen_core.analysis.delays import DELAY_SAMPLES, DELAY_SEED, DelayCurve
from lengen_core.analysis.dilution import Prediction
from lengen_core.analysis.evaluate import LengthReport
from lengen_core.analysis.fit import DilutionFit, FitResult
from lengen_core.analysis.heads import HeadReport
from lengen_core.analysis.heatmap import Heatmap
from lengen_core.analysis.horizon import Horizon
from lengen_core.analysis.rules import RULES, InferenceRule, RuleError, make_rule, parse_rule
from lengen_core.analysis.sequence import SequenceReport
from lengen_core.analysis.verdict import Verdict
from lengen_core.config import ConfigError, RunConfig, with_changes
from lengen_core.measure import EVALUATION_SEED, Measurement
from lengen_core.models.encodings import LengthError
from lengen_core.training import Run

__all__ = [
    "CARRIER_SEARCH", "DEFAULT_LONGEST", "DEFAULT_SAMPLES", "DELAY_PRESETS", "DELAY_SAMPLES", "DELAY_SEED",
    "EVALUATION_SEED", "PRESETS", "RULES", "RULE_LONGEST", "START_LENGTHS", "START_SAMPLES", "Carrier", "Collapse",
    "Comparison", "ConfigError", "default_lengths", "DelayCurve", "DilutionFit", "DilutionTable", "FitResult", "HeadReport", "Heatmap",
    "Horizon", "InferenceRule", "LengthError", "LengthReport", "Measurement", "Prediction", "RuleError", "Run",
    "RunConfig", "RunStore", "RunSummary", "SequenceReport", "StoreError", "Sweep", "SweepCollapse", "SweepGrid",
    "SweepProgress", "SweepResult", "TrainingProgress", "Verdict", "accuracy_table", "carrier", "compare",
    "curve_table", "delay_presets", "delays", "dilution_table", "evaluate", "heads", "heatmap", "load", "make_rule",
    "measure", "parse_rule", "preset_ids", "rule_curve", "runs", "shipped_sweeps", "single_head_presets", "sweep",
    "train", "train_longer", "transformer_presets", "with_changes",
]
