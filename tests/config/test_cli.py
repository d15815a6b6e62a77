"""Command-line flags: Go flag syntax, every flag, flags over the config file, and failures like nats-server's."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from skiff.server import cli
from skiff.server.cli import CommandError, UsageError, parse_args, parse_flags
from skiff.server.conf import ConfigError
from tests.harness import ROOT, nats_server_binary

CERTS = ROOT / "conf" / "certs"

# (argv, {field: expected})
FLAG_CASES = [
    (["-a", "127.0.0.1"], {"host": "127.0.0.1"}),
    (["--addr", "127.0.0.1"], {"host": "127.0.0.1"}),
    (["--net=10.1.1.1"], {"host": "10.1.1.1"}),
    (["-addr=::1"], {"host": "::1"}),
    (["-p", "4333"], {"port": 4333}),
    (["--port=4333"], {"port": 4333}),
    (["-p", "-1"], {"port": -1}),
    (["-p=-1"], {"port": -1}),
    (["-p", "0"], {"port": 4222}),
    (["-p", "0x10E1"], {"port": 4321}),
    (["-p", "010"], {"port": 8}),  # Go's ParseInt(s, 0): a leading 0 is octal
    (["-n", "hub"], {"server_name": "hub"}),
    (["--name", "hub"], {"server_name": "hub"}),
    (["--server_name=hub"], {"server_name": "hub"}),
    (["-js"], {"jetstream": True}),
    (["--jetstream"], {"jetstream": True}),
    (["-js=false"], {"jetstream": False}),
    (["-js=1"], {"jetstream": True}),
    (["-sd", "/tmp/js"], {"store_dir": "/tmp/js"}),
    (["-sd=/tmp/js"], {"store_dir": "/tmp/js"}),
    (["--store_dir", "/tmp/js"], {"store_dir": "/tmp/js"}),
    (["--user", "u", "--pass", "p"], {"username": "u", "password": "p"}),
    (["--auth", "tok"], {"authorization": "tok"}),
    (["-m", "8222"], {"http_port": 8222}),
    (["--http_port=-1"], {"http_port": -1}),
    (["-l", "/tmp/s.log"], {"log_file": "/tmp/s.log"}),
    (["--log", "/tmp/s.log"], {"log_file": "/tmp/s.log"}),
    (["-D"], {"debug": True, "trace": False}),
    (["--debug"], {"debug": True}),
    (["-V"], {"trace": True, "debug": False}),
    (["--trace"], {"trace": True}),
    (["-DV"], {"debug": True, "trace": True}),
    (["-VV"], {"trace": True, "debug": False}),
    (["-DVV"], {"debug": True, "trace": True}),
    (["-T=false"], {"logtime": False}),
    (["--logtime=false"], {"logtime": False}),
    (["--logtime_utc"], {"logtime_utc": True}),
    (["-P", "/tmp/s.pid"], {"pid_file": "/tmp/s.pid"}),
    (["--pid", "/tmp/s.pid"], {"pid_file": "/tmp/s.pid"}),
    (["--log_json"], {"log_json": True}),
    (["--ports_file_dir", "/tmp"], {"ports_file_dir": "/tmp"}),
    (["--client_advertise", "x:1"], {"client_advertise": "x:1"}),
    (["--max_traced_msg_len", "100"], {"max_traced_msg_len": 100}),
    # no effect without --cluster, in nats-server too (no route listener: ServerOptions.cluster.port 0)
    (["--cluster_advertise", "x:1", "--no_advertise", "--connect_retries", "3"], {"ignored_config_keys": []}),
]


@pytest.mark.parametrize("argv,expected", FLAG_CASES, ids=[" ".join(a) for a, _ in FLAG_CASES])
def test_flags(argv, expected):
    o = parse_args(argv)
    for field, value in expected.items():
        assert getattr(o, field) == value, field


@pytest.mark.parametrize("flag", ["-VV", "-DVV"])
def test_verbose_trace_flags_warn(flag, tmp_path):
    """nats-server's -VV/-DVV also trace its internal SYSTEM client (log.go SetLoggerV2 traceSysAcc), which
    Skiff does not have: tracing is on, with one start-up warning (no client can see the difference)."""
    conf = tmp_path / "c.conf"
    conf.write_text("prof_block_rate: 5\n")  # the file's own warning is kept beside the flag's
    o = parse_args([flag, "-c", str(conf)])
    assert o.trace
    assert len(o.ignored_config_keys) == 2 and "prof_block_rate" in o.ignored_config_keys[0]
    assert o.ignored_config_keys[1].startswith(f'"-{flag[1:]}" is not implemented by Skiff and is ignored: ')
    assert parse_args([f"{flag}=false"]).ignored_config_keys == []


def test_cluster_flags():
    """nats-server's cluster flags (opts.go overrideCluster): a URL to listen on (":-1" for a random port), the
    routes, comma-separated, and the name; credentials in the --cluster URL are the routes' authorization."""
    o = parse_args(["--cluster", "nats://u:p@127.0.0.1:-1", "--cluster_name", "c1", "--routes",
                    "nats-route://127.0.0.1:6223,nats-route://u:p@127.0.0.1:6224", "--connect_retries", "3"])
    c = o.cluster
    assert (c.name, c.host, c.port, c.username, c.password, c.connect_retries) == ("c1", "127.0.0.1", -1, "u", "p", 3)
    assert c.routes == ["nats-route://127.0.0.1:6223", "nats-route://u:p@127.0.0.1:6224"]
    with pytest.raises(CommandError, match="expected cluster password to be set"):
        parse_args(["--cluster", "nats://u@127.0.0.1:6222"])


