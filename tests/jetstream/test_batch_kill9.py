"""kill -9 while atomic batches commit: after the restart every batch is there whole or not at all, and every
acknowledged batch is there (both servers).  And a commit cut short on disk is rolled back at recovery (Skiff)."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import textwrap

import nats
import pytest

from tests.jetstream.test_batch_atomic import bh
from tests.jetstream.kill9_support import close_dead, create_stream, direct_get_all

PUBLISHERS = 4
BATCH = 25
KILL_AFTER = 40  # acknowledged batches


async def _api(nc, suffix, body=b""):
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    return json.loads((await nc.request("$JS.API." + suffix, body, timeout=5)).data)


async def _storm(server, acked: dict[str, tuple[int, int]]) -> None:
    conns = [await nats.connect(server.url, allow_reconnect=False) for _ in range(PUBLISHERS)]
    stop = asyncio.Event()

    async def publisher(nc, pid: int) -> None:
        n = 0
        while not stop.is_set():
            bid = f"p{pid}-{n}"
            n += 1
            try:
                for i in range(1, BATCH):  # staged without replies, then the commit as a request
                    await nc.publish(f"k.{pid}", b"%s/%d" % (bid.encode(), i) + b"." * 200, headers=bh(bid, i))
                msg = await nc.request(f"k.{pid}", b"%s/%d" % (bid.encode(), BATCH), headers=bh(bid, BATCH, "1"),
                                       timeout=3)
            except Exception:
                return
            ack = json.loads(msg.data)
            if "error" not in ack:
                acked[bid] = (ack["seq"], ack["count"])

    async def killer() -> None:
        while len(acked) < KILL_AFTER:
            await asyncio.sleep(0.002)
        server.kill()
        stop.set()

    tasks = [asyncio.create_task(publisher(nc, p)) for p, nc in enumerate(conns)]
    await asyncio.wait_for(killer(), 60)
    await asyncio.gather(*tasks, return_exceptions=True)
    await close_dead(*conns)


async def _all_msgs(nc, name: str, last: int) -> list[dict]:
    return [{"seq": int(m.headers["Nats-Sequence"]), "id": m.headers.get("Nats-Batch-Id"),
             "bseq": int(m.headers.get("Nats-Batch-Sequence", 0)), "commit": m.headers.get("Nats-Batch-Commit")}
            for m in await direct_get_all(nc, name, last)]


async def test_kill9_during_batch_commits_leaves_whole_batches(server):
    await create_stream(server.url, {"name": "K", "subjects": ["k.>"], "allow_atomic": True, "allow_direct": True})

    acked: dict[str, tuple[int, int]] = {}
    await _storm(server, acked)
    assert len(acked) >= KILL_AFTER

    server.start()
    nc = await nats.connect(server.url)
    st = (await _api(nc, "STREAM.INFO.K"))["state"]
    msgs = await _all_msgs(nc, "K", st["last_seq"])
    assert len(msgs) == st["messages"]
    by_batch: dict[str, list[dict]] = {}
    for m in msgs:
        assert m["id"], m  # only batch messages were published
        by_batch.setdefault(m["id"], []).append(m)
    for bid, ms in by_batch.items():
        # Whole: sequences 1..BATCH, consecutive in the stream, the last one the commit.
        assert [m["bseq"] for m in ms] == list(range(1, BATCH + 1)), (bid, [m["bseq"] for m in ms])
        assert ms[-1]["seq"] - ms[0]["seq"] == BATCH - 1
        assert ms[-1]["commit"] == "1" and all(m["commit"] is None for m in ms[:-1])
    for bid, (seq, count) in acked.items():
        assert count == BATCH and bid in by_batch, bid
        assert by_batch[bid][-1]["seq"] == seq
    await nc.close()


@pytest.mark.skiff_only
async def test_a_commit_cut_short_on_disk_is_rolled_back(server, target):
    """What a kill -9 in the middle of a commit's write leaves (the batch's first messages on disk, not its commit
    message), made by appending to the stream's files while the server is down: the restart removes them."""
    from skiff.storage.filestore.store import FileStreamStore

    nc = await nats.connect(server.url)
    r = await _api(nc, "STREAM.CREATE.T", {"name": "T", "subjects": ["t.>"], "allow_atomic": True})
    assert "error" not in r, r
    for i in range(1, 3):
        assert (await nc.request("t.a", b"ok", headers=bh("whole", i), timeout=2)).data == b""
    ack = json.loads((await nc.request("t.a", b"ok", headers=bh("whole", 3, "1"), timeout=2)).data)
    assert ack["seq"] == 3
    assert json.loads((await nc.request("t.b", b"plain", timeout=2)).data)["seq"] == 4
    await nc.close()
    server.stop()

    sdir = os.path.join(server.store_dir, "jetstream", "$G", "streams", "T")
    fs = FileStreamStore(sdir)
    hdr = lambda i: ("NATS/1.0\r\nNats-Batch-Id: torn\r\nNats-Batch-Sequence: %d\r\n\r\n" % i).encode()  # noqa: E731
    for i in range(1, 4):
        fs.store_msg("t.a", hdr(i), b"torn")
    fs.flush()
    fs.stop()

    server.start()
    nc = await nats.connect(server.url)
    st = (await _api(nc, "STREAM.INFO.T"))["state"]
    assert st["messages"] == 4 and st["first_seq"] == 1, st
    last = await _api(nc, "STREAM.MSG.GET.T", {"last_by_subj": "t.a"})
    assert last["message"]["seq"] == 3 and base64.b64decode(last["message"]["data"]) == b"ok"
    assert "partially written atomic batch" in server.log()
    # The stream goes on: a new batch commits after the removed sequences.
    await nc.request("t.a", b"n", headers=bh("next", 1), timeout=2)
    ack = json.loads((await nc.request("t.a", b"n", headers=bh("next", 2, "1"), timeout=2)).data)
    assert ack["count"] == 2 and ack["seq"] == 9
    await nc.close()


