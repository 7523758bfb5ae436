"""deploy/nginx.conf, the proxy in front of the replicas: filled, nginx accepts it, and it keeps what the
replicas need (a header set inside a location would drop the server's Host, and Streamlit refuses the WebSocket)."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.helpers import proxy


def test_the_template_fills_one_upstream_per_replica() -> None:
    text = re.sub(r"#.*", "", proxy.render("127.0.0.1:9999", [8501, 8502, 8503]))  # the directives alone
    assert "@" not in text  # no placeholder left
    assert re.findall(r"server 127\.0\.0\.1:(\d+) ", text) == ["8501", "8502", "8503"]
    assert "listen 127.0.0.1:9999;" in text
    assert "hash $lengen_route consistent;" in text


def test_no_location_sets_a_header_of_its_own() -> None:
    locations = re.findall(r"location [^{]*\{([^}]*)\}", proxy.TEMPLATE.read_text())
    assert len(locations) == 3
    for body in locations:
        assert "proxy_set_header" not in body, "a location's own header drops Host, Upgrade and Connection"
    server = proxy.TEMPLATE.read_text()
    for header in ("Host $http_host", "Upgrade $http_upgrade", "Connection $connection_upgrade"):
        assert f"proxy_set_header {header};" in server


def test_nginx_accepts_the_filled_config(tmp_path) -> None:
    if reason := proxy.missing():
        pytest.skip(reason)
    (tmp_path / "temp").mkdir()
    (tmp_path / "nginx.conf").write_text(proxy.render("127.0.0.1:9999", [8501, 8502]))
    checked = subprocess.run([proxy.NGINX, "-t", "-p", str(tmp_path), "-c", "nginx.conf"],
                             check=False, capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