def test_tls_flags():
    o = parse_args(["--tls", "--tlscert", str(CERTS / "server-cert.pem"), "--tlskey", str(CERTS / "server-key.pem"),
                    "--tlscacert", str(CERTS / "ca.pem"), "--tlsverify"])
    assert o.tls.cert_file.endswith("server-cert.pem") and o.tls.ca_file.endswith("ca.pem") and o.tls.verify
    assert o.auth_timeout == 3.0
    # --tlsverify alone (with cert and key) turns TLS on as well, like nats-server's overrideTLS.
    o = parse_args(["--tlsverify", "--tlscert", str(CERTS / "server-cert.pem"), "--tlskey",
                    str(CERTS / "server-key.pem")])
    assert o.tls is not None and o.tls.verify


def test_tls_flags_need_cert_and_key():
    with pytest.raises(CommandError, match="certificate must be present"):
        parse_args(["--tls"])
    with pytest.raises(CommandError, match="private key must be present"):
        parse_args(["--tls", "--tlscert", str(CERTS / "server-cert.pem")])


def test_https_port_needs_tls():
    with pytest.raises(CommandError, match="TLS cert and key required for HTTPS"):
        parse_args(["-ms", "8443"])


def test_flags_win_over_the_config_file(tmp_path):
    f = tmp_path / "s.conf"
    f.write_text(f"port: 4333\ndebug: true\nserver_name: file\njetstream {{ store_dir: {tmp_path}/js }}\n"
                 f"tls {{ cert_file: {CERTS}/server-cert.pem, key_file: {CERTS}/server-key.pem, timeout: 5 }}\n")
    o = parse_args(["-c", str(f), "-p", "5555", "-D=false", "-js"])
    assert (o.port, o.debug, o.server_name, o.jetstream) == (5555, False, "file", True)
    assert o.store_dir == f"{tmp_path}/js" and o.config_file == str(f)
    assert o.tls is not None and o.tls.timeout == 5.0
    assert o.cli_overrides["port"] == 5555 and "server_name" not in o.cli_overrides
    # --tls=false turns off the file's TLS
    assert parse_args(["-c", str(f), "--tls=false"]).tls is None
    # --tlscert/--tlskey replace the file's block, keeping its timeout (nats-server overrideTLS)
    o = parse_args(["--config", str(f), "--tlscert", str(CERTS / "client-cert.pem"), "--tlskey",
                    str(CERTS / "client-key.pem")])
    assert o.tls.cert_file.endswith("client-cert.pem") and o.tls.timeout == 5.0


def test_bad_config_file_is_a_config_error(tmp_path):
    f = tmp_path / "s.conf"
    f.write_text("port: [\n")
    with pytest.raises(ConfigError) as ei:
        parse_args(["-c", str(f)])
    assert ei.value.file == str(f)


