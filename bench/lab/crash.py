"""Crash lab: ``kill -9`` in the middle of publishing, acking, stream delete / purge / create; then file damage
(damage.py) and a full disk (diskfull.py).

Kill rounds run per server and per ``sync_interval`` (``always`` and the default 2 min) on one store that
survives every round (restart on the same port and directory):

* publish: async publishes (window 256, payload = its own index) to a fresh stream, SIGKILL at a random moment
  0.05-0.6 s in, restart, read the stream back by DIRECT.GET.  Lost = acknowledged but absent or different;
  duplicated = one payload at two sequences; sequence reuse = a publish after the restart gets a sequence at or
  below one acknowledged before the kill.
* ack: pull a prefilled stream (batch 50) and ack every message with a reply (``ack_sync``); SIGKILL at a random
  moment; after the restart pull everything that comes back within ack_wait + 2 s.  A confirmed ack lost = a
  message whose ack was confirmed and that is delivered again.
* ops: stream delete, purge or create sent and SIGKILL 0-30 ms later.  After the restart the stream must be
  all there or all gone (delete), hold all or none of its messages (purge), be absent or whole (create), and a
  bystander stream must be intact.
"""
from __future__ import annotations

import asyncio
import random
import time

from bench.lab import damage, diskfull
from bench.lab.common import Budget, Result, lab_server, tracebacks
from bench.lab.jsutil import ack_seqs, create_stream, fill, pull, read_all, stream_state
from bench.lab.wire import Conn, js_api, publish_acked


async def run(kinds: list[str], a, budget: Budget, res: Result) -> None:
    rng = random.Random(a.seed)
    rounds = a.kills or (1 if a.smoke else 2 if a.quick else 50)
    per_kind = budget.left() / len(kinds)
    for kind in kinds:
        kb = Budget(per_kind)
        syncs = (True,) if a.smoke or a.sync == "always" else (False,) if a.sync == "default" else (True, False)
        for sync_always in syncs:
            label = "always" if sync_always else "default"
            # each of publish and ack gets this share of the server's time; ops, damage, disk full the rest
            share = 0.42 if len(syncs) == 1 else 0.3 if sync_always else 0.12
            await kill_publish(kind, sync_always, rounds, Budget(kb.seconds * share), rng, res, label)
            await kill_ack(kind, sync_always, rounds, Budget(kb.seconds * share), rng, res, label)
        await kill_ops(kind, 1 if a.smoke else max(3, rounds), Budget(kb.seconds * 0.1), rng, res, a.quick)
        await damage.run_kind(kind, a.quick, Budget(max(10.0, kb.left() * 0.6)), res, smoke=a.smoke)
        await diskfull.run_kind(kind, a.quick, Budget(max(2.0, kb.left()) if a.smoke else max(8.0, kb.left())), res,
                                smoke=a.smoke)


async def _connect(srv) -> Conn:
    return await Conn.connect(srv.port, name="crash-lab", timeout=10)


async def _after_kill(srv, c: Conn, tot: dict) -> Conn | None:
    """Once the server was SIGKILLed: count the kill, restart it on its port and store, and connect again (None,
    counted as no_restart, when it does not come back)."""
    srv.proc.wait()
    await c.close()
    tot["kills"] += 1
    try:
        srv.start(timeout=60)
    except RuntimeError:
        tot["no_restart"] += 1
        return None
    return await _connect(srv)


async def kill_publish(kind: str, sync_always: bool, rounds: int, budget: Budget, rng: random.Random,
                       res: Result, label: str) -> None:
    srv = lab_server(kind, sync_always=sync_always)
    tot = {"kills": 0, "acked": 0, "lost": 0, "dup": 0, "reused": 0, "unacked_kept": 0, "no_restart": 0}
    try:
        srv.start()
        for i in range(rounds):
            if i and budget.over():
                break
            c = await _connect(srv)
            name = f"P{i}"
            await create_stream(c, name, [f"p{i}.>"])
            acks: dict[int, int] = {}  # payload index -> seq

            def on_ack(idx: int, doc: dict) -> None:
                if "error" not in doc and doc.get("seq"):  # error acks carry "seq": 0
                    acks[idx] = doc["seq"]

            def forever():
                n = 0
                while True:
                    yield b"%011d:" % n + b"p" * 20
                    n += 1

            asyncio.get_running_loop().call_later(rng.uniform(0.05, 0.6), srv.proc.kill)
            await publish_acked(c, f"p{i}.x", forever(), window=256, timeout=2, on_ack=on_ack)
            c = await _after_kill(srv, c, tot)
            if c is None:
                break
            st = await stream_state(c, name) or {}
            last = st.get("last_seq", 0)
            stored, _ = await read_all(c, name, 1, max(last, max(acks.values(), default=0)))
            by_payload: dict[bytes, int] = {}
            for seq, data in stored.items():
                if data in by_payload:
                    tot["dup"] += 1
                by_payload[data] = seq
            for idx, seq in acks.items():
                if stored.get(seq) != b"%011d:" % idx + b"p" * 20:
                    tot["lost"] += 1
            tot["acked"] += len(acks)
            tot["unacked_kept"] += max(0, len(stored) - len(acks))
            after = await js_api(c, "STREAM.INFO." + name) or {}
            m = await c.request(f"p{i}.after", b"after", timeout=5)
            if m is not None:
                try:
                    seq = m.json().get("seq", 0)
                except ValueError:
                    seq = 0
                if seq and seq <= max(list(acks.values()) + [last]):
                    tot["reused"] += 1
            if "error" not in after:
                await js_api(c, "STREAM.DELETE." + name)
            await c.close()
        tot["tracebacks"] = tracebacks(srv)
    finally:
        srv.cleanup()
    for k, v in tot.items():
        res.row(f"publish/{label}: {k}", kind, v)


