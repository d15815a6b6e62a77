"""Scale workloads: many connections, many consumers, a big stream restarted.

Theory of operation: these look at the server between steps, so each is a procedure ``(ctx, server) -> dict``
rather than one client command.  Memory per object is the growth of the server's VmRSS while the objects exist
(sampled after a short settle) divided by their number.  Restart time is measured from spawning the server
process to the first ``$JS.API.STREAM.INFO`` answer that reports every message, once after a clean stop
(SIGTERM) and once after ``kill -9``; the poller is a raw-socket client asking every 10 ms, with headers on so a
JetStream API that is not up yet answers at once with a 503 no-responders status instead of a timeout.
Full run: 10,000 connections, 10,000 durable consumers, 1,000,000 messages; quick run: 200 / 200 / 20,000.
"""
from __future__ import annotations

import json
import selectors
import socket
import subprocess
import time

from bench import commands
from bench.servers import BenchServer
from bench.workloads import Context, Row, Target, Workload


class ScaleError(RuntimeError):
    pass


def _checked(argv: list[str], timeout: float) -> dict:
    out = commands.run(argv, timeout)
    if not out.ok:
        raise ScaleError(out.error)
    return out.result


def _settled_rss(server: BenchServer, settle: float = 1.0) -> int:
    """VmRSS after the server had `settle` seconds to finish what it was doing (max of a few samples)."""
    time.sleep(settle)
    samples = []
    for _ in range(3):
        r = server.rss_kib()
        if r is None:
            raise ScaleError(f"server died: {server.log_tail(2)}")
        samples.append(r)
        time.sleep(0.1)
    return max(samples)


def connections(ctx: Context, server: BenchServer) -> dict:
    n = ctx.conns
    before = _settled_rss(server, 0.1 if ctx.quick else 0.5)
    limit = 2 * ctx.slack + n / 50
    argv = ctx.c("conns", None, server, "--count", n, "--concurrency", 256, "--timeout", limit)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **commands.child_kwargs())
    try:
        line = _read_line(proc, timeout=limit + 1)
        doc = commands.last_json_line(line or "")
        if not doc or not doc.get("ok"):
            rest, err = proc.communicate(input="", timeout=10)
            doc = commands.last_json_line((line or "") + rest)
            raise ScaleError((doc or {}).get("error") or f"connection flood failed: {err.strip()[-200:]}")
        after = _settled_rss(server, 0.3 if ctx.quick else 1.0)
        proc.communicate(input="close\n", timeout=60)
    finally:
        if proc.poll() is None:
            commands.kill_group(proc)
            proc.communicate()
    return {"connections": n, "open_s": doc["elapsed"], "open_rate": doc["rate"], "rss_before_kib": before,
            "rss_after_kib": after, "rss_per_conn_kib": (after - before) / n}


def _read_line(proc: subprocess.Popen, timeout: float) -> str | None:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            raise ScaleError(f"timeout after {timeout:.0f}s")
        return proc.stdout.readline()
    finally:
        sel.close()


def consumers(ctx: Context, server: BenchServer) -> dict:
    n = ctx.consumers
    stream = "BENCHSCALE"
    _checked(ctx.c("js", "create", server, "--stream", stream, "--count", n), ctx.client_timeout)
    try:
        before = _settled_rss(server, 0.1 if ctx.quick else 0.5)
        limit = 3 * ctx.slack + n / 10
        created = _checked(ctx.c("js", "consumers", server, "--stream", stream, "--count", n, "--threads", 4,
                                 "--timeout", limit), limit + 1)
        after = _settled_rss(server, 0.3 if ctx.quick else 1.0)
        info = _checked(ctx.c("js", "info", server, "--stream", stream), ctx.client_timeout)
        if info.get("consumers") != n:
            raise ScaleError(f"stream reports {info.get('consumers')} consumers, expected {n}")
        pub = _checked(ctx.c("js", "apub", server, "--stream", stream, "--fresh", 0, "--window", 256,
                             "--duration", ctx.duration), ctx.client_timeout)
    finally:
        commands.run(ctx.c("js", "delete", server, "--stream", stream), ctx.client_timeout)
    return {"consumers": n, "create_s": created["elapsed"], "create_rate": created["rate"],
            "rss_before_kib": before, "rss_after_kib": after, "rss_per_consumer_kib": (after - before) / n,
            "pub_rate_idle": pub["rate"]}


