"""The Ray backend of sweeps against a real local cluster: `ray start --head` with token
authentication (Ray 2.60), a client that connects by address with RAY_AUTH_MODE=token and the
cluster's token, and the same table cell for cell as the local backend. Skipped, with the reason,
only where Ray is not installed (requirements-ray.txt; CI installs it)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed here (pip install -r requirements-ray.txt)")
# slow: a head starts in many seconds and each grid trains twice. One worker: `ray stop` ends every Ray
# process of the machine, so the module's cluster must not meet another.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
GRID = ["--encodings", "rope,learned", "--offsets", "1", "--seeds", "0", "--lengths", "16,64", "--samples", "64",
        "--set", "steps=400", "--set", "d_model=32", "--set", "qk_init=1.0"]
FIGURES = ("run_id", "learned", "steps", "m_out", "argmax_offset", "predicted_horizon", "measured_horizon", "lengths")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A Ray head on this machine with token authentication, one for the module (starting one takes
    many seconds); yields (address, the client's environment). The tests leave it as they found it."""
    home, temp = tmp_path_factory.mktemp("ray-home"), Path("/tmp") / f"ray-{os.getpid()}"  # Ray's socket paths must stay short
    env = {**os.environ, "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run([RAY, "get-auth-token", "--generate"], env=env, check=True, capture_output=True, timeout=120)
    token = (home / ".ray" / "auth_token").read_text().strip()
    port = free_port()
    head = {**env, "RAY_AUTH_MODE": "token"}
    started = subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2",
                              "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"],
                             env=head, capture_output=True, text=True, timeout=300, check=False)
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}", {**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    finally:
        subprocess.run([RAY, "stop", "--force"], env=head, capture_output=True, timeout=120, check=False)
        shutil.rmtree(temp, ignore_errors=True)


def sweep(argv: list[str], env: dict[str, str], home: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "lengen_core", "sweep", *GRID, *argv, "--json"], cwd=ROOT,
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
    done = subprocess.run([sys.executable, "-m", "lengen_core", "sweep", *GRID, "--backend", "ray",
                           "--address", address, "--json"], cwd=ROOT,
                          env={**without, "LENGEN_HOME": str(tmp_path / "store"), "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and "token" in done.stderr.lower(), done.stderr[-2000:]
