"""nats-py's key-value store end to end against both servers (its watchers are ordered push consumers that rely on
the pending count in the ack subject)."""
from __future__ import annotations

import asyncio

import pytest
from nats.js import errors as jserr
from nats.js.api import KeyValueConfig
from nats.js.kv import KV_DEL, KV_PURGE


async def _kv(jsc, **kw):
    js = jsc.nc.jetstream()
    return js, await js.create_key_value(KeyValueConfig(bucket=jsc.name("kv"), **kw))


async def test_put_get_update_create_delete_purge(jsc):
    _, kv = await _kv(jsc, history=5)
    r1 = await kv.put("k1", b"v1")
    assert (await kv.get("k1")).value == b"v1"
    r2 = await kv.update("k1", b"v2", last=r1)
    assert r2 > r1
    with pytest.raises(jserr.KeyWrongLastSequenceError):
        await kv.update("k1", b"bad", last=r1)
    await kv.create("k2", b"x")
    with pytest.raises(jserr.KeyWrongLastSequenceError):
        await kv.create("k2", b"again")
    await kv.delete("k2")
    with pytest.raises(jserr.KeyNotFoundError) as ei:  # nats-py reports a delete marker as not found
        await kv.get("k2")
    assert ei.value.op == KV_DEL
    await kv.create("k2", b"recreated")  # create over a delete marker works
    assert (await kv.get("k2")).value == b"recreated"
    await kv.purge("k1")
    with pytest.raises(jserr.KeyNotFoundError):
        await kv.get("k1")
    assert (await kv.get("k2", revision=None)).value == b"recreated"


async def test_keys_history_and_status(jsc):
    _, kv = await _kv(jsc, history=3)
    for i in range(5):
        await kv.put("a", b"%d" % i)
    await kv.put("b.c", b"1")
    await kv.put("d", b"1")
    await kv.delete("d")
    assert sorted(await kv.keys()) == ["a", "b.c"]
    hist = await kv.history("a")
    assert [e.value for e in hist] == [b"2", b"3", b"4"]
    assert [e.delta for e in hist] == [2, 1, 0]
    st = await kv.status()
    assert st.history == 3 and st.values == 6  # 3 of a, b.c, d and its delete marker


async def test_keys_empty_bucket(jsc):
    _, kv = await _kv(jsc)
    with pytest.raises(jserr.NoKeysError):
        await kv.keys()


async def test_watch_initial_values_then_updates(jsc):
    _, kv = await _kv(jsc, history=2)
    await kv.put("x", b"1")
    await kv.put("y", b"1")
    await kv.put("x", b"2")
    await kv.delete("y")
    w = await kv.watchall()
    initial = []
    async for e in w:
        if e is None:
            break
        initial.append((e.key, e.value, e.operation, e.delta))
    assert initial == [("x", b"2", None, 1), ("y", b"", KV_DEL, 0)]
    await kv.put("z", b"new")
    await kv.purge("x")
    e = await asyncio.wait_for(w.updates(timeout=2), 3)
    assert (e.key, e.value) == ("z", b"new")
    e = await asyncio.wait_for(w.updates(timeout=2), 3)
    assert (e.key, e.operation) == ("x", KV_PURGE)
    await w.stop()


async def test_watch_filter_and_empty(jsc):
    _, kv = await _kv(jsc)
    w = await kv.watch("nothing.*")
    e = await asyncio.wait_for(w.updates(timeout=2), 3)
    assert e is None  # the end of the (empty) initial data
    await kv.put("nothing.a", b"1")
    e = await asyncio.wait_for(w.updates(timeout=2), 3)
    assert e.key == "nothing.a"
    await w.stop()
