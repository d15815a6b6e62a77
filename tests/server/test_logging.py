"""Logging flags (-D, -V, --log_json, -l): what a user sees on the console or in the log file."""
import json
import socket
import time

import pytest

pytestmark = pytest.mark.skiff_only  # the log format is Skiff's own (nats-server's differs in detail)


def _ping(srv):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    f = s.makefile("rb")
    f.readline()
    s.sendall(b'CONNECT {"verbose":false,"pass":"hunter2"}\r\nPUB trace.me 2\r\nhi\r\nPING\r\n')
    assert f.readline() == b"PONG\r\n"
    s.close()


def _wait_for(path, needle, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = open(path).read()
        if needle in text:
            return text
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not in log:\n{text}")


def test_trace_logs_protocol_lines_without_secrets(server_factory, tmp_path):
    log = tmp_path / "skiff.log"
    srv = server_factory("-DV", "-l", str(log), jetstream=False)
    _ping(srv)
    text = _wait_for(log, "->> [PUB trace.me 2]")
    assert "[INF] Server is ready" in text and "[DBG]" in text
    assert "hunter2" not in text and "[REDACTED]" in text


def test_json_logs(server_factory, tmp_path):
    log = tmp_path / "skiff.json"
    srv = server_factory("--log_json", "-l", str(log), jetstream=False)
    _ping(srv)
    text = _wait_for(log, "Server is ready")
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert any(line["event"] == "Server is ready" and line["level"] == "info" for line in lines)
