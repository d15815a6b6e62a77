"""Turn benchmark results into the printed table, the JSON file and the Markdown table of docs/benchmarks.md.

Theory of operation: the orchestrator produces one plain dict (see bench/run.py) holding, per workload, each
server's runs and per row the two medians, the ratio (Skiff / nats-server) and whether the target is met.  This
module only formats that dict: a fixed-width text table for the terminal, Markdown for the docs, and the dict
itself as JSON.  A cell whose server failed reads ``error: <reason>``; a workload not run reads ``pending``.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

GROUP_TITLES = {
    "core": "Core NATS (C client)",
    "auth": "Core NATS with accounts and users (C client)",
    "jetstream": "JetStream, file storage (C client)",
    "scale": "Scale",
    "nats-py": "What a nats-py user sees (nats-py as the client)",
}
KINDS = ("skiff", "nats-server")
HEADER = ("workload", "Skiff", "nats-server", "ratio", "target", "met", "peak RSS Skiff", "peak RSS nats-server",
          "CPU/run Skiff", "CPU/run nats-server")


def fmt_value(value: float | None, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit in ("msg/s", "op/s", "req/s"):
        if value >= 1e6:
            return f"{value / 1e6:.2f}M {unit}"
        if value >= 1e4:
            return f"{value / 1e3:.0f}k {unit}"
        if value >= 1e3:
            return f"{value / 1e3:.1f}k {unit}"
        return f"{value:.0f} {unit}"
    if unit == "us":
        return f"{value / 1000:.2f} ms" if value >= 10_000 else f"{value:.0f} us"
    if unit == "s":
        return f"{value:.2f} s" if value < 100 else f"{value:.0f} s"
    if unit == "KiB":
        return f"{value:.1f} KiB"
    if unit in ("ms", "MiB"):
        return f"{value:.1f} {unit}"
    return f"{value:g} {unit}"


def fmt_rss(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:.0f} MiB"


def fmt_cpu(seconds: float | None) -> str:
    """The server's CPU time during one run of the client (median of the runs): 5.0 s in a 5 s run is a whole CPU."""
    return "-" if seconds is None else f"{seconds:.1f} s"


def fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    return f"{ratio:.2f}x" if ratio < 100 else f"{ratio:.0f}x"


def cell(row: dict, kind: str, width: int | None = None) -> str:
    if row.get("pending", {}).get(kind):
        return "pending"
    err = row.get("errors", {}).get(kind)
    if err:
        text = f"error: {err}"
        return text if width is None or len(text) <= width else text[: width - 3] + "..."
    text = fmt_value(row.get("values", {}).get(kind), row["unit"])
    note = row.get("notes", {}).get(kind)
    return f"{text} ({note})" if note else text


def table_rows(results: dict, err_width: int | None,
               beside: dict | None = None) -> list[tuple[str, list[tuple[str, ...]]]]:
    """(group title, rows of cells) for every group with workloads, in run order; with ``beside`` (a second run's
    results) each row's ratio in that run follows the ratio, to show the spread of the figures."""
    other = {(w["name"], r["label"]): r.get("ratio") for w in (beside or {}).get("workloads", []) for r in w["rows"]}
    sections: dict[str, list[tuple[str, ...]]] = {}
    for w in results["workloads"]:
        rows = sections.setdefault(w["group"], [])
        for i, row in enumerate(w["rows"]):
            target = row.get("target") or ""
            met = "" if row.get("met") is None else ("yes" if row["met"] else "NO")
            rss = [fmt_rss(w["servers"].get(k, {}).get("peak_rss_kib")) if i == 0 else "" for k in KINDS]
            rss += [fmt_cpu(w["servers"].get(k, {}).get("cpu_s_median")) if i == 0 else "" for k in KINDS]
            second = (fmt_ratio(other.get((w["name"], row["label"]))),) if beside is not None else ()
            rows.append((row["label"], cell(row, "skiff", err_width), cell(row, "nats-server", err_width),
                         fmt_ratio(row.get("ratio")), *second, target, met, *rss))
    return [(GROUP_TITLES.get(g, g), rows) for g, rows in sections.items()]


