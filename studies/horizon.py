"""What sets RoPE's horizon (issue 14): an ablation study of the single-head retrieval model.

    .venv/bin/python -m studies.horizon --quick              # screening: 1 seed, few variants (~2 min)
    .venv/bin/python -m studies.horizon --json out.json      # the study: STUDY's variants, 3 seeds each
    .venv/bin/python -m studies.horizon --panel --seeds 1    # the candidate recipes on the panel
    .venv/bin/python -m studies.horizon --targets all --variants "d_model 128, init ×0.1"
                                                           # a recipe against issue 14's targets (~1 min)

**Targets** (--targets): the issue's bar for a default recipe: on the default config accuracy
≥ 0.95 at 16× L_train on seeds 0, 1, 2 (--target-seeds for more), and ≥ 0.9 at 4× on each RoPE
config of the prediction panel (tests/unit/test_prediction_panel.py) at the seed the test trains it
with (--panel-seeds to run every panel config at other seeds). Accuracy at 1×, 4×, 16×, 64×, with
the training steps and wall seconds of each run.

**Horizon.** The largest length on the doubling grid L_train·2^i (i = 0 … 12) up to which the
measured accuracy stays ≥ 0.9, at `SAMPLES` sequences per length (lengen_core.analysis.evaluate's
sequences, its default seed). "≥ cap" when it never falls on the grid. The **predicted horizon**
is the same threshold on lengen_core.analysis.dilution's prediction from the weights: its doubling grid up
to 2^20 finds the first failure, then bisection between the last length that passes and it gives
the largest length ≥ 0.9 (exact if the predicted curve falls once, which the staircase mostly does).
**m_out** is lengen_core.analysis.fit's margin, fitted to the measured masses on the same grid.

**Variants** change one thing of the default config at a time (lengen's recipe: Adam, lr 3e-3,
batch 128, ≤ 1 500 steps, stop at accuracy 1.0 held for 200 steps): a config field, the optimiser,
or the model: `HorizonHead` multiplies the attention logits by `logit_scale` and, with `residual`,
adds the query token's embedding to the attention output before the readout (a residual stream,
as TransformerLens's attention-only model has). Neither is a lengen_core option; both live here.

Training is lengen's loop (same initial weights, same batches) with the optimiser made a choice;
one thread. Nothing here is imported by lengen_core.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F

from lengen_core.analysis.dilution import predict
from lengen_core.analysis.evaluate import last_query_outputs, sequence_tokens
from lengen_core.analysis.fit import fit_dilution
from lengen_core.config import RunConfig, with_changes
from lengen_core.models.head import MinimalHead
from lengen_core.tasks import query_start, sample_batch
from lengen_core.training import DATA_SEED_OFFSET

THRESHOLD = 0.9  # the horizon's accuracy
SAMPLES = 1_024  # sequences per measured length
GRID_DOUBLINGS = 12  # measured grid: L_train · 2^0 … 2^12
PREDICTION_LIMIT = 1 << 20  # predicted grid and bisection up to here
EVAL_SEED = 12_345  # lengen_core.analysis.evaluate's default
# The config every variant changes one thing of: the default when the study ran (d_model 64, qk_init 1.0),
# not today's (the recipe this study found), so every row keeps meaning what it measured.
STUDY_DEFAULT = RunConfig.legacy_defaults()
OptimizerName = Literal["adam", "adamw", "sgd"]


class HorizonHead(MinimalHead):
    """The minimal head with two study options (no lengen_core change):

    - `logit_scale` α: attention logits α·q·k/√D (α folded into the query, so the O(L) evaluation
      and the prediction, which read `query_table`, see it too);
    - `qk_init`: W_Q and W_K drawn `qk_init` times smaller, so the initial logits are qk_init² times
      smaller (the same draws otherwise);
    - `residual`: readout (E[x_t] + attention output) @ W_U at each query t, instead of the
      attention output alone. The prediction from the weights models no residual.
    """

    def __init__(self, config: RunConfig, generator: torch.Generator, logit_scale: float = 1.0,
                 residual: bool = False, qk_init: float = 1.0) -> None:
        super().__init__(config, generator)
        self.logit_scale = logit_scale
        self.residual = residual
        with torch.no_grad():  # after every draw: the same random stream as MinimalHead
            self.W_Q.mul_(qk_init)
            self.W_K.mul_(qk_init)

    def _projection(self, tokens: torch.Tensor, weight: torch.Tensor, table: torch.Tensor | None) -> torch.Tensor:
        out = super()._projection(tokens, weight, table)
        return out * self.logit_scale if weight is self.W_Q else out

    def query_table(self, position: int, rows: torch.Tensor | None = None) -> torch.Tensor:
        return super().query_table(position, rows) * self.logit_scale

    def forward(self, tokens: torch.Tensor, query_start: int = 0, observe=None) -> torch.Tensor:
        logits = super().forward(tokens, query_start, observe)  # (B, Tq, V): the tables or the blocks, as lengen
        return logits + self.direct_readout()[tokens[:, query_start:]] if self.residual else logits

    def direct_readout(self) -> torch.Tensor:
        """The residual's contribution per query token, E @ W_U: (V, V)."""
        return self.embed @ self.W_U


