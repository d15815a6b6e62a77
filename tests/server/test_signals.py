"""nats-server's signals, against both servers: SIGTERM stops cleanly, SIGUSR2 enters lame-duck mode,
SIGHUP reloads the configuration file."""
import json
import signal
import socket
import time

import pytest


def _connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    f = s.makefile("rb")
    info = f.readline()
    assert info.startswith(b"INFO ")
    s.sendall(b'CONNECT {"verbose":false,"protocol":1}\r\nPING\r\n')
    return s, f


def test_sigterm_stops_cleanly(server):
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(10) == 0


def test_lame_duck_mode(server_factory):
    srv = server_factory(jetstream=False, config='lame_duck_duration: "30s"\nlame_duck_grace_period: "1s"\n')
    s, f = _connect(srv.port)
    assert f.readline() == b"PONG\r\n"
    assert f.readline().startswith(b"INFO ")  # the INFO after the first PING
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGUSR2)
    line = f.readline()
    assert line.startswith(b"INFO ")
    assert json.loads(line[5:])["ldm"] is True
    # New connections are refused while in lame-duck mode.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", srv.port), timeout=1).recv(1) or (_ for _ in ()).throw(OSError())
    # The client is closed after the grace period (30s is nats-server's minimum duration; with one client the
    # close comes right after the grace period, then the server waits out the duration and exits).
    assert f.read() == b""
    assert 0.9 <= time.monotonic() - t0 <= 5


def test_sighup_reloads_config(server_factory):
    srv = server_factory(jetstream=False, config="authorization { token: first }\n")
    path = srv.argv()[srv.argv().index("-c") + 1]
    with open(path, "w") as fh:
        fh.write("authorization { token: second }\n")
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while True:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
        f = s.makefile("rb")
        f.readline()
        s.sendall(b'CONNECT {"verbose":false,"auth_token":"second"}\r\nPING\r\n')
        if f.readline() == b"PONG\r\n":
            break
        assert time.monotonic() < deadline, "reload did not take the new token"
        time.sleep(0.1)
    s2 = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
    f2 = s2.makefile("rb")
    f2.readline()
    s2.sendall(b'CONNECT {"verbose":false,"auth_token":"first"}\r\nPING\r\n')
    assert f2.readline() == b"-ERR 'Authorization Violation'\r\n"


def test_sighup_keeps_command_line_flags(server_factory):
    """nats-server reapplies the command-line flags over the reloaded file (FlagSnapshot / MergeOptions): -V stays
    on although the file says nothing about trace (Skiff lost it on reload before)."""
    srv = server_factory("-V", jetstream=False, config="max_control_line: 4096\n")
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while "Reloaded server configuration" not in srv.log():
        assert time.monotonic() < deadline, srv.log()
        time.sleep(0.05)
    s, f = _connect(srv.port)
    assert f.readline() == b"PONG\r\n"
    s.close()
    deadline = time.monotonic() + 5
    while "<<- [PING]" not in srv.log():
        assert time.monotonic() < deadline, srv.log()
        time.sleep(0.05)
