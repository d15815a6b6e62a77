"""What every campaign shares: starting the two servers, the canary, the time budget and the summary table.

Servers are the test harness's :class:`tests.harness.ServerProcess` (same ports, same command lines, restart on
the same port and store).  JetStream settings go into a config file (``jetstream { store_dir, sync_interval }``)
because nats-server refuses ``-sd`` next to a ``store_dir`` in a file.  A campaign returns a :class:`Result`:
rows of ``metric -> {server kind: value}`` and notes; ``__main__`` prints it side by side and writes JSON.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.commands import child_kwargs, kill_group
from bench.servers import LABELS, proc_status
from tests.harness import ROOT, TARGETS, ServerProcess


def conf_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def lab_server(kind: str, *, sync_always: bool = False, conf: str = "", store_dir: str | None = None,
               jetstream: bool = True, args: list[str] | None = None, js_extra: str = "") -> ServerProcess:
    """A (not yet started) server of ``kind`` with JetStream from a config file (``js_extra`` lines inside its
    ``jetstream`` block) and ``conf`` appended."""
    srv = ServerProcess(kind=kind, jetstream=False, store_dir=store_dir, args=list(args or []))
    text = ""
    if jetstream:
        text = "jetstream {\n  store_dir: " + conf_string(srv.store_dir) + "\n"
        if sync_always:
            text += "  sync_interval: always\n"
        text += js_extra + "}\n"
    srv.config = text + conf
    return srv


def log_text(srv: ServerProcess) -> str:
    try:
        return Path(srv.log_path).read_bytes().decode(errors="replace")
    except OSError:
        return ""


def tracebacks(srv: ServerProcess) -> int:
    """Python tracebacks (Skiff) or Go panics (nats-server) in the server's whole log."""
    text = log_text(srv)
    return text.count("Traceback (most recent call last)") + text.count("panic:")


def first_traceback(srv: ServerProcess, lines: int = 12) -> str:
    text = log_text(srv)
    i = text.find("Traceback (most recent call last)")
    if i < 0:
        i = text.find("panic:")
    return "" if i < 0 else "\n".join(text[i:].splitlines()[:lines])


def rss_kib(srv: ServerProcess) -> int | None:
    if srv.proc is None or srv.proc.poll() is not None:
        return None
    return proc_status(srv.proc.pid).get("VmRSS")


class Budget:
    """A campaign's time bound: ``left()`` seconds remain until ``seconds`` after creation."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def over(self) -> bool:
        return self.left() <= 0

    def share(self, parts: int) -> "Budget":
        return Budget(max(1.0, self.left() / max(1, parts)))


@dataclass
class Result:
    campaign: str
    rows: list[tuple[str, dict]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)

    def row(self, metric: str, kind: str, value) -> None:
        for m, vals in self.rows:
            if m == metric:
                vals[kind] = value
                return
        self.rows.append((metric, {kind: value}))

    def note(self, text: str) -> None:
        self.notes.append(text)

    def as_json(self) -> dict:
        return {"campaign": self.campaign, "rows": [{"metric": m, "values": v} for m, v in self.rows],
                "notes": self.notes, "details": self.details}

    def table(self, kinds: list[str]) -> str:
        width = max([len(m) for m, _ in self.rows] + [20])
        cols = [LABELS.get(k, k) for k in kinds]
        out = [f"== {self.campaign} ==", f"{'metric':<{width}}  " + "  ".join(f"{c:>18}" for c in cols)]
        for metric, vals in self.rows:
            out.append(f"{metric:<{width}}  " + "  ".join(f"{fmt(vals.get(k)):>18}" for k in kinds))
        for n in self.notes:
            out.append(f"  note: {n}")
        return "\n".join(out)

    def markdown(self, kinds: list[str]) -> str:
        cols = [LABELS.get(k, k) for k in kinds]
        out = ["| metric | " + " | ".join(cols) + " |", "|---|" + "---|" * len(kinds)]
        for metric, vals in self.rows:
            out.append(f"| {metric} | " + " | ".join(fmt(vals.get(k)) for k in kinds) + " |")
        return "\n".join(out)


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
    return str(v)


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(p / 100 * (len(s) - 1) + 0.5))]


# ---------------------------------------------------------------------- canary
class Canary:
    """A separate process (``python -m bench.lab.canary``) that round-trips a tiny message through the server
    every 2 ms on its own connection and records ``(time, latency)``: what an innocent client feels while a
    campaign attacks the server.  A separate process so the attacker's CPU use in this one does not count."""

    def __init__(self, srv: ServerProcess, rr: bool = False, every: float = 0.002) -> None:
        self.tmpdir = tempfile.mkdtemp(prefix="lab-canary-")
        self.path = os.path.join(self.tmpdir, "canary.txt")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.lab.canary", str(srv.port), self.path,
                                      "--every", str(every)] + (["--rr"] if rr else []),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT,
                                     **child_kwargs())
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not self.samples():
            if self.proc.poll() is not None:
                raise RuntimeError(f"canary died: {self.proc.stderr.read().decode()[-500:]}")
            time.sleep(0.05)

    def samples(self, since: float = 0.0, until: float = float("inf")) -> list[tuple[float, float]]:
        """(wall time sent, latency s) of the probes sent in [since, until]."""
        out = []
        try:
            with open(self.path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2:
                        t, lat = float(parts[0]), float(parts[1])
                        if since <= t <= until:
                            out.append((t, lat))
        except OSError:
            pass
        return out

    def stop(self) -> None:
        kill_group(self.proc)
        self.proc.wait()
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    @staticmethod
    def stats(samples: list[tuple[float, float]], since: float | None = None,
              until: float | None = None) -> dict:
        """max / p50 / p99 latency (ms) and the longest gap with no answer (ms: a probe stuck in flight counts
        from its send time to ``until``)."""
        lats = [lat * 1000 for _, lat in samples]
        gap = max(lats, default=0.0)
        if samples and until is not None:
            # the canary is sequential: from the last probe sent to `until` it may be waiting (stalled)
            gap = max(gap, (until - samples[-1][0] - samples[-1][1]) * 1000)
        return {"probes": len(samples), "max_ms": round(gap, 1),
                "p50_ms": round(pct(lats, 50) or 0, 2), "p99_ms": round(pct(lats, 99) or 0, 2)}


def kinds_from(arg: str) -> list[str]:
    kinds = [k.strip() for k in arg.split(",") if k.strip()]
    bad = [k for k in kinds if k not in TARGETS]
    if bad or not kinds:
        raise SystemExit(f"unknown server kind(s) {bad}; choose from {TARGETS}")
    return kinds


def dump(obj) -> str:
    return json.dumps(obj, sort_keys=True, default=str)