@dataclass(frozen=True)
class Variant:
    """One change to the default recipe; `changes` are lengen config fields (`with_changes` names)."""

    name: str
    factor: str
    changes: tuple[tuple[str, Any], ...] = ()
    optimizer: OptimizerName = "adam"
    momentum: float = 0.9  # SGD only
    logit_scale: float = 1.0
    residual: bool = False
    qk_init: float = 1.0

    def config(self, base: RunConfig, seed: int) -> RunConfig:
        return with_changes(base, seed=seed, **dict(self.changes))


def _optimizer(variant: Variant, model: torch.nn.Module, config: RunConfig) -> torch.optim.Optimizer:
    lr, decay = config.train.learning_rate, config.train.weight_decay
    if variant.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=decay)
    if variant.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=variant.momentum, weight_decay=decay)
    return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=decay, fused=True)  # as lengen_core.training (CPU)


@dataclass
class Trained:
    model: HorizonHead
    steps: int
    seconds: float
    train_accuracy: float  # mean of the last 20 batches


def train_variant(config: RunConfig, variant: Variant) -> Trained:
    """lengen's training loop (lengen_core.training: same initial weights, batches and stopping rule)
    with the variant's model options and optimiser."""
    train = config.train
    model = HorizonHead(config, torch.Generator().manual_seed(train.seed), variant.logit_scale, variant.residual,
                        variant.qk_init)
    data = torch.Generator().manual_seed(train.seed + DATA_SEED_OFFSET)
    optimizer = _optimizer(variant, model, config)
    recent: deque[float] = deque(maxlen=train.patience)
    accuracies, start, steps = [], time.perf_counter(), 0
    while steps < train.steps:
        tokens, targets = sample_batch(config.task, train.batch_size, data)  # (B, T), (B, 1)
        logits = model(tokens, query_start=query_start(config.task, tokens.shape[1]))  # (B, 1, V)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        steps += 1
        accuracies.append(float((logits.argmax(-1) == targets).float().mean()))
        recent.append(accuracies[-1])
        if len(recent) == train.patience and not train.keep_training and min(recent) >= train.target_accuracy:
            break
    model.eval()
    return Trained(model, steps, time.perf_counter() - start, statistics.fmean(accuracies[-20:]))


def measure(model: HorizonHead, config: RunConfig, lengths: Sequence[int], samples: int = SAMPLES) -> list[dict]:
    """Accuracy and target mass (mean, standard error) at each length, O(L) memory (lengen_core.analysis.evaluate),
    with the residual's readout added. Stops once accuracy < THRESHOLD and the mass is below 2/V:
    nothing past there changes the horizon or the fit."""
    V, rows = config.task.vocab_size, []
    for length in lengths:
        out = last_query_outputs(model, config, length, samples, EVAL_SEED)
        readout = out.readout
        if model.residual:
            query_tokens = sequence_tokens(EVAL_SEED, length, samples, V, length - 1, length)[:, 0]  # (S,)
            readout = readout + model.direct_readout().detach()[query_tokens]
        accuracy = float((readout.argmax(1) == out.targets).float().mean())
        mass = out.target_mass
        rows.append({"length": length, "accuracy": accuracy, "mass": float(mass.mean()),
                     "mass_sem": float(mass.std() / math.sqrt(samples))})
        if accuracy < THRESHOLD and rows[-1]["mass"] < 2 / V:
            break
    return rows