@pytest.mark.parametrize("argv,message", [
    (["--bogus"], "flag provided but not defined: -bogus"),
    (["-p", "abc"], 'invalid value "abc" for flag -p: parse error'),
    (["-p", "1_000"], 'invalid value "1_000" for flag -p: parse error'),
    (["-p", "99999999999999999999"], "value out of range"),
    (["-p"], "flag needs an argument: -p"),
    (["-D=maybe"], 'invalid boolean value "maybe" for -D: parse error'),
    (["---x"], "bad flag syntax: ---x"),
    (["-=x"], "bad flag syntax: -=x"),
])
def test_usage_errors(argv, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        parse_flags(argv)


def test_parsing_stops_at_the_first_word():
    f = parse_flags(["-D", "version", "-p", "1"])
    assert f.values == {"debug": True} and f.args == ["version", "-p", "1"]
    f = parse_flags(["-D", "--", "-p", "1"])
    assert f.values == {"debug": True} and f.args == ["-p", "1"]
    with pytest.raises(CommandError, match='unrecognized command: "foo"'):
        parse_args(["foo"])


def test_every_nats_server_flag_in_its_usage_is_known():
    usage = subprocess.run([nats_server_binary(), "-h"], capture_output=True, text=True, timeout=30).stdout
    import re

    names = set(re.findall(r"(?:^|[\s,])--?([A-Za-z_]+)", usage))
    names -= {"options"}  # "[options]"
    missing = sorted(n for n in names if n not in cli.FLAGS)
    assert not missing, missing


# ---------------------------------------------------------------------------------------------------------------
# The process: exit codes and streams compared with the real nats-server.


def _run(kind: str, *args: str, cwd: Path | None = None, **env_extra: str) -> subprocess.CompletedProcess:
    cmd = [nats_server_binary()] if kind == "nats-server" else [sys.executable, "-m", "skiff.server"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env_extra)
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60, cwd=cwd or ROOT, env=env)


FLAG_ERRORS = [["--bogus"], ["-p", "abc"], ["-p"], ["-D=maybe"], ["---x"]]


@pytest.mark.parametrize("args", FLAG_ERRORS)
def test_flag_errors_exit_1(args):
    # A deliberate difference (docs/parity.md): nats-server prints the error and the usage but exits 0;
    # Skiff exits 1 so that a harness with a mistyped flag fails.
    ours, theirs = _run("skiff", *args), _run("nats-server", *args)
    assert (ours.returncode, theirs.returncode) == (1, 0)
    assert ours.stderr.strip().splitlines()[-1] == theirs.stderr.strip().splitlines()[-1]
    assert ours.stdout.strip() and theirs.stdout.strip()


@pytest.mark.parametrize("args", [
    ["foo"], ["-t"], ["-a", "127.0.0.1", "-p", "-1", "-ms", "-1"], ["--tls"], ["--routes", "nats://127.0.0.1:1"],  # errors: exit status 1
    ["-sl", "foo=1"],
    ["-h"], ["--help"], ["help"],
])
def test_exit_status_and_streams_match_nats_server(args):
    ours, theirs = _run("skiff", *args), _run("nats-server", *args)
    assert ours.returncode == theirs.returncode, (ours.stderr, theirs.stderr)
    assert bool(ours.stdout.strip()) == bool(theirs.stdout.strip())
    assert bool(ours.stderr.strip()) == bool(theirs.stderr.strip())
    if theirs.stderr.strip():
        # the same message (nats-server logs a start banner before some fatal errors)
        ours_msg = ours.stderr.strip().removeprefix("skiff: ")
        assert theirs.stderr.strip().splitlines()[-1].endswith(ours_msg.splitlines()[-1])


def test_usage_on_stdout_for_a_flag_error():
    p = _run("skiff", "--bogus")
    assert "Usage: skiff [options]" in p.stdout
    assert p.stderr.strip() == "flag provided but not defined: -bogus"


@pytest.mark.parametrize("args", [["-v"], ["--version"], ["version"]])
def test_version(args):
    p = _run("skiff", *args)
    assert p.returncode == 0
    assert p.stdout.startswith("skiff: v") and "nats-server compatible 2." in p.stdout


def test_check_config(tmp_path):
    good = tmp_path / "good.conf"
    good.write_text("port: 4333\nmax_payload: 64KB\nauthorization { user: a, password: b }\n")
    ours, theirs = _run("skiff", "-c", str(good), "-t"), _run("nats-server", "-c", str(good), "-t")
    assert ours.returncode == theirs.returncode == 0
    # Same digest of the parsed configuration as nats-server.
    assert ours.stderr.split("(")[-1] == theirs.stderr.split("(")[-1]
    bad = tmp_path / "bad.conf"
    bad.write_text("port: 4333\nbogus: 1\n")
    ours, theirs = _run("skiff", "-c", str(bad), "-t"), _run("nats-server", "-c", str(bad), "-t")
    assert ours.returncode == theirs.returncode == 1
    assert f"{bad}:2:" in ours.stderr and 'unknown field "bogus"' in ours.stderr


