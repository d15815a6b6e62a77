"""Start-up workloads: an empty server's start, and a restart after ``kill -9`` with a subject per message.

Theory of operation: each is a procedure ``(ctx, server) -> dict`` (bench/scale.py) that stops and starts its own
(fresh) server several times and reports medians, because one start is one sample of a noisy figure.

- ``startup``: JetStream on, empty store.  From spawning the process to (a) the first connection that reads the
  server's ``INFO`` (what a harness waiting for the port sees; the target is <= 100 ms) and (b) the first
  ``$JS.API.INFO`` answer (what a test that creates a stream at once waits for).  Polled every 2 ms.  Also the CPU
  time of each process's whole life (start, that one request, SIGTERM; user + system, every thread), read from the
  reaped children's resource usage: on a shared machine the times to INFO mostly measure the wait for a CPU, the
  CPU time what a start costs.  Then the idle memory of the last start, a second after it (the target is
  <= 30 MiB).  Beside Skiff's starts, the same number of starts of bench/floor_server.py (a bare asyncio server on
  Skiff's interpreter, timed the same way): the floor under Skiff's figures on this machine, so that a start-up
  miss can be told apart as the machine's (the floor near the target too) or Skiff's (far above the floor).
- ``restart_subjects``: ``restart_msgs / 5`` messages of 100 bytes, each on a subject of its own (1,000,000 /
  5 = 200,000 in the full run, ~32 MB: the shape of a store with a subject per message), then ``kill -9`` and the time from
  spawning the process to the first ``STREAM.INFO`` that reports every message; the median over a few kills.
  ``scale.restart`` (bench/scale.py) is the other shape: many messages on one subject.
"""
from __future__ import annotations

import json
import resource
import socket
import statistics
import time
from pathlib import Path

from bench.scale import ScaleError, wait_stream_ready
from bench.servers import BenchServer
from bench.workloads import Context, Row, Target, Workload

POLL = 0.002
FLOOR_SERVER = Path(__file__).resolve().parent / "floor_server.py"


def _spawn_timed(server: BenchServer, timeout: float) -> tuple[float, float]:
    """Start ``server``; (seconds to the first INFO, seconds to the first $JS.API.INFO answer)."""
    started = time.monotonic()
    if not server.start(timeout=timeout, poll=POLL):
        raise ScaleError(f"did not start: {server.error}")
    info_at = server.ready_at
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _js_info(server.port):
            return info_at - started, time.monotonic() - started
        time.sleep(POLL)
    raise ScaleError("JetStream API did not answer")


def _js_info(port: int) -> bool:
    """One $JS.API.INFO request on a fresh raw connection; False while JetStream is not up (503 / no answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.settimeout(5)
        f = s.makefile("rb")
        if not f.readline().startswith(b"INFO"):
            return False
        s.sendall(b'CONNECT {"verbose":false,"headers":true,"no_responders":true,"protocol":1}\r\n'
                  b"SUB _INBOX.benchjs 1\r\nPUB $JS.API.INFO _INBOX.benchjs 0\r\n\r\n")
        while True:
            line = f.readline()
            if not line or line.startswith(b"-ERR"):
                return False
            if line.startswith(b"PING"):
                s.sendall(b"PONG\r\n")
            elif line.startswith((b"MSG", b"HMSG")):
                body = f.read(int(line.split()[-1]) + 2)
                return line.startswith(b"MSG") and b'"error"' not in body


def _children_cpu() -> float:
    """User + system seconds of this process's children that have been waited for (the stopped servers)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _starts(server: BenchServer, runs: int, timeout: float) -> dict:
    """Stop ``server`` and start it ``runs`` times: the medians of the times to INFO and to the first
    $JS.API.INFO answer, and of the CPU of each start that was also stopped here."""
    first_info, first_js, cpu = [], [], []
    for i in range(runs):
        before = _children_cpu()
        server.stop()
        if i:  # the process this loop started (the first stop ends the one the run started for it)
            cpu.append(_children_cpu() - before)
        a, b = _spawn_timed(server, timeout=timeout)
        first_info.append(a)
        first_js.append(b)
    return {"startup_s": statistics.median(first_info), "startup_js_s": statistics.median(first_js),
            "startup_max_s": max(first_info), "startup_cpu_ms": statistics.median(cpu) * 1000}