def horizon_of(lengths: Sequence[int], accuracies: Sequence[float]) -> int | None:
    """The last length before the first one below THRESHOLD (lengths ascending); None if the first fails."""
    horizon = None
    for length, accuracy in zip(lengths, accuracies):
        if accuracy < THRESHOLD:
            break
        horizon = length
    return horizon


def predicted_horizon(model: HorizonHead, config: RunConfig) -> tuple[int | None, bool]:
    """(largest length with predicted accuracy ≥ THRESHOLD, whether it hit PREDICTION_LIMIT):
    the doubling grid, then bisection between the last passing and the first failing grid length."""
    L = config.task.train_length
    grid = [L << i for i in range(64) if L << i <= PREDICTION_LIMIT]
    with torch.no_grad():
        accuracies = [p.accuracy for p in predict(model, config, grid)]
    passing = horizon_of(grid, accuracies)
    if passing is None or passing == grid[-1]:
        return passing, passing is not None
    low, high = passing, passing * 2
    while high - low > 1:
        middle = (low + high) // 2
        with torch.no_grad():
            ok = predict(model, config, [middle])[0].accuracy >= THRESHOLD
        low, high = (middle, high) if ok else (low, middle)
    return low, False


def logit_scale_of(model: HorizonHead) -> float:
    """RMS |q|·RMS |k| / √D over tokens (position 0): the largest logit the head can make, the scale
    every carrier value is a fraction of."""
    with torch.no_grad():
        q = model.query_table(0)  # (V, D)
        k = model.key_table(torch.zeros(1, dtype=torch.long))[:, 0]  # (V, D)
    return float(q.pow(2).sum(1).mean().sqrt() * k.pow(2).sum(1).mean().sqrt() / math.sqrt(q.shape[1]))


def run_variant(variant: Variant, base: RunConfig, seed: int, samples: int = SAMPLES) -> dict:
    """Train one seed of a variant and measure it: a flat JSON-ready record."""
    config = variant.config(base, seed)
    trained = train_variant(config, variant)
    L = config.task.train_length
    record = {"variant": variant.name, "factor": variant.factor, "seed": seed, "steps": trained.steps,
              "train_seconds": trained.seconds, "train_accuracy": trained.train_accuracy, "m_out": None,
              "logit_scale": logit_scale_of(trained.model),
              "fit_status": "diverged", "horizon": None, "horizon_capped": False, "accuracy": {},
              "predicted_horizon": None, "predicted_capped": False}
    if not all(bool(p.isfinite().all()) for p in trained.model.parameters()):
        return record  # the optimiser diverged: no horizon
    rows = measure(trained.model, config, [L << i for i in range(GRID_DOUBLINGS + 1)], samples)
    lengths = [row["length"] for row in rows]
    fit = fit_dilution(lengths, [r["mass"] for r in rows], [r["mass_sem"] for r in rows], L, config.task.vocab_size)
    record.update({"m_out": fit.fit.m_out if fit.fit else None, "fit_status": fit.status,
                   "horizon": horizon_of(lengths, [r["accuracy"] for r in rows]),
                   "horizon_capped": lengths[-1] == L << GRID_DOUBLINGS and rows[-1]["accuracy"] >= THRESHOLD,
                   "accuracy": {str(r["length"]): r["accuracy"] for r in rows}})
    if not variant.residual and record["horizon"] is not None:
        record["predicted_horizon"], record["predicted_capped"] = predicted_horizon(trained.model, config)
    return record


def variant(name: str, factor: str, **options: Any) -> Variant:
    """A Variant whose config changes are given as keywords next to its model and optimiser options."""
    own = {key: options.pop(key) for key in ("optimizer", "momentum", "logit_scale", "residual", "qk_init") if key in options}
    return Variant(name, factor, tuple(options.items()), **own)


