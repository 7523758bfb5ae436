"""Do near-recurrences predict accuracy drops? The study behind docs/near-recurrences.md.

    .venv/bin/python studies/near_recurrences.py [--out FILE] [--only NAME ...] [--cache DIR]

For each configuration below (all fixed before any result was looked at; the accuracy curves of
the `fresh` ones were first computed once the redefined rule was frozen) it trains the minimal
RoPE softmax head, then

1. measures the accuracy A(n) of the last query at every length n ≤ FINE and at GRID_POINTS
   log-spaced lengths from L_train to LONGEST, on the same SAMPLES sequences at every length
   ("paired": a sequence of length n is the first n keys, counted back from the query, of one
   long random sequence), so A(n+1) − A(n) is exactly the effect of the one key entering at
   offset n. The readout is the model's own; on the evaluation's token stream the sweep equals
   lengen_core.analysis.evaluate.evaluate exactly (checked at two lengths, recorded in the JSON);
2. computes a smooth reference that knows nothing of where recurrences sit: the same model and
   sequences, but every key beyond the training range gets the logits of an independent,
   uniformly drawn far offset in [L_train, LONGEST) (the two-zone law, simulated exactly);
3. lists the app's near-recurrences (lengen_core.analysis.carrier.find_near_recurrences: some pair's
   s_ab(Δ) within ln 4 of the query's mean target logit) and the redefined rule's lines (the
   override hazard h(Δ) ≥ HAZARD_LINE, `override_hazard` below);
4. compares: for each flagged offset, the measured step there against the reference's change per
   key; for each measured step, whether an offset was flagged there; the same on the grid.

Writes one JSON (default artifacts/near_recurrence_study.json, git-ignored) and prints one line per
configuration. Not imported by lengen_core. About 1-3 min per configuration on two cores, most of it
training; `--cache DIR` (e.g. artifacts/near-recurrence-weights) keeps the trained weights and their
step counts between runs, and training is deterministic on the CPU, so the numbers do not change.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import poisson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: the repo root holds lengen_core

from lengen_core.analysis.carrier import (
    RECURRENCE_GAP,
    CarrierBlocks,
    carrier_values,
    find_near_recurrences,
    token_coefficients,
)
from lengen_core.analysis.dilution import predict
from lengen_core.analysis.evaluate import evaluate, sequence_tokens, wilson_interval
from lengen_core.config import RunConfig, with_changes
from lengen_core.models.head import build_model
from lengen_core.training import train

# name, offset k, training length, vocabulary V, seed; default training otherwise (RunConfig()).
STUDY = [
    ("default", 3, 16, 16, 0),
    ("k7-L24-V20-s11", 7, 24, 20, 11),
    ("k5-L32-V16-s1", 5, 32, 16, 1),
    ("k3-L16-V32-s2", 3, 16, 32, 2),
    ("k10-L48-V12-s3", 10, 48, 12, 3),
    ("k2-L12-V24-s4", 2, 12, 24, 4),
]
FRESH = [  # run only after the redefined rule (override_hazard, HAZARD_LINE, STEP) was frozen
    ("k4-L20-V16-s21", 4, 20, 16, 21),
    ("k6-L40-V24-s22", 6, 40, 24, 22),
    ("k3-L16-V16-s23", 3, 16, 16, 23),
]

SAMPLES = 2_048  # sequences, the same at every length: Wilson half-width ≤ 0.022 per point
LONGEST = 1 << 16
FINE = 8_192  # every length up to here (per-key steps); beyond, only the grid
GRID_POINTS = 40
TOKEN_SEED = 1  # the paired sweep's sequences
SHUFFLE_SEED = 2  # the reference's far offsets
EVALUATE_SEED = 12_345  # the cross-check against lengen_core.analysis.evaluate
LEARNED = 0.99  # accuracy at L_train (4 096 sequences) a run needs to enter the study
HAZARD_LINE = 0.01  # the redefined rule draws a line where h(Δ) ≥ this
STEP = 0.005  # a measured step: one key costs ≥ 0.5% of the sequences ...
STEP_P = 1e-3  # ... and more than the reference's loss per key could give (Poisson, p < this)
FLOOR_MARGIN = 0.05  # the study region ends where accuracy is within this of its value at LONGEST
TOKEN_BLOCK = 4_096


def config_of(offset: int, train_length: int, vocab_size: int, seed: int) -> RunConfig:
    base = RunConfig()
    if (offset, train_length, vocab_size, seed) == (base.task.offset, base.task.train_length,
                                                      base.task.vocab_size, base.train.seed):
        return base
    return with_changes(base, offset=offset, train_length=train_length, vocab_size=vocab_size, seed=seed)


# --- the redefined rule -------------------------------------------------------------------------


@torch.no_grad()
def override_hazard(model: torch.nn.Module, config: RunConfig, offsets: torch.Tensor) -> np.ndarray:
    """h(Δ) = (1/V³)·#{(a, c, b): b ≠ c, s_ab(Δ) > s_ac(k)} for each Δ in `offsets`.

    The probability, over a uniformly random query token a, target token c and key token b, that
    one key at offset Δ gets more attention than the target: a key that by itself outvotes the
    target. Expected accuracy step when offset Δ enters the window: −A·h(Δ). Cost V²·log V per offset.
    """
    coefficients = token_coefficients(model).cpu()
    frequencies = model.encoding.frequencies.cpu()
    V, k = coefficients.shape[0], config.task.offset
    target = carrier_values(coefficients, frequencies, torch.tensor([k]))[..., 0]  # (V_a, V_c) s_ac(k)
    ordered = target.sort(dim=1).values.contiguous()
    hazard = np.empty(len(offsets))
    for start in range(0, len(offsets), 1024):
        chunk = offsets[start : start + 1024]
        s = carrier_values(coefficients, frequencies, chunk)  # (V_a, V_b, n)
        below = torch.searchsorted(ordered, s.reshape(V, -1)).view(V, V, -1)  # #{c: s_ac(k) < s_ab(Δ)}
        same = target[:, :, None] < s  # c = b is no rival: t_ab < s_ab(Δ) counted above, remove it
        hazard[start : start + len(chunk)] = ((below - same.long()).sum(dim=(0, 1)).double() / V**3).numpy()
    return hazard


def hazard_lines(model: torch.nn.Module, config: RunConfig, search_length: int, threshold: float = HAZARD_LINE,
                 limit: int = 5) -> list[tuple[int, float]]:
    """The first `limit` offsets Δ ≥ L_train with h(Δ) ≥ threshold: draw a line at length Δ + 1."""
    found: list[tuple[int, float]] = []
    for begin in range(config.task.train_length, search_length, 1 << 14):
        offsets = torch.arange(begin, min(begin + (1 << 14), search_length))
        h = override_hazard(model, config, offsets)
        found += [(int(offsets[i]), float(h[i])) for i in np.nonzero(h >= threshold)[0]]
        if len(found) >= limit:
            break
    return found[:limit]


# --- measurement --------------------------------------------------------------------------------


def offset_tokens(S: int, V: int, begin: int, end: int, seed: int = TOKEN_SEED) -> torch.Tensor:
    """Tokens of S sequences at offsets begin … end−1 from the query (offset 0 is the query itself)."""
    blocks = []
    for block in range(begin // TOKEN_BLOCK, (end - 1) // TOKEN_BLOCK + 1):
        stream = torch.Generator().manual_seed((seed * 1_000_003 + block) % 2**63)
        blocks.append(torch.randint(V, (S, TOKEN_BLOCK), generator=stream))
    first = begin // TOKEN_BLOCK * TOKEN_BLOCK
    return torch.cat(blocks, dim=1)[:, begin - first : end - first]


@torch.no_grad()
def paired_sweep(model, config: RunConfig, longest: int, samples: int, grid: list[int], fine: int,
                 tokens: torch.Tensor | None = None, shuffle_from: int | None = None) -> dict:
    """Accuracy of the last query at every n ≤ `fine` and at each grid length, same sequences throughout.

    Offsets Δ = 0 … n−1 are the keys of a sequence of length n; the target is at Δ = k. With
    `shuffle_from` = L, a key at Δ ≥ L gets the logits of an independent uniform offset in [L, longest).
    Returns the per-length accuracy (fine), per-length counts of sequences turning wrong (loss) and
    right (gain) as the key at offset n−1 enters, and at the grid lengths the accuracy and each
    sequence's correctness (for paired differences).
    """
    coefficients = token_coefficients(model).cpu()
    frequencies = model.encoding.frequencies.cpu()
    V, k = coefficients.shape[0], config.task.offset
    target = carrier_values(coefficients, frequencies, torch.tensor([k]))[..., 0]
    shift = target.max(dim=1).values  # per query token; cancels in every comparison
    readout = (model.embed @ model.W_V @ model.W_U).detach().double().cpu()  # (V, V): a key's vote → scores
    blocks = CarrierBlocks(coefficients, frequencies, TOKEN_BLOCK, shift)
    if shuffle_from is not None:
        table = torch.cat([blocks(b, min(b + TOKEN_BLOCK, longest)) for b in range(0, longest, TOKEN_BLOCK)], 2)
        stream = torch.Generator().manual_seed(SHUFFLE_SEED)
    take = (lambda b, e: tokens[:, b:e]) if tokens is not None else (lambda b, e: offset_tokens(samples, V, b, e))
    head = take(0, k + 1)
    query, answer = head[:, 0], head[:, k]
    votes = torch.zeros(samples, V, dtype=torch.float64)
    accuracy = np.full(fine + 1, np.nan)
    loss = np.zeros(fine + 1, dtype=np.int64)
    gain = np.zeros(fine + 1, dtype=np.int64)
    grid_accuracy, grid_correct = {}, {}
    previous = torch.zeros(samples, dtype=torch.bool)
    stops = sorted({*range(0, longest, TOKEN_BLOCK), *(g for g in grid if g <= longest), longest,
                    *range(0, fine, 256), fine})
    loaded = -1
    for begin, end in itertools.pairwise(stops):
        block = begin // TOKEN_BLOCK * TOKEN_BLOCK
        if block != loaded:
            block_end = min(block + TOKEN_BLOCK, longest)
            keys = take(block, block_end)  # (S, c)
            if shuffle_from is None:
                index = (query[:, None] * V + keys) * (block_end - block) + torch.arange(block_end - block)
                logits = blocks(block, block_end).reshape(-1)[index]
            else:
                position = torch.arange(block, block_end).expand(samples, -1).clone()
                far = position >= shuffle_from
                position[far] = torch.randint(shuffle_from, longest, (int(far.sum()),), generator=stream)
                logits = table.reshape(-1)[(query[:, None] * V + keys) * longest + position]
            weights = logits.double().exp()
            loaded = block
        x, w = keys[:, begin - block : end - block], weights[:, begin - block : end - block]
        if end <= fine:
            scores = votes @ readout
            running = scores[:, None, :] + (w[:, :, None] * readout[x]).cumsum(dim=1)  # (S, c, V)
            correct = running.argmax(dim=2) == answer[:, None]
            before = torch.cat((previous[:, None], correct[:, :-1]), dim=1)
            lengths = np.arange(begin + 1, end + 1)
            accuracy[lengths] = correct.double().mean(dim=0).numpy()
            loss[lengths] = (before & ~correct).sum(dim=0).numpy()
            gain[lengths] = (~before & correct).sum(dim=0).numpy()
            previous = correct[:, -1]
        votes.scatter_add_(1, x, w)
        if end in grid:
            right = (votes @ readout).argmax(dim=1) == answer
            grid_accuracy[end], grid_correct[end] = float(right.double().mean()), right.numpy()
    return {"accuracy": accuracy, "loss": loss, "gain": gain, "grid": grid_accuracy, "correct": grid_correct}


def check_against_evaluate(model, config: RunConfig, lengths: list[int], samples: int = 1_024) -> list[dict]:
    """The sweep's accuracy on evaluate()'s own sequences equals evaluate()'s (both the model's readout)."""
    V, out = config.task.vocab_size, []
    for n in lengths:
        official = evaluate(model, config, [n], samples, EVALUATE_SEED)[0].accuracy
        keys = sequence_tokens(EVALUATE_SEED, n, samples, V).flip(1)  # position n−1−Δ ↦ offset Δ
        ours = paired_sweep(model, config, n, samples, [n], fine=0, tokens=keys)["grid"][n]
        out.append({"length": n, "evaluate": official, "sweep": ours})
    return out


@torch.no_grad()
def app_gaps(model, config: RunConfig, offsets: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The app's criterion per offset: min_a [mean_c s_ac(k) − max_b s_ab(Δ)] (≤ ln 4 flags Δ), and how
    many (a, b) pairs are within ln 4."""
    coefficients, frequencies = token_coefficients(model).cpu(), model.encoding.frequencies.cpu()
    k = config.task.offset
    mean_target = carrier_values(coefficients, frequencies, torch.tensor([k]))[..., 0].mean(dim=1)  # (V_a,)
    gaps, pairs = np.empty(len(offsets)), np.empty(len(offsets), dtype=np.int64)
    for start in range(0, len(offsets), 2048):
        s = carrier_values(coefficients, frequencies, offsets[start : start + 2048])  # (V, V, n)
        gaps[start : start + s.shape[-1]] = (mean_target[:, None] - s.max(dim=1).values).min(dim=0).values.numpy()
        pairs[start : start + s.shape[-1]] = (s >= mean_target[:, None, None] - RECURRENCE_GAP).sum(dim=(0, 1)).numpy()
    return gaps, pairs


