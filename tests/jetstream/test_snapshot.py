"""Stream backup and restore over the wire, against both servers, and across them.

nats-py has no backup API: :func:`backup` and :func:`restore` speak the protocol as the nats CLI's library does
(nats-io/jsm.go snapshots.go SnapshotToDirectory / RestoreSnapshotFromDirectory): an inbox for the chunks, an empty
reply to every chunk that carries a reply subject, the end at the first empty message (its ``Status`` header 204
when chunks were acknowledged, anything else a failure); restore sends 64 KiB requests and one empty request last.
"""
from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.harness import ServerProcess

pytestmark = pytest.mark.asyncio


async def backup(nc, stream: str, no_consumers: bool = False, chunk_size: int = 131072) -> tuple[dict, bytes, dict]:
    """(snapshot reply, backup bytes, {"status": end status, "acks": [ack subjects]})."""
    inbox = nc.new_inbox()
    chunks: list[bytes] = []
    acks: list[str] = []
    fin: asyncio.Future = asyncio.get_running_loop().create_future()

    async def cb(m):
        if not m.data:
            if not fin.done():
                fin.set_result((m.headers or {}).get("Status", ""))
            return
        chunks.append(m.data)
        if m.reply:
            acks.append(m.reply)
            await nc.publish(m.reply, b"")

    sub = await nc.subscribe(inbox, cb=cb)
    body = {"deliver_subject": inbox, "no_consumers": no_consumers, "chunk_size": chunk_size}
    r = json.loads((await nc.request(f"$JS.API.STREAM.SNAPSHOT.{stream}", json.dumps(body).encode(), timeout=5)).data)
    if "error" in r:
        await sub.unsubscribe()
        return r, b"", {}
    status = await asyncio.wait_for(fin, 30)
    await sub.unsubscribe()
    return r, b"".join(chunks), {"status": status, "acks": acks}


async def restore(nc, stream: str, meta: dict, data: bytes) -> tuple[dict, list]:
    """(restore reply, [chunk replies..., final reply as dict])."""
    r = json.loads((await nc.request(f"$JS.API.STREAM.RESTORE.{stream}", json.dumps(meta).encode(), timeout=5)).data)
    if "error" in r:
        return r, []
    ds = r["deliver_subject"]
    replies: list = []
    for i in range(0, len(data), 65536):
        m = await nc.request(ds, data[i:i + 65536], timeout=5)
        replies.append(m.data)
        if m.data:
            return r, replies
    m = await nc.request(ds, b"", timeout=60)
    return r, replies + [json.loads(m.data)]


def renamed(meta: dict, name: str) -> dict:
    cfg = dict(meta["config"], name=name, subjects=[f"{name}.>"])
    cfg.get("metadata", {}).pop("_nats.ver", None)
    return {"config": cfg, "state": meta["state"]}


async def fill(jsc, name: str) -> None:
    """Messages with and without headers, a deleted one in the middle and deleted ones at the end, a consumer
    with some acks and an outstanding delivery."""
    await jsc.create(name)
    for i in range(1, 41):
        await jsc.pub(f"{name}.{'a' if i % 2 else 'b'}", f"payload {i} ".encode() * (i % 7 + 1),
                      headers={"X-N": str(i)} if i % 3 == 0 else None)
    for seq in (5, 39, 40):
        r = await jsc.api(f"STREAM.MSG.DELETE.{name}", {"seq": seq})
        assert r.get("success"), r
    r = await jsc.api(f"CONSUMER.CREATE.{name}.D", {"stream_name": name, "config": {
        "durable_name": "D", "ack_policy": "explicit", "ack_wait": 30_000_000_000}})
    assert "error" not in r, r
    msgs = await pull(jsc.nc, name, 4)
    for m in msgs[:3]:
        await m.ack()
    await jsc.nc.flush()
    await asyncio.sleep(0.05)


