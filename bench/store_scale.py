"""File store at scale: write rate, clean restart, restart after kill -9, index memory per message.

    python bench/store_scale.py              1,000,000 messages of 128 bytes in one stream
    python bench/store_scale.py --quick      50,000 messages
    python bench/store_scale.py --json out.json --subjects 1000 --dir /tmp/x

Every phase runs in its own Python process so that timings and memory are those of a fresh server start:

    write        a writer stores N messages (flush every 256, as the server flushes once per loop iteration),
                 then stops cleanly.
    clean        open the cleanly stopped store (block summaries present): time, RSS growth, index bytes.
    kill9        a writer stores N messages into a fresh store and is killed with SIGKILL after its last
                 flush (no clean stop: the newest block has no summary); then the restart is timed.
    noindex      the kill -9 store with every block summary deleted: a full rebuild from the block files.
    replay       sequential load_next_msg over the stream after a restart (what a new consumer does).

Targets (issue 3): clean restart < 2 s, restart after kill -9 < 10 s, index well under 100 bytes/message.
The storage layer only: no server, no network.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FLUSH_EVERY = 256
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


# ------------------------------------------------------------------------------------------------ phases (child)
def phase_write(d: str, n: int, size: int, subjects: int, clean: bool) -> dict:
    from skiff.storage import FileStreamStore, StoreConfig

    s = FileStreamStore(d, StoreConfig())
    names = [f"bench.{i}" for i in range(subjects)]
    data = b"x" * size
    t0 = time.perf_counter()
    for i in range(n):
        s.store_msg(names[i % subjects], b"", data)
        if i % FLUSH_EVERY == FLUSH_EVERY - 1:
            s.flush()
    s.flush()
    dt = time.perf_counter() - t0
    out = {"msgs": n, "seconds": dt, "msgs_per_s": n / dt, "us_per_msg": dt / n * 1e6}
    if clean:
        t1 = time.perf_counter()
        s.stop()
        out["stop_seconds"] = time.perf_counter() - t1
        return out
    # Tell the parent everything is flushed, then wait to be killed.
    print(json.dumps(out), flush=True)
    time.sleep(3600)
    return out


def phase_open(d: str, n: int, replay: int) -> dict:
    import gc

    from skiff.storage import FileStreamStore, StoreConfig

    gc.collect()
    before = rss()
    t0 = time.perf_counter()
    s = FileStreamStore(d, StoreConfig())
    dt = time.perf_counter() - t0
    gc.collect()
    after = rss()
    st = s.state()
    assert st.messages == n, (st.messages, n)
    out = {
        "seconds": dt,
        "rss_growth_bytes": after - before,
        "rss_bytes_per_msg": (after - before) / n,
        "index_bytes_per_msg": s.index_bytes() / n,
        "subjects": st.num_subjects,
        "lost": st.lost.msgs if st.lost else None,
    }
    if replay:
        t1 = time.perf_counter()
        seq, got = 0, 0
        while got < replay:
            m, seq = s.load_next_msg("", seq + 1)
            if m is None:
                break
            got += 1
        rt = time.perf_counter() - t1
        out["replay_msgs"] = got
        out["replay_msgs_per_s"] = got / rt if rt else 0.0
        t2 = time.perf_counter()
        for q in range(1, n + 1, max(1, n // 20000)):
            s.num_pending(q, "bench.7")
        out["num_pending_literal_us"] = (time.perf_counter() - t2) / len(range(1, n + 1, max(1, n // 20000))) * 1e6
    s.stop()
    return out


# ------------------------------------------------------------------------------------------------ driver (parent)
def child(*args: str, timeout: float = 1800) -> dict:
    p = subprocess.run([sys.executable, __file__, "--phase", *args], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"phase {args[0]} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def kill9_writer(d: str, n: int, size: int, subjects: int) -> dict:
    p = subprocess.Popen([sys.executable, __file__, "--phase", "write", d, str(n), str(size), str(subjects), "dirty"],
                         stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert p.stdout is not None
    line = p.stdout.readline()
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    return json.loads(line)


def du(d: str) -> int:
    return sum(f.stat().st_size for f in Path(d).rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="50,000 messages")
    ap.add_argument("--msgs", type=int)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--subjects", type=int, default=1000)
    ap.add_argument("--dir", help="where to put the stores (default: a temp dir, removed afterwards)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.phase:
        name, *rest = a.phase
        if name == "write":
            d, n, size, subjects, mode = rest
            res = phase_write(d, int(n), int(size), int(subjects), mode == "clean")
        else:
            d, n, replay = rest
            res = phase_open(d, int(n), int(replay))
        print(json.dumps(res), flush=True)
        return 0

    n = a.msgs or (50_000 if a.quick else 1_000_000)
    base = a.dir or tempfile.mkdtemp(prefix="skiff-store-scale-")
    os.makedirs(base, exist_ok=True)
    clean_dir, dirty_dir = os.path.join(base, "clean"), os.path.join(base, "kill9")
    for d in (clean_dir, dirty_dir):
        shutil.rmtree(d, ignore_errors=True)
    results: dict = {"msgs": n, "size": a.size, "subjects": a.subjects, "python": sys.version.split()[0]}
    try:
        print(f"writing {n:,} x {a.size} B ...", file=sys.stderr)
        results["write"] = child("write", clean_dir, str(n), str(a.size), str(a.subjects), "clean")
        results["disk_bytes"] = du(clean_dir)
        print("clean restart ...", file=sys.stderr)
        results["clean_restart"] = child("open", clean_dir, str(n), str(min(n, 200_000)))
        print("kill -9 writer ...", file=sys.stderr)
        results["kill9_write"] = kill9_writer(dirty_dir, n, a.size, a.subjects)
        print("restart after kill -9 ...", file=sys.stderr)
        results["kill9_restart"] = child("open", dirty_dir, str(n), "0")
        for p in Path(dirty_dir, "msgs").glob("*.idx"):
            p.unlink()
        print("restart without any index ...", file=sys.stderr)
        results["noindex_restart"] = child("open", dirty_dir, str(n), "0")
    finally:
        if not a.dir:
            shutil.rmtree(base, ignore_errors=True)

    w, c, k, z = results["write"], results["clean_restart"], results["kill9_restart"], results["noindex_restart"]
    rows = [
        ("write rate", f"{w['msgs_per_s']:,.0f} msg/s ({w['us_per_msg']:.2f} us/msg)", ""),
        ("clean stop", f"{w['stop_seconds']:.2f} s", ""),
        ("disk", f"{results['disk_bytes'] / n:.0f} B/msg", ""),
        ("clean restart", f"{c['seconds']:.2f} s", "< 2 s"),
        ("restart after kill -9", f"{k['seconds']:.2f} s", "< 10 s"),
        ("restart, no index at all", f"{z['seconds']:.2f} s", "< 10 s"),
        ("index memory", f"{c['index_bytes_per_msg']:.1f} B/msg", "< 100 B/msg"),
        ("RSS growth at open", f"{c['rss_bytes_per_msg']:.1f} B/msg", "< 100 B/msg"),
        ("replay (load_next_msg)", f"{c['replay_msgs_per_s']:,.0f} msg/s", ""),
        ("num_pending literal", f"{c['num_pending_literal_us']:.1f} us", ""),
    ]
    results["targets_met"] = {
        "clean_restart_lt_2s": c["seconds"] < 2,
        "kill9_restart_lt_10s": k["seconds"] < 10,
        "noindex_restart_lt_10s": z["seconds"] < 10,
        "index_lt_100B": c["index_bytes_per_msg"] < 100,
        "rss_lt_100B": c["rss_bytes_per_msg"] < 100,
    }
    title = f"Skiff file store, {n:,} msgs x {a.size} B, {a.subjects} subjects, Python {results['python']}"
    print(title)
    print("-" * len(title))
    for name, value, target in rows:
        print(f"{name:<26} {value:<34} {target}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
