"""deploy/compose.yaml, the cluster deployment (no Docker engine here: its parts are checked as written):
a Ray head, CPU workers and a GPU worker with the NVIDIA device reservation, app replicas that share one
store volume and name the head in LENGEN_RAY_ADDRESS, and a proxy whose upstreams are exactly the replicas
(its start script fills deploy/nginx.conf as it would in the container)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
APPS = sorted(name for name in SERVICES if name.startswith("app-"))
RAY_NODES = ["ray-head", "ray-worker", "ray-gpu-worker", *APPS]


def command(name: str) -> str:
    text = SERVICES[name]["command"]
    return text if isinstance(text, str) else " ".join(text)


def head_address() -> str:
    port = re.search(r"--port=(\d+)", command("ray-head")).group(1)
    return f"{SERVICES['ray-head']['hostname']}:{port}"


def test_the_cluster_has_a_head_workers_a_gpu_worker_replicas_and_a_proxy():
    assert len(APPS) >= 2
    assert "--head" in command("ray-head") and "--num-cpus=0" in command("ray-head")  # the head trains nothing
    assert "--num-cpus=0" in command("app-1")  # nor does a replica: it joins only to reach the cluster
    gpu = SERVICES["ray-gpu-worker"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    assert "--num-gpus=1" in command("ray-gpu-worker") and gpu["profiles"] == ["gpu"]
    assert gpu["build"]["args"]["BASE_IMAGE"] == "lengen-gpu"  # the CUDA build of torch


def test_every_replica_trains_on_the_head_and_every_ray_node_shares_one_store():
    address = head_address()
    for name in APPS:
        assert SERVICES[name]["environment"]["LENGEN_RAY_ADDRESS"] == address
        assert SERVICES[name]["environment"]["STREAMLIT_SERVER_COOKIE_SECRET"].startswith("${LENGEN_COOKIE_SECRET")
    for name in RAY_NODES:
        env = SERVICES[name]["environment"]
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN")
        assert SERVICES[name]["volumes"] == [f"lengen-runs:{env['LENGEN_HOME']}"], name  # a worker saves runs there
        if name != "ray-head":
            assert f"--address={address}" in command(name), name
    assert "lengen-runs" in COMPOSE["volumes"]
    assert len({SERVICES[name]["hostname"] for name in APPS}) == len(APPS)  # the store tells hosts apart


def test_the_proxys_upstreams_are_exactly_the_replicas(tmp_path):
    proxy = SERVICES["proxy"]
    replicas = proxy["environment"]["LENGEN_REPLICAS"].split()
    port = re.search(r"--server\.port=(\d+)", command("app-1")).group(1)
    assert replicas == [f"{SERVICES[name]['hostname']}:{port}" for name in APPS]
    assert sorted(proxy["depends_on"]) == APPS
    filled = subprocess.run(["sh", str(DEPLOY / "proxy-start.sh")], check=False, capture_output=True, text=True,
                            timeout=30, env={**os.environ, "LENGEN_REPLICAS": " ".join(replicas),
                                             "LENGEN_PROXY_TEMPLATE": str(DEPLOY / "nginx.conf"),
                                             "LENGEN_PROXY_PREFIX": str(tmp_path), "LENGEN_PROXY_RENDER_ONLY": "1"})
    assert filled.returncode == 0, filled.stderr
    text = re.sub(r"#.*", "", (tmp_path / "nginx.conf").read_text())
    assert "@" not in text
    assert re.findall(r"server (\S+) max_fails", text) == replicas
    assert "listen 0.0.0.0:8080;" in text and proxy["ports"] == ["8080:8080"]
    assert "apt-get install -y --no-install-recommends nginx-light" in (DEPLOY / "proxy.Dockerfile").read_text()


def test_the_proxy_refuses_to_start_without_replicas(tmp_path):
    refused = subprocess.run(["sh", str(DEPLOY / "proxy-start.sh")], check=False, capture_output=True, text=True,
                             timeout=30, env={**os.environ, "LENGEN_REPLICAS": "", "LENGEN_PROXY_PREFIX": str(tmp_path)})
    assert refused.returncode == 2 and "LENGEN_REPLICAS is empty" in refused.stderr


def operator_commands() -> str:
    """The shell block of docs/scale.md's "The whole cluster with Docker Compose", as an operator types it."""
    text = (ROOT / "docs" / "scale.md").read_text()
    section = text.split("## The whole cluster with Docker Compose", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)


def test_the_operators_commands_in_the_docs_match_the_compose_file():
    commands, compose = operator_commands(), (DEPLOY / "compose.yaml").read_text()
    lines = [line.split("#", 1)[0].strip() for line in commands.splitlines()]
    assert lines.index("cd deploy") < min(i for i, line in enumerate(lines) if line.startswith("docker compose"))
    # every variable the compose file requires (${VAR:?...}) is exported, and every export is one it reads
    required = set(re.findall(r"\$\{(\w+):\?", compose))
    exported = set(re.findall(r"export (\w+)=", commands))
    assert required <= exported, required - exported
    assert all(f"${{{name}" in compose for name in exported), exported
    # the images the compose file builds on are the ones the docs build, with build arguments the Dockerfile has
    bases = {args["BASE_IMAGE"] for s in SERVICES.values() if isinstance(s.get("build"), dict)
             for args in [s["build"].get("args", {})] if "BASE_IMAGE" in args}
    assert bases and bases <= set(re.findall(r"docker build -t ([\w-]+)", commands)), bases
    dockerfile_args = set(re.findall(r"^ARG (\w+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE))
    assert set(re.findall(r"--build-arg (\w+)=", commands)) <= dockerfile_args
    # the services, profiles and variables the commands name exist
    for service in re.findall(r"--scale ([\w-]+)=", commands) + re.findall(r"compose exec ([\w-]+)", commands):
        assert service in SERVICES, service
    profiles = {p for s in SERVICES.values() for p in s.get("profiles", [])}
    assert set(re.findall(r"--profile (\w+)", commands)) <= profiles
    for name in re.findall(r"\((\w+_CPUS) each\)", commands):
        assert f"${{{name}" in compose, name