async def pull(nc, stream: str, n: int) -> list:
    """``n`` messages of consumer D (a plain inbox: nats-py's request() cannot take a delivery as its reply)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.D", json.dumps({"batch": n}).encode(), reply=inbox)
    out = [await sub.next_msg(timeout=2) for _ in range(n)]
    await sub.unsubscribe()
    return out


async def messages(jsc, name: str, last: int) -> dict:
    out = {}
    for seq in range(1, last + 1):
        r = await jsc.api(f"STREAM.MSG.GET.{name}", {"seq": seq}, check=False)
        if "error" in r:
            out[seq] = r["error"]["err_code"]
        else:
            m = r["message"]
            out[seq] = (m["subject"], m.get("hdrs"), m["data"], m["time"])
    return out


def consumer_view(info: dict) -> tuple:
    return (info["delivered"]["consumer_seq"], info["delivered"]["stream_seq"], info["ack_floor"]["consumer_seq"],
            info["ack_floor"]["stream_seq"], info["num_ack_pending"], info["num_pending"])


async def test_backup_and_restore_round_trip(jsc):
    name = jsc.name("BK")
    await fill(jsc, name)
    snap, data, end = await backup(jsc.nc, name)
    assert snap["type"] == "io.nats.jetstream.api.v1.stream_snapshot_response"
    assert snap["config"]["name"] == name and snap["state"]["last_seq"] == 40 and snap["state"]["num_deleted"] == 3
    assert data.startswith(b"\xff\x06\x00\x00S2sTwO")
    new = jsc.name("RS")
    r, replies = await restore(jsc.nc, new, renamed(snap, new), data)
    assert r["type"] == "io.nats.jetstream.api.v1.stream_restore_response"
    assert r["deliver_subject"].startswith(f"$JS.SNAPSHOT.RESTORE.{new}.")
    assert all(x == b"" for x in replies[:-1])
    final = replies[-1]
    assert final["type"] == "io.nats.jetstream.api.v1.stream_create_response" and "error" not in final, final
    st = final["state"]
    assert (st["messages"], st["first_seq"], st["last_seq"], st["num_deleted"]) == (37, 1, 40, 3)
    # same messages at the same sequences (under their own subjects), same times, deleted ones still deleted
    assert await messages(jsc, name, 40) == await messages(jsc, new, 40)
    # the consumer came back with its position and acks
    ci = await jsc.api(f"CONSUMER.INFO.{new}.D")
    assert "error" not in ci, ci
    assert consumer_view(ci) == consumer_view(await jsc.api(f"CONSUMER.INFO.{name}.D"))
    assert ci["delivered"]["stream_seq"] == 4 and ci["ack_floor"]["stream_seq"] == 3
    # a new publish continues after the restored last sequence (the trailing deletes are not handed out again)
    ack = await jsc.pub(f"{new}.a", b"next")
    assert ack["seq"] == 41


async def test_backup_without_consumers_and_flow_control(jsc):
    name = jsc.name("FC")
    await jsc.create(name)
    for i in range(200):
        await jsc.pub(f"{name}.x", bytes([i % 256]) * 300 + str(i).encode())
    r = await jsc.api(f"CONSUMER.CREATE.{name}.D", {"stream_name": name, "config": {"durable_name": "D"}})
    assert "error" not in r
    snap, data, end = await backup(jsc.nc, name, no_consumers=True, chunk_size=1024)
    assert snap["state"]["consumer_count"] == 1  # the reply tells the stream's state as it is
    assert end["status"] == "204"
    # every full chunk asked for an ack: $JS.SNAPSHOT.ACK.<stream>.<id>.<chunk len>.<index>, index from 1
    assert end["acks"], end
    for i, subj in enumerate(end["acks"], 1):
        t = subj.split(".")
        assert t[:4] == ["$JS", "SNAPSHOT", "ACK", name] and t[5:] == ["1024", str(i)]
    assert len(data) // 1024 == len(end["acks"])
    new = jsc.name("FR")
    _, replies = await restore(jsc.nc, new, renamed(snap, new), data)
    assert replies[-1]["state"]["messages"] == 200 and "error" not in replies[-1]
    names = await jsc.api(f"CONSUMER.NAMES.{new}")
    assert names["consumers"] == [] or names["consumers"] is None


async def test_empty_stream_backup(jsc):
    name = jsc.name("EM")
    await jsc.create(name)
    snap, data, end = await backup(jsc.nc, name)
    assert end["status"] == "" and end["acks"] == []  # one short chunk, no ack asked, no 204 header
    new = jsc.name("ER")
    _, replies = await restore(jsc.nc, new, renamed(snap, new), data)
    assert replies[-1]["state"]["messages"] == 0 and "error" not in replies[-1]


async def test_restore_refusals(jsc):
    name = jsc.name("BAD")
    await fill(jsc, name)
    snap, data, _ = await backup(jsc.nc, name)

    async def fails(data_: bytes) -> dict:
        new = jsc.name("X")
        r, replies = await restore(jsc.nc, new, renamed(snap, new), data_)
        assert "error" not in r
        assert all(x == b"" for x in replies[:-1])  # failures come with the last reply, not on a chunk
        final = replies[-1]
        info = await jsc.api(f"STREAM.INFO.{new}")
        assert info["error"]["err_code"] == 10059  # nothing is left behind
        return final["error"]

    assert await fails(data[:len(data) // 2]) == {"code": 500, "err_code": 10062,
                                                   "description": "restore failed: s2: corrupt input"}
    assert await fails(b"") == {"code": 500, "err_code": 10062, "description": "restore failed: EOF"}
    assert await fails(b"definitely not a backup") == {"code": 500, "err_code": 10062,
                                                       "description": "restore failed: s2: corrupt input"}
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0xFF
    err = await fails(bytes(flipped))
    assert err["err_code"] == 10062 and err["description"].startswith("restore failed: s2: corrupt input")
    # wrong name, existing stream: refused before any chunk
    meta = {"config": snap["config"], "state": snap["state"]}
    r, _ = await restore(jsc.nc, "OTHER", meta, data)
    assert r["error"] == {"code": 400, "err_code": 10056, "description": "stream name in subject does not match request"}
    assert r["deliver_subject"] == ""
    r, _ = await restore(jsc.nc, name, meta, data)
    assert r["error"] == {"code": 400, "err_code": 10130, "description": "stream name already in use, cannot restore"}


async def test_restore_chunk_without_reply_cancels(jsc):
    name = jsc.name("NR")
    await jsc.create(name)
    snap, data, _ = await backup(jsc.nc, name)
    new = jsc.name("NRR")
    r = json.loads((await jsc.nc.request(f"$JS.API.STREAM.RESTORE.{new}",
                                         json.dumps(renamed(snap, new)).encode(), timeout=5)).data)
    await jsc.nc.publish(r["deliver_subject"], data)  # no reply subject: the restore is cancelled
    await jsc.nc.flush()
    await asyncio.sleep(0.2)
    assert await jsc.no_reply(r["deliver_subject"], b"", timeout=0.5)
    assert (await jsc.api(f"STREAM.INFO.{new}"))["error"]["err_code"] == 10059


@pytest.mark.parametrize("source,dest", [("nats-server", "skiff"), ("skiff", "nats-server")])
async def test_backup_restores_on_the_other_server(source, dest):
    """A backup taken on one server restores on the other: messages, sequences, times and consumer state."""
    from tests.jetstream.conftest import JsClient

    src, dst = ServerProcess(kind=source).start(), ServerProcess(kind=dest).start()
    try:
        nc1 = await nats.connect(src.url, allow_reconnect=False)
        nc2 = await nats.connect(dst.url, allow_reconnect=False)
        a, b = JsClient(nc1, src, "a"), JsClient(nc2, dst, "b")
        await fill(a, "CROSS")
        snap, data, end = await backup(nc1, "CROSS")
        assert end["status"] == "204" or end["acks"] == []
        _, replies = await restore(nc2, "CROSS", {"config": snap["config"], "state": snap["state"]}, data)
        final = replies[-1]
        assert "error" not in final, final
        assert await messages(a, "CROSS", 40) == await messages(b, "CROSS", 40)
        ca, cb = await a.api("CONSUMER.INFO.CROSS.D"), await b.api("CONSUMER.INFO.CROSS.D")
        assert consumer_view(ca) == consumer_view(cb)
        # the restored consumer goes on from where it was: the outstanding delivery (seq 4) comes again after
        # ack_wait, the next new one is seq 6 (5 was deleted)
        (m,) = await pull(nc2, "CROSS", 1)
        assert m.metadata.sequence.stream == 6
        await nc1.close()
        await nc2.close()
    finally:
        src.cleanup()
        dst.cleanup()


async def test_a_restored_consumer_survives_kill9(server_factory):
    """The restore's reply promises the consumers too: killed right after it, the server comes back with each
    restored consumer's config and state (Skiff writes their meta.inf and state in a worker thread before the
    reply: restore.py ``_consumer_files``)."""
    from tests.jetstream.conftest import JsClient

    server = server_factory()
    nc = await nats.connect(server.url, allow_reconnect=False)
    jsc = JsClient(nc, server, "k")
    await fill(jsc, "KB")
    snap, data, _ = await backup(nc, "KB")
    _, replies = await restore(nc, "KR", renamed(snap, "KR"), data)
    assert "error" not in replies[-1], replies[-1]
    before = await jsc.api("CONSUMER.INFO.KR.D")
    assert "error" not in before and before["delivered"]["stream_seq"] == 4, before
    await nc.close()
    server.kill()
    server.start()
    nc = await nats.connect(server.url, allow_reconnect=False)
    try:
        after = await JsClient(nc, server, "k").api("CONSUMER.INFO.KR.D")
        assert "error" not in after, after
        assert after["config"]["durable_name"] == "D" and after["config"]["ack_wait"] == 30_000_000_000
        assert consumer_view(after) == consumer_view(before)
    finally:
        await nc.close()
