"""The Ray backend of sweeps against a real local cluster: `ray start --head` with token
authentication (Ray 2.60), a client that connects by address with RAY_AUTH_MODE=token and the
cluster's token, and the same table cell for cell as the local backend. Skipped, with the reason,
only where Ray is not installed (requirements-ray.txt; CI installs it)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

# Ray reads its token from the environment once, when it is imported: not here, but in the process that connects
if importlib.util.find_spec("ray") is None:
    pytest.skip("Ray is not installed here (pip install -r requirements-ray.txt)", allow_module_level=True)
# slow: each grid trains twice. One xdist worker for every test on the session's one Ray head.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

ROOT = Path(__file__).resolve().parents[2]
GRID = ["--encodings", "rope,learned", "--offsets", "1", "--seeds", "0", "--lengths", "16,64", "--samples", "64",
        "--set", "steps=400", "--set", "d_model=32", "--set", "qk_init=1.0"]
FIGURES = ("run_id", "learned", "steps", "m_out", "argmax_offset", "predicted_horizon", "measured_horizon", "lengths")


@pytest.fixture(scope="module")
def cluster(ray_cluster):
    """The session's Ray head (tests/e2e/conftest.py), shared with the training pool's tests."""
    return ray_cluster


def sweep(argv: list[str], env: dict[str, str], home: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "lengen", "sweep", *GRID, *argv, "--json"], cwd=ROOT,
                          env={**env, "LENGEN_HOME": str(home), "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_grid_on_a_ray_cluster_gives_the_local_backends_table(cluster, tmp_path):
    address, env = cluster
    on_ray = sweep(["--backend", "ray", "--address", address], env, tmp_path / "ray-store")
    local = sweep(["--backend", "local", "--workers", "2"], env, tmp_path / "local-store")
    assert on_ray["backend"] == "ray" and on_ray["trained"] == 2 and local["trained"] == 2
    assert on_ray["sweep_id"] == local["sweep_id"]
    for remote, here in zip(on_ray["cells"], local["cells"], strict=True):
        assert "error" not in remote, remote
        assert {key: remote[key] for key in FIGURES} == {key: here[key] for key in FIGURES}
    # the runs the workers trained are in the store the driver named
    assert all((tmp_path / "ray-store" / "runs" / cell["run_id"]).is_dir() for cell in on_ray["cells"])


def test_without_the_token_a_client_is_refused(cluster, tmp_path):
    address, env = cluster
    without = {key: value for key, value in env.items() if key not in ("RAY_AUTH_TOKEN",)}
    without["HOME"] = str(tmp_path)  # no ~/.ray/auth_token either
    done = subprocess.run([sys.executable, "-m", "lengen", "sweep", *GRID, "--backend", "ray",
                           "--address", address, "--json"], cwd=ROOT,
                          env={**without, "LENGEN_HOME": str(tmp_path / "store"), "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and "token" in done.stderr.lower(), done.stderr[-2000:]
