"""File damage: one kind of damage at a time to a copy of a cleanly stopped store, then restart and count.

Each server fills its own store once (stream ``D``: 5,000 x 4 KiB messages, several blocks on both servers,
and durable ``C`` that acked the first 100), stops cleanly, and the store is copied as a template.  For every
kind of damage a fresh copy is damaged and a server started on it.  Counted: did it start, is the stream
there, how many messages read back exactly (DIRECT.GET, payload compared), how many came back *wrong* (served
but different: silent corruption), whether the consumer survived with its ack floor, and which files the server
deleted that the damage did not touch ("deleted unasked").  The file names are each server's own
(``msgs/N.blk`` on both; the index is ``msgs/index.db`` in nats-server and ``msgs/N.idx`` in Skiff).
"""
from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
from pathlib import Path

from bench.lab.common import Budget, Result, lab_server, tracebacks
from bench.lab.jsutil import create_stream, read_all, stream_state
from bench.lab.wire import Conn, js_api, publish_acked

MSGS = 5000
SIZE = 4096
ACKED = 100


def payload(i: int) -> bytes:
    head = b"%011d:" % i
    return head + bytes([65 + i % 26]) * (SIZE - len(head))


def _blocks(sd: Path) -> list[Path]:
    return sorted((sd / "msgs").glob("*.blk"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0)


def _garble(p: Path, rng: random.Random) -> None:
    n = max(64, p.stat().st_size if p.exists() else 64)
    p.write_bytes(bytes(rng.getrandbits(8) for _ in range(min(n, 4096))))


def _flip(p: Path, at: int) -> None:
    with open(p, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x5A]))


