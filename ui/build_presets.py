"""Train the preset runs and write them into `assets/presets/`: `python -m ui.build_presets [--force]`."""

from __future__ import annotations

import argparse

from lengen_core.store import RunStore
from lengen_core.training import train
from ui.presets import PRESET_ROOT, PRESETS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--force", action="store_true", help="retrain presets that already exist")
    args = parser.parse_args()
    store = RunStore(root=PRESET_ROOT)
    for label, config in PRESETS.items():
        run_id = config.run_id()
        if store.exists(run_id) and not args.force:
            print(f"{label}: {run_id} already built")
            continue
        if store.exists(run_id):
            store.delete(run_id)
        run = train(config, device="cpu")  # CPU: the same weights on every machine that rebuilds them
        store.save(run)
        print(f"{label}: {run_id} trained in {run.train_seconds:.1f}s, {run.steps} steps, "
              f"train accuracy {run.train_accuracy:.3f}")


if __name__ == "__main__":
    main()
