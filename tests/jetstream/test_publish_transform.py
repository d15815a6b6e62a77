"""subject_transform on ingest and republish, against both servers."""
from __future__ import annotations

import pytest

from skiff.protocol.jsapi._transform import validate_mapping

from tests.jetstream.conftest import collect


@pytest.mark.parametrize("dest, subject, stored", [
    ("t.{{wildcard(2)}}.$1", "in.a.b", "t.b.a"),
    ("t.{{ Wildcard( 1 ) }}.x", "in.a.b", "t.a.x"),
    ("t.{{partition(7,1,2)}}.{{wildcard(1)}}", "in.order.42", "t.{p}.order"),
    ("t.{{splitFromLeft(1,2)}}.{{wildcard(2)}}", "in.abcdef.z", "t.ab.cdef.z"),
    ("t.{{SplitFromRight(1,2)}}.{{wildcard(2)}}", "in.abcdef.z", "t.abcd.ef.z"),
    ("t.{{sliceFromLeft(1,3)}}.{{wildcard(2)}}", "in.abcdefg.z", "t.abc.def.g.z"),
    ("t.{{sliceFromRight(1,3)}}.{{wildcard(2)}}", "in.abcdefg.z", "t.a.bcd.efg.z"),
    ("t.{{split(1,-)}}.{{wildcard(2)}}", "in.-a--b-.z", "t.a.b.z"),
    ("t.{{left(1,2)}}.{{right(2,1)}}", "in.abc.xyz", "t.ab.z"),
])
async def test_subject_transform_functions(jsc, dest, subject, stored):
    assert validate_mapping("in.*.*", dest) is None  # Skiff's own check of the destination accepts it too
    name = jsc.name()
    src = f"{name}.*.*"
    subject = subject.replace("in.", f"{name}.", 1)
    dest = dest.replace("t.", f"{name}t.", 1)
    await jsc.create(name, storage="memory", subjects=[src], subject_transform={"src": src, "dest": dest})
    await jsc.pub(subject, b"x")
    subjects = (await jsc.info(name, {"subjects_filter": ">"}))["state"]["subjects"]
    (got,) = subjects
    expect = stored.replace("t.", f"{name}t.", 1)
    if "{p}" in expect:  # the partition number is nats-server's FNV-1a hash: both servers must agree on it
        assert got.startswith(f"{name}t.") and got.endswith(".order") and 0 <= int(got.split(".")[1]) < 7
        assert got.split(".")[1] == "6"
    else:
        assert got == expect


async def test_republish(jsc):
    name = jsc.name()
    sub = await jsc.nc.subscribe(f"{name}rp.>")
    await jsc.create(name, storage="memory", subjects=[f"{name}.>"],
                     republish={"src": f"{name}.a.>", "dest": f"{name}rp.>"})
    await jsc.pub(f"{name}.a.x", b"one")
    await jsc.pub(f"{name}.b.x", b"not republished")
    await jsc.pub(f"{name}.a.x", b"two", {"K": "v"})
    got = await collect(sub, 2, timeout=1)
    assert [(m.subject, m.data) for m in got] == [(f"{name}rp.x", b"one"), (f"{name}rp.x", b"two")]
    h = got[1].headers
    assert list(h) == ["K", "Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Last-Sequence"]
    assert (h["Nats-Stream"], h["Nats-Subject"], h["Nats-Sequence"], h["Nats-Last-Sequence"]) == (
        name, f"{name}.a.x", "3", "1")


async def test_republish_headers_only(jsc):
    name = jsc.name()
    sub = await jsc.nc.subscribe(f"{name}rp.>")
    await jsc.create(name, storage="memory", subjects=[f"{name}.>"],
                     republish={"dest": f"{name}rp.>", "headers_only": True})
    await jsc.pub(f"{name}.q", b"payload")
    (m,) = await collect(sub, 1, timeout=1)
    assert m.data == b"" and m.headers["Nats-Msg-Size"] == "7" and m.headers["Nats-Last-Sequence"] == "0"