def _middle(sd: Path) -> Path | None:
    b = _blocks(sd)
    return b[len(b) // 2] if len(b) >= 3 else None


def _index_files(sd: Path) -> list[Path]:
    return list((sd / "msgs").glob("*.idx")) + list((sd / "msgs").glob("index.db"))


def _do(kind_of_damage: str, sd: Path, rng: random.Random) -> list[Path] | None:
    """Apply one damage to stream directory ``sd``; the files touched, None when it does not apply."""
    blocks = _blocks(sd)
    last = blocks[-1] if blocks else None
    obs = sd / "obs" / "C"
    if kind_of_damage == "truncated tail":
        os.truncate(last, max(0, last.stat().st_size - 100))
        return [last]
    if kind_of_damage == "garbage tail":
        with open(last, "ab") as f:
            f.write(bytes(rng.getrandbits(8) for _ in range(300)))
        return [last]
    if kind_of_damage == "zero-length newest block":
        os.truncate(last, 0)
        return [last]
    if kind_of_damage == "missing middle block":
        mid = _middle(sd)
        if mid is None:
            return None
        mid.unlink()
        return [mid]
    if kind_of_damage == "bit flip, middle block":
        mid = _middle(sd) or blocks[0]
        _flip(mid, mid.stat().st_size // 2)
        return [mid]
    if kind_of_damage == "truncated middle block":
        mid = _middle(sd)
        if mid is None:
            return None
        os.truncate(mid, mid.stat().st_size // 2)
        return [mid]
    if kind_of_damage == "bit flip, first block":
        _flip(blocks[0], blocks[0].stat().st_size // 3)
        return [blocks[0]]
    if kind_of_damage == "corrupt index":
        idx = _index_files(sd)
        for p in idx:
            _garble(p, rng)
        return idx or None
    if kind_of_damage == "missing index":
        idx = _index_files(sd)
        for p in idx:
            p.unlink()
        return idx or None
    if kind_of_damage == "corrupt meta.inf":
        _garble(sd / "meta.inf", rng)
        return [sd / "meta.inf"]
    if kind_of_damage == "missing meta.inf":
        (sd / "meta.inf").unlink()
        return [sd / "meta.inf"]
    if kind_of_damage == "corrupt consumer state":
        p = obs / "o.dat"
        if not p.exists():
            return None
        _garble(p, rng)
        return [p]
    if kind_of_damage == "missing consumer state":
        p = obs / "o.dat"
        if not p.exists():
            return None
        p.unlink()
        return [p]
    if kind_of_damage == "corrupt consumer meta.inf":
        p = obs / "meta.inf"
        if not p.exists():
            return None
        _garble(p, rng)
        return [p]
    if kind_of_damage == "stray empty block":
        p = sd / "msgs" / f"{int(last.stem) + 7}.blk"
        p.touch()
        return [p]
    raise ValueError(kind_of_damage)


KINDS = ["truncated tail", "garbage tail", "zero-length newest block", "missing middle block",
         "bit flip, middle block", "truncated middle block", "bit flip, first block", "corrupt index",
         "missing index", "corrupt meta.inf", "missing meta.inf", "corrupt consumer state",
         "missing consumer state", "corrupt consumer meta.inf", "stray empty block"]
QUICK_KINDS = ["truncated tail", "bit flip, middle block", "corrupt meta.inf"]


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _stream_dir(store: Path) -> Path:
    return store / "jetstream" / "$G" / "streams" / "D"


async def _template(kind: str, msgs: int) -> str:
    srv = lab_server(kind)
    try:
        srv.start()
        c = await Conn.connect(srv.port, timeout=10)
        await create_stream(c, "D", ["d.>"])
        await publish_acked(c, "d.x", (payload(i) for i in range(msgs)), window=128, timeout=60)
        await js_api(c, "CONSUMER.DURABLE.CREATE.D.C", {"stream_name": "D", "config": {
            "durable_name": "C", "ack_policy": "explicit", "deliver_policy": "all"}})
        inbox = c.sub("lab.dmg")
        c.pub("$JS.API.CONSUMER.MSG.NEXT.D.C", b'{"batch":%d}' % ACKED, "lab.dmg")
        for _ in range(ACKED):
            m = await asyncio.wait_for(inbox.queue.get(), 10)
            await c.request(m.reply, b"+ACK", timeout=5)
        await c.close()
        srv.stop()
        tmpl = tempfile.mkdtemp(prefix=f"lab-damage-{kind}-")
        shutil.copytree(srv.store_dir, os.path.join(tmpl, "store"))
        return tmpl
    finally:
        srv.cleanup()


async def run_kind(kind: str, quick: bool, budget: Budget, res: Result, smoke: bool = False) -> None:
    rng = random.Random(7)
    msgs = 300 if smoke else 1200 if quick else MSGS
    tmpl = await _template(kind, msgs)
    details = res.details.setdefault("damage", {}).setdefault(kind, {})
    try:
        for dmg in (QUICK_KINDS[:1] if smoke else QUICK_KINDS if quick else KINDS):
            if budget.over():
                res.note(f"damage: time bound reached before '{dmg}' on {kind}")
                break
            work = tempfile.mkdtemp(prefix="lab-damage-run-")
            store = Path(work) / "store"
            shutil.copytree(os.path.join(tmpl, "store"), store)
            sd = _stream_dir(store)
            nblocks = len(_blocks(sd))
            touched = _do(dmg, sd, rng)
            if touched is None:
                res.row(f"damage: {dmg}", kind, "n/a")
                shutil.rmtree(work, ignore_errors=True)
                continue
            before = _files(store) - {str(p.relative_to(store)) for p in touched}
            srv = lab_server(kind, store_dir=str(store))
            cell, d = "did not start", {"blocks": nblocks}
            try:
                try:
                    srv.start(timeout=60)
                except RuntimeError as e:
                    d["start_error"] = str(e).splitlines()[0][:200]
                else:
                    c = await Conn.connect(srv.port, timeout=10)
                    st = await stream_state(c, "D")
                    if st is None or "error" in st:
                        intact = wrong = 0
                        d["stream"] = "missing"
                    else:
                        got, _ = await read_all(c, "D", 1, msgs)
                        intact = sum(1 for s, v in got.items() if v == payload(s - 1))
                        wrong = len(got) - intact
                    ci = await js_api(c, "CONSUMER.INFO.D.C") or {}
                    floor = ci.get("ack_floor", {}).get("stream_seq") if "error" not in ci else None
                    await c.close()
                    srv.stop()
                    gone = sorted(before - _files(store))
                    d.update(intact=intact, wrong=wrong, ack_floor=floor, deleted_unasked=gone[:10],
                             tracebacks=tracebacks(srv))
                    cell = f"{intact}/{msgs} ok"
                    if wrong:
                        cell += f", {wrong} WRONG"
                    cell += f", C@{floor}" if floor is not None else ", C gone"
                    data_gone = [g for g in gone if not g.endswith((".idx", "index.db"))]
                    if data_gone:
                        cell += f", {len(data_gone)} data files deleted"
                    elif gone:
                        cell += f", {len(gone)} index files dropped"
                res.row(f"damage: {dmg}", kind, cell)
                details[dmg] = d
            finally:
                srv.cleanup()
                shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(tmpl, ignore_errors=True)
