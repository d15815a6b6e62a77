"""The benchmark's workloads: what each one runs, which figures it reports, and the target for each figure.

Theory of operation: a :class:`Workload` says how to measure one thing against one server.  Most are a client
command line (``client``), run once per run against each server in turn (A/B/B/A...), after optional ``setup``
commands run once per server (prefill a stream, create a KV bucket).  Scale workloads, which must look at the
server between steps (memory before and after, a restart), are a ``procedure`` (see bench/scale.py).  Every
command prints one JSON object; each :class:`Row` names a key of it and how to read it (unit, which direction is
better, the target for the Skiff / nats-server ratio).  The ratio is always Skiff's figure over nats-server's,
so a throughput target reads ``>= 0.5x`` and a latency or memory target ``<= 1.5x``.

Load generators: the C programs in bench/c/ (the NATS C client, and raw sockets where a client library's own
thread hand-offs would dominate the figure: request/reply latency, the connection flood); nats-py for the
"what a nats-py user sees" group.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bench.servers import BenchServer

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Target:
    """A bound on the Skiff / nats-server ratio, or, with ``unit``, on Skiff's own figure in that unit (the
    performance targets state start-up, idle memory and stalls as absolute bounds: "<= 100 ms", "<= 30 MiB",
    "<= 50 ms")."""

    op: str  # ">=" or "<="
    ratio: float  # the bound: a ratio, or a value in `unit`
    unit: str = ""

    def met(self, ratio: float | None, value: float | None = None) -> bool | None:
        x = value if self.unit else ratio
        if x is None:
            return None
        return x >= self.ratio if self.op == ">=" else x <= self.ratio

    def __str__(self) -> str:
        return f"{self.op} {self.ratio:g} {self.unit}" if self.unit else f"{self.op} {self.ratio:g}x"


@dataclass(frozen=True)
class Row:
    label: str
    key: str
    unit: str  # "msg/s", "op/s", "req/s", "us", "s", "KiB"
    higher_better: bool
    target: Target | None = None
    kinds: tuple[str, ...] | None = None  # the servers whose procedure reports it (None: every one); "-" for others


@dataclass
class Context:
    """Sizes and durations of one benchmark run (quick or full) and the paths of the load generators."""

    quick: bool
    duration: float
    runs: int
    prefill: int  # messages in the stream the consumer workloads read
    kv_keys: int
    conns: int
    consumers: int
    restart_msgs: int
    bins: dict[str, Path] = field(default_factory=dict)
    python: str = sys.executable

    @classmethod
    def make(cls, quick: bool, **overrides) -> "Context":
        base = (
            dict(duration=1.0, runs=1, prefill=20_000, kv_keys=100, conns=200, consumers=200, restart_msgs=20_000)
            if quick
            else dict(duration=5.0, runs=3, prefill=200_000, kv_keys=1000, conns=10_000, consumers=10_000,
                      restart_msgs=1_000_000)
        )
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(quick=quick, **base)

    @property
    def slack(self) -> float:
        """Allowance on top of the expected time before a client is declared hung."""
        return 10.0 if self.quick else 60.0

    @property
    def client_timeout(self) -> float:
        return self.duration * 6 + self.slack

    def c(self, program: str, mode: str | None, server: BenchServer, *args) -> list[str]:
        """A C load generator's command line.  Its own watchdog (--timeout, which also bounds how long it waits
        for any one answer) fires before the orchestrator's hard timeout; later --timeout arguments win."""
        argv = [str(self.bins[program])] + ([mode] if mode else [])
        return argv + ["--url", server.url, "--timeout", f"{self.client_timeout - 1:g}"] + [str(a) for a in args]

    def py(self, mode: str, server: BenchServer, *args) -> list[str]:
        return [self.python, str(HERE / "natspy_client.py"), mode, "--url", server.url] + [str(a) for a in args]


Command = Callable[[Context, BenchServer], list[str]]


@dataclass
class Workload:
    name: str
    group: str  # "core", "jetstream", "scale", "nats-py"
    title: str
    rows: tuple[Row, ...]
    client: Command | None = None
    setup: Callable[[Context, BenchServer], list[list[str]]] = lambda ctx, s: []
    teardown: Callable[[Context, BenchServer], list[list[str]]] = lambda ctx, s: []
    procedure: Callable[[Context, BenchServer], dict] | None = None
    profile: str = "default"
    fresh: bool = False  # needs servers of its own (it restarts them)
    single_run: bool = False  # scale workloads: one run per server
    timeout: Callable[[Context], float] = lambda ctx: ctx.client_timeout


