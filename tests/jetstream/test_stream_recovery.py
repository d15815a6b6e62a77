"""Streams survive a restart (both servers); a corrupt stream is skipped without stopping Skiff."""
from __future__ import annotations

import json
import os

import nats
import pytest

from tests.jetstream.conftest import strip_dynamic


async def _api(nc, suffix, body=b""):
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    return json.loads((await nc.request("$JS.API." + suffix, body, timeout=3)).data)


async def _pub(nc, subject, data=b"", headers=None):
    return json.loads((await nc.request(subject, data, headers=headers, timeout=3)).data)


@pytest.mark.parametrize("kill", [False, True], ids=["clean", "kill9"])
async def test_restart_recovers_streams(server, kill):
    nc = await nats.connect(server.url)
    f = await _api(nc, "STREAM.CREATE.F", {"name": "F", "subjects": ["f.>"], "max_msgs_per_subject": 3,
                                           "duplicate_window": 60_000_000_000, "allow_direct": True,
                                           "metadata": {"owner": "me"}})
    await _api(nc, "STREAM.CREATE.M", {"name": "M", "subjects": ["m.>"], "storage": "memory"})
    await _pub(nc, "m.a", b"gone")
    for i in range(10):
        await _pub(nc, f"f.{i % 4}", b"v%d" % i, {"Nats-Msg-Id": f"id{i}"})
    await _api(nc, "STREAM.MSG.DELETE.F", {"seq": 9})
    before = await _api(nc, "STREAM.INFO.F", {"subjects_filter": ">"})
    await nc.close()

    server.restart(kill=kill)
    nc = await nats.connect(server.url)
    names = await _api(nc, "STREAM.NAMES")
    assert names["streams"] == ["F"]  # memory streams do not survive a restart
    after = await _api(nc, "STREAM.INFO.F", {"subjects_filter": ">"})
    assert strip_dynamic(after["config"]) == strip_dynamic(before["config"])
    assert after["created"] == before["created"]
    assert after["state"] == before["state"]
    m = await nc.request("$JS.API.DIRECT.GET.F", json.dumps({"seq": 10}).encode(), timeout=3)
    assert m.data == b"v9" and m.headers["Nats-Msg-Id"] == "id9"
    # Dedupe state inside the window survives; the sequence continues.
    assert await _pub(nc, "f.0", b"x", {"Nats-Msg-Id": "id7"}) == {"stream": "F", "seq": 8, "duplicate": True}
    assert await _pub(nc, "f.0", b"x", {"Nats-Expected-Last-Msg-Id": "id9"}) == {"stream": "F", "seq": 11}
    await nc.close()


@pytest.mark.skiff_only
async def test_corrupt_stream_is_skipped(server, target):
    nc = await nats.connect(server.url)
    for name in ("A", "B"):
        await _api(nc, f"STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name}.>"]})
        await _pub(nc, f"{name}.x", b"data")
    await nc.close()
    server.stop()
    meta = os.path.join(server.store_dir, "jetstream", "$G", "streams", "A", "meta.inf")
    with open(meta, "r+b") as fh:
        fh.seek(10)
        fh.write(b"\xff\xff\xff")
    server.start()
    nc = await nats.connect(server.url)
    assert (await _api(nc, "STREAM.NAMES"))["streams"] == ["B"]
    assert (await _api(nc, "STREAM.INFO.B"))["state"]["messages"] == 1
    await nc.close()
    assert "COULD NOT BE RECOVERED" in server.log()


def _stream_dir(server, name):
    return os.path.join(server.store_dir, "jetstream", "$G", "streams", name)


def _damage_meta(server, name):
    with open(os.path.join(_stream_dir(server, name), "meta.inf"), "r+b") as fh:
        fh.seek(10)
        fh.write(b"\xff\xff\xff")


async def test_damaged_meta_then_declared_again_keeps_the_messages(server, target):
    """Issue #15 finding 3: a stream whose meta.inf is damaged is skipped at start; declaring it again (as KV and
    most applications do at start-up) picks its blocks up again, as nats-server does - never an empty stream."""
    nc = await nats.connect(server.url)
    cfg = {"name": "A", "subjects": ["A.>"]}
    await _api(nc, "STREAM.CREATE.A", cfg)
    await _api(nc, "STREAM.CREATE.B", {"name": "B", "subjects": ["B.>"]})
    for i in range(300):
        await _pub(nc, f"A.{i % 3}", b"d%d" % i)
    await _pub(nc, "B.x", b"b")
    await nc.close()
    server.stop()
    _damage_meta(server, "A")
    server.start()
    nc = await nats.connect(server.url)
    assert (await _api(nc, "STREAM.NAMES"))["streams"] == ["B"]
    created = await _api(nc, "STREAM.CREATE.A", cfg)
    assert "error" not in created, created
    st = created["state"]
    assert (st["messages"], st["first_seq"], st["last_seq"], st["num_subjects"]) == (300, 1, 300, 3)
    got = await _api(nc, "STREAM.MSG.GET.A", {"seq": 123})
    assert got["message"]["subject"] == "A.2"
    assert await _pub(nc, "A.0", b"next") == {"stream": "A", "seq": 301}
    await nc.close()
    server.restart()
    nc = await nats.connect(server.url)
    info = await _api(nc, "STREAM.INFO.A")
    if target == "skiff":
        # Skiff wrote the new metadata over the damaged file: the next start loads the stream by itself.
        assert info["state"]["messages"] == 301
    else:
        # nats-server only writes meta.inf when there is none (newFileStoreWithCreated), so the damaged one stays and
        # the stream is skipped again until it is declared again (docs/parity.md).
        assert info["error"]["err_code"] == 10059
    await nc.close()


