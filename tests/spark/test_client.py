"""The connector's own NATS/JetStream client (no Spark): range reads with no gaps and no duplicates, filters,
deleted messages, Direct Get, pipelined publishing with deduplication and authentication - against both servers."""
from __future__ import annotations

import asyncio

import pytest

from pyspark_jetstream.client import Connection, NatsError
from pyspark_jetstream.jetstream import JetStream, Publisher, read_range, read_range_direct
from tests.spark.helpers import Admin, unique


@pytest.fixture
async def env(shared_server):
    admin = await Admin.connect(shared_server.url)
    conn = await Connection.connect(shared_server.url)
    yield admin, JetStream(conn)
    await conn.close()
    await admin.close()


async def filled_stream(admin: Admin, n: int = 300, deleted=(1, 2, 77, 150, 151, 152, 299), **cfg):
    """A stream with ``n`` messages on three subjects (every 5th with repeated headers), some deleted."""
    name = unique("R")
    await admin.create(name, **cfg)
    items = []
    for i in range(1, n + 1):
        hdrs = {"k": f"v{i}"} if i % 5 == 0 else None
        items.append((f"{name}.{('a', 'b', 'c')[i % 3]}", b"m%d" % i, hdrs))
    assert await admin.publish_many(items) == list(range(1, n + 1))
    for seq in deleted:
        await admin.delete_msg(name, seq)
    expected = {i: (items[i - 1][0], items[i - 1][1]) for i in range(1, n + 1) if i not in deleted}
    return name, expected


async def collect(agen) -> list:
    out = []
    async for chunk in agen:
        assert chunk, "empty chunks are never yielded"
        out.extend(chunk)
    return out


@pytest.mark.parametrize("chunk", [1, 17, 2000])
async def test_full_range_no_gaps_no_duplicates(env, chunk):
    admin, js = env
    name, expected = await filled_stream(admin)
    msgs = await collect(read_range(js, name, 1, 300, [], chunk=chunk))
    assert [m.seq for m in msgs] == sorted(expected)
    assert {m.seq: (m.subject, m.data) for m in msgs} == expected
    with_hdr = [m for m in msgs if m.hdr]
    assert [m.seq for m in with_hdr] == [s for s in sorted(expected) if s % 5 == 0]
    assert all(b"k: v%d" % m.seq in m.hdr for m in with_hdr)
    assert all(m.time_ns > 1_600_000_000 * 10**9 for m in msgs)
    assert await admin.consumer_names(name) == []  # the ephemeral consumer was deleted


async def test_ranges_split_anywhere_reassemble_exactly(env):
    admin, js = env
    name, expected = await filled_stream(admin)
    got = []
    for first, last in [(1, 1), (2, 76), (77, 77), (78, 150), (151, 152), (153, 298), (299, 300)]:
        part = await collect(read_range(js, name, first, last, [], chunk=50))
        assert all(first <= m.seq <= last for m in part)
        got.extend(m.seq for m in part)
    assert got == sorted(expected)


async def test_filtered_ranges(env):
    admin, js = env
    name, expected = await filled_stream(admin)
    one = await collect(read_range(js, name, 10, 200, [f"{name}.a"], chunk=13))
    assert [m.seq for m in one] == [s for s in sorted(expected) if 10 <= s <= 200 and expected[s][0].endswith(".a")]
    two = await collect(read_range(js, name, 1, 300, [f"{name}.a", f"{name}.c"], chunk=40))
    assert [m.seq for m in two] == [s for s in sorted(expected) if not expected[s][0].endswith(".b")]
    none = await collect(read_range(js, name, 1, 300, [f"{name}.zzz"]))
    assert none == []


async def test_range_with_deleted_tail_or_nothing_left_terminates(env):
    admin, js = env
    name, expected = await filled_stream(admin, n=40, deleted=(35, 36, 37, 38, 39, 40, 5, 6))
    tail = await asyncio.wait_for(collect(read_range(js, name, 30, 40, [])), 10)
    assert [m.seq for m in tail] == [30, 31, 32, 33, 34]
    gone = await asyncio.wait_for(collect(read_range(js, name, 5, 6, [])), 10)
    assert gone == []
    # more messages after the range: never read past its end
    mid = await collect(read_range(js, name, 1, 10, [], chunk=3))
    assert [m.seq for m in mid] == [1, 2, 3, 4, 7, 8, 9, 10]