def rate(label: str, target: Target | None = None, unit: str = "msg/s", key: str = "rate") -> Row:
    return Row(label, key, unit, True, target)


def latency(label: str, key: str = "p50_us", target: Target | None = None) -> Row:
    return Row(label, key, "us", False, target)


def _prefill(stream: str, subjects: int = 0) -> Callable[[Context, BenchServer], list[list[str]]]:
    def setup(ctx: Context, s: BenchServer) -> list[list[str]]:
        spread = ["--subjects", subjects] if subjects else []
        return [ctx.c("js", "apub", s, "--stream", stream, "--count", ctx.prefill, "--window", 1000,
                      "--size", 128, "--timeout", _prefill_timeout(ctx), *spread)]
    return setup


def _prefill_timeout(ctx: Context) -> float:
    return 2 * ctx.slack + ctx.prefill / 1000  # at least ~1k msg/s


def _drop_stream(stream: str) -> Callable[[Context, BenchServer], list[list[str]]]:
    return lambda ctx, s: [ctx.c("js", "delete", s, "--stream", stream)]


def _kv_setup(ctx: Context, s: BenchServer) -> list[list[str]]:
    return [ctx.c("js", "kvsetup", s, "--keys", ctx.kv_keys, "--size", 128)]


def _kv_drop(ctx: Context, s: BenchServer) -> list[list[str]]:
    return [ctx.c("js", "delete", s, "--stream", "KV_BENCHKV")]


def _consume_timeout(ctx: Context) -> float:
    return ctx.client_timeout + ctx.prefill / 2000


def _consume(mode: str, stream: str, *extra) -> Command:
    return lambda ctx, s: ctx.c("js", mode, s, "--stream", stream, "--count", ctx.prefill, "--duration",
                                ctx.duration, "--timeout", _consume_timeout(ctx) - 1, *extra)


def core_workloads() -> list[Workload]:
    out = []
    for size in (16, 128, 1024, 16384):
        out.append(Workload(
            f"core.pub.{size}", "core", f"publish only, {size} B",
            (rate(f"publish {size} B", Target(">=", 0.25) if size == 128 else None),),
            client=lambda ctx, s, size=size: ctx.c("core", "pub", s, "--size", size, "--duration", ctx.duration),
        ))
    out += [
        Workload("core.pubsub", "core", "1 publisher + 1 subscriber, 128 B",
                 (rate("1 pub + 1 sub, 128 B", Target(">=", 0.5)),),
                 client=lambda ctx, s: ctx.c("core", "pubsub", s, "--duration", ctx.duration, "--subs", 1)),
        Workload("core.fanout4", "core", "1 publisher, fan-out to 4 subscribers, 128 B (deliveries/s)",
                 (rate("fan-out to 4 subs, 128 B"),),
                 client=lambda ctx, s: ctx.c("core", "pubsub", s, "--duration", ctx.duration, "--subs", 4)),
        Workload("core.queue4", "core", "1 publisher, queue group of 4 subscribers, 128 B",
                 (rate("queue group of 4, 128 B"),),
                 client=lambda ctx, s: ctx.c("core", "queue", s, "--duration", ctx.duration, "--subs", 4)),
        Workload("core.rr1", "core", "request/reply, 1 client, 1 responder, 128 B (raw sockets)",
                 (latency("req/reply 1 client p50", "p50_us", Target("<=", 1.3)),
                  latency("req/reply 1 client p99", "p99_us")),
                 client=lambda ctx, s: ctx.c("rr", None, s, "--duration", ctx.duration, "--clients", 1)),
        Workload("core.rr50", "core", "request/reply, 50 clients, 1 responder, 128 B (raw sockets)",
                 (latency("req/reply 50 clients p50", "p50_us"), latency("req/reply 50 clients p99", "p99_us"),
                  rate("req/reply 50 clients", unit="req/s")),
                 client=lambda ctx, s: ctx.c("rr", None, s, "--duration", ctx.duration, "--clients", 50)),
    ]
    return out