@pytest.mark.skiff_only  # nats-server opens whatever the directory holds; Skiff never deletes nor adopts it blindly
async def test_unknown_directory_at_create_is_set_aside(server, target):
    """A directory that appeared under streams/ while the server ran (it was not skipped at start) is neither
    deleted nor adopted by a create: it is moved to lost+found and logged."""
    d = _stream_dir(server, "X")
    os.makedirs(os.path.join(d, "msgs"))
    with open(os.path.join(d, "msgs", "1.blk"), "wb") as fh:
        fh.write(b"not ours")
    nc = await nats.connect(server.url)
    created = await _api(nc, "STREAM.CREATE.X", {"name": "X", "subjects": ["x.>"]})
    assert created["state"]["messages"] == 0
    await nc.close()
    aside = os.path.join(server.store_dir, "jetstream", "$G", "lost+found", "X.1", "msgs", "1.blk")
    with open(aside, "rb") as fh:
        assert fh.read() == b"not ours"
    assert "stream directory set aside" in server.log()


def _blocks(server, name):
    d = os.path.join(_stream_dir(server, name), "msgs")
    return sorted((os.path.join(d, f) for f in os.listdir(d) if f.endswith(".blk")),
                  key=lambda p: int(os.path.basename(p).split(".")[0]))


async def test_empty_newest_block_keeps_last_seq(server, target):
    """Issue #15 finding 4: a zero-length newest block (what an OS crash or power loss can leave) must not send the
    stream's last sequence back, or new messages get sequences other messages had.  Both servers keep last_seq from
    the state written at a clean stop; Skiff also names the lost messages (``lost``, and a log line)."""
    nc = await nats.connect(server.url)
    await _api(nc, "STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
    for i in range(200):
        await _pub(nc, f"s.{i % 10}", b"x" * 100)
    await nc.close()
    server.stop()
    newest = _blocks(server, "S")[-1]
    os.truncate(newest, 0)
    server.start()
    nc = await nats.connect(server.url)
    st = (await _api(nc, "STREAM.INFO.S"))["state"]
    assert (st["messages"], st["first_seq"], st["last_seq"]) == (0, 201, 200)
    if target == "skiff":
        assert st["lost"]["msgs"] == list(range(1, 201))
        assert "BLOCK FILE EMPTY: messages lost" in server.log() and os.path.basename(newest) in server.log()
    else:
        assert "lost" not in st  # nats-server counts them deleted without saying they were lost (docs/parity.md)
    assert await _pub(nc, "s.0", b"after") == {"stream": "S", "seq": 201}
    await nc.close()


@pytest.mark.skiff_only  # the damage is aimed at one record of Skiff's block format; nats-server's differs
async def test_bit_flip_under_an_intact_index_shows_in_stream_info(server, target):
    """Issue #15 finding 5: a flipped bit inside a block whose summary (index) is intact used to stay counted in
    stream info until someone read that message.  The block checksum check after start finds it: stream info shows
    the loss (``lost``, ``num_deleted``) and the log names the block and the sequence."""
    import asyncio

    from skiff.storage.filestore.block import HEAD, KIND_MSG

    nc = await nats.connect(server.url)
    await _api(nc, "STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
    for i in range(200):
        await _pub(nc, f"s.{i % 10}", b"x" * 100)
    await nc.close()
    server.stop()
    blk = _blocks(server, "S")[0]
    with open(blk, "r+b") as fh:
        data = fh.read()
        pos = 0
        while True:
            h = HEAD.unpack_from(data, pos)
            if h[1] == KIND_MSG and h[4] == 100:
                break
            pos += h[3]
        fh.seek(pos + h[3] // 2)
        fh.write(bytes([data[pos + h[3] // 2] ^ 0x10]))
    server.start()
    nc = await nats.connect(server.url)
    for _ in range(100):
        st = (await _api(nc, "STREAM.INFO.S"))["state"]
        if "lost" in st:
            break
        await asyncio.sleep(0.05)
    assert (st["messages"], st["last_seq"], st["num_deleted"], st["lost"]["msgs"]) == (199, 200, 1, [100])
    await nc.close()
    log = server.log()
    assert "BLOCK CHECKSUM MISMATCH" in log and os.path.basename(blk) in log and "seq: 100" in log