BASELINE = variant("default (Adam 3e-3)", "baseline")
VARIANTS: tuple[Variant, ...] = (
    BASELINE,
    variant("Adam lr 1e-3", "learning rate", learning_rate=1e-3),
    variant("Adam lr 1e-2", "learning rate", learning_rate=1e-2),
    variant("Adam lr 3e-2", "learning rate", learning_rate=3e-2),
    variant("AdamW wd 0.01", "optimiser", optimizer="adamw", weight_decay=0.01),
    variant("AdamW wd 0.1", "optimiser", optimizer="adamw", weight_decay=0.1),
    variant("SGD-momentum lr 0.1", "optimiser", optimizer="sgd", learning_rate=0.1),
    variant("SGD-momentum lr 1.0", "optimiser", optimizer="sgd", learning_rate=1.0),
    variant("keep training, 1500 steps", "steps", keep_training=True),
    variant("keep training, 5000 steps", "steps", keep_training=True, steps=5_000),
    variant("stop at 0.99, patience 10", "steps", target_accuracy=0.99, patience=10),
    variant("Adam wd 1e-3", "weight decay", weight_decay=1e-3),
    variant("Adam wd 1e-2", "weight decay", weight_decay=1e-2),
    variant("residual", "residual", residual=True),
    variant("residual, lr 1e-2", "residual", residual=True, learning_rate=1e-2),
    variant("logit scale 0.5", "attention scale", logit_scale=0.5),
    variant("logit scale 2", "attention scale", logit_scale=2.0),
    variant("logit scale 1.5", "attention scale", logit_scale=1.5),
    variant("logit scale 4", "attention scale", logit_scale=4.0),
    variant("W_Q, W_K init ×0.3", "initial logits", qk_init=0.3),
    variant("W_Q, W_K init ×0.1", "initial logits", qk_init=0.1),
    variant("init ×0.1, lr 1e-2", "combined", qk_init=0.1, learning_rate=1e-2),
    variant("d_model 32", "d_model", d_model=32),
    variant("d_model 128", "d_model", d_model=128),
    variant("d_model 256", "d_model", d_model=256),
    variant("d_model 128, lr 1e-2", "combined", d_model=128, learning_rate=1e-2),
    variant("d_model 256, lr 1e-2", "combined", d_model=256, learning_rate=1e-2),
    variant("d_model 128, stop at 0.99", "recipe", d_model=128, target_accuracy=0.99),
    variant("d_model 128, init ×0.3", "recipe", d_model=128, qk_init=0.3),
    variant("d_model 128, stop at 0.99, init ×0.3", "recipe", d_model=128, target_accuracy=0.99, qk_init=0.3),
    variant("d_model 256, stop at 0.99", "recipe", d_model=256, target_accuracy=0.99),
    variant("d_model 128, init ×0.1", "recipe", d_model=128, qk_init=0.1),
    variant("d_model 128, stop at 0.99, init ×0.1", "recipe", d_model=128, target_accuracy=0.99, qk_init=0.1),
    variant("d_model 256, init ×0.3", "recipe", d_model=256, qk_init=0.3),
    variant("d_model 128, init ×0.3, lr 1e-3", "recipe", d_model=128, qk_init=0.3, learning_rate=1e-3),
    variant("d_model 128, init ×0.3, keep training", "recipe", d_model=128, qk_init=0.3, keep_training=True),
    variant("lr 1e-2, keep training", "combined", learning_rate=1e-2, keep_training=True),
    variant("batch 32", "batch size", batch_size=32),
    variant("batch 512", "batch size", batch_size=512),
    variant("V 8", "V", vocab_size=8),
    variant("V 32", "V", vocab_size=32),
)

# (offset, vocab, train_length): the prediction panel's RoPE configs (docs/prediction.md) and the
# seed-11 config; offsets 1–8, V 8–32, L_train 8–48.
PANEL = ((1, 8, 8), (2, 12, 16), (5, 24, 32), (8, 32, 48), (4, 16, 12), (6, 10, 20), (3, 20, 40), (7, 20, 24))


