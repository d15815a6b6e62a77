"""A consumer create writes its ``meta.inf`` off the event loop and still answers only once it is written (a stream
update too).

Skiff opens the consumer's store and writes its metadata in a worker thread (consumer_writes.create_files); the
reply waits for it, and the API router holds later requests meanwhile.  What a client can see, on both servers:

* every consumer acknowledged as created is there after a kill -9 (nats-server writes meta.inf before it answers:
  consumer.go addConsumerWithAssignment -> store.Open / writeConsumerMeta);
* what a create followed at once by a delete (or an update) left is what the next start finds: a deleted consumer
  is not brought back by its create's write.  On Skiff those requests act in arrival order; nats-server runs API
  requests on a pool of goroutines and may answer them in another order.
"""
from __future__ import annotations

import asyncio
import json

import nats

STREAM = "CF"
CREATORS = 4
PER_CREATOR = 60
KILL_AFTER = 80


def _cfg(name: str, **extra) -> bytes:
    return json.dumps({"stream_name": STREAM, "config": {"durable_name": name, "ack_policy": "explicit",
                                                         **extra}}).encode()


async def _stream(nc) -> None:
    r = json.loads((await nc.request(f"$JS.API.STREAM.CREATE.{STREAM}", json.dumps(
        {"name": STREAM, "subjects": ["cf.>"]}).encode(), timeout=5)).data)
    assert "error" not in r, r


async def _info(nc, name: str) -> dict:
    return json.loads((await nc.request(f"$JS.API.CONSUMER.INFO.{STREAM}.{name}", b"", timeout=5)).data)


async def test_created_consumers_survive_kill9(server_factory):
    server = server_factory()
    nc = await nats.connect(server.url)
    await _stream(nc)
    await nc.close()
    acked: set[str] = set()
    conns = [await nats.connect(server.url, allow_reconnect=False) for _ in range(CREATORS)]

    async def creator(k: int, nc) -> None:
        for i in range(PER_CREATOR):
            name = f"C{k}_{i}"
            try:
                msg = await nc.request(f"$JS.API.CONSUMER.CREATE.{STREAM}.{name}", _cfg(name), timeout=5)
            except Exception:
                return  # the kill
            r = json.loads(msg.data)
            assert "error" not in r, r
            acked.add(name)

    async def killer() -> None:
        while len(acked) < KILL_AFTER:
            await asyncio.sleep(0.001)
        server.kill()

    tasks = [asyncio.create_task(creator(k, c)) for k, c in enumerate(conns)]
    await asyncio.wait_for(killer(), 60)
    await asyncio.gather(*tasks, return_exceptions=True)
    for c in conns:
        try:
            await c.close()
        except Exception:
            pass
    assert len(acked) >= KILL_AFTER

    server.start()
    nc = await nats.connect(server.url)
    try:
        missing = []
        for name in sorted(acked):
            r = await _info(nc, name)
            if "error" in r:
                missing.append((name, r["error"]))
            else:
                assert r["config"]["durable_name"] == name
        assert not missing, f"{len(missing)} of {len(acked)} acknowledged consumers lost: {missing[:5]}"
    finally:
        await nc.close()


async def _pipelined(nc, requests: list[tuple[str, bytes]]) -> list[dict]:
    """Send ``requests`` back to back on one connection (no wait between them); their replies in order."""
    inbox = nc.new_inbox()
    replies: dict[str, dict] = {}
    done = asyncio.Event()

    async def on_reply(msg) -> None:
        replies[msg.subject] = json.loads(msg.data)
        if len(replies) == len(requests):
            done.set()

    sub = await nc.subscribe(inbox + ".*", cb=on_reply)
    for i, (subject, body) in enumerate(requests):
        await nc.publish(subject, body, reply=f"{inbox}.{i}")
    await nc.flush()
    await asyncio.wait_for(done.wait(), 10)
    await sub.unsubscribe()
    return [replies[f"{inbox}.{i}"] for i in range(len(requests))]


