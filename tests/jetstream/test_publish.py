"""Publishing into streams against both servers: PubAcks, expected-* headers, dedupe, roll-ups, limits."""
from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.jetstream.conftest import collect


async def test_ack_bytes_and_no_reply_publishes_are_stored(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    sub = await jsc.nc.subscribe(f"{name}.>")  # ordinary subscribers still get the messages
    msg = await jsc.nc.request(f"{name}.a", b"1", timeout=2)
    assert msg.data == b'{"stream":"%s","seq":1}' % name.encode()
    await jsc.nc.publish(f"{name}.b", b"2")  # no reply: stored, no ack
    await jsc.nc.publish(f"{name}.c", b"3", headers={"K": "v"})
    await jsc.nc.flush()
    ack = await jsc.pub(f"{name}.d", b"4")
    assert ack == {"stream": name, "seq": 4}
    got = await collect(sub, 4)
    assert [m.data for m in got] == [b"1", b"2", b"3", b"4"]
    st = (await jsc.info(name))["state"]
    assert (st["messages"], st["first_seq"], st["last_seq"]) == (4, 1, 4)


async def test_dedupe_and_exact_duplicate_ack(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    a = await jsc.nc.request(f"{name}.a", b"x", headers={"Nats-Msg-Id": "id1"}, timeout=2)
    b = await jsc.nc.request(f"{name}.a", b"x", headers={"Nats-Msg-Id": "id1"}, timeout=2)
    assert a.data == b'{"stream":"%s","seq":1}' % name.encode()
    # nats-server writes this one by hand, with a space after the colon.
    assert b.data == b'{"stream":"%s","seq":1,"duplicate": true}' % name.encode()
    assert (await jsc.pub(f"{name}.a", b"x", {"Nats-Msg-Id": "id2"}))["seq"] == 2
    assert (await jsc.info(name))["state"]["messages"] == 2


async def test_dedupe_window_expires(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", duplicate_window=200_000_000)
    assert (await jsc.pub(f"{name}.a", b"x", {"Nats-Msg-Id": "i"}))["seq"] == 1
    assert (await jsc.pub(f"{name}.a", b"x", {"Nats-Msg-Id": "i"})).get("duplicate") is True
    await asyncio.sleep(0.6)
    assert (await jsc.pub(f"{name}.a", b"x", {"Nats-Msg-Id": "i"})) == {"stream": name, "seq": 2}


async def test_error_ack_bytes(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    msg = await jsc.nc.request(f"{name}.a", b"", headers={"Nats-Expected-Stream": "nope"}, timeout=2)
    assert msg.data == (b'{"error":{"code":400,"err_code":10060,"description":"expected stream does not match"},'
                        b'"stream":"%s","seq":0}' % name.encode())


async def test_expected_headers(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    s_a, s_b = f"{name}.a", f"{name}.b"

    def err(ack):
        return (ack["error"]["err_code"], ack["error"]["description"], ack["seq"])

    assert (await jsc.pub(s_a, b"", {"Nats-Expected-Stream": name}))["seq"] == 1
    assert err(await jsc.pub(s_a, b"", {"Nats-Expected-Last-Sequence": "5"})) == (10071, "wrong last sequence: 1", 0)
    assert err(await jsc.pub(s_a, b"", {"Nats-Expected-Last-Sequence": "x"})) == (10071, "wrong last sequence: 1", 0)
    assert (await jsc.pub(s_a, b"", {"Nats-Expected-Last-Sequence": "1"}))["seq"] == 2
    # Per subject: 0 means "no message on this subject yet" (KV create).
    assert (await jsc.pub(s_b, b"", {"Nats-Expected-Last-Subject-Sequence": "0"}))["seq"] == 3
    assert err(await jsc.pub(s_b, b"", {"Nats-Expected-Last-Subject-Sequence": "0"})) == (
        10071, "wrong last sequence: 3", 0)
    assert err(await jsc.pub(s_a, b"", {"Nats-Expected-Last-Subject-Sequence": "1"})) == (
        10071, "wrong last sequence: 2", 0)
    assert (await jsc.pub(s_a, b"", {"Nats-Expected-Last-Subject-Sequence": "2"}))["seq"] == 4
    # ... checked against another subject (wildcards allowed) with -Subject.
    hdr = {"Nats-Expected-Last-Subject-Sequence": "3", "Nats-Expected-Last-Subject-Sequence-Subject": s_b}
    assert (await jsc.pub(s_a, b"", hdr))["seq"] == 5
    hdr = {"Nats-Expected-Last-Subject-Sequence": "5", "Nats-Expected-Last-Subject-Sequence-Subject": f"{name}.*"}
    assert (await jsc.pub(s_a, b"", hdr))["seq"] == 6
    assert err(await jsc.pub(s_a, b"", {"Nats-Expected-Last-Subject-Sequence-Subject": s_b})) == (
        10193, "missing sequence for expected last sequence per subject", 0)
    # Last msg id: "" until a message with an id is stored, and reset by one without.
    assert err(await jsc.pub(s_a, b"", {"Nats-Expected-Last-Msg-Id": "m1"})) == (10070, "wrong last msg ID: ", 0)
    assert (await jsc.pub(s_a, b"", {"Nats-Msg-Id": "m1"}))["seq"] == 7
    assert (await jsc.pub(s_a, b"", {"Nats-Expected-Last-Msg-Id": "m1", "Nats-Msg-Id": "m2"}))["seq"] == 8
    assert err(await jsc.pub(s_a, b"", {"Nats-Expected-Last-Msg-Id": "m1"})) == (10070, "wrong last msg ID: m2", 0)
    assert (await jsc.pub(s_a, b""))["seq"] == 9
    assert err(await jsc.pub(s_a, b"", {"Nats-Expected-Last-Msg-Id": "m2"})) == (10070, "wrong last msg ID: ", 0)


async def test_check_order_expected_stream_first(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    hdr = {"Nats-Expected-Stream": "other", "Nats-Expected-Last-Sequence": "9", "Nats-TTL": "5s"}
    assert (await jsc.pub(f"{name}.a", b"", hdr))["error"]["err_code"] == 10060
    del hdr["Nats-Expected-Stream"]
    assert (await jsc.pub(f"{name}.a", b"", hdr))["error"]["err_code"] == 10166  # TTL before sequences


async def test_rollup(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", allow_rollup_hdrs=True)
    for i in range(3):
        await jsc.pub(f"{name}.a", b"a%d" % i)
        await jsc.pub(f"{name}.b", b"b%d" % i)
    ack = await jsc.pub(f"{name}.a", b"roll", {"Nats-Rollup": "SUB"})  # case-insensitive
    assert ack["seq"] == 7
    st = (await jsc.info(name, {"subjects_filter": ">"}))["state"]
    assert st["subjects"] == {f"{name}.a": 1, f"{name}.b": 3}
    ack = await jsc.pub(f"{name}.b", b"all", {"Nats-Rollup": "all"})
    st = (await jsc.info(name))["state"]
    assert (st["messages"], st["first_seq"], st["last_seq"]) == (1, 8, 8)
    ack = await jsc.pub(f"{name}.b", b"", {"Nats-Rollup": "bogus"})
    assert ack["error"] == {"code": 500, "err_code": 10111, "description": 'rollup value invalid: "bogus"'}


async def test_rollup_not_permitted(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory")
    ack = await jsc.pub(f"{name}.a", b"", {"Nats-Rollup": "sub"})
    assert ack["error"] == {"code": 500, "err_code": 10111, "description": "rollup not permitted"}


@pytest.mark.parametrize("storage", ["memory", "file"])
async def test_discard_new_limits(jsc, storage):
    name = jsc.name()
    await jsc.create(name, storage=storage, discard="new", max_msgs=2)
    await jsc.pub(f"{name}.a", b"1")
    await jsc.pub(f"{name}.a", b"2")
    ack = await jsc.pub(f"{name}.a", b"3")
    assert ack == {"error": {"code": 503, "err_code": 10077, "description": "maximum messages exceeded"},
                   "stream": name, "seq": 0}
    name2 = jsc.name()
    await jsc.create(name2, storage=storage, discard="new", max_bytes=100)
    assert (await jsc.pub(f"{name2}.a", b"x" * 40))["seq"] == 1
    ack = await jsc.pub(f"{name2}.a", b"x" * 40)
    assert ack["error"]["description"] == "maximum bytes exceeded"


async def test_discard_new_per_subject_and_old_eviction(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", discard="new", max_msgs_per_subject=1, discard_new_per_subject=True)
    await jsc.pub(f"{name}.a", b"1")
    ack = await jsc.pub(f"{name}.a", b"2")
    assert ack["error"]["description"] == "maximum messages per subject exceeded"
    assert (await jsc.pub(f"{name}.b", b"1"))["seq"] == 2
    # Without discard_new_per_subject the per-subject limit evicts even under discard new (KV history).
    name2 = jsc.name()
    await jsc.create(name2, storage="memory", discard="new", max_msgs_per_subject=2)
    for i in range(4):
        assert (await jsc.pub(f"{name2}.k", b"%d" % i))["seq"] == i + 1
    st = (await jsc.info(name2))["state"]
    assert (st["messages"], st["first_seq"]) == (2, 3)
    # Discard old drops the oldest.
    name3 = jsc.name()
    await jsc.create(name3, storage="memory", max_msgs=3)
    for i in range(5):
        await jsc.pub(f"{name3}.x", b"")
    st = (await jsc.info(name3))["state"]
    assert (st["messages"], st["first_seq"], st["last_seq"]) == (3, 3, 5)


async def test_max_msg_size_and_header_size(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", max_msg_size=100)
    assert (await jsc.pub(f"{name}.a", b"x" * 100))["seq"] == 1
    ack = await jsc.pub(f"{name}.a", b"x" * 101)
    assert ack["error"] == {"code": 400, "err_code": 10054, "description": "message size exceeds maximum allowed"}
    ack = await jsc.pub(f"{name}.a", b"x" * 80, {"H": "y" * 30})  # headers count towards the size
    assert ack["error"]["err_code"] == 10054
    name2 = jsc.name()
    await jsc.create(name2, storage="memory")
    ack = await jsc.pub(f"{name2}.a", b"", {"Big": "z" * 70000})
    assert ack["error"] == {"code": 400, "err_code": 10097, "description": "header size exceeds maximum allowed of 64k"}


async def test_no_ack_stream_stores_silently(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", no_ack=True)
    with pytest.raises(nats.errors.TimeoutError):
        await jsc.nc.request(f"{name}.a", b"x", timeout=0.3)
    assert (await jsc.info(name))["state"]["messages"] == 1


async def test_interest_retention_without_consumers(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", retention="interest")
    assert await jsc.pub(f"{name}.a", b"x") == {"stream": name, "seq": 1}
    assert await jsc.pub(f"{name}.a", b"x") == {"stream": name, "seq": 2}
    st = (await jsc.info(name))["state"]
    # Not stored, but the sequence is used up.
    assert (st["messages"], st["last_seq"], st["first_seq"]) == (0, 2, 3)


async def test_workqueue_stores_without_consumers(jsc):
    name = jsc.name()
    await jsc.create(name, storage="memory", retention="workqueue")
    assert (await jsc.pub(f"{name}.a", b"x"))["seq"] == 1
    assert (await jsc.info(name))["state"]["messages"] == 1


async def test_no_stream_no_responders(jsc):
    with pytest.raises(nats.errors.NoRespondersError):
        await jsc.nc.request(f"{jsc.name()}.nothing", b"", timeout=1)


async def test_many_publishes_in_one_read_get_ordered_acks(jsc):
    """Publishes pipelined in one socket read: all stored, each ack carries its own sequence."""
    name = jsc.name()
    await jsc.create(name)  # file store: acks wait for the flush
    inbox = jsc.nc.new_inbox()
    sub = await jsc.nc.subscribe(inbox + ".*")
    for i in range(200):
        await jsc.nc.publish(f"{name}.a", b"%d" % i, reply=f"{inbox}.{i}")
    await jsc.nc.flush()
    acks = await collect(sub, 200, timeout=2)
    assert len(acks) == 200
    assert all(json.loads(m.data)["seq"] == int(m.subject.rsplit(".", 1)[1]) + 1 for m in acks)


async def test_domain_in_acks_and_api(server_factory):
    """With ``jetstream { domain: hub }``: PubAcks carry the domain, $JS.hub.API reaches the API, replies say it
    (except the CREATE reply, which nats-server leaves without it)."""
    srv = server_factory(config="jetstream { domain: hub }\n")
    nc = await nats.connect(srv.url)
    try:
        r = json.loads((await nc.request("$JS.hub.API.STREAM.CREATE.D", b'{"name":"D","storage":"memory"}',
                                         timeout=2)).data)
        assert "domain" not in r and r["did_create"] is True
        ack = await nc.request("D", b"x", timeout=2)
        assert ack.data == b'{"stream":"D","domain":"hub","seq":1}'
        err = await nc.request("D", b"x", headers={"Nats-Expected-Stream": "E"}, timeout=2)
        assert json.loads(err.data) == {"error": {"code": 400, "err_code": 10060,
                                                  "description": "expected stream does not match"},
                                        "stream": "D", "seq": 0}  # no domain in error acks
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.D", b"", timeout=2)).data)
        assert info["domain"] == "hub" and list(info)[-3:] == ["domain", "cluster", "ts"]
        acct = json.loads((await nc.request("$JS.hub.API.INFO", b"", timeout=2)).data)
        assert acct["domain"] == "hub"
    finally:
        await nc.close()
