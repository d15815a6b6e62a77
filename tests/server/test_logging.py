"""Logging as a nats-server user reads it: the start-up banner, [TRC] lines with <<- and ->>, -V without -D,
[FTL] (tests/config/test_cli.py), the log file reopened and closed, monitoring errors through the same logger,
and --log_json (Skiff's own)."""
import json
import os
import re
import signal
import socket
import time

import pytest


def _wait_for(path, needle, timeout=5):
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            text = open(path).read()
        except FileNotFoundError:  # a reopened log file appears when the signal has been handled
            text = ""
        if needle in text:
            return text
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not in log:\n{text}")


def _conversation(port):
    """CONNECT (verbose, with a password), SUB, PUB, HPUB, PING, then an unknown operation."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    f = s.makefile("rb")
    f.readline()
    s.sendall(b'CONNECT {"verbose":true,"pedantic":false,"pass":"hunter2","headers":true}\r\n'
              b"SUB trace.me 1\r\nPUB trace.me r 2\r\nhi\r\nHPUB trace.me 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n")
    while f.readline() != b"PONG\r\n":
        pass
    s.sendall(b"BOGUS\r\n")
    assert f.readline().startswith(b"-ERR")
    s.close()


def _messages(text, level):
    """The message part of every line at ``level`` ("TRC", "INF"...)."""
    return [ln.split(f"[{level}] ", 1)[1] for ln in text.splitlines() if f"[{level}] " in ln]


def test_trace_lines(server_factory):
    srv = server_factory("-V", jetstream=False)
    _conversation(srv.port)
    text = _wait_for(srv.log_path, "->> [-ERR Unknown Protocol Operation]")
    trc = [re.sub(r"^127\.0\.0\.1:\d+ - cid:\d+ - ", "", m) for m in _messages(text, "TRC")]
    expected_in_order = [
        '<<- [CONNECT {"verbose":true,"pedantic":false,"pass":"[REDACTED]","headers":true}]',
        "<<- [SUB trace.me 1]",
        "<<- [PUB trace.me r 2]",
        '<<- MSG_PAYLOAD: ["hi"]',
        "<<- [HPUB trace.me 12 14]",
        '<<- MSG_PAYLOAD: ["NATS/1.0\\r\\n\\r\\nhi"]',
        "<<- [PING]",
    ]
    inbound = [t for t in trc if t.startswith("<<-")]
    assert inbound == expected_in_order, trc
    outbound = [t for t in trc if t.startswith("->>")]
    for line in ("->> [OK]", "->> [MSG trace.me 1 r 2]", '->> MSG_PAYLOAD: ["hi"]', "->> [HMSG trace.me 1 12 14]",
                 "->> [PONG]", "->> [-ERR Unknown Protocol Operation]"):
        assert line in outbound, (line, trc)
    assert "hunter2" not in text
    # -V alone is trace without debug
    assert "[DBG]" not in text


def test_max_traced_msg_len(server_factory):
    srv = server_factory("-V", "--max_traced_msg_len", "3", jetstream=False)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    f = s.makefile("rb")
    f.readline()
    s.sendall(b'CONNECT {"verbose":false}\r\nPUB x 10\r\n0123456789\r\nPING\r\n')
    assert f.readline() == b"PONG\r\n"
    s.close()
    text = _wait_for(srv.log_path, "MSG_PAYLOAD")
    assert any(m.endswith('<<- MSG_PAYLOAD: ["012..."]') for m in _messages(text, "TRC")), text


def test_trace_headers(server_factory):
    """trace_headers: only the header block of a message, and nothing for one without (traceMsgInternal)."""
    srv = server_factory(jetstream=False, config="trace_headers: true\n")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    f = s.makefile("rb")
    f.readline()
    s.sendall(b'CONNECT {"verbose":false,"headers":true}\r\nSUB h 1\r\nPUB h 5\r\nplain\r\n'
              b"HPUB h 18 23\r\nNATS/1.0\r\nA: b\r\n\r\nhello\r\nPING\r\n")
    while (line := f.readline()) != b"PONG\r\n":
        assert line, "connection closed"
    s.close()
    text = _wait_for(srv.log_path, "->> [PONG]")
    payloads = [m.split(" - ", 2)[2] for m in _messages(text, "TRC") if "MSG_PAYLOAD" in m]
    assert payloads == ['<<- MSG_PAYLOAD: ["NATS/1.0\\r\\nA: b"]', '->> MSG_PAYLOAD: ["NATS/1.0\\r\\nA: b"]'], text


def test_debug_without_trace(server_factory):
    srv = server_factory("-D", jetstream=False)
    _conversation(srv.port)
    text = _wait_for(srv.log_path, "[DBG]")
    assert "[TRC]" not in text
    # nats-server's words and its client prefix, never structlog key=value fragments
    assert re.search(r"\[DBG\] 127\.0\.0\.1:\d+ - cid:\d+ - Client connection created", text), text
    plain = "\n".join(_messages(text, "DBG") + _messages(text, "ERR") + _messages(text, "INF"))
    if srv.kind == "skiff":  # nats-server has one: "Client parser ERROR, state=0, i=0: proto=..."
        assert not re.search(r"(^|\s)[a-z_]+=\S", plain, re.M), plain


def test_banner(server_factory):
    srv = server_factory(jetstream=True)
    text = _wait_for(srv.log_path, "Server is ready")
    inf = _messages(text, "INF")
    assert inf[0] == "Starting nats-server"
    assert inf[1].startswith("  Version:  2.")
    assert inf[2].startswith("  Git:      [")
    assert re.fullmatch(r"  Name:     N[A-Z0-9]{55}", inf[3])
    assert re.fullmatch(r"  Node:     [0-9A-Za-z]{8}", inf[4])  # JetStream on
    assert re.fullmatch(r"  ID:       N[A-Z0-9]{55}", inf[5])
    assert inf.index(f"Starting http monitor on 127.0.0.1:{srv.http_port}") < inf.index("Starting JetStream")
    block = inf[inf.index("---------------- JETSTREAM ----------------"):]
    assert block[1] == "  Strict:          true"
    assert re.fullmatch(r"  Max Memory:      \d+\.\d\d [KMGT]B", block[2])
    assert re.fullmatch(r"  Max Storage:     \d+\.\d\d [KMGT]B", block[3])
    assert block[4] == f'  Store Directory: "{srv.store_dir}/jetstream"'
    assert re.fullmatch(r"  API Level:       \d+", block[5])
    assert block[6] == "-------------------------------------------"
    assert inf[-2:] == [f"Listening for client connections on 127.0.0.1:{srv.port}", "Server is ready"]


def test_banner_names_the_config_file(server_factory):
    srv = server_factory(jetstream=False, config="server_name: hub\n")
    text = _wait_for(srv.log_path, "Server is ready")
    inf = _messages(text, "INF")
    assert "  Name:     hub" in inf
    path = srv.argv()[srv.argv().index("-c") + 1]
    assert any(re.fullmatch(rf"Using configuration file: {re.escape(path)} \(sha256:[0-9a-f]{{64}}\)", m)
               for m in inf), inf


def test_log_file_reopen_on_sigusr1(server_factory, tmp_path):
    log = tmp_path / "server.log"
    srv = server_factory("-l", str(log), jetstream=False)
    _wait_for(log, "Server is ready")
    os.rename(log, tmp_path / "skiff.server.log.1")  # what logrotate does
    srv.proc.send_signal(signal.SIGUSR1)
    text = _wait_for(log, "File log re-opened")
    assert "Server is ready" not in text
    assert srv.proc.poll() is None


@pytest.mark.skiff_only  # /proc/<pid>/fd of our own process; nats-server has no SIGHUP log reopen to compare
def test_sighup_closes_the_old_log_file(server_factory, tmp_path):
    log = tmp_path / "server.log"
    srv = server_factory("-l", str(log), jetstream=False, config="debug: false\n")
    _wait_for(log, "Server is ready")
    for _ in range(3):
        srv.proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
    _wait_for(log, "Reloaded server configuration")
    fd_dir = f"/proc/{srv.proc.pid}/fd"
    open_logs = [fd for fd in os.listdir(fd_dir) if os.path.realpath(os.path.join(fd_dir, fd)) == str(log)]
    assert len(open_logs) == 1, open_logs


@pytest.mark.skiff_only  # --log_json is Skiff's own
def test_json_logs(server_factory, tmp_path):
    log = tmp_path / "skiff.json"
    srv = server_factory("--log_json", "-l", str(log), jetstream=False)
    _conversation(srv.port)
    text = _wait_for(log, "Server is ready")
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert any(line["event"] == "Server is ready" and line["level"] == "info" for line in lines)


@pytest.mark.skiff_only  # makes the monitor's provider fail on purpose
async def test_monitor_errors_go_through_the_server_log(tmp_path):
    from skiff.server import log as logmod
    from skiff.server.monitor.http import MonitorServer

    class Broken:
        def varz(self, params):
            raise RuntimeError("provider exploded")

    path = tmp_path / "skiff.log"
    logmod.configure(log_file=str(path))
    try:
        mon = MonitorServer("127.0.0.1", 0, Broken())
        await mon.start()
        import asyncio

        reader, writer = await asyncio.open_connection("127.0.0.1", mon.port)
        writer.write(b"GET /varz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (await reader.readline()).startswith(b"HTTP/1.1 500")
        writer.close()
        await mon.stop()
        text = path.read_text()
        assert re.search(r"^\[\d+\] \S+ \S+ \[ERR\] Monitoring endpoint /varz failed$", text, re.M), text
        assert "RuntimeError: provider exploded" in text
    finally:
        logmod.configure()


def test_log_size_limit_rotates(server_factory, tmp_path):
    log = tmp_path / "server.log"
    srv = server_factory("-V", "-l", str(log), "--log_size_limit", "2000", jetstream=False)
    _wait_for(log, "Server is ready")
    _conversation(srv.port)
    deadline = time.monotonic() + 5
    while not [p for p in tmp_path.iterdir() if p.name.startswith("server.log.")]:
        assert time.monotonic() < deadline, list(tmp_path.iterdir())
        time.sleep(0.05)
    backup = next(p for p in tmp_path.iterdir() if p.name.startswith("server.log."))
    assert re.fullmatch(r"server\.log\.\d{4}\.\d\d\.\d\d\.\d\d\.\d\d\.\d\d\.\d{9}", backup.name)
    assert "Server is ready" in backup.read_text()
    first = _wait_for(log, "Rotated log").splitlines()[0]
    assert first.endswith(f'[INF] Rotated log, backup saved as "{backup}"'), first


def test_shutdown_lines(server_factory):
    srv = server_factory(jetstream=False)
    _wait_for(srv.log_path, "Server is ready")
    srv.proc.send_signal(signal.SIGTERM)
    srv.proc.wait(10)
    inf = _messages(_wait_for(srv.log_path, "Server Exiting.."), "INF")
    assert inf[-3:] == ['Trapped "terminated" signal', "Initiating Shutdown...", "Server Exiting.."]