async def test_create_then_delete_and_update_act_in_order(server_factory, target):
    server = server_factory()
    nc = await nats.connect(server.url)
    try:
        await _stream(nc)
        out = await _pipelined(nc, [
            (f"$JS.API.CONSUMER.CREATE.{STREAM}.GONE", _cfg("GONE")),
            (f"$JS.API.CONSUMER.DELETE.{STREAM}.GONE", b""),
            (f"$JS.API.CONSUMER.CREATE.{STREAM}.UPD", _cfg("UPD")),
            (f"$JS.API.CONSUMER.CREATE.{STREAM}.UPD", _cfg("UPD", description="second")),
        ])
        assert out[0]["config"]["durable_name"] == "GONE", out[0]
        if target == "skiff" or out[1].get("success"):
            # Skiff answers the API in arrival order (api.py: the router holds later requests while a create
            # writes).  nats-server queues API requests for a pool of goroutines (jetstream_api.go apiDispatch,
            # processJSAPIRoutedRequests), so there the delete may run first and find nothing: the consumer stays.
            assert out[1] == {"type": "io.nats.jetstream.api.v1.consumer_delete_response", "success": True}, out[1]
            gone = True
        else:
            assert out[1]["error"]["err_code"] == 10014, out[1]
            gone = False
        if target == "skiff":
            assert "description" not in out[2]["config"], out[2]
            assert out[3]["config"]["description"] == "second", out[3]
        before = await _info(nc, "UPD")
        r = await _info(nc, "GONE")
        assert ("error" in r) == gone, r
    finally:
        await nc.close()
    server.kill()
    server.start()
    nc = await nats.connect(server.url)
    try:
        r = await _info(nc, "GONE")
        assert ("error" in r) == gone, r  # a deleted consumer is not brought back by a late write
        if gone:
            assert r["error"]["err_code"] == 10014, r
        assert (await _info(nc, "UPD"))["config"].get("description") == before["config"].get("description")
    finally:
        await nc.close()


async def test_pipelined_creates_keep_names_and_limits(server_factory, target):
    """Creates sent back to back on one stream: Skiff writes their files together (consumer_writes.py
    ``_queue_meta``) and lets a create of another consumer run beside one still writing (api.py ``joins``); the
    stream's max_consumers and the consumers' names still hold as if they came one by one."""
    server = server_factory()
    nc = await nats.connect(server.url)
    try:
        r = json.loads((await nc.request(f"$JS.API.STREAM.CREATE.{STREAM}", json.dumps(
            {"name": STREAM, "subjects": ["cf.>"], "max_consumers": 3}).encode(), timeout=5)).data)
        assert "error" not in r, r
        out = await _pipelined(nc, [
            (f"$JS.API.CONSUMER.CREATE.{STREAM}.A", _cfg("A")),
            (f"$JS.API.CONSUMER.CREATE.{STREAM}.B", _cfg("B")),
            (f"$JS.API.CONSUMER.CREATE.{STREAM}.A", _cfg("A")),  # the same again: no new consumer
            (f"$JS.API.CONSUMER.CREATE.{STREAM}.B", json.dumps({"stream_name": STREAM, "action": "create",
                                                               "config": {"durable_name": "B", "ack_policy": "none"}}
                                                              ).encode()),  # another config, action create
            (f"$JS.API.CONSUMER.CREATE.{STREAM}.C", _cfg("C")),
            (f"$JS.API.CONSUMER.CREATE.{STREAM}.D", _cfg("D")),  # the fourth: over max_consumers
            (f"$JS.API.CONSUMER.CREATE.{STREAM}", json.dumps({"stream_name": STREAM, "config": {
                "ack_policy": "explicit"}}).encode()),  # an ephemeral: over max_consumers too
        ])
        assert [o["config"]["durable_name"] for o in (out[0], out[2])] == ["A", "A"], out[:3]
        if target == "skiff" or "error" not in out[1]:
            # In arrival order (nats-server may run the second B first: see the test above), B with another
            # config under action "create" is 10148.
            assert out[1]["config"]["durable_name"] == "B", out[1]
            assert out[3]["error"]["err_code"] == 10148, out[3]
        else:
            assert out[3]["config"]["durable_name"] == "B", out[3]
        codes = sorted(o["error"]["err_code"] if "error" in o else 0 for o in out[4:])
        assert codes == [0, 10026, 10026], out[4:]
        names = json.loads((await nc.request(f"$JS.API.CONSUMER.NAMES.{STREAM}", b"", timeout=5)).data)
        assert len(names["consumers"]) == 3 and {"A", "B"} <= set(names["consumers"]), names
    finally:
        await nc.close()


async def test_an_acknowledged_stream_update_survives_kill9(server_factory):
    """A stream update answers once its meta.inf is written (Skiff writes it in a worker thread:
    api_streams.StreamApi._update_on_disk; nats-server before it answers, stream.go update -> writeStreamMeta)."""
    server = server_factory()
    nc = await nats.connect(server.url)
    try:
        await _stream(nc)
        r = json.loads((await nc.request(f"$JS.API.STREAM.UPDATE.{STREAM}", json.dumps(
            {"name": STREAM, "subjects": ["cf.>", "more.>"], "description": "second", "max_msgs": 10}).encode(),
            timeout=5)).data)
        assert r["config"]["description"] == "second", r
    finally:
        await nc.close()
    server.kill()
    server.start()
    nc = await nats.connect(server.url)
    try:
        si = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{STREAM}", b"", timeout=5)).data)
        cfg = si["config"]
        assert (cfg["description"], cfg["subjects"], cfg["max_msgs"]) == ("second", ["cf.>", "more.>"], 10), cfg
    finally:
        await nc.close()