# --- analysis -----------------------------------------------------------------------------------


def paired_change(correct: dict, a: int, b: int, S: int) -> tuple[float, float]:
    """A(b) − A(a) on the same sequences and its standard error sqrt(discordant)/S (McNemar)."""
    x, y = correct[a], correct[b]
    return float(y.mean() - x.mean()), math.sqrt(float((x != y).sum())) / S


def rule_scores(flag: np.ndarray, step: np.ndarray, net: np.ndarray) -> dict:
    """Flagged offsets against measured steps, both over the study region."""
    hits = flag & step
    total = float(net.sum())
    return {
        "flagged": int(flag.sum()),
        "flagged_share": float(flag.mean()),
        "steps": int(step.sum()),
        "precision": float(hits.sum() / flag.sum()) if flag.any() else None,
        "recall": float(hits.sum() / step.sum()) if step.any() else None,
        "loss_share": float(net[flag].sum() / total) if total > 0 else None,
    }


def study(name: str, k: int, L: int, V: int, seed: int, role: str, cache: Path | None) -> dict:
    clock = time.perf_counter()
    config = config_of(k, L, V, seed)
    model = build_model(config, torch.Generator().manual_seed(seed))
    stored = cache / f"{config.run_id()}.pt" if cache else None
    if stored and stored.exists():  # training is deterministic on the CPU: the same weights bit for bit
        saved = torch.load(stored)
        model.load_state_dict(saved["state"])
        steps = saved["steps"]
    else:
        run = train(config, device="cpu")
        model, steps = run.model, run.steps
        if stored:
            torch.save({"state": model.state_dict(), "steps": steps}, stored)
    model.eval()
    trained = time.perf_counter()
    learned = evaluate(model, config, [L], 4_096, EVALUATE_SEED)[0].accuracy
    result = {"name": name, "role": role, "offset": k, "train_length": L, "vocab_size": V, "seed": seed,
              "run_id": config.run_id(), "train_steps": steps, "accuracy_at_train_length": learned}
    if learned < LEARNED:
        return result | {"excluded": f"accuracy {learned:.3f} < {LEARNED} at L_train"}

    grid = sorted({int(n) for n in np.geomspace(L, LONGEST, GRID_POINTS).round()})
    S = SAMPLES
    result["evaluate_check"] = check_against_evaluate(model, config, [4 * L, 64 * L])
    measured = paired_sweep(model, config, LONGEST, S, grid, FINE)
    reference = paired_sweep(model, config, LONGEST, S, grid, 0, shuffle_from=L)
    predicted = {p.length: p.accuracy for p in predict(model, config, [n for n in grid if n <= FINE])}
    offsets = torch.arange(FINE)
    hazard = override_hazard(model, config, offsets)
    gaps, pairs = app_gaps(model, config, offsets)
    recurrences = find_near_recurrences(model, config, LONGEST, limit=1 << 20)
    app = np.zeros(FINE, dtype=bool)
    app[[r.offset for r in recurrences if r.offset < FINE]] = True
    recomputed_mismatches = int((app[L:] != (gaps[L:] <= RECURRENCE_GAP)).sum())  # expected 0

    A = measured["accuracy"]  # A[n], n = 1 … FINE
    floor = measured["grid"][LONGEST]
    end = next((n for n in grid if n <= FINE and measured["grid"][n] <= floor + FLOOR_MARGIN), FINE)
    region = np.arange(L, end - 1)  # offsets Δ entering at n = Δ + 1 ≤ end
    net = (measured["loss"] - measured["gain"])[region + 1]  # sequences lost when Δ enters
    # the reference's loss per key on the grid interval holding n = Δ + 1
    rate = np.zeros(len(region))
    for a, b in itertools.pairwise(grid):
        inside = (region + 1 > a) & (region + 1 <= b)
        rate[inside] = max(0.0, reference["grid"][a] - reference["grid"][b]) * S / (b - a)
    significant = poisson.sf(net - 1, np.maximum(rate, 1e-9)) < STEP_P
    step = (net >= STEP * S) & significant
    app_flag, hazard_flag = app[region], hazard[region] >= HAZARD_LINE

    def entry(d: int) -> dict:
        i = d - L
        inside = 0 <= i < len(region)
        if d + 1 > FINE:
            return {"offset": d, "length": d + 1}
        return {"offset": d, "length": d + 1, "gap": round(float(gaps[d]), 3), "pairs": int(pairs[d]),
                "hazard": round(float(hazard[d]), 4),
                "measured_step": round(float(A[d + 1] - A[d]), 4),
                "reference_step_per_key": round(-float(rate[i]) / S, 5) if inside else None,
                "measured_step_significant": bool(step[i]) if inside else None}

    first_step = int(region[step][0]) if step.any() else None
    app_first = [r.offset for r in recurrences[:5]]
    hazard_first = [int(d) for d in np.nonzero(hazard[L:] >= HAZARD_LINE)[0][:5] + L]

    intervals = []
    for a, b in itertools.pairwise(grid):
        if b > end:
            break
        dm, em = paired_change(measured["correct"], a, b, S)
        dr, er = paired_change(reference["correct"], a, b, S)
        inside = (np.arange(FINE) + 1 > a) & (np.arange(FINE) + 1 <= b)
        intervals.append({"from": a, "to": b, "measured_change": round(dm, 4), "reference_change": round(dr, 4),
                          "drop_below_reference": bool(dm < 0 and dm - dr < -2 * math.hypot(em, er)),
                          "measured_drop": bool(dm < -2 * em),
                          "app_entries": int((app & inside)[L:].sum()),
                          "hazard_entries": int(((hazard >= HAZARD_LINE) & inside)[L:].sum())})
    drops = [i for i in intervals if i["measured_drop"]]
    below = [i for i in intervals if i["drop_below_reference"]]
    near_one = [n for n in grid if n <= FINE and measured["grid"][n] > 0.3]
    staircase = np.concatenate(([1.0], np.cumprod(1 - np.where(np.arange(FINE) >= L, hazard, 0.0))))

    result |= {
        "seconds_training": round(trained - clock, 1),
        "study_region": [L, end],
        "accuracy_floor": floor,
        "grid": [{"length": n, "measured": measured["grid"][n],
                  "wilson": [round(x, 4) for x in wilson_interval(round(measured["grid"][n] * S), S)],
                  "reference": reference["grid"][n], "predicted": predicted.get(n),
                  "staircase": float(staircase[n]) if n <= FINE else None} for n in grid],
        "fine_vs_grid_max_difference": max(abs(A[n] - measured["grid"][n]) for n in grid if n <= FINE),
        "largest_gap": {
            "measured_minus_reference": max(measured["grid"][n] - reference["grid"][n] for n in grid),
            "reference_minus_measured": max(reference["grid"][n] - measured["grid"][n] for n in grid),
            "predicted_vs_measured": max(abs(predicted[n] - measured["grid"][n]) for n in predicted),
            "staircase_vs_measured_while_above_0.3": max(abs(staircase[n] - measured["grid"][n]) for n in near_one),
        },
        "app_recurrences_below_longest": len(recurrences),
        "app_criterion_recomputed_mismatches": recomputed_mismatches,
        "app_first_five": [entry(d) for d in app_first],
        "app_first_ten": [entry(int(d)) for d in np.nonzero(app)[0][:10]],
        "hazard_first_ten": [entry(int(d)) for d in np.nonzero(hazard[L:] >= HAZARD_LINE)[0][:10] + L],
        "largest_measured_steps": [entry(int(d)) for d in region[np.argsort(-net, kind="stable")[:10]]],
        "onset": {"first_measured_step": first_step, "first_app_line": app_first[0] if app_first else None,
                  "first_hazard_line": hazard_first[0] if hazard_first else None},
        "per_offset": {"app": rule_scores(app_flag, step, net), "hazard": rule_scores(hazard_flag, step, net),
                       "app_gap_below_zero": rule_scores(gaps[region] <= 0, step, net),
                       "correlation_net_loss_vs_A_h": float(np.corrcoef(net, A[region] * hazard[region])[0, 1]),
                       "mean_step": {  # A(Δ+1) − A(Δ) averaged over the offsets of the region in each group
                           "app_flagged": float(-net[app_flag].mean() / S) if app_flag.any() else None,
                           "app_not_flagged": float(-net[~app_flag].mean() / S),
                           "hazard_flagged": float(-net[hazard_flag].mean() / S) if hazard_flag.any() else None,
                           "reference_per_key": float(-rate.mean() / S)},
                       # at the hazard lines: Σ measured loss / Σ predicted loss A(Δ)·h(Δ)·S (1 = the rule's size)
                       # each measured step over the reference's loss per key at its length
                       "step_over_reference_per_key": dict(zip(("min", "median", "max"), (
                           float(x) for x in np.percentile(net[step] / np.maximum(rate[step], 1e-9), [0, 50, 100]))))
                       if step.any() else None,
                       "hazard_lines_measured_over_predicted": float(
                           net[hazard_flag].sum() / (A[region] * hazard[region])[hazard_flag].sum() / S)
                       if hazard_flag.any() else None},
        "grid_intervals": intervals,
        "grid_summary": {
            "intervals": len(intervals),
            "with_app_entry": sum(i["app_entries"] > 0 for i in intervals),
            "with_hazard_entry": sum(i["hazard_entries"] > 0 for i in intervals),
            "measured_drops": len(drops),
            "measured_drops_with_app_entry": sum(i["app_entries"] > 0 for i in drops),
            "measured_drops_with_hazard_entry": sum(i["hazard_entries"] > 0 for i in drops),
            "drops_below_reference": len(below),
            "hazard_entry_intervals_with_measured_drop": sum(
                i["measured_drop"] for i in intervals if i["hazard_entries"]),
            "app_entry_intervals_with_measured_drop": sum(i["measured_drop"] for i in intervals if i["app_entries"]),
        },
        "per_offset_arrays": {"accuracy_after_entry": [round(float(x), 5) for x in A[region + 1]],
                              "net_loss": net.tolist(), "hazard": [round(float(h), 5) for h in hazard[region]],
                              "app": app_flag.astype(int).tolist()},
        "seconds": round(time.perf_counter() - clock, 1),
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("artifacts/near_recurrence_study.json"))
    parser.add_argument("--only", nargs="*", help="configuration names (default: all)")
    parser.add_argument("--cache", type=Path, help="folder for trained weights (reused when present)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
    results = []
    for role, configs in (("study", STUDY), ("fresh", FRESH)):
        for name, k, L, V, seed in configs:
            if args.only and name not in args.only:
                continue
            r = study(name, k, L, V, seed, role, args.cache)
            results.append(r)
            if "excluded" in r:
                print(f"{name}: excluded ({r['excluded']})", flush=True)
                continue
            app, haz, on = r["per_offset"]["app"], r["per_offset"]["hazard"], r["onset"]
            print(f"{name} ({role}): onset {on['first_measured_step']} | app first {on['first_app_line']}, "
                  f"precision {app['precision']:.2f} recall {app['recall']:.2f} | "
                  f"hazard first {on['first_hazard_line']}, precision {haz['precision']:.2f} "
                  f"recall {haz['recall']:.2f} | predict() within {r['largest_gap']['predicted_vs_measured']:.3f} "
                  f"[{r['seconds']:.0f} s]", flush=True)
    root = Path(__file__).resolve().parents[1]
    def git(*arguments: str) -> str:
        return subprocess.run(["git", *arguments], cwd=root, capture_output=True, text=True, check=False).stdout.strip()

    code = {"commit": git("rev-parse", "HEAD"), "lengen_core_uncommitted": git("status", "--porcelain", "lengen_core")}
    settings = {k: globals()[k] for k in ("SAMPLES", "LONGEST", "FINE", "GRID_POINTS", "TOKEN_SEED", "SHUFFLE_SEED",
                                          "EVALUATE_SEED", "LEARNED", "HAZARD_LINE", "STEP", "STEP_P", "FLOOR_MARGIN")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"settings": settings | {"RECURRENCE_GAP": RECURRENCE_GAP}, "code": code,
                                          "configs": results}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
