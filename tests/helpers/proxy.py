"""The reverse proxy of a replicated lab (deploy/nginx.conf) started on loopback in front of given replicas:
the template's placeholders filled, Debian's nginx run in the foreground from a temporary prefix."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from bench.app_bench import free_port

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy" / "nginx.conf"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def missing() -> str | None:
    """None when nginx can be run here, else why not (and how to get it)."""
    return None if NGINX else "nginx is not installed (Debian: apt-get install -y nginx)"


def render(listen: str, replica_ports: list[int]) -> str:
    """deploy/nginx.conf with `listen` and one upstream server per replica on loopback."""
    servers = " ".join(f"server 127.0.0.1:{port} max_fails=1 fail_timeout=10s;" for port in replica_ports)
    text = TEMPLATE.read_text()
    assert "@LISTEN@" in text and "@UPSTREAMS@" in text, "deploy/nginx.conf lost a placeholder"
    return text.replace("@LISTEN@", listen).replace("@UPSTREAMS@", servers)


@contextlib.contextmanager
def serve_proxy(replica_ports: list[int]) -> Iterator[dict]:
    """nginx on a free loopback port in front of `replica_ports`, answering health; yields its url and process."""
    prefix = Path(tempfile.mkdtemp(prefix="lengen-proxy-"))
    (prefix / "temp").mkdir()
    port = free_port()
    (prefix / "nginx.conf").write_text(render(f"127.0.0.1:{port}", replica_ports))
    log = (prefix / "nginx.log").open("w")
    process = subprocess.Popen([NGINX, "-p", str(prefix), "-c", "nginx.conf"], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"nginx did not answer health: {(prefix / 'nginx.log').read_text()[-3000:]}")
            time.sleep(0.1)
        yield {"url": url, "process": process, "prefix": prefix}
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
        shutil.rmtree(prefix, ignore_errors=True)
