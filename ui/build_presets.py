"""Train the preset runs and write them into `assets/presets/`: `python -m ui.build_presets [--force]`."""

from __future__ import annotations

import argparse
import dataclasses

import torch

from lengen_core.serving.store import RunStore
from lengen_core.training import Run, train
from ui.presets import PRESET_ROOT, PRESETS


class _UnsharedWeights:
    """A model seen through its state dict with every tensor copied.

    The transformer's blocks hold the model's positional encoding as a submodule, so a learned table
    appears three times in `state_dict()` sharing one storage, and safetensors refuses to save that.
    The store only asks the model for `state_dict()`; copies load back into the one shared table.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {name: tensor.detach().clone() for name, tensor in self.model.state_dict().items()}


def savable(run: Run) -> Run:
    return dataclasses.replace(run, model=_UnsharedWeights(run.model))


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
        store.save(savable(run))
        print(f"{label}: {run_id} trained in {run.train_seconds:.1f}s, {run.steps} steps, "
              f"train accuracy {run.train_accuracy:.3f}")


if __name__ == "__main__":
    main()
