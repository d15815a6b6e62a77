"""nats-py's object store end to end against both servers: chunked put/get of large objects (read back through an
ordered consumer that stops at pending 0), list, info, delete."""
from __future__ import annotations

import os

import pytest
from nats.js import errors as jserr


async def _store(jsc):
    js = jsc.nc.jetstream()
    return await js.create_object_store(jsc.name("ob"))


async def test_put_get_large_object_in_chunks(jsc):
    obs = await _store(jsc)
    data = os.urandom(128 * 1024 * 5 + 777)  # 6 chunks of the default 128 KiB
    info = await obs.put("big.bin", data)
    assert info.size == len(data) and info.chunks == 6
    got = await obs.get("big.bin")
    assert got.data == data and got.info.digest == info.digest


async def test_small_and_empty_objects_list_and_delete(jsc):
    obs = await _store(jsc)
    await obs.put("a", b"hello")
    await obs.put("empty", b"")
    assert (await obs.get("a")).data == b"hello"
    assert (await obs.get("empty")).data == b""
    assert sorted(o.name for o in await obs.list()) == ["a", "empty"]
    await obs.delete("a")
    with pytest.raises(jserr.ObjectNotFoundError):  # nats-py hides deleted objects from get
        await obs.get("a")
    assert {o.name: bool(o.deleted) for o in await obs.list()} == {"a": True, "empty": False}  # list shows deletes
    st = await obs.status()
    assert st.bucket.startswith("ob")


async def test_overwrite_replaces_chunks(jsc):
    obs = await _store(jsc)
    await obs.put("x", os.urandom(300_000))
    new = os.urandom(1000)
    await obs.put("x", new)
    assert (await obs.get("x")).data == new