# The targets for a default recipe: RoPE on the default config ≥ 0.95 at 16× L_train on
# seeds 0, 1, 2; ≥ 0.9 at 4× on every RoPE config of the prediction panel, at the seed
# tests/unit/test_prediction_panel.py trains it with: (offset, vocab, train_length, seed).
TARGET_DEFAULT_SEEDS = (0, 1, 2)
TARGET_DEFAULT_ACCURACY, TARGET_PANEL_ACCURACY = 0.95, 0.9
TARGET_PANEL = ((1, 8, 8, 1), (2, 12, 16, 2), (5, 24, 32, 4), (8, 32, 48, 1), (4, 16, 12, 2), (6, 10, 20, 3),
                (3, 20, 40, 2), (7, 20, 24, 11))
TARGET_MULTIPLES = (1, 4, 16, 64)  # measured at these multiples of L_train (stops after a failure)
# The candidate recipes, in the order they were tried (docs/horizon.md), and the one that meets every
# target: d_model 128 with W_Q, W_K drawn 10× smaller (initial attention logits 100× smaller).
CANDIDATES = ("d_model 128, stop at 0.99", "d_model 128, init ×0.3", "d_model 128, lr 1e-2", "d_model 256",
              "d_model 128, init ×0.1")
RECIPE = "d_model 128, init ×0.1"


def target_runs(which: str, default_seeds: Sequence[int] = TARGET_DEFAULT_SEEDS,
                panel_seeds: Sequence[int] = ()) -> list[tuple[str, RunConfig, int, int, float]]:
    """(label, base config, seed, the multiple the target is at, the accuracy it needs) for `which`:
    'default', 'panel' or 'all'. The panel's configs run at their own seed, or at `panel_seeds` if given."""
    runs = []
    if which in ("default", "all"):
        runs += [("default", STUDY_DEFAULT, seed, 16, TARGET_DEFAULT_ACCURACY) for seed in default_seeds]
    if which in ("panel", "all"):
        for k, v, n, seed in TARGET_PANEL:
            label, base = parse_base(f"offset={k},vocab_size={v},train_length={n}")
            runs += [(label, base, s, 4, TARGET_PANEL_ACCURACY) for s in (panel_seeds or (seed,))]
    return runs


def run_target(variant: Variant, label: str, base: RunConfig, seed: int, multiple: int, needed: float,
               samples: int = SAMPLES) -> dict:
    """Train one (variant, config, seed) and measure it at TARGET_MULTIPLES of L_train: a JSON-ready record
    with whether it meets its target (accuracy ≥ `needed` at `multiple` × L_train)."""
    config = variant.config(base, seed)
    trained = train_variant(config, variant)
    L = config.task.train_length
    record = {"variant": variant.name, "base": label, "seed": seed, "steps": trained.steps,
              "train_seconds": trained.seconds, "train_accuracy": trained.train_accuracy,
              "target_multiple": multiple, "target_accuracy": needed, "accuracy": {}, "meets": False}
    if all(bool(p.isfinite().all()) for p in trained.model.parameters()):
        rows = measure(trained.model, config, [L * m for m in TARGET_MULTIPLES], samples)
        record["accuracy"] = {f"{r['length'] // L}x": r["accuracy"] for r in rows}
        record["meets"] = record["accuracy"].get(f"{multiple}x", 0.0) >= needed
    return record


def target_markdown(records: Sequence[dict]) -> str:
    """One row per run: steps, train seconds, accuracy at each multiple, the target and whether it holds."""
    lines = ["| variant | config | seed | steps | train s | " + " | ".join(f"{m}×" for m in TARGET_MULTIPLES)
             + " | target | meets |", "|---|---|---:|---:|---:|" + "---:|" * len(TARGET_MULTIPLES) + "---|---|"]
    for r in records:
        cells = [f"{r['accuracy'][f'{m}x']:.3f}" if f"{m}x" in r["accuracy"] else "—" for m in TARGET_MULTIPLES]
        lines.append(f"| {r['variant']} | {r['base']} | {r['seed']} | {r['steps']} | {r['train_seconds']:.1f} | "
                     + " | ".join(cells) + f" | ≥ {r['target_accuracy']} at {r['target_multiple']}× "
                     f"| {'yes' if r['meets'] else '**no**'} |")
    return "\n".join(lines)


