"""Stream sources on both servers: filters, subject transforms, start options, STREAM.INFO ``sources``, the
``Nats-Stream-Source`` header, updates that add and remove sources.

The header is ``<origin> <origin seq> <filter> <dest> <origin subject>`` (stream.go genSourceHeader); nats-server
2.15 appends the origin's stream identity as a sixth field, which Skiff (API level 2, no stream identities) does
not have: tests compare the first five fields.
"""
from __future__ import annotations

import asyncio
import base64
import time

from .test_mirror import get_msg, wait_state


def source_header(msg: dict, fields: int = 5) -> list[str]:
    """The first ``fields`` fields of Nats-Stream-Source (the sixth, 2.15's origin identity, is a hash)."""
    hdrs = base64.b64decode(msg.get("hdrs", "")).decode()
    for line in hdrs.split("\r\n"):
        if line.startswith("Nats-Stream-Source:"):
            return line.split(":", 1)[1].strip().split(" ")[:fields]
    raise AssertionError(f"no Nats-Stream-Source in {hdrs!r}")


async def test_source_copies_with_source_header(jsc):
    o, s = jsc.name("O"), jsc.name("S")
    await jsc.create(o)
    for i in range(3):
        await jsc.pub(f"{o}.{i}", b"m%d" % i, headers={"Nats-Expected-Last-Sequence": str(i)})
    r = await jsc.api(f"STREAM.CREATE.{s}", {"name": s, "subjects": [f"{s}.>"], "sources": [{"name": o}]})
    assert "error" not in r, r
    assert r["sources"] == [{"name": o, "lag": 0, "active": -1}]
    info = await wait_state(jsc, s, lambda i: i["state"]["messages"] == 3)
    src = info["sources"]
    assert [list(x) for x in src] == [["name", "lag", "seq", "active"]]
    assert src[0]["name"] == o and src[0]["lag"] == 0 and src[0]["seq"] == 3 and 0 <= src[0]["active"] < 5e9
    msg = await get_msg(jsc, s, 2)
    assert msg["subject"] == f"{o}.1" and base64.b64decode(msg["data"]) == b"m1"
    assert source_header(msg) == [o, "2", ">", ">", f"{o}.1"]
    # Nats-Expected-* headers are not copied (they were checked at the origin).
    assert "Nats-Expected" not in base64.b64decode(msg["hdrs"]).decode()
    # The sourcing stream keeps its own subjects and sequences.
    ack = await jsc.pub(f"{s}.own", b"own")
    assert ack == {"stream": s, "seq": 4}
    await jsc.pub(f"{o}.late", b"late")
    await wait_state(jsc, s, lambda i: i["state"]["messages"] == 5)
    assert (await get_msg(jsc, s, 5))["subject"] == f"{o}.late"


async def test_sources_with_filters_transforms_and_start(jsc):
    a, b, s = jsc.name("A"), jsc.name("B"), jsc.name("S")
    await jsc.create(a)
    await jsc.create(b)
    for i in range(4):
        await jsc.pub(f"{a}.{'x' if i % 2 else 'y'}", b"a%d" % i)
        await jsc.pub(f"{b}.z", b"b%d" % i)
    r = await jsc.api(f"STREAM.CREATE.{s}", {"name": s, "sources": [
        {"name": a, "filter_subject": f"{a}.x"},
        {"name": b, "opt_start_seq": 3, "subject_transforms": [{"src": f"{b}.>", "dest": f"{s}.from-b.>"}]},
    ]})
    assert "error" not in r, r
    assert "subjects" not in r["config"]  # a stream with sources gets no default subject
    info = await wait_state(jsc, s, lambda i: i["state"]["messages"] == 4)
    by_name = {x["name"]: x for x in info["sources"]}
    assert by_name[a]["filter_subject"] == f"{a}.x" and by_name[a]["seq"] == 4
    assert by_name[b]["subject_transforms"] == [{"src": f"{b}.>", "dest": f"{s}.from-b.>"}]
    assert by_name[b]["seq"] == 4
    subjects, headers_seen = [], []
    for seq in range(1, 5):
        m = await get_msg(jsc, s, seq)
        subjects.append(m["subject"])
        headers_seen.append(source_header(m))
    assert sorted(subjects) == sorted([f"{a}.x", f"{a}.x", f"{s}.from-b.z", f"{s}.from-b.z"])
    assert sorted(h[:2] for h in headers_seen if h[0] == b) == [[b, "3"], [b, "4"]]
    assert [h for h in headers_seen if h[0] == b][0][2:] == [f"{b}.>", f"{s}.from-b.>", f"{b}.z"]
    assert sorted(h[1] for h in headers_seen if h[0] == a) == ["2", "4"]


async def test_source_opt_start_time(jsc):
    o, s = jsc.name("O"), jsc.name("S")
    await jsc.create(o)
    for i in range(3):
        await jsc.pub(f"{o}.old", b"%d" % i)
    await asyncio.sleep(0.05)
    mid = (await jsc.info(o))["state"]["last_ts"]
    await asyncio.sleep(0.05)
    for i in range(2):
        await jsc.pub(f"{o}.new", b"%d" % i)
    r = await jsc.api(f"STREAM.CREATE.{s}", {"name": s, "sources": [{"name": o, "opt_start_time": mid}]})
    assert "error" not in r, r
    info = await wait_state(jsc, s, lambda i: i["state"]["messages"] >= 2)
    await asyncio.sleep(0.3)
    info = await jsc.info(s)
    # opt_start_time is inclusive: the message stored at exactly that time, then the two after it.
    assert info["state"]["messages"] == 3
    assert [(await get_msg(jsc, s, q))["subject"] for q in (1, 2, 3)] == [f"{o}.old", f"{o}.new", f"{o}.new"]


