"""The peer: the same work done with TransformerLens, run with the peer environment's python.

    bench/.venv-peer/bin/python bench/peer.py --encoding rope --runs 3 --steps 300

prints one JSON object on stdout. The model is a `HookedTransformer` with one layer, one head,
attention only, d_model = d_head = `--d-model` (the bench passes the width lengen is measured at),
n_ctx 4096, and no normalisation (lengen's minimal head has none; LayerNorm would only slow the
peer); positions `rotary` (over the whole head) for RoPE and `standard` (a learned table added to
the embedding) for learned positions. Training: the same batches as lengen (lengen's own
`sample_batch` with the same data seed), Adam at the learning rate and batch size the bench passes
from lengen's config, cross-entropy at the last position only. Evaluation: the same 256 sequences per length as `lengen_core.analysis.evaluate` (its
`sequence_tokens`), one full forward with `run_with_cache` reading the attention pattern at the
last query; the full T×T pattern is built, which is how the peer works.

Only the data generators are imported from lengen (pure torch): they make the two sides see the
same tokens. Nothing here is imported by lengen.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore", category=DeprecationWarning)  # "HookedTransformer is deprecated": known, pinned

import torch
import torch.nn.functional as F
import transformer_lens
from transformer_lens import HookedTransformer, HookedTransformerConfig

from lengen_core.analysis.evaluate import sequence_tokens
from lengen_core.config import TaskConfig
from lengen_core.tasks import sample_batch
from lengen_core.training import DATA_SEED_OFFSET

PATTERN = "blocks.0.attn.hook_pattern"
POSITIONS = {"rope": "rotary", "learned": "standard"}


def build(encoding: str, d_model: int, vocab_size: int, n_ctx: int, seed: int) -> HookedTransformer:
    config = HookedTransformerConfig(
        n_layers=1, n_heads=1, d_model=d_model, d_head=d_model, d_vocab=vocab_size, n_ctx=n_ctx,
        attn_only=True, positional_embedding_type=POSITIONS[encoding], rotary_dim=d_model,
        normalization_type=None, act_fn=None, seed=seed, device="cpu", default_prepend_bos=False,
    )
    return HookedTransformer(config)


def reached_at(accuracies: list[float], threshold: float, window: int) -> int | None:
    """The first step (1-based) where the mean batch accuracy of the last `window` steps is ≥ threshold."""
    for step in range(window, len(accuracies) + 1):
        if sum(accuracies[step - window : step]) / window >= threshold:
            return step
    return None


def train_once(args: argparse.Namespace, task: TaskConfig, seed: int) -> dict:
    model = build(args.encoding, args.d_model, task.vocab_size, args.n_ctx, seed)
    data = torch.Generator().manual_seed(seed + DATA_SEED_OFFSET)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    accuracies, times = [], []
    start = time.perf_counter()
    for _ in range(args.steps):
        tokens, targets = sample_batch(task, args.batch_size, data)  # (B, T), (B, 1)
        logits = model(tokens)[:, -1]  # (B, V): the loss at the last position only
        loss = F.cross_entropy(logits, targets[:, 0])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        float(loss.detach())  # the same host sync per step as lengen's Training
        accuracies.append(float((logits.argmax(-1) == targets[:, 0]).float().mean()))
        times.append(time.perf_counter() - start)
    step = reached_at(accuracies, args.threshold, args.window)
    return {"seed": seed, "steps": args.steps, "seconds": times[-1], "steps_per_second": args.steps / times[-1],
            "steps_to_target": step, "seconds_to_target": None if step is None else times[step - 1],
            "final_accuracy": accuracies[-1], "model": model}


@torch.no_grad()
def evaluate(model: HookedTransformer, task: TaskConfig, length: int, samples: int, seed: int, budget: int) -> dict:
    """Accuracy and target mass of the last query, in batches of at most `budget` pattern elements."""
    start = time.perf_counter()
    batch = max(1, budget // (length * length))
    target = length - 1 - task.offset
    correct, mass = 0, 0.0
    tokens = sequence_tokens(seed, length, samples, task.vocab_size)  # (S, L)
    for first in range(0, samples, batch):
        chunk = tokens[first : first + batch]
        logits, cache = model.run_with_cache(chunk, names_filter=PATTERN)  # (b, L, V), pattern (b, 1, L, L)
        correct += int((logits[:, -1].argmax(-1) == chunk[:, target]).sum())
        mass += float(cache[PATTERN][:, 0, -1, target].sum())
    return {"length": length, "seconds": time.perf_counter() - start, "accuracy": correct / samples,
            "target_mass": mass / samples}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoding", choices=sorted(POSITIONS), default="rope")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threshold", type=float, default=0.99)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--lengths", type=int, nargs="*", default=[16, 64, 256, 1024, 4096])
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--eval-seed", type=int, default=12_345)
    parser.add_argument("--eval-runs", type=int, default=1)
    parser.add_argument("--pattern-budget", type=int, default=1 << 25, help="pattern elements per forward batch")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    task = TaskConfig()
    runs = [train_once(args, task, seed) for seed in range(args.runs)]
    model = runs[0].pop("model")
    for run in runs[1:]:
        run.pop("model")
    model.eval()
    evaluation = []
    for length in args.lengths:
        repeats = [evaluate(model, task, length, args.samples, args.eval_seed, args.pattern_budget)
                   for _ in range(args.eval_runs)]
        best = dict(repeats[0], seconds=statistics.median(r["seconds"] for r in repeats), repeats=len(repeats))
        evaluation.append(best)
    json.dump({
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformer_lens": getattr(transformer_lens, "__version__", None) or _dist_version()},
        "threads": torch.get_num_threads(),
        "model": {"class": "HookedTransformer", "n_layers": 1, "n_heads": 1, "d_model": args.d_model,
                  "d_head": args.d_model, "n_ctx": args.n_ctx, "attn_only": True,
                  "positional_embedding_type": POSITIONS[args.encoding], "normalization_type": None},
        "training": runs,
        "evaluation": evaluation,
    }, sys.stdout)


def _dist_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformer-lens")
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