def header(beside: dict | None) -> tuple[str, ...]:
    return HEADER if beside is None else HEADER[:4] + ("ratio, 2nd run",) + HEADER[4:]


def text_table(results: dict, err_width: int = 48, beside: dict | None = None) -> str:
    sections = table_rows(results, err_width, beside)
    head = header(beside)
    all_rows = [head] + [r for _, rows in sections for r in rows]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(head))]
    right = {1, 2, 3, *range(len(head) - 4, len(head))} | ({4} if beside is not None else set())

    def line(r: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))

    out = [line(head), "  ".join("-" * w for w in widths)]
    for title, rows in sections:
        out.append(f"[{title}]")
        out += [line(r) for r in rows]
    return "\n".join(out)


def markdown_table(results: dict, beside: dict | None = None) -> str:
    out = []
    head = header(beside)
    aligns = ["---"] + ["---:"] * (4 if beside is not None else 3) + ["---", "---", "---:", "---:", "---:", "---:"]
    for title, rows in table_rows(results, 120, beside):
        out.append(f"**{title}**\n")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(aligns) + "|")
        for r in rows:
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
        out.append("")
    return "\n".join(out)


def machine_markdown(meta: dict, beside: dict | None = None) -> str:
    m = meta.get("machine", {})
    lines = [
        f"- Date: {meta.get('finished', meta.get('started', '?'))}",
        f"- Machine: {m.get('cpu', '?')}, {m.get('nproc', '?')} CPUs (nproc), {m.get('mem', '?')} RAM, "
        f"{m.get('kernel', '?')}",
        f"- Python {m.get('python', '?')}; nats-server {meta.get('versions', {}).get('nats-server', '?')}; "
        f"Skiff {meta.get('versions', {}).get('skiff', '?')}; NATS C client {m.get('libnats', '?')}",
        f"- Mode: {meta.get('mode', '?')}: {meta.get('runs', '?')} run(s) per server per workload, alternating, "
        f"{meta.get('duration', '?')} s per run; medians shown",
    ]
    if "load" in meta:
        lines.append(f"- Load average (1 min) when the run started / ended: {meta['load']['start']:.1f} / "
                     f"{meta['load']['end']:.1f} (anything above the benchmark's own ~2 is other work on the machine)")
    for m in meta.get("merged", []):
        lines.append(f"- Rerun on {m['finished']} and merged in: {', '.join(m['workloads'])}")
    if beside is not None:
        b = beside.get("meta", {})
        load = b.get("load")
        load_text = f", load average {load['start']:.1f} / {load['end']:.1f}" if load else ""
        lines.append(f"- \"ratio, 2nd run\": another whole run on {b.get('finished', '?')} (Skiff "
                     f"{b.get('versions', {}).get('skiff', '?')}{load_text}), beside this one to show the spread")
    return "\n".join(lines)


def write_json(results: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=_jsonable) + "\n")


def _jsonable(o):
    if isinstance(o, float) and math.isnan(o):
        return None
    return str(o)


def merge(base: dict, new: dict) -> dict:
    """`base` with the workloads of `new` in place of those of the same name (new ones appended)."""
    by_name = {w["name"]: w for w in new["workloads"]}
    workloads = [by_name.pop(w["name"], w) for w in base["workloads"]] + list(by_name.values())
    meta = dict(base["meta"])
    meta["merged"] = meta.get("merged", []) + [{"finished": new["meta"].get("finished"),
                                               "workloads": [w["name"] for w in new["workloads"]]}]
    return {"meta": meta, "workloads": workloads}


BEGIN, END = "<!-- bench:results:begin -->", "<!-- bench:results:end -->"


def update_docs(results: dict, doc: Path, beside: dict | None = None) -> bool:
    """Replace the block between the markers in docs/benchmarks.md with the machine and the tables."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        return False
    block = f"{BEGIN}\n{machine_markdown(results['meta'], beside)}\n\n{markdown_table(results, beside)}\n{END}"
    doc.write_text(re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S))
    return True
