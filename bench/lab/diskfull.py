"""A full disk: the store on a small tmpfs (mounted here as root; without root the campaign says so and skips).

Publish 4 KiB messages (async, window 64) until 300 in a row are refused or 20 s pass; then: is the server
alive and answering, what error did the refused publishes get, do all acknowledged messages read back after a
``kill -9`` and restart, and after deleting the stream does a new stream accept publishes again.
``max_file_store`` is set far above the tmpfs size so the disk fills before JetStream's own limit refuses.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
import time

from bench.lab.common import Budget, Result, lab_server, tracebacks
from bench.lab.jsutil import create_stream, read_all, stream_state
from bench.lab.wire import Conn, js_api, publish_acked

TMPFS_MB = 24


def mount_tmpfs(mb: int) -> tuple[str | None, str]:
    d = tempfile.mkdtemp(prefix="lab-diskfull-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", d], capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(d)
        return None, (r.stderr or r.stdout).strip()
    return d, ""


def umount(d: str) -> None:
    subprocess.run(["umount", "-l", d], capture_output=True)
    try:
        os.rmdir(d)
    except OSError:
        pass


async def run_kind(kind: str, quick: bool, budget: Budget, res: Result, smoke: bool = False) -> None:
    mnt, why = mount_tmpfs(4 if smoke else 8 if quick else TMPFS_MB)
    if mnt is None:
        res.row("disk full", kind, "skipped")
        res.note(f"disk full: cannot mount a tmpfs here ({why}); run as root or use the store's write hook")
        return
    store = os.path.join(mnt, "store")
    srv = lab_server(kind, store_dir=store, js_extra="  max_file_store: 10G\n")
    acks: dict[int, int] = {}
    errs: dict[str, int] = {}
    try:
        srv.start()
        c = await Conn.connect(srv.port, timeout=10)
        await create_stream(c, "F", ["f.>"])
        streak = 0
        stop = asyncio.Event()

        def on_ack(i: int, doc: dict) -> None:
            nonlocal streak
            if "error" not in doc and doc.get("seq"):  # error acks carry "seq": 0
                acks[i] = doc["seq"]
                streak = 0
            else:
                desc = str(doc.get("error", {}).get("description", doc))[:80]
                errs[desc] = errs.get(desc, 0) + 1
                streak += 1
                if streak >= 300:
                    stop.set()

        t_end = time.monotonic() + min(20.0, max(1.5, budget.left() / 2))

        sent = 0

        def gen():
            nonlocal sent
            while not stop.is_set() and time.monotonic() < t_end:
                yield b"%011d:" % sent + b"f" * 4084
                sent += 1

        # nats-server stops answering publishes once its disk is full: wait at most this long for an ack
        await publish_acked(c, "f.x", gen(), window=64, timeout=2 if smoke else 10, on_ack=on_ack)
        alive = srv.proc.poll() is None and await c.flush(5)
        res.row("disk full: acked before full", kind, len(acks))
        res.row("disk full: refused publishes", kind, sum(errs.values()))
        res.row("disk full: publishes never answered", kind, max(0, sent - len(acks) - sum(errs.values())))
        info = await js_api(c, "INFO", timeout=5)
        res.row("disk full: JetStream API answering", kind, info is not None and "error" not in info)
        res.row("disk full: error text", kind, max(errs, key=errs.get)[:40] if errs else "none")
        res.row("disk full: server answering", kind, bool(alive))
        await c.close()
        srv.kill()
        try:
            srv.start(timeout=60)
            restarted = True
        except RuntimeError:
            restarted = False
        res.row("disk full: restarts on full disk", kind, restarted)
        if restarted:
            c = await Conn.connect(srv.port, timeout=10)
            st = await stream_state(c, "F") or {}
            last = st.get("last_seq", 0) if "error" not in st else 0
            got, _ = await read_all(c, "F", 1, max(list(acks.values()) + [last]))
            lost = sum(1 for i, s in acks.items() if got.get(s) != b"%011d:" % i + b"f" * 4084)
            res.row("disk full: acked lost after kill -9", kind, lost)
            await js_api(c, "STREAM.DELETE.F")
            await create_stream(c, "G", ["g.>"])
            m = await c.request("g.x", b"after", timeout=5)
            ok = m is not None and b'"seq"' in m.data
            res.row("disk full: publishes again after delete", kind, ok)
            await c.close()
        res.row("disk full: tracebacks", kind, tracebacks(srv))
    finally:
        srv.cleanup()
        umount(mnt)