async def test_update_adds_and_removes_sources(jsc):
    a, b, s = jsc.name("A"), jsc.name("B"), jsc.name("S")
    await jsc.create(a)
    await jsc.create(b)
    await jsc.pub(f"{a}.1", b"a")
    await jsc.pub(f"{b}.1", b"b")
    r = await jsc.api(f"STREAM.CREATE.{s}", {"name": s, "sources": [{"name": a}]})
    assert "error" not in r, r
    await wait_state(jsc, s, lambda i: i["state"]["messages"] == 1)
    r = await jsc.api(f"STREAM.UPDATE.{s}", {"name": s, "sources": [{"name": a}, {"name": b}]})
    assert "error" not in r, r
    assert sorted(x["name"] for x in r["sources"]) == sorted([a, b])  # nats-server: Go map order
    await wait_state(jsc, s, lambda i: i["state"]["messages"] == 2)
    # Adding a source again later does not copy a second time what it already took.
    r = await jsc.api(f"STREAM.UPDATE.{s}", {"name": s, "sources": [{"name": b}]})
    assert "error" not in r, r
    assert [x["name"] for x in r["sources"]] == [b]
    await jsc.pub(f"{a}.2", b"a2")
    await jsc.pub(f"{b}.2", b"b2")
    info = await wait_state(jsc, s, lambda i: i["state"]["messages"] == 3)
    r = await jsc.api(f"STREAM.UPDATE.{s}", {"name": s, "sources": [{"name": b}, {"name": a}]})
    assert "error" not in r, r
    info = await wait_state(jsc, s, lambda i: i["state"]["messages"] == 4)
    await asyncio.sleep(0.3)
    info = await jsc.info(s)
    assert info["state"]["messages"] == 4
    assert (await get_msg(jsc, s, 4))["subject"] == f"{a}.2"


async def test_sourced_message_id_not_deduplicated_against_local_publishes(jsc):
    """nats-server 2.15.1 stores a sourced message even when its Nats-Msg-Id was published to the sourcing stream
    directly within the window (checked against the binary)."""
    o, s = jsc.name("O"), jsc.name("S")
    await jsc.create(o)
    await jsc.create(s, sources=[{"name": o}])
    await jsc.pub(f"{s}.x", b"direct", headers={"Nats-Msg-Id": "same"})
    await jsc.pub(f"{o}.x", b"sourced", headers={"Nats-Msg-Id": "same"})
    await jsc.pub(f"{o}.y", b"next")
    await wait_state(jsc, s, lambda i: i["state"]["last_seq"] >= 3)
    m = await get_msg(jsc, s, 2)
    assert m["subject"] == f"{o}.x" and base64.b64decode(m["data"]) == b"sourced"
    assert "Nats-Msg-Id: same" in base64.b64decode(m["hdrs"]).decode()
    assert (await get_msg(jsc, s, 3))["subject"] == f"{o}.y"


async def test_sourcing_consumer_gone_is_recreated(jsc):
    """The origin deleted and created again: the source notices (no heartbeats) and sets itself up again."""
    o, s = jsc.name("O"), jsc.name("S")
    await jsc.create(o)
    await jsc.pub(f"{o}.1", b"1")
    await jsc.create(s, subjects=[f"{s}.>"], sources=[{"name": o}])
    await wait_state(jsc, s, lambda i: i["state"]["messages"] == 1)
    t0 = time.monotonic()
    r = await jsc.api(f"STREAM.DELETE.{o}")
    assert r.get("success"), r
    await jsc.create(o)
    for i in range(3):
        await jsc.pub(f"{o}.again", b"%d" % i)
    # Seen as stale after 10 s and set up again; the origin's identity (2.15: a hash of its creation time, the
    # sixth field of Nats-Stream-Source) changed, so the source takes the new stream from its start.
    info = await wait_state(jsc, s, lambda i: i["state"]["messages"] == 4, timeout=30)
    assert time.monotonic() - t0 < 30
    await asyncio.sleep(0.3)
    assert (await jsc.info(s))["state"]["messages"] == 4
    hdrs = [source_header(await get_msg(jsc, s, q), 6) for q in (1, 2, 3, 4)]
    assert [h[1] for h in hdrs] == ["1", "1", "2", "3"]
    assert all(len(h) == 6 for h in hdrs), hdrs
    assert hdrs[0][5] != hdrs[1][5] == hdrs[2][5] == hdrs[3][5]


async def test_sourced_messages_stored_as_the_origin_had_them(jsc):
    """A Nats-TTL (origin allows TTLs, the sourcing stream does not) and a Nats-Rollup (origin allows roll-ups,
    the sourcing stream does not) are stored verbatim instead of failing the source (processJetStreamMsg with
    ``sourced``): the source does not stall on them."""
    o, s = jsc.name("O"), jsc.name("S")
    await jsc.create(o, allow_msg_ttl=True, allow_rollup_hdrs=True)
    await jsc.pub(f"{o}.a", b"ttl", headers={"Nats-TTL": "1h"})
    await jsc.pub(f"{o}.b", b"r1")
    await jsc.pub(f"{o}.b", b"rollup", headers={"Nats-Rollup": "sub"})
    await jsc.pub(f"{o}.c", b"last")
    await jsc.create(s, sources=[{"name": o}])
    info = await wait_state(jsc, s, lambda i: i["state"]["last_seq"] == 3)
    assert info["state"]["messages"] == 3  # the origin's roll-up had already removed r1
    m = await get_msg(jsc, s, 1)
    assert "Nats-TTL: 1h" in base64.b64decode(m["hdrs"]).decode()
    assert (await get_msg(jsc, s, 3))["subject"] == f"{o}.c"