async def kill_ack(kind: str, sync_always: bool, rounds: int, budget: Budget, rng: random.Random,
                   res: Result, label: str) -> None:
    srv = lab_server(kind, sync_always=sync_always)
    tot = {"kills": 0, "confirmed_acks": 0, "confirmed_acks_lost": 0, "no_restart": 0}
    prefill = 3000
    try:
        srv.start()
        for i in range(rounds):
            if i and budget.over():
                break
            c = await _connect(srv)
            name = f"A{i}"
            await create_stream(c, name, [f"a{i}.>"])
            await fill(c, f"a{i}.x", prefill)
            await js_api(c, f"CONSUMER.DURABLE.CREATE.{name}.C", {"stream_name": name, "config": {
                "durable_name": "C", "ack_policy": "explicit", "ack_wait": 1_000_000_000,
                "max_ack_pending": 10000, "max_deliver": -1}})
            inbox = c.sub("lab.pull." + name)
            confirmed: set[int] = set()
            loop = asyncio.get_running_loop()
            loop.call_later(rng.uniform(0.1, 0.8), srv.proc.kill)

            async def consume() -> None:
                while not c.closed.is_set():
                    msgs = await pull(c, name, "C", 50, 1.0, inbox)
                    if not msgs:
                        return
                    for m in msgs:
                        r = await c.request(m.reply, b"+ACK", timeout=2)
                        if r is None:
                            return
                        confirmed.add(ack_seqs(m.reply)[0])

            await consume()
            c = await _after_kill(srv, c, tot)
            if c is None:
                break
            inbox = c.sub("lab.pull." + name)
            again: set[int] = set()
            t_end = time.monotonic() + 2.2  # ack_wait (1 s) + margin: pending ones come back
            while time.monotonic() < t_end:
                msgs = await pull(c, name, "C", 1000, 0.5, inbox)
                for m in msgs:
                    again.add(ack_seqs(m.reply)[0])
                    c.pub(m.reply, b"+ACK")
            tot["confirmed_acks"] += len(confirmed)
            tot["confirmed_acks_lost"] += len(confirmed & again)
            await js_api(c, "STREAM.DELETE." + name)
            await c.close()
        tot["tracebacks"] = tracebacks(srv)
    finally:
        srv.cleanup()
    for k, v in tot.items():
        res.row(f"ack/{label}: {k}", kind, v)


async def kill_ops(kind: str, rounds: int, budget: Budget, rng: random.Random, res: Result, quick: bool) -> None:
    """SIGKILL just after a delete / purge / create request; the stream must come back whole or not at all."""
    n = 500 if quick else 20000
    srv = lab_server(kind)
    tot = {"kills": 0, "partial": 0, "bystander_damaged": 0, "seq_reused_after_purge": 0, "no_restart": 0,
           "delete_done": 0, "purge_done": 0, "create_done": 0}
    try:
        srv.start()
        c = await _connect(srv)
        await create_stream(c, "KEEP", ["keep.>"])
        await fill(c, "keep.x", 1000)
        await c.close()
        for i in range(rounds):
            if i and budget.over():
                break
            op = ("delete", "purge", "create")[i % 3]
            name = f"O{i}"
            c = await _connect(srv)
            if op != "create":
                await create_stream(c, name, [f"o{i}.>"])
                await fill(c, f"o{i}.x", n)
            api = {"delete": f"STREAM.DELETE.{name}", "purge": f"STREAM.PURGE.{name}",
                   "create": f"STREAM.CREATE.{name}"}[op]
            body = b"" if op != "create" else (
                b'{"name":"%s","subjects":["o%d.>"],"storage":"file","max_msgs":12345}' % (name.encode(), i))
            c.pub("$JS.API." + api, body, "lab.ignore")
            await c.drain()
            await asyncio.sleep(rng.uniform(0, 0.03))
            srv.proc.kill()
            c = await _after_kill(srv, c, tot)
            if c is None:
                break
            st = await stream_state(c, name)
            missing = st is None or "error" in st
            if op == "delete":
                ok = missing or st.get("messages") == n
                tot["delete_done"] += missing
            elif op == "purge":
                ok = not missing and st.get("messages") in (0, n)
                tot["purge_done"] += (not missing and st.get("messages") == 0)
                if not missing:
                    m = await c.request(f"o{i}.after", b"x", timeout=5)
                    seq = m.json().get("seq", 0) if m is not None and m.data.startswith(b"{") else 0
                    if seq and seq <= n:
                        tot["seq_reused_after_purge"] += 1
            else:
                info = await js_api(c, f"STREAM.INFO.{name}") or {}
                ok = missing or info.get("config", {}).get("max_msgs") == 12345
                tot["create_done"] += not missing
            tot["partial"] += not ok
            keep = await stream_state(c, "KEEP") or {}
            if keep.get("messages") != 1000:
                tot["bystander_damaged"] += 1
            if not missing:
                await js_api(c, f"STREAM.DELETE.{name}")
            await c.close()
        tot["tracebacks"] = tracebacks(srv)
    finally:
        srv.cleanup()
    for k, v in tot.items():
        res.row(f"ops: {k}", kind, v)
