"""The orchestrator: start both servers, run every workload against each in turn, collect medians and ratios.

Theory of operation: for each workload, get one server of each kind with the workload's profile (fresh servers
per workload in a full run, so each peak RSS is that workload's alone; in quick mode servers are reused per
profile and their peak is reset before each workload).  Run the workload's setup once per server, then its runs
alternating the order (Skiff, nats-server, then nats-server, Skiff, ...) so that drift on the machine (page
cache, thermal, other tenants) does not favour one side.  Read each server's peak RSS, run the teardown, and
reduce the runs to one median per figure.  A failure in one cell never stops the others: the reason is kept and
printed as ``error: <reason>``; every client process has a hard timeout and every server is killed at the end.
"""
from __future__ import annotations

import datetime as _dt
import fnmatch
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import commands, report
from bench.build import ensure_built
from bench.scale import ScaleError
from bench.servers import KINDS, LABELS, BenchServer, default_command, server_version
from bench.workloads import Context, Workload, all_workloads

ROOT = Path(__file__).resolve().parent.parent


def raise_nofile(want: int) -> int:
    """Raise the soft open-files limit (inherited by the servers and load generators) towards `want`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class ServerPool:
    """Servers by (kind, profile): reused across workloads unless fresh ones are wanted."""

    def __init__(self, commands_by_kind: dict[str, list[str]], fresh: bool):
        self.commands = commands_by_kind
        self.fresh = fresh
        self.pool: dict[tuple[str, str], BenchServer] = {}
        self.start_failures: dict[tuple[str, str], str] = {}
        self.live: list[BenchServer] = []

    def acquire(self, kind: str, profile: str, fresh: bool) -> BenchServer:
        key = (kind, profile)
        if key in self.start_failures:  # it did not start before; do not wait for it again
            s = BenchServer(kind, profile, command=self.commands[kind])
            s.error = self.start_failures[key]
            return s
        if not (fresh or self.fresh):
            s = self.pool.get(key)
            if s is not None and s.alive():
                s.reset_peak()
                return s
            if s is not None:
                s.cleanup()
        s = BenchServer(kind, profile, command=self.commands[kind])
        self.live.append(s)
        if not s.start():
            self.start_failures[key] = s.error
        elif not (fresh or self.fresh):
            self.pool[key] = s
        return s

    def release(self, server: BenchServer, fresh: bool) -> None:
        if fresh or self.fresh or server.error:
            server.cleanup()

    def close(self) -> None:
        for s in self.live:
            s.cleanup()


def _median(values: list[float]) -> float | None:
    values = [v for v in values if isinstance(v, (int, float)) and v == v]
    return statistics.median(values) if values else None


def _summary(w: Workload, result: dict | None, error: str | None) -> str:
    if error:
        return f"error: {error}"
    return ", ".join(f"{row.key}={report.fmt_value(result.get(row.key), row.unit)}" for row in w.rows)


def run_workload(ctx: Context, w: Workload, pool: ServerPool, kinds: list[str], log) -> dict:
    fresh = w.fresh
    servers = {k: pool.acquire(k, w.profile, fresh) for k in kinds}
    per = {k: {"runs": [], "errors": [], "cpu_s": [], "peak_rss_kib": None, "error": s.error,
               "server": s.describe()} for k, s in servers.items()}
    try:
        setup_timeout = 3 * ctx.slack + ctx.prefill / 500
        for k, s in servers.items():
            if per[k]["error"]:
                continue
            for argv in w.setup(ctx, s):
                out = commands.run(argv, setup_timeout)
                if not out.ok:
                    per[k]["error"] = f"setup: {out.error}"
                    break
        runs = 1 if w.single_run else ctx.runs
        for i in range(runs):
            for k in (kinds if i % 2 == 0 else kinds[::-1]):
                s = servers[k]
                if per[k]["error"]:
                    continue
                if not s.alive():
                    per[k]["error"] = f"server died: {s.log_tail(2)}"
                    continue
                t0 = time.monotonic()
                pid0, cpu0 = s.pid, s.cpu_seconds()
                if w.procedure is not None:
                    try:
                        result, error = w.procedure(ctx, s), None
                    except ScaleError as e:
                        result, error = None, str(e)
                    except Exception as e:  # noqa: BLE001 - a broken procedure is one cell's error, not the run's
                        result, error = None, f"internal error: {type(e).__name__}: {e}"
                else:
                    out = commands.run(w.client(ctx, s), w.timeout(ctx))
                    result, error = out.result, out.error
                cpu1 = s.cpu_seconds()
                if result is not None:
                    per[k]["runs"].append(result)
                    if cpu0 is not None and cpu1 is not None and s.pid == pid0:  # not across a restart
                        per[k]["cpu_s"].append(cpu1 - cpu0)  # the server's CPU while the client ran
                else:
                    per[k]["errors"].append(error)
                    if not s.alive():
                        per[k]["error"] = f"server died: {s.log_tail(2)}"
                log(f"  {w.name:<16} {LABELS[k]:<11} run {i + 1}/{runs} ({time.monotonic() - t0:5.1f}s): "
                    f"{_summary(w, result, error)}")
        for k, s in servers.items():
            per[k]["peak_rss_kib"] = s.peak_rss_kib()
            per[k]["cpu_s_median"] = _median(per[k]["cpu_s"])
        for k, s in servers.items():
            if s.alive():
                for argv in w.teardown(ctx, s):
                    commands.run(argv, ctx.client_timeout)
    finally:
        for s in servers.values():
            pool.release(s, fresh)
    return {"name": w.name, "group": w.group, "title": w.title, "profile": w.profile, "servers": per,
            "rows": _rows(ctx, w, per, kinds)}


def _rows(ctx: Context, w: Workload, per: dict, kinds: list[str]) -> list[dict]:
    names = {k: _human(v) for k, v in vars(ctx).items() if isinstance(v, int)}
    rows = []
    for row in w.rows:
        values, errors = {}, {}
        for k in kinds:
            values[k] = _median([r.get(row.key) for r in per[k]["runs"]])
            if values[k] is None and (row.kinds is None or k in row.kinds):
                errors[k] = per[k]["error"] or (per[k]["errors"][0] if per[k]["errors"] else "no result")
        ratio = None
        if values.get("skiff") is not None and values.get("nats-server"):
            ratio = values["skiff"] / values["nats-server"]
        met = row.target.met(ratio, values.get("skiff")) if row.target else None
        rows.append({"label": row.label.format(**names), "key": row.key, "unit": row.unit,
                     "higher_better": row.higher_better, "target": str(row.target) if row.target else None,
                     "kinds": list(row.kinds) if row.kinds is not None else None,
                     "values": values, "errors": errors, "ratio": ratio, "met": met,
                     "notes": {k: n for k in kinds if (n := _note(per[k], values[k]))},
                     "pending": {k: k not in kinds for k in KINDS}})
    return rows


def _note(per_server: dict, value: float | None) -> str | None:
    """What the median hides, shown beside it: messages a subscriber never got (slow consumer, drops) and runs
    that failed while others succeeded."""
    runs, notes = per_server["runs"], []
    lost = sum(r.get("lost", 0) for r in runs)
    sent = sum(r.get("expected", r.get("published", 0)) for r in runs)
    if lost > 0 and sent:
        notes.append(f"lost {lost / sent:.1%}")
    if value is not None and per_server["errors"]:
        failed = len(per_server["errors"])
        notes.append(f"{failed} of {failed + len(runs)} runs failed")
    return ", ".join(notes) or None


def _human(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def machine() -> dict:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    libnats = subprocess.run(["pkg-config", "--modversion", "libnats"], capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "nproc": os.cpu_count(), "mem": mem, "kernel": f"Linux {platform.release()}",
            "python": platform.python_version(), "libnats": libnats or "?"}


def skiff_version() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        rev = ""
    return f"git {rev}" if rev else "?"


def select(workloads: list[Workload], only: list[str], skip: list[str], groups: list[str]) -> list[Workload]:
    def match(w: Workload, pats: list[str]) -> bool:
        return any(fnmatch.fnmatch(w.name, p) or fnmatch.fnmatch(w.group, p) for p in pats)

    out = [w for w in workloads if (not only or match(w, only)) and not match(w, skip)]
    return [w for w in out if not groups or w.group in groups]


def run(ctx: Context, workloads: list[Workload], kinds: list[str], server_commands: dict[str, list[str]],
        fresh: bool, log=lambda s: print(s, file=sys.stderr, flush=True)) -> dict:
    started = _dt.datetime.now().isoformat(timespec="seconds")
    load_before = os.getloadavg()[0]
    ctx.bins = ensure_built()
    nofile = raise_nofile(max(4096, 2 * ctx.conns + 1024))
    if nofile < ctx.conns + 512:
        log(f"note: open-files limit {nofile} is below what {ctx.conns} connections need")
    versions = {k: skiff_version() if k == "skiff" and server_commands[k] == default_command(k)
                else server_version(k, server_commands[k]) for k in kinds}
    pool = ServerPool(server_commands, fresh)
    results = []
    try:
        for i, w in enumerate(workloads, 1):
            log(f"[{i}/{len(workloads)}] {w.name}: {w.title}")
            results.append(run_workload(ctx, w, pool, kinds, log))
    finally:
        pool.close()
    meta = {"started": started, "finished": _dt.datetime.now().isoformat(timespec="seconds"),
            "mode": "quick" if ctx.quick else "full", "duration": ctx.duration, "runs": ctx.runs,
            "sizes": {"prefill": ctx.prefill, "kv_keys": ctx.kv_keys, "conns": ctx.conns,
                      "consumers": ctx.consumers, "restart_msgs": ctx.restart_msgs},
            "servers": {k: " ".join(server_commands[k]) for k in kinds}, "versions": versions,
            "machine": machine(), "load": {"start": load_before, "end": os.getloadavg()[0]}}
    return {"meta": meta, "workloads": results}


__all__ = ["run", "select", "all_workloads", "Context", "KINDS"]