# A Skiff process that dies (os._exit, no clean-up: what kill -9 leaves) in the middle of writing an atomic batch's
# commit: the file store's write is swapped for one that writes half of the flush and exits.
_TEARING_SERVER = textwrap.dedent("""
    import asyncio, json, os, sys
    import nats
    from skiff.server.core.server import Server

    async def main():
        srv = Server(jetstream=True, store_dir=sys.argv[1])
        await srv.start()
        nc = await nats.connect(srv.client_url)
        r = await nc.request("$JS.API.STREAM.CREATE.T", json.dumps(
            {"name": "T", "subjects": ["t.>"], "allow_atomic": True}).encode(), timeout=3)
        assert "error" not in json.loads(r.data), r.data
        for i in range(3):
            await nc.request("t.before", b"acked %d" % i, timeout=3)
        store = srv.jetstream.streams["T"].store

        def tearing_write(fd, data, off):
            if b"Nats-Batch-Commit" in bytes(data):
                os.pwrite(fd, bytes(data[:len(data) // 2]), off)
                os._exit(9)
            return os.pwrite(fd, data, off)

        store._write = tearing_write
        for i in range(1, 20):
            await nc.publish("t.batch", b"m" * 100, headers={"Nats-Batch-Id": "torn", "Nats-Batch-Sequence": str(i)})
        await nc.request("t.batch", b"m", headers={"Nats-Batch-Id": "torn", "Nats-Batch-Sequence": "20",
                                                   "Nats-Batch-Commit": "1"}, timeout=3)

    asyncio.run(main())
""")


@pytest.mark.skiff_only
async def test_death_in_the_middle_of_a_commit_write(server_factory, target, tmp_path):
    from tests.harness import server_env

    store_dir = str(tmp_path / "store")
    script = tmp_path / "tearing_server.py"
    script.write_text(_TEARING_SERVER)
    proc = subprocess.run([sys.executable, str(script), store_dir], env=server_env(), capture_output=True,
                          timeout=60)
    assert proc.returncode == 9, proc.stderr.decode()[-3000:]

    server = server_factory(store_dir=store_dir)
    nc = await nats.connect(server.url)
    st = (await _api(nc, "STREAM.INFO.T"))["state"]
    assert st["messages"] == 3 and st["first_seq"] == 1, st  # the three acknowledged messages, no part of the batch
    last = await _api(nc, "STREAM.MSG.GET.T", {"last_by_subj": "t.before"})
    assert base64.b64decode(last["message"]["data"]) == b"acked 2"
    assert (await _api(nc, "STREAM.MSG.GET.T", {"last_by_subj": "t.batch"}))["error"]["err_code"] == 10037
    await nc.close()