def startup(ctx: Context, server: BenchServer) -> dict:
    runs = 5 if ctx.quick else 15
    out = {"runs": runs, **_starts(server, runs, ctx.slack)}
    # Idle memory (<= 30 MiB): VmRSS of the last started server once it has had a second to settle.
    time.sleep(1.0)
    rss = server.rss_kib()
    out["idle_rss_mib"] = None if rss is None else rss / 1024
    if server.kind == "skiff":
        # The floor on this machine: a bare asyncio server (bench/floor_server.py) on Skiff's interpreter, started
        # and timed the same way, between Skiff's starts and nats-server's.
        floor = BenchServer(kind="floor", command=[ctx.python, str(FLOOR_SERVER)])
        try:
            starts = _starts(floor, runs, ctx.slack)
        finally:
            floor.cleanup()
        out["floor_s"], out["floor_cpu_ms"] = starts["startup_s"], starts["startup_cpu_ms"]
    return out


def _fill_subjects(port: int, stream: str, n: int, size: int, timeout: float) -> None:
    """Create ``stream`` and publish ``n`` messages, message i on subject ``<stream>.<i>``, 1000 acks in flight."""
    deadline = time.monotonic() + timeout
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.settimeout(timeout)
        f = s.makefile("rb")
        f.readline()
        cfg = json.dumps({"name": stream, "subjects": [f"{stream}.>"], "storage": "file"}).encode()
        s.sendall(b'CONNECT {"verbose":false,"headers":true,"protocol":1}\r\nSUB _I.c 1\r\nSUB _I.a 2\r\n'
                  + f"PUB $JS.API.STREAM.CREATE.{stream} _I.c {len(cfg)}\r\n".encode() + cfg + b"\r\n")
        _read_msgs(f, s, 1)
        payload = b"x" * size
        window = 1000
        for lo in range(0, n, window):
            hi = min(n, lo + window)
            s.sendall(b"".join(b"PUB %s.%d _I.a %d\r\n%s\r\n" % (stream.encode(), i, size, payload)
                               for i in range(lo, hi)))
            errors = _read_msgs(f, s, hi - lo)
            if errors:
                raise ScaleError(f"publish failed: {errors[0]}")
            if time.monotonic() > deadline:
                raise ScaleError(f"fill not done after {timeout:.0f}s ({lo} messages)")


def _read_msgs(f, s: socket.socket, count: int) -> list[str]:
    errors = []
    while count:
        line = f.readline()
        if not line:
            raise ScaleError("server closed the connection")
        if line.startswith(b"PING"):
            s.sendall(b"PONG\r\n")
        elif line.startswith(b"-ERR"):
            raise ScaleError(line.decode().strip())
        elif line.startswith(b"MSG"):
            body = f.read(int(line.split()[-1]) + 2)
            if b'"error"' in body:
                errors.append(body[:200].decode(errors="replace"))
            count -= 1
    return errors


def restart_subjects(ctx: Context, server: BenchServer) -> dict:
    n = max(ctx.restart_msgs // 5, 1000)
    stream = "BENCHSUBJ"
    _fill_subjects(server.port, stream, n, 100, timeout=3 * ctx.slack + n / 2000)
    kills = 2 if ctx.quick else 5
    limit = 3 * ctx.slack + n / 2000
    times = []
    for _ in range(kills):
        server.kill()
        if not server.start(timeout=limit, poll=POLL):
            raise ScaleError(f"did not come back after kill -9: {server.error}")
        times.append(wait_stream_ready(server, stream, n, timeout=limit, poll=POLL) - server.started_at)
    return {"messages": n, "restart_kill_s": statistics.median(times), "restart_kill_max_s": max(times)}


def startup_workloads() -> list[Workload]:
    return [
        Workload("startup.empty", "scale", "process start with JetStream on and an empty store: to the first "
                 "accepted connection (INFO) and to the first $JS.API.INFO answer (median of 15 starts)",
                 (Row("start to first connection (INFO)", "startup_s", "s", False, Target("<=", 0.1, unit="s")),
                  Row("start to first $JS.API.INFO answer", "startup_js_s", "s", False),
                  Row("CPU of a start (to that answer and SIGTERM)", "startup_cpu_ms", "ms", False),
                  Row("idle RSS (JetStream on, empty store)", "idle_rss_mib", "MiB", False,
                      Target("<=", 30.0, unit="MiB")),
                  Row("floor: a bare asyncio server, start to INFO", "floor_s", "s", False, kinds=("skiff",)),
                  Row("floor: CPU of its start", "floor_cpu_ms", "ms", False, kinds=("skiff",))),
                 procedure=startup, single_run=True, fresh=True),
        Workload("startup.restart_subjects", "scale", "stream with one subject per message: restart after "
                 "kill -9 until STREAM.INFO reports every message (median of 5 kills)",
                 (Row("{restart_msgs}/5 msgs, a subject each: restart after kill -9", "restart_kill_s", "s", False,
                      Target("<=", 2.0)),),
                 procedure=restart_subjects, single_run=True, fresh=True),
    ]
