"""A read task whose server goes away goes on over a new connection (issue #18, "reconnect to another server of the
list mid-read"): on the next URL of ``servers``, or on the same server once it is back, from the sequence after
the last message it handed out - no message lost, none twice - and for at most ``timeout`` seconds.

The reads run through ``reader._read_resuming``, the body of every Spark read task (``read_partition`` only turns
its lists into Arrow batches), in the test's own event loop so that the loopback :class:`Proxy` (a server address
that can go away) runs beside it.  Against both servers."""
from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from pyspark_jetstream.jetstream import ConnectionLost
from pyspark_jetstream.offsets import StreamReset
from pyspark_jetstream.options import ReadOptions
from pyspark_jetstream.reader import _read_resuming
from tests.spark.helpers import Admin, Proxy, unique

N = 3000


async def fill(url: str, n: int = N, **cfg) -> tuple[str, str]:
    """A new stream with messages ``m1``..``m<n>``: (its name, its creation time)."""
    admin = await Admin.connect(url)
    try:
        name = unique("RC")
        created = (await admin.create(name, **cfg))["created"]
        assert await admin.publish_many([(f"{name}.{i % 3}", b"m%d" % i) for i in range(1, n + 1)]) == \
            list(range(1, n + 1))
        return name, created
    finally:
        await admin.close()


def options(servers: str, stream: str, **extra) -> ReadOptions:
    return ReadOptions.parse({"servers": servers, "stream": stream, "fetchBatch": "50", **extra})


async def read_all(agen, after_first=None) -> list[int]:
    """The sequences of every message, in the order handed out; ``after_first()`` runs after the first list."""
    seqs = []
    async for msgs in agen:
        seqs += [m.seq for m in msgs]
        assert all(m.data == b"m%d" % m.seq for m in msgs)
        if after_first is not None:
            await after_first()
            after_first = None
    return seqs


@pytest.mark.parametrize("method", ["consumer", "direct"])
async def test_read_goes_on_at_the_next_server_of_the_list(shared_server, method, caplog):
    name, created = await fill(shared_server.url, allow_direct=True)
    proxy = Proxy(shared_server.port)
    first = await proxy.start()
    try:
        opts = options(f"{first},{shared_server.url}", name, readMethod=method)
        with caplog.at_level(logging.WARNING, logger="pyspark_jetstream"):
            seqs = await read_all(_read_resuming(opts, 1, N + 1, created), after_first=proxy.close)
    finally:
        await proxy.close()
    assert seqs == list(range(1, N + 1))  # in order, none lost, none twice
    assert any("reconnecting to go on at sequence" in r.getMessage() for r in caplog.records)


async def test_read_survives_a_server_restart_on_its_port(server_factory, caplog):
    """kill -9 of the server mid-read, started again a second later on the same port and store directory: the
    read waits for it (within ``timeout``) and reads on from the file store."""
    server = server_factory()
    name, created = await fill(server.url, storage="file")

    def restart() -> None:
        server.kill()
        time.sleep(1.0)  # the reader finds nobody listening for a while
        server.start()

    threads = []

    async def kill_and_restart() -> None:
        t = threading.Thread(target=restart)
        t.start()
        threads.append(t)

    t0 = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="pyspark_jetstream"):
            seqs = await read_all(_read_resuming(options(server.url, name, timeout="30"), 1, N + 1, created),
                                  after_first=kill_and_restart)
    finally:
        for t in threads:
            t.join()
    assert seqs == list(range(1, N + 1))
    assert any("reconnecting" in r.getMessage() for r in caplog.records)
    assert time.monotonic() - t0 < 30


async def test_reconnecting_gives_up_after_the_timeout(shared_server):
    name, created = await fill(shared_server.url, n=500)
    proxy = Proxy(shared_server.port)
    url = await proxy.start()
    agen = _read_resuming(options(url, name, timeout="1"), 1, 501, created)
    try:
        assert await agen.__anext__()
        await proxy.close()  # the only server of the list is gone for good
        t0 = time.monotonic()
        with pytest.raises(ConnectionLost, match=r"no server of .* answered within timeout=1s"):
            async for _msgs in agen:
                pass
        assert time.monotonic() - t0 < 5
    finally:
        await agen.aclose()
        await proxy.close()


