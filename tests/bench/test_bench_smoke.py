"""The benchmark's smoke run: ``python -m bench --quick`` with tiny sizes must produce a table with figures from
both servers for every workload, so the benchmark (C load generators, orchestrator, report) never rots.

It runs every workload once per server for a fraction of a second (well under a minute in all).  It skips only
when the NATS C client cannot be installed (no libnats-dev / gcc and no way to apt-get them); any other failure,
including a workload that errors on Skiff, fails the test with the cells that say why.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.build import BuildError, ensure_built
from bench.workloads import Context, all_workloads

ROOT = Path(__file__).resolve().parents[2]
SMOKE_ARGS = ["--quick", "--duration", "0.25", "--prefill", "2000", "--conns", "100", "--consumers", "50",
              "--restart-msgs", "2000"]


def skiff_selected(config) -> bool:
    """With --target=nats-server the suite is run without Skiff: the benchmark then runs nats-server only."""
    return config.getoption("--target") in ("both", "skiff")


@pytest.fixture(scope="module")
def bench_results(request, tmp_path_factory) -> tuple[dict, str]:
    try:
        ensure_built()
    except BuildError as e:
        pytest.skip(f"benchmark load generators unavailable: {e}")
    out = tmp_path_factory.mktemp("bench") / "results.json"
    servers = [] if skiff_selected(request.config) else ["--servers", "nats-server"]
    try:
        proc = subprocess.run([sys.executable, "-m", "bench", *SMOKE_ARGS, *servers, "--json", str(out)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the quick benchmark overstayed 120 s:\n{(e.stderr or b'')[-3000:]!r}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def test_table_has_both_servers_and_every_workload(bench_results):
    results, table = bench_results
    header = table.splitlines()[0]
    assert "Skiff" in header and "nats-server" in header and "ratio" in header  # "pending" cells without Skiff
    ran = [w["name"] for w in results["workloads"]]
    assert ran == [w.name for w in all_workloads()]
    for w in results["workloads"]:
        for row in w["rows"]:
            assert row["label"] in table


def reported_by(row: dict, kind: str) -> bool:
    return row["kinds"] is None or kind in row["kinds"]


def test_nats_server_figures_in_every_row(bench_results):
    """The harness itself works: the reference server gives a figure for every row it reports."""
    results, _ = bench_results
    missing = [(w["name"], r["label"], r["errors"].get("nats-server")) for w in results["workloads"]
               for r in w["rows"] if reported_by(r, "nats-server") and r["values"].get("nats-server") is None]
    assert not missing, _lines(missing)


def test_skiff_figures_and_ratio_in_every_row(request, bench_results):
    if not skiff_selected(request.config):
        pytest.skip("--target=nats-server: Skiff not run")
    results, _ = bench_results
    missing = [(w["name"], r["label"], r["errors"].get("skiff")) for w in results["workloads"] for r in w["rows"]
               if r["values"].get("skiff") is None or (r["ratio"] is None and reported_by(r, "nats-server"))]
    assert not missing, _lines(missing)


def test_start_up_floor_beside_skiff_only(request, bench_results):
    """startup.empty times a bare asyncio server (bench/floor_server.py) beside Skiff's starts: a figure on the
    Skiff side, "-" (no figure, no error, no ratio) on nats-server's."""
    if not skiff_selected(request.config):
        pytest.skip("--target=nats-server: Skiff not run")
    results, table = bench_results
    (w,) = [w for w in results["workloads"] if w["name"] == "startup.empty"]
    floor = [r for r in w["rows"] if r["label"].startswith("floor:")]
    assert [r["key"] for r in floor] == ["floor_s", "floor_cpu_ms"]
    for r in floor:
        assert r["kinds"] == ["skiff"] and r["values"]["skiff"] > 0, r
        assert r["values"]["nats-server"] is None and not r["errors"] and r["ratio"] is None, r
        line = next(ln for ln in table.splitlines() if ln.startswith(r["label"]))
        assert "error" not in line and " - " in line, line


def test_peak_rss_of_both_servers_reported(bench_results):
    results, _ = bench_results
    for w in results["workloads"]:
        for kind, per in w["servers"].items():
            if per["runs"]:
                assert w["servers"][kind]["peak_rss_kib"] > 0, (w["name"], kind)


def test_server_cpu_of_both_servers_reported(bench_results):
    """Each server's CPU time during the client's runs (median), beside the figures: a server that is faster by
    burning more CPU shows it."""
    from bench.workloads import all_workloads

    results, table = bench_results
    restarting = {w.name for w in all_workloads() if w.procedure is not None and w.fresh}
    busy = {kind: 0.0 for kind in ("skiff", "nats-server")}
    for w in results["workloads"]:
        for kind, per in w["servers"].items():
            cpu = per.get("cpu_s_median")
            if per["runs"] and w["name"] not in restarting:  # those may restart the server within a run: no figure
                assert cpu is not None and cpu >= 0, (w["name"], kind)
                busy[kind] += cpu
    assert all(v > 0 for v in busy.values()), busy
    assert "CPU/run Skiff" in table and "CPU/run nats-server" in table