def restart(ctx: Context, server: BenchServer) -> dict:
    n = ctx.restart_msgs
    stream = "BENCHBIG"
    limit = 3 * ctx.slack + n / 500
    fill = _checked(ctx.c("js", "apub", server, "--stream", stream, "--count", n, "--window", 1000,
                          "--timeout", limit), limit + 1)
    out = {"messages": n, "fill_rate": fill["rate"]}
    limit = 3 * ctx.slack + n / 2000
    for kill, key in ((False, "restart_clean_s"), (True, "restart_kill_s")):
        if kill:
            server.kill()
        else:
            server.stop(timeout=limit)
        if not server.start(timeout=limit):
            raise ScaleError(f"did not come back after {'kill -9' if kill else 'a clean stop'}: {server.error}")
        seen = wait_stream_ready(server, stream, n, timeout=limit)
        out[key] = seen - server.started_at
    return out


def wait_stream_ready(server: BenchServer, stream: str, messages: int, timeout: float, poll: float = 0.01) -> float:
    """Poll STREAM.INFO until it reports `messages`; returns the monotonic time of that answer."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            state = _stream_state(server.port, stream)
        except (OSError, ValueError) as e:
            last = str(e)
            state = None
        if state is not None:
            if state.get("messages") == messages:
                return time.monotonic()
            last = f"stream reports {state.get('messages')} messages"
        if not server.alive():
            raise ScaleError(f"server exited: {server.log_tail(2)}")
        time.sleep(poll)
    raise ScaleError(f"stream not ready after {timeout:.0f}s ({last})")


def _stream_state(port: int, stream: str) -> dict | None:
    """One STREAM.INFO request on a fresh raw connection; None when JetStream did not answer (yet)."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.settimeout(5)
        f = s.makefile("rb")
        if not f.readline().startswith(b"INFO"):
            return None
        s.sendall(b'CONNECT {"verbose":false,"headers":true,"no_responders":true,"protocol":1}\r\n'
                  b"SUB _INBOX.benchready 1\r\n"
                  + f"PUB $JS.API.STREAM.INFO.{stream} _INBOX.benchready 0\r\n\r\n".encode())
        while True:
            line = f.readline()
            if not line:
                return None
            if line.startswith(b"PING"):
                s.sendall(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                return None
            elif line.startswith(b"HMSG"):  # a status (503 no responders): JetStream API not up yet
                parts = line.split()
                f.read(int(parts[-1]) + 2)
                return None
            elif line.startswith(b"MSG"):
                parts = line.split()
                body = f.read(int(parts[-1]) + 2)[:-2]
                doc = json.loads(body)
                if "error" in doc:
                    return None
                return doc.get("state", {})


def scale_workloads() -> list[Workload]:
    kib = "KiB"
    return [
        Workload("scale.conns", "scale", "idle connections: time to open them all, server RSS per connection",
                 (Row("{conns} connections: time to open", "open_s", "s", False),
                  Row("RSS per idle connection ({conns})", "rss_per_conn_kib", kib, False, Target("<=", 1.0))),
                 procedure=connections, single_run=True, fresh=True),
        Workload("scale.consumers", "scale", "durable pull consumers on one stream: creation time, RSS each, "
                 "async publish rate with them all idle",
                 (Row("{consumers} consumers: creation time", "create_s", "s", False),
                  Row("RSS per consumer ({consumers})", "rss_per_consumer_kib", kib, False),
                  Row("JS async publish, {consumers} idle consumers", "pub_rate_idle", "msg/s", True)),
                 procedure=consumers, single_run=True, fresh=True),
        Workload("scale.restart", "scale", "stream of many messages: restart time after a clean stop and after "
                 "kill -9 (until STREAM.INFO reports every message)",
                 (Row("{restart_msgs} msgs: fill (async publish)", "fill_rate", "msg/s", True),
                  Row("{restart_msgs} msgs: restart after clean stop", "restart_clean_s", "s", False),
                  Row("{restart_msgs} msgs: restart after kill -9", "restart_kill_s", "s", False,
                      Target("<=", 2.0))),  # restart after kill -9 within 2x nats-server's
                 procedure=restart, single_run=True, fresh=True),
    ]
