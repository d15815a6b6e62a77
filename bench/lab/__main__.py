"""``python -m bench.lab``: see the package docstring."""
from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import importlib
from bench.lab.common import Budget, Result, kinds_from

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"

# name -> (module under bench.lab, default seconds, quick seconds)
CAMPAIGNS = {
    "crash-lab": ("crash", 600, 40),
    "fuzz-api": ("fuzz_api", 180, 12),
    "fuzz-protocol": ("fuzz_protocol", 180, 10),
    "stall-probes": ("stall", 300, 30),
    "bypass-probes": ("bypass", 60, 15),
    "churn-memory": ("churn", 300, 15),
    "restart-time": ("restart", 300, 20),
}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.lab", description=__doc__)
    p.add_argument("campaign", choices=[*CAMPAIGNS, "all"])
    p.add_argument("--quick", action="store_true", help="small sizes (make reliability)")
    p.add_argument("--smoke", action="store_true", help="the tiniest sizes, a few seconds per campaign (CI smoke)")
    p.add_argument("--seconds", type=float, help="time bound per campaign (per server where it runs twice)")
    p.add_argument("--servers", default="skiff,nats-server", help="which servers (default: both)")
    p.add_argument("--json", type=Path, help="write the results here too")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables as well")
    p.add_argument("--seed", type=int, default=1, help="random seed of fuzzers and kill times")
    p.add_argument("--kills", type=int, help="crash-lab: kill -9 rounds per (phase, sync setting)")
    p.add_argument("--sync", choices=["both", "always", "default"], default="both",
                   help="crash-lab: which sync_interval settings the kill rounds run under")
    p.add_argument("--requests", type=int, help="fuzz-api: requests per server")
    p.add_argument("--cycles", type=int, help="churn-memory: connect/disconnect cycles (full 60000)")
    p.add_argument("--store-mb", type=float, help="restart-time: store size in MB (full 60)")
    p.add_argument("--purge-msgs", type=int, help="stall-probes: messages in the purged stream (full 1000000)")
    p.add_argument("--subjects", type=int, help="stall-probes: subjects in STREAM.CREATE (full 5000)")
    p.add_argument("--consumers", type=int, help="stall-probes: consumers on the deleted stream (full 1000)")
    return p.parse_args(argv)


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def run_one(name: str, a: argparse.Namespace, kinds: list[str]) -> Result:
    modname, full_s, quick_s = CAMPAIGNS[name]
    mod = importlib.import_module("bench.lab." + modname)
    seconds = a.seconds or (max(3, quick_s // 5) if a.smoke else quick_s if a.quick else full_s)
    res = Result(name)
    t0 = time.monotonic()
    print(f"[lab] {name}: time bound {seconds:.0f}s", file=sys.stderr, flush=True)
    out = mod.run(kinds, a, Budget(seconds), res)
    if asyncio.iscoroutine(out):
        asyncio.run(out)
    res.details["elapsed_s"] = round(time.monotonic() - t0, 1)
    return res


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    a.quick = a.quick or a.smoke
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: finally blocks stop every server
    kinds = kinds_from(a.servers)
    names = list(CAMPAIGNS) if a.campaign == "all" else [a.campaign]
    meta = {"commit": git_commit(), "date": _dt.datetime.now().isoformat(timespec="seconds"),
            "quick": a.quick, "servers": kinds, "argv": sys.argv[1:]}
    results = []
    for name in names:
        res = run_one(name, a, kinds)
        results.append(res)
        print(res.table(kinds), flush=True)
        if a.markdown:
            print("\n" + res.markdown(kinds) + "\n")
        print(f"[lab] {name}: done in {res.details['elapsed_s']}s", file=sys.stderr, flush=True)
    doc = {"meta": meta, "campaigns": [r.as_json() for r in results]}
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    paths = [RESULTS / f"lab-{a.campaign}-{stamp}.json"] + ([a.json] if a.json else [])
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1, default=str))
    print(f"[lab] results: {paths[0]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
