"""The reliability campaigns' smoke run: ``python -m bench.lab all --smoke`` must run every campaign against the
selected servers and print a summary table for each, so the tools in bench/lab never rot.

It asserts that each campaign ran and produced figures, never the figures themselves: the targets (0 lost acks
under ``always``, no stall over 50 ms, restart within 2x ...) are measured by the full runs and written in
docs/reliability.md, where unmet ones are said plainly.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.lab.__main__ import CAMPAIGNS
from bench.servers import LABELS

ROOT = Path(__file__).resolve().parents[2]


def servers(config) -> list[str]:
    t = config.getoption("--target")
    return ["skiff", "nats-server"] if t == "both" else [t]


@pytest.fixture(scope="module")
def lab_run(request, tmp_path_factory) -> tuple[dict, str, list[str]]:
    kinds = servers(request.config)
    out = tmp_path_factory.mktemp("lab") / "lab.json"
    try:
        proc = subprocess.run([sys.executable, "-m", "bench.lab", "all", "--smoke", "--servers", ",".join(kinds),
                               "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=150)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the lab smoke run overstayed 150 s:\n{(e.stderr or b'')[-3000:]!r}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout, kinds


def test_every_campaign_ran_and_printed_a_table(lab_run):
    doc, stdout, kinds = lab_run
    assert [c["campaign"] for c in doc["campaigns"]] == list(CAMPAIGNS)
    for name in CAMPAIGNS:
        assert f"== {name} ==" in stdout
    header = next(line for line in stdout.splitlines() if line.startswith("metric"))
    for kind in kinds:
        assert LABELS[kind] in header


def test_every_campaign_has_figures_from_every_server(lab_run):
    doc, _, kinds = lab_run
    for camp in doc["campaigns"]:
        assert camp["rows"], camp["campaign"]
        for kind in kinds:
            have = [r for r in camp["rows"] if r["values"].get(kind) is not None]
            assert have, (camp["campaign"], kind)


def test_crash_lab_killed_and_restarted(lab_run):
    """The crash lab really killed the servers and read them back (a lab that never kills proves nothing)."""
    doc, _, kinds = lab_run
    rows = {r["metric"]: r["values"] for r in doc["campaigns"][0]["rows"]}
    for kind in kinds:
        assert rows["publish/always: kills"][kind] >= 1
        assert rows["ack/always: kills"][kind] >= 1
        assert rows["ops: kills"][kind] >= 1
        assert rows["publish/always: no_restart"][kind] == 0


def test_meta_names_the_commit(lab_run):
    doc, _, kinds = lab_run
    assert doc["meta"]["commit"] and doc["meta"]["servers"] == kinds