def auth_workloads() -> list[Workload]:
    """core.pub.128 against servers started with accounts and users (profile "accounts"), as each user.  Issue #10:
    a user without permissions must publish as fast as on the plain server (compare with core.pub.128 of the same
    run); a user with allow/deny pays one cached check per subject."""
    def pub_as(user: str) -> Command:
        return lambda ctx, s: ctx.c("core", "pub", s, "--size", 128, "--duration", ctx.duration,
                                    "--url", s.url_as(user))  # the last --url wins

    return [
        Workload("auth.pub.open", "auth", "publish only, 128 B, an account user without permissions",
                 (rate("publish 128 B, user without permissions"),), client=pub_as("open"), profile="accounts"),
        Workload("auth.pub.perms", "auth", "publish only, 128 B, an account user with publish allow/deny",
                 (rate("publish 128 B, user with allow/deny"),), client=pub_as("perms"), profile="accounts"),
    ]


def jetstream_workloads() -> list[Workload]:
    return [
        Workload("js.pub", "jetstream", "synchronous publish (wait for each ack), 128 B, file storage",
                 (rate("JS sync publish"), latency("JS sync publish p50")),
                 client=lambda ctx, s: ctx.c("js", "pub", s, "--stream", "BENCHP", "--duration", ctx.duration),
                 teardown=_drop_stream("BENCHP")),
        Workload("js.apub", "jetstream", "async publish, window 256, 128 B, file storage",
                 (rate("JS async publish", Target(">=", 0.7)),),
                 client=lambda ctx, s: ctx.c("js", "apub", s, "--stream", "BENCHA", "--duration", ctx.duration,
                                             "--window", 256),
                 teardown=_drop_stream("BENCHA")),
        Workload("js.pub.always", "jetstream", "synchronous publish with sync_interval: always",
                 (rate("JS sync publish, sync always"),),
                 client=lambda ctx, s: ctx.c("js", "pub", s, "--stream", "BENCHPS", "--duration", ctx.duration),
                 teardown=_drop_stream("BENCHPS"), profile="sync_always"),
        Workload("js.apub.always", "jetstream", "async publish, window 256, with sync_interval: always",
                 (rate("JS async publish, sync always", Target(">=", 5.0)),),
                 client=lambda ctx, s: ctx.c("js", "apub", s, "--stream", "BENCHAS", "--duration", ctx.duration,
                                             "--window", 256),
                 teardown=_drop_stream("BENCHAS"), profile="sync_always"),
        Workload("js.fetch", "jetstream", "pull consumer: fetch batches of 100 + ack each, prefilled stream",
                 (rate("JS pull fetch + ack", Target(">=", 0.5)),),
                 setup=_prefill("BENCHF"),
                 client=_consume("fetch", "BENCHF", "--batch", 100),
                 teardown=_drop_stream("BENCHF"), timeout=_consume_timeout),
    ] + [
        # A wildcard filter over a stream of many subjects (the per-subject search path of a filter).
        Workload(f"js.fetch.f{k}", "jetstream", f"pull consumer with filter S.* over a prefilled stream of {k} "
                 "subjects: fetch batches of 100 + ack each",
                 (rate(f"JS pull fetch + ack, filter over {k} subjects", Target(">=", 0.5)),),
                 setup=_prefill(f"BENCHF{k}", subjects=k),
                 client=_consume("fetch", f"BENCHF{k}", "--batch", 100, "--filter", f"BENCHF{k}.*"),
                 teardown=_drop_stream(f"BENCHF{k}"), timeout=_consume_timeout)
        for k in (10, 100)
    ] + [
        Workload("js.push", "jetstream", "push consumer, explicit ack (library acks each), prefilled stream",
                 (rate("JS push consumer", Target(">=", 0.5)),),
                 setup=_prefill("BENCHU"),
                 client=_consume("push", "BENCHU"),
                 teardown=_drop_stream("BENCHU"), timeout=_consume_timeout),
        Workload("js.ordered", "jetstream", "ordered consumer (no acks, flow control), prefilled stream",
                 (rate("JS ordered consumer", Target(">=", 0.5)),),
                 setup=_prefill("BENCHO"),
                 client=_consume("ordered", "BENCHO"),
                 teardown=_drop_stream("BENCHO"), timeout=_consume_timeout),
        Workload("js.kv.put", "jetstream", "KV put, random keys, 128 B values, one client",
                 (rate("KV put", Target(">=", 0.9), unit="op/s"), latency("KV put p50")),
                 setup=_kv_setup,
                 client=lambda ctx, s: ctx.c("js", "kvput", s, "--keys", ctx.kv_keys, "--duration", ctx.duration),
                 teardown=_kv_drop),
        Workload("js.kv.get", "jetstream", "KV get, random keys, one client",
                 (rate("KV get", Target(">=", 0.9), unit="op/s"), latency("KV get p50")),
                 setup=_kv_setup,
                 client=lambda ctx, s: ctx.c("js", "kvget", s, "--keys", ctx.kv_keys, "--duration", ctx.duration),
                 teardown=_kv_drop),
    ]