def test_targets_printed_beside_ratios(bench_results):
    results, table = bench_results
    targets = {r["label"]: r["target"] for w in results["workloads"] for r in w["rows"] if r["target"]}
    assert targets["publish 128 B"] == ">= 0.25x"
    assert targets["JS async publish, sync always"] == ">= 5x"
    for label, target in targets.items():
        line = next(line for line in table.splitlines() if line.startswith(label))
        assert target in line


def _lines(missing: list[tuple]) -> str:
    return "rows without a figure:\n" + "\n".join(f"  {name}: {label}: error: {err}" for name, label, err in missing)


def test_quick_context_is_small():
    ctx = Context.make(True)
    assert ctx.duration <= 2 and ctx.runs == 1 and ctx.conns <= 1000 and ctx.restart_msgs <= 100_000


def test_cells_show_errors_pending_and_targets():
    """The report's reading of a results dict (no servers): error and pending cells, ratio direction, targets."""
    from bench import report

    def row(label, unit, values, errors=None, target=None, ratio=None, met=None, pending=None):
        return {"label": label, "unit": unit, "values": values, "errors": errors or {}, "target": target,
                "ratio": ratio, "met": met, "notes": {}, "pending": pending or {}}

    results = {"meta": {}, "workloads": [
        {"name": "a", "group": "core", "servers": {"skiff": {"peak_rss_kib": 40960, "cpu_s_median": 2.46},
                                                   "nats-server": {}},
         "rows": [row("lat p50", "us", {"skiff": 120.0, "nats-server": 100.0}, target="<= 1.5x", ratio=1.2,
                      met=True),
                  row("pub", "msg/s", {"skiff": None, "nats-server": 2.5e6}, errors={"skiff": "timeout after 9s"},
                      target=">= 0.25x")]},
        {"name": "b", "group": "jetstream", "servers": {"skiff": {}, "nats-server": {}},
         "rows": [row("js", "msg/s", {"nats-server": 1000.0}, pending={"skiff": True})]},
    ]}
    text = report.text_table(results)
    lines = {line.split("  ")[0]: line for line in text.splitlines()}
    assert "1.20x" in lines["lat p50"] and "<= 1.5x" in lines["lat p50"] and "yes" in lines["lat p50"]
    assert "40 MiB" in lines["lat p50"] and "2.5 s" in lines["lat p50"]
    assert "error: timeout after 9s" in lines["pub"] and "2.50M msg/s" in lines["pub"]
    assert "pending" in lines["js"] and "1.0k msg/s" in lines["js"]
    md = report.markdown_table(results)
    assert "| pub | error: timeout after 9s | 2.50M msg/s |" in md


def test_a_second_run_is_shown_beside_the_first():
    """--beside: each row's ratio in a second run follows the ratio of the first, by workload and row label; a row
    the second run does not have shows "-"; the machine lines name the second run."""
    from bench import report

    def results(ratios: dict, finished: str) -> dict:
        return {"meta": {"finished": finished, "versions": {"skiff": "abc1234"}, "load": {"start": 1.2, "end": 1.5}},
                "workloads": [{"name": name, "group": "core", "servers": {"skiff": {}, "nats-server": {}},
                               "rows": [{"label": f"{name} row", "unit": "msg/s", "ratio": r, "met": None,
                                         "values": {"skiff": 1.0, "nats-server": 2.0}, "notes": {}}]}
                              for name, r in ratios.items()]}

    first = results({"a": 0.5, "b": 0.7}, "2026-11-27 11:30")
    second = results({"a": 0.55}, "2026-11-27 11:50")
    ((_, rows),) = report.table_rows(first, None, beside=second)
    assert [r[:5] for r in rows] == [("a row", "1 msg/s", "2 msg/s", "0.50x", "0.55x"),
                                     ("b row", "1 msg/s", "2 msg/s", "0.70x", report.fmt_ratio(None))]
    assert "ratio, 2nd run" in report.text_table(first, beside=second).splitlines()[0]
    assert "| a row | 1 msg/s | 2 msg/s | 0.50x | 0.55x |" in report.markdown_table(first, beside=second)
    assert "another whole run on 2026-11-27 11:50" in report.machine_markdown(first["meta"], second)
    assert "2nd run" not in report.text_table(first)  # without --beside the table is as before