async def test_direct_get_reads_the_same(env):
    admin, js = env
    name, expected = await filled_stream(admin, allow_direct=True)
    direct = await collect(read_range_direct(js, name, 1, 300, [], chunk=64))
    assert [(m.seq, m.subject, m.data) for m in direct] == [(s, *expected[s]) for s in sorted(expected)]
    assert all((b"k: v%d" % m.seq in m.hdr) == (m.seq % 5 == 0) for m in direct)
    assert all(b"Nats-Sequence" not in m.hdr for m in direct)  # the server's own reply headers are stripped
    filtered = await collect(read_range_direct(js, name, 3, 100, [f"{name}.b"], chunk=7))
    assert [m.seq for m in filtered] == [s for s in sorted(expected) if 3 <= s <= 100 and expected[s][0].endswith(".b")]


async def test_pipelined_publish_deduplicates_by_msg_id(env):
    admin, js = env
    name = unique("W")
    await admin.create(name)
    pub = Publisher(js.conn, max_in_flight=64, expected_stream=name)
    for i in range(500):
        await pub.publish(f"{name}.x", b"%d" % i, b"NATS/1.0\r\nNats-Msg-Id: id-%d\r\n\r\n" % i)
    await pub.wait()
    assert (pub.published, pub.duplicates) == (500, 0)
    again = Publisher(js.conn, max_in_flight=1000)
    for i in range(500):
        await again.publish(f"{name}.x", b"%d" % i, b"NATS/1.0\r\nNats-Msg-Id: id-%d\r\n\r\n" % i)
    await again.wait()
    assert (again.published, again.duplicates) == (500, 500)
    assert (await admin.info(name))["state"]["messages"] == 500


async def test_publish_to_no_stream_fails(env):
    _admin, js = env
    pub = Publisher(js.conn)
    await pub.publish(unique("nostream") + ".x", b"x")
    with pytest.raises(NatsError):
        await pub.wait()


async def test_credentials(server_factory):
    srv = server_factory("--user", "alice", "--pass", "s3cret")
    conn = await Connection.connect(srv.url, user="alice", password="s3cret")
    await conn.flush()
    await conn.close()
    conn = await Connection.connect(f"nats://alice:s3cret@127.0.0.1:{srv.port}")
    await conn.close()
    with pytest.raises(NatsError, match="[Aa]uthorization"):
        await Connection.connect(srv.url, user="alice", password="wrong")
    tok = server_factory("--auth", "t0ken")
    conn = await Connection.connect(tok.url, token="t0ken")
    await conn.close()
    with pytest.raises(NatsError):
        await Connection.connect(tok.url)


async def test_unreachable_server_lists_every_attempt():
    with pytest.raises(NatsError, match="127.0.0.1:1.*127.0.0.1:2"):
        await Connection.connect("nats://127.0.0.1:1,127.0.0.1:2", timeout=1)


async def test_large_range_across_server_delivery_passes(env):
    """More messages than one delivery pass of a server (Skiff delivers 1024 per pass; before 3b02826 it ended
    no_wait pulls at a pass boundary with 404): every message arrives, the reader pulls again while the deliveries
    say more is pending."""
    admin, js = env
    name = unique("BIG")
    await admin.create(name)
    n = 5000
    await admin.publish_many([(f"{name}.x", b"%d" % i) for i in range(n)])
    msgs = await asyncio.wait_for(collect(read_range(js, name, 1, n, [], chunk=2000)), 60)
    assert [m.seq for m in msgs] == list(range(1, n + 1))
    part = await asyncio.wait_for(collect(read_range(js, name, 1200, 4100, [], chunk=1500)), 60)
    assert [m.seq for m in part] == list(range(1200, 4101))