def test_config_warning_fails_check_but_not_start(tmp_path):
    f = tmp_path / "w.conf"
    f.write_text("ping_interval: 60\n")
    assert _run("skiff", "-c", str(f), "-t").returncode == _run("nats-server", "-c", str(f), "-t").returncode == 1
    calls = []
    with pytest.raises(SystemExit) as ei:
        cli.main(["-c", str(f)], run=lambda o: calls.append(o) or 0)
    assert ei.value.code == 0 and calls[0].ping_interval == 60.0


def test_main_hands_options_to_run():
    seen = []
    with pytest.raises(SystemExit) as ei:
        cli.main(["-a", "127.0.0.1", "-p", "-1", "-js"], run=lambda o: seen.append(o) or 7)
    assert ei.value.code == 7
    assert (seen[0].host, seen[0].port, seen[0].jetstream) == ("127.0.0.1", -1, True)


def test_signal_reload_to_a_pid_file(tmp_path):
    child = subprocess.Popen([sys.executable, "-c",
                              "import signal,sys,time\n"
                              "signal.signal(signal.SIGHUP, lambda *a: sys.exit(42))\n"
                              "print('ready', flush=True)\n"
                              "time.sleep(30)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        pid_file = tmp_path / "s.pid"
        pid_file.write_text(str(child.pid))
        p = _run("skiff", "--signal", f"reload={pid_file}")
        assert p.returncode == 0, p.stderr
        assert child.wait(10) == 42
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            child.wait()


def test_signal_errors():
    assert "unknown signal" in _run("skiff", "-sl", "foo=1").stderr
    p = _run("skiff", "-sl", "reload=999999")
    assert p.returncode == 1 and "no such process" in p.stderr.lower()


def test_python_dash_m_server_starts_and_stops(tmp_path):
    """`python -m skiff.server` with flags reaches the runner: the port answers INFO."""
    from tests.harness import ServerProcess

    srv = ServerProcess(kind="skiff", jetstream=False).start()
    try:
        assert srv.proc.poll() is None
    finally:
        assert srv.stop() is not None
        srv.cleanup()


# ---------------------------------------------------------------------------------------------------------------
# Start-up failures: one [FTL] line saying what failed and where, in nats-server's words, and exit status 1.

def _fatal_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if "[FTL] " in ln]
    assert lines, stderr
    return lines[-1].split("[FTL] ", 1)[1]


def _busy_port():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


@pytest.mark.parametrize("args", [
    ["-p", "99999"], ["-p", "65536"], ["-p", "-5"],  # Python would bind 99999 % 65536 = 34463
    ["-m", "99999"], ["-m", "-5"],
], ids=" ".join)
def test_port_out_of_range_is_fatal(args):
    ours, theirs = _run("skiff", "-a", "127.0.0.1", *args), _run("nats-server", "-a", "127.0.0.1", *args)
    assert ours.returncode == theirs.returncode == 1
    assert _fatal_line(ours.stderr) == _fatal_line(theirs.stderr)


def test_busy_ports_are_named(tmp_path):
    busy = _busy_port()
    try:
        port = busy.getsockname()[1]
        from tests.harness import free_port

        for args in (["-p", str(port)], ["-p", str(free_port()), "-m", str(port)]):
            ours, theirs = _run("skiff", "-a", "127.0.0.1", *args), _run("nats-server", "-a", "127.0.0.1", *args)
            assert ours.returncode == theirs.returncode == 1
            assert _fatal_line(ours.stderr) == _fatal_line(theirs.stderr)
            # the busy port is the one named (the monitor's, not the client's)
            assert f"127.0.0.1:{port}" in _fatal_line(ours.stderr)
    finally:
        busy.close()


def test_bad_store_dir_is_fatal(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    from tests.harness import free_port

    for sd in (str(a_file), str(a_file / "sub"), "/proc/skiff-cannot-mkdir"):
        args = ["-a", "127.0.0.1", "-p", str(free_port()), "-js", "-sd", sd]
        ours, theirs = _run("skiff", *args), _run("nats-server", *args)
        assert ours.returncode == theirs.returncode == 1, sd
        assert _fatal_line(ours.stderr) == _fatal_line(theirs.stderr)
        assert _fatal_line(ours.stderr).startswith("Can't start JetStream: ")


def _start(kind: str, *args: str, stderr=subprocess.PIPE, cwd=None) -> subprocess.Popen:
    cmd = [nats_server_binary()] if kind == "nats-server" else [sys.executable, "-m", "skiff.server"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(cmd + list(args), stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                            cwd=cwd or ROOT)


def _read_until(proc: subprocess.Popen, needle: str, timeout: float = 20) -> str:
    """stderr up to ``needle`` (raw reads: a buffered readline would hide what select() sees)."""
    import select
    import time

    fd = proc.stderr.fileno()
    seen = b""
    deadline = time.monotonic() + timeout
    while needle.encode() not in seen:
        assert time.monotonic() < deadline, seen.decode(errors="replace")
        if select.select([fd], [], [], 0.5)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, seen.decode(errors="replace")
            seen += chunk
    return seen.decode(errors="replace")


def _stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_random_port_is_logged_and_serves(target):
    import socket

    proc = _start(target, "-a", "127.0.0.1", "-p", "-1")
    try:
        text = _read_until(proc, "Server is ready")
        import re

        port = int(re.search(r"Listening for client connections on 127\.0\.0\.1:(\d+)", text).group(1))
        assert port > 0
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        assert s.makefile("rb").readline().startswith(b"INFO ")
        s.close()
    finally:
        assert _stop(proc) == 0


def test_ports_file(target, tmp_path):
    import json
    import re

    from tests.harness import free_port

    http_port = free_port()
    proc = _start(target, "-a", "127.0.0.1", "-p", "-1", "-m", str(http_port), "--ports_file_dir", str(tmp_path))
    try:
        text = _read_until(proc, "Server is ready")
        port = int(re.search(r"Listening for client connections on 127\.0\.0\.1:(\d+)", text).group(1))
        exe = "nats-server" if target == "nats-server" else "skiff"  # `python -m skiff.server` is called skiff
        path = tmp_path / f"{exe}_{proc.pid}.ports"
        import time

        # nats-server writes it from a goroutine once the listeners are up, not atomically: the file can be seen
        # empty or half written first (a full run once read it before its JSON was complete)
        deadline = time.monotonic() + 10
        while not (path.exists() and path.read_text().endswith("}")):
            assert time.monotonic() < deadline, list(tmp_path.iterdir())
            time.sleep(0.05)
        assert json.loads(path.read_text()) == {"nats": [f"nats://127.0.0.1:{port}"],
                                                "monitoring": [f"http://127.0.0.1:{http_port}"]}
    finally:
        assert _stop(proc) == 0
    assert not path.exists()  # removed at shutdown


def test_sigterm_stops_with_the_log_pipe_closed(target):
    """A supervisor that stopped reading the server's stderr must still be able to stop it.  nats-server (Go)
    dies of SIGPIPE on its next log line; Skiff drops log lines it cannot write and exits cleanly
    (docs/parity.md)."""
    import socket
    import time

    proc = _start(target, "-a", "127.0.0.1", "-p", "-1")
    text = _read_until(proc, "Server is ready")
    import re

    port = int(re.search(r"connections on 127\.0\.0\.1:(\d+)", text).group(1))
    proc.stderr.close()
    proc.stdout.close()
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == (-signal.SIGPIPE if target == "nats-server" else 0)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1)


def test_unopenable_log_file():
    args = ["-a", "127.0.0.1", "-p", "-1", "-l", "/nonexistent-skiff-dir/server.log"]
    ours, theirs = _run("skiff", *args), _run("nats-server", *args)
    assert ours.returncode == theirs.returncode == 1
    expected = "error opening file: open /nonexistent-skiff-dir/server.log: no such file or directory"
    assert theirs.stderr.strip().endswith(expected) and ours.stderr.strip() == expected


@pytest.mark.parametrize("utc", [False, True])
def test_logtime_utc(utc):
    import datetime

    # UTC+9, no daylight saving: local and UTC stamps differ.  Only in the servers' environment: set in this
    # process it changed local time for later tests of the same worker (test_accountz's revoked times).
    args = ["-a", "127.0.0.1", "-p", "99999"] + (["--logtime_utc"] if utc else [])
    for kind in ("skiff", "nats-server"):
        p = _run(kind, *args, TZ="Asia/Tokyo")
        import re

        stamp = re.match(r"\[\d+\] (\S+ \S+) \[", p.stderr).group(1)
        logged = datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f")
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        if not utc:
            now += datetime.timedelta(hours=9)
        assert abs((now - logged).total_seconds()) < 120, (kind, stamp)
