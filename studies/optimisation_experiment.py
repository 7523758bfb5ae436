"""The numbers behind the Theory page's optimisation experiment (C1), as JSON on stdout.

    python studies/optimisation_experiment.py                      # the page's config (the Learned preset's)
    python studies/optimisation_experiment.py --offset 5 --train-length 20 --seed 1

(a) the constructed head and the same config trained from its random start, accuracy from L_train to
the end of the table; (b) the gradient per position row over that training; (c) training started
from the construction, accuracy at 4× along the way. The same calls as ui/theory/gradients.py, with the
page's steps, samples and recording intervals.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lengen_core.analysis.evaluate import evaluate
from lengen_core.config import RunConfig, with_changes
from lengen_core.models.initial import initial_model
from lengen_core.optimisation import TrainingTrace, trace_training
from lengen_core.training import train

DRIFT_STEPS, DRIFT_EVERY, GRADIENT_EVERY, SAMPLES, REACH_SAMPLES = 400, 20, 10, 256, 128  # as ui/theory/gradients.py


def far_points(trace: TrainingTrace, length: int) -> list[dict]:
    column = trace.lengths.index(length)
    return [{"step": step, "accuracy": reports[column].accuracy, "argmax_key": reports[column].argmax_key,
             "argmax_share": reports[column].argmax_share, "target_mass": reports[column].target_mass}
            for step, reports in zip(trace.evaluation_steps, trace.evaluations, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offset", type=int, default=3)
    parser.add_argument("--train-length", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--drift-steps", type=int, default=DRIFT_STEPS, help="steps trained from the construction")
    args = parser.parse_args()
    random_start = with_changes(RunConfig(), encoding="learned", offset=args.offset, train_length=args.train_length,
                                vocab_size=args.vocab, seed=args.seed)
    constructed = with_changes(random_start, init="constructed", steps=0)
    L, N = args.train_length, random_start.model.max_positions
    lengths = [n for n in (L << p for p in range(16)) if n <= N]
    trained = train(random_start, "cpu")
    reach = {name: [{"length": r.length, "accuracy": r.accuracy, "argmax_key": r.argmax_key}
                    for r in evaluate(model, random_start, lengths, samples=REACH_SAMPLES)]
             for name, model in (("constructed", initial_model(constructed)), ("random_start", trained.model))}
    gradients = trace_training(random_start, GRADIENT_EVERY, (L, 4 * L), SAMPLES)
    drift = trace_training(with_changes(constructed, steps=args.drift_steps, keep_training=True), DRIFT_EVERY,
                           (L, 4 * L), SAMPLES)
    print(json.dumps({
        "random_start_run_id": random_start.run_id(), "constructed_run_id": constructed.run_id(),
        "reach": reach,
        "gradients": {"steps": len(gradients.losses), "largest_within": gradients.largest_gradient_within(),
                      "largest_beyond": gradients.largest_gradient_beyond(),
                      "accuracy_at_4x": far_points(gradients, 4 * L)},
        "drift": {"steps": len(drift.losses), "first_loss": drift.losses[0], "last_loss": drift.losses[-1],
                  "accuracy_at_train_length": [float(a) for a in drift.accuracy(L)],
                  "largest_beyond": drift.largest_gradient_beyond(), "accuracy_at_4x": far_points(drift, 4 * L)},
    }, indent=1))


if __name__ == "__main__":
    main()