PY_TARGET = Target(">=", 0.9)
PY_LATENCY_TARGET = Target("<=", round(1 / 0.9, 2))


def natspy_workloads() -> list[Workload]:
    def py(mode: str, *extra) -> Command:
        return lambda ctx, s: ctx.py(mode, s, "--duration", ctx.duration, *extra)

    return [
        Workload("py.pub", "nats-py", "nats-py: publish only, 128 B", (rate("nats-py publish 128 B", PY_TARGET),),
                 client=py("pub")),
        Workload("py.pubsub", "nats-py", "nats-py: 1 publisher + 1 subscriber, 128 B",
                 (rate("nats-py 1 pub + 1 sub", PY_TARGET),), client=py("pubsub")),
        Workload("py.rr", "nats-py", "nats-py: request/reply, 1 client",
                 (latency("nats-py req/reply p50", "p50_us", PY_LATENCY_TARGET),
                  latency("nats-py req/reply p99", "p99_us")),
                 client=py("reqrep")),
        Workload("py.jspub", "nats-py", "nats-py: JetStream publish (await each ack)",
                 (rate("nats-py JS publish", PY_TARGET),), client=py("jspub", "--stream", "BENCHPYP"),
                 teardown=_drop_stream("BENCHPYP")),
        Workload("py.jsapub", "nats-py", "nats-py: JetStream publish_async, window 256",
                 (rate("nats-py JS publish_async", PY_TARGET),), client=py("jsapub", "--stream", "BENCHPYA"),
                 teardown=_drop_stream("BENCHPYA")),
        Workload("py.fetch", "nats-py", "nats-py: pull fetch batches of 100 + ack",
                 (rate("nats-py JS fetch + ack", PY_TARGET),), setup=_prefill("BENCHPYF"),
                 client=lambda ctx, s: ctx.py("fetch", s, "--stream", "BENCHPYF", "--count", ctx.prefill,
                                              "--duration", ctx.duration),
                 teardown=_drop_stream("BENCHPYF"), timeout=lambda ctx: _consume_timeout(ctx) * 3),
        Workload("py.kvput", "nats-py", "nats-py: KV put", (rate("nats-py KV put", PY_TARGET, unit="op/s"),),
                 setup=_kv_setup, client=lambda ctx, s: py("kvput", "--keys", ctx.kv_keys)(ctx, s),
                 teardown=_kv_drop),
        Workload("py.kvget", "nats-py", "nats-py: KV get", (rate("nats-py KV get", PY_TARGET, unit="op/s"),),
                 setup=_kv_setup, client=lambda ctx, s: py("kvget", "--keys", ctx.kv_keys)(ctx, s),
                 teardown=_kv_drop),
        Workload("py.fastbatch", "nats-py", "nats-py: one fast batch (allow_batched, ADR-50), flow 500",
                 (rate("nats-py fast batch publish", PY_TARGET),),
                 client=py("fastbatch", "--stream", "BENCHPYB", "--window", 500),
                 teardown=_drop_stream("BENCHPYB")),
        Workload("py.atomicbatch", "nats-py", "nats-py: atomic batches of 100 (allow_atomic, ADR-50)",
                 (rate("nats-py atomic batch publish", PY_TARGET),),
                 client=py("atomicbatch", "--stream", "BENCHPYT", "--batch", 100),
                 teardown=_drop_stream("BENCHPYT")),
    ]


def all_workloads() -> list[Workload]:
    from bench import admin_stalls, scale, startup  # noqa: PLC0415 - they import this module

    return (core_workloads() + auth_workloads() + jetstream_workloads() + scale.scale_workloads()
            + startup.startup_workloads() + admin_stalls.admin_stall_workloads() + natspy_workloads())


GROUPS = ("core", "auth", "jetstream", "scale", "nats-py")