async def test_the_next_server_holding_another_stream_of_that_name_is_data_loss(server_factory):
    """Two servers that are not one cluster: the second one's stream has the same name and the same messages, but
    it is another stream (another creation time).  Going on there would mix two streams' sequences: under
    failOnDataLoss it is an error, as a stream re-created under a query is."""
    a, b = server_factory(), server_factory()
    name, created = await fill(a.url)
    admin = await Admin.connect(b.url)
    try:
        await admin.create(name)
        await admin.publish_many([(f"{name}.{i % 3}", b"m%d" % i) for i in range(1, N + 1)])
    finally:
        await admin.close()
    proxy = Proxy(a.port)
    first = await proxy.start()
    try:
        with pytest.raises(StreamReset, match="re-created"):
            await read_all(_read_resuming(options(f"{first},{b.url}", name), 1, N + 1, created),
                           after_first=proxy.close)
    finally:
        await proxy.close()


async def test_planning_asks_again_when_the_connection_breaks_mid_request(shared_server, caplog):
    """The driver's STREAM.INFO (planning every micro-batch) in flight when the connection is reset: asked again
    over a new connection within ``timeout``, not a failed query (a server killed while a streaming query plans)."""
    from pyspark_jetstream.reader import fetch_bounds

    name, created = await fill(shared_server.url, n=30)
    proxy = Proxy(shared_server.port, cut_on=b"STREAM.INFO")
    url = await proxy.start()
    try:
        with caplog.at_level(logging.WARNING, logger="pyspark_jetstream"):
            bounds, _ = await asyncio.to_thread(fetch_bounds, options(url, name, timeout="10"))
        assert proxy.cut_on is None  # the first request was cut
        assert (bounds.start, bounds.last_seq, bounds.created) == (1, 30, created)
        assert "planning again over a new connection" in caplog.text
    finally:
        await proxy.close()


def test_streaming_query_keeps_running_across_a_server_restart(spark, server_factory, tmp_path):
    """A micro-batch query reading a file-stored stream while its server is killed (-9) and started again on the
    same port and store: the query does not fail (planning and tasks wait up to ``timeout`` for the server) and
    its sink gets every message exactly once."""
    from tests.spark.helpers import sync
    from tests.spark.test_stream import Batches

    server = server_factory()
    name = unique("SR")
    sync(server.url, lambda a: a.create(name, storage="file"))
    total = 400

    def publish(lo, hi):
        sync(server.url, lambda a: a.publish_many([(f"{name}.a", b"m%d" % i) for i in range(lo, hi)]))

    publish(1, 201)
    sink = Batches()
    q = (spark.readStream.format("jetstream").option("servers", server.url).option("stream", name)
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 20).option("timeout", "30").load()
         .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(processingTime="100 milliseconds").start())
    try:
        deadline = time.monotonic() + 60
        while len(sink.seqs) < 60 and time.monotonic() < deadline and q.isActive:
            time.sleep(0.05)
        server.kill()
        time.sleep(1.0)
        server.start()
        publish(201, total + 1)
        while len(sink.seqs) < total and time.monotonic() < deadline and q.isActive:
            time.sleep(0.1)
        assert q.isActive, q.exception()
    finally:
        q.stop()
    assert q.exception() is None
    assert sink.seqs == list(range(1, total + 1))


async def test_a_refusal_is_not_waited_out(server_factory):
    """Only a server that is down is waited for: an authorization refusal fails at once, not after ``timeout``."""
    from pyspark_jetstream.client import ConnectError
    from pyspark_jetstream.options import ConnectOptions
    from pyspark_jetstream.runner import open_jetstream_within

    server = server_factory("--user", "u", "--pass", "p")
    opts = ConnectOptions.parse({"servers": server.url, "user": "u", "password": "wrong", "timeout": "20"})
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(ConnectError, match="Authorization Violation") as e:
        await open_jetstream_within(opts, "t", t0 + 20)
    assert not e.value.transient and loop.time() - t0 < 5