def summarise(records: Sequence[dict]) -> list[dict]:
    """One row per (base, variant): seeds, steps, m_out mean ± sd, horizons (median, min, max)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for record in records:
        groups.setdefault((record.get("base", "default"), record["variant"]), []).append(record)
    rows = []
    for (base, name), group in groups.items():
        m_outs = [r["m_out"] for r in group if r["m_out"] is not None]
        rows.append({
            "base": base, "variant": name, "factor": group[0]["factor"], "seeds": len(group),
            "steps": statistics.fmean(r["steps"] for r in group),
            "train_seconds": statistics.fmean(r["train_seconds"] for r in group),
            "m_out": statistics.fmean(m_outs) if m_outs else None,
            "m_out_sd": statistics.stdev(m_outs) if len(m_outs) > 1 else 0.0,
            "horizons": [_horizon_text(r["horizon"], r["horizon_capped"]) for r in group],
            "predicted": [_horizon_text(r["predicted_horizon"], r["predicted_capped"]) for r in group
                          if r["predicted_horizon"] is not None or r["factor"] != "residual"],
        })
    return rows


def _horizon_text(length: int | None, capped: bool) -> str:
    return "—" if length is None else f"≥{length:,}" if capped else f"{length:,}"


def markdown(rows: Sequence[dict]) -> str:
    header = ("| base | variant | seeds | steps | train s | m_out (mean ± sd) | measured horizon (per seed) "
              "| predicted horizon (per seed) |")
    lines = [header, "|---|---|---:|---:|---:|---|---|---|"]
    for row in rows:
        m_out = "—" if row["m_out"] is None else f"{row['m_out']:.2f} ± {row['m_out_sd']:.2f}"
        predicted = ", ".join(row["predicted"]) or "n/a (residual)"
        lines.append(f"| {row['base']} | {row['variant']} | {row['seeds']} | {row['steps']:.0f} "
                     f"| {row['train_seconds']:.1f} | {m_out} | {', '.join(row['horizons'])} | {predicted} |")
    return "\n".join(lines)


def parse_base(text: str) -> tuple[str, RunConfig]:
    """'offset=7,train_length=24,vocab_size=20' → (its label, the default config with those fields)."""
    if not text:
        return "default", STUDY_DEFAULT
    changes = {key: int(value) for key, value in (item.split("=") for item in text.split(","))}
    label = f"k{changes.get('offset', 3)} L{changes.get('train_length', 16)} V{changes.get('vocab_size', 16)}"
    return label, with_changes(STUDY_DEFAULT, **changes)


QUICK = ("default (Adam 3e-3)", "Adam lr 1e-2", "AdamW wd 0.1", "SGD-momentum lr 1.0", "keep training, 1500 steps",
         "Adam wd 1e-2", "residual", "logit scale 4", "d_model 128", "batch 512", "V 32")


# The study's variants (3 seeds each), in the order they run: those the screening (--quick) found
# to matter first, then the rest of issue 14's factors.
STUDY = ("default (Adam 3e-3)", "Adam lr 1e-3", "Adam lr 1e-2", "lr 1e-2, keep training", "d_model 128",
         "W_Q, W_K init ×0.3", "logit scale 0.5", "residual", "AdamW wd 0.1", "Adam wd 1e-2", "batch 512", "V 32",
         "keep training, 1500 steps", "SGD-momentum lr 0.1", "stop at 0.99, patience 10", "logit scale 2",
         "d_model 32", "batch 32", "V 8")
# On the panel (--panel, 1 seed): the default recipe, the two candidates the study first pointed to, the recipe.
PANEL_VARIANTS = ("default (Adam 3e-3)", "lr 1e-2, keep training", "d_model 128", "d_model 128, init ×0.1")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m studies.horizon", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="screening: 1 seed, the QUICK variants")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--variants", default="",
                        help="';'-separated variant names, or 'all' (default: STUDY, or PANEL_VARIANTS with --panel)")
    parser.add_argument("--base", action="append", default=[],
                        help="a base config as field=value,… (repeatable; default: lengen's default)")
    parser.add_argument("--panel", action="store_true",
                        help="bases: the PANEL configs and the two hardest of the brief (k7 L24 V20, k8 L16 V16)")
    parser.add_argument("--targets", choices=("default", "panel", "all"), default="",
                        help="measure the variants (default: CANDIDATES) against the issue's recipe targets on the "
                             "default config's seeds 0-2 and/or the panel's configs at their seeds")
    parser.add_argument("--only", default="", help="with --targets: only the configs whose label contains this")
    parser.add_argument("--panel-seeds", default="",
                        help="with --targets: run every panel config at these seeds (comma-separated) instead of its own")
    parser.add_argument("--target-seeds", default="0,1,2",
                        help="with --targets: the default config's seeds, comma-separated (default 0,1,2)")
    parser.add_argument("--json", default="", help="write every record and the summary here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.targets:
        return main_targets(args, parser)
    names = set(filter(None, args.variants.split(";"))) or set(PANEL_VARIANTS if args.panel else STUDY)
    names = set(QUICK) if args.quick else {v.name for v in VARIANTS} if names == {"all"} else names
    unknown = names - {v.name for v in VARIANTS}
    if unknown:
        parser.error(f"unknown variant(s): {', '.join(sorted(unknown))}")
    seeds = range(1 if args.quick else args.seeds)  # --panel: pass --seeds 1 for one seed per config
    records, start = [], time.perf_counter()
    if args.panel:
        args.base += [f"offset={k},vocab_size={v},train_length={n}" for k, v, n in PANEL + ((8, 16, 16),)]
    for label, base in map(parse_base, args.base or [""]):
        order = list(dict.fromkeys((*STUDY, *PANEL_VARIANTS, *(v.name for v in VARIANTS))))  # STUDY's first
        for item in sorted((v for v in VARIANTS if v.name in names), key=lambda v: order.index(v.name)):
            for seed in seeds:
                record = run_variant(item, base, seed)
                record["base"] = label
                records.append(record)
                print(f"{label:>14} | {item.name:<28} s{seed} steps {record['steps']:>5} "
                      f"{record['train_seconds']:5.1f}s m_out {record['m_out'] or float('nan'):5.2f} "
                      f"horizon {_horizon_text(record['horizon'], record['horizon_capped']):>8} predicted "
                      f"{_horizon_text(record['predicted_horizon'], record['predicted_capped']):>9}", flush=True)
                if args.json:  # after every run: a study stopped early keeps what it measured
                    with open(args.json, "w") as handle:
                        json.dump({"records": records, "summary": summarise(records)}, handle, indent=1)
    print(markdown(summarise(records)))
    print(f"\n{len(records)} runs in {time.perf_counter() - start:.0f} s on one thread")


def main_targets(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """--targets: every variant on every target run, in order (the variants in the order given)."""
    names = [n for n in args.variants.split(";") if n] or list(CANDIDATES)
    unknown = set(names) - {v.name for v in VARIANTS}
    if unknown:
        parser.error(f"unknown variant(s): {', '.join(sorted(unknown))}")
    by_name, records, start = {v.name: v for v in VARIANTS}, [], time.perf_counter()
    for name in names:
        default_seeds = [int(seed) for seed in args.target_seeds.split(",")]
        panel_seeds = [int(seed) for seed in args.panel_seeds.split(",") if seed]
        for label, base, seed, multiple, needed in target_runs(args.targets, default_seeds, panel_seeds):
            if args.only not in label:
                continue
            record = run_target(by_name[name], label, base, seed, multiple, needed)
            records.append(record)
            accuracy = " ".join(f"{key} {value:.3f}" for key, value in record["accuracy"].items())
            print(f"{name:<38} | {label:>12} s{seed:<2} steps {record['steps']:>5} {record['train_seconds']:5.1f}s "
                  f"| {accuracy} | {'meets' if record['meets'] else 'FAILS'}", flush=True)
            if args.json:
                with open(args.json, "w") as handle:
                    json.dump({"records": records}, handle, indent=1)
    print(target_markdown(records))
    print(f"\n{len(records)} runs in {time.perf_counter() - start:.0f} s on one thread")


if __name__ == "__main__":
    main()
