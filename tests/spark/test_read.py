"""Batch reads through Spark: full, ranged and filtered, with no gaps and no duplicates, on both servers."""
from __future__ import annotations

import datetime as dt

import pytest

from tests.spark.helpers import raw_hpub, sync, unique

N = 1000
DELETED = {1, 2, 250, 500, 501, 502, 777, 999}
REGIONS = ("eu", "us", "asia")


@pytest.fixture(scope="module")
def orders(shared_server):
    """A stream of N messages on three subjects, every 10th with headers, some deleted; and the expected rows."""
    name = unique("ORDERS")

    async def fill(a):
        await a.create(name, storage="file", allow_direct=True)
        items = []
        for i in range(1, N + 1):
            subject = f"{name}.{REGIONS[i % 3]}"
            items.append((subject, b"order-%d" % i, {"n": str(i)} if i % 10 == 0 else None))
        assert await a.publish_many(items) == list(range(1, N + 1))
        for seq in DELETED:
            await a.delete_msg(name, seq)
        return items

    items = sync(shared_server.url, fill)
    expected = {i: items[i - 1] for i in range(1, N + 1) if i not in DELETED}
    return shared_server.url, name, expected


def load(spark, url, stream, **options):
    r = spark.read.format("jetstream").option("servers", url).option("stream", stream)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_full_read_in_many_partitions(spark, orders):
    url, name, expected = orders
    df = load(spark, url, name, maxSeqsPerPartition=97)
    assert df.rdd.getNumPartitions() == 11  # [3, 1001) - the deleted 1 and 2 are below first_seq
    assert [f.name for f in df.schema.fields] == ["stream", "subject", "seq", "timestamp", "headers", "data"]
    rows = df.collect()
    seqs = [r.seq for r in rows]
    assert len(seqs) == len(set(seqs)), "duplicates"
    assert sorted(seqs) == sorted(expected), "gaps or extra rows"
    now = dt.datetime.now()
    for r in rows:
        subject, data, hdrs = expected[r.seq]
        assert (r.stream, r.subject, bytes(r.data)) == (name, subject, data)
        assert r.headers == ({"n": [hdrs["n"]]} if hdrs else None)
        assert abs((now - r.timestamp).total_seconds()) < 600
    ts = [r.timestamp for r in sorted(rows, key=lambda r: r.seq)]
    assert ts == sorted(ts)
    assert sync(url, lambda a: a.consumer_names(name)) == []  # every task deleted the consumer it created


def test_ranged_read(spark, orders):
    url, name, expected = orders
    df = load(spark, url, name, startingOffsets=240, endingOffsets=780, minPartitions=5)
    assert df.rdd.getNumPartitions() == 5
    seqs = [r.seq for r in df.select("seq").collect()]
    assert len(seqs) == len(set(seqs))
    assert sorted(seqs) == [s for s in sorted(expected) if 240 <= s < 780]


def test_filtered_read(spark, orders):
    url, name, expected = orders
    df = load(spark, url, name, filterSubjects=f"{name}.eu,{name}.asia", minPartitions=3)
    got = sorted((r.seq, r.subject) for r in df.select("seq", "subject").collect())
    assert got == [(s, expected[s][0]) for s in sorted(expected) if not expected[s][0].endswith(".us")]
    # one filter subject, read with Direct Get, and a subset of the columns by a user-given schema
    df = (spark.read.format("jetstream").schema("seq bigint, data binary").option("servers", url)
          .option("stream", name).option("filterSubjects", f"{name}.us").option("readMethod", "direct")
          .option("maxSeqsPerPartition", 300).load())
    got = sorted((r.seq, bytes(r.data)) for r in df.collect())
    assert got == [(s, expected[s][1]) for s in sorted(expected) if expected[s][0].endswith(".us")]


def test_aggregate_per_subject(spark, orders):
    url, name, expected = orders
    counts = {r.subject: r["count"] for r in load(spark, url, name).groupBy("subject").count().collect()}
    want: dict = {}
    for subject, _data, _h in expected.values():
        want[subject] = want.get(subject, 0) + 1
    assert counts == want


def test_repeated_headers_and_empty_stream(spark, shared_server):
    name = unique("H")

    async def fill(a):
        await a.create(name)
        await raw_hpub(shared_server.url, f"{name}.x", b"NATS/1.0\r\nA: 1\r\nB: x\r\nA: 2\r\n\r\n", b"payload")

    empty = unique("E")
    sync(shared_server.url, lambda a: a.create(empty))
    assert load(spark, shared_server.url, empty).count() == 0
    sync(shared_server.url, fill)
    (row,) = load(spark, shared_server.url, name).collect()
    assert row.headers == {"A": ["1", "2"], "B": ["x"]}
    assert bytes(row.data) == b"payload"


def test_batch_data_loss(spark, shared_server):
    name = unique("L")

    async def fill(a):
        await a.create(name, max_msgs=5)
        await a.publish_many([(f"{name}.x", b"%d" % i) for i in range(1, 21)])

    sync(shared_server.url, fill)  # retention keeps 16..20
    with pytest.raises(Exception, match="removed"):
        load(spark, shared_server.url, name, startingOffsets=3).collect()
    rows = load(spark, shared_server.url, name, startingOffsets=3, failOnDataLoss="false").collect()
    assert sorted(r.seq for r in rows) == [16, 17, 18, 19, 20]


def test_bad_options_fail_load_with_a_clear_message(spark, orders):
    """Issue #18 items 3 and 4: an unknown option is an error naming it (not ignored: ``filterSubject`` read the
    whole stream); a bad value names its option; a batch read that can only be empty is an error (Kafka)."""
    url, name, _expected = orders
    # Spark lower-cases option names before the source sees them
    with pytest.raises(Exception, match="(?i)unknown option 'filterSubject'.*did you mean 'filterSubjects'"):
        spark.read.format("jetstream").option("servers", url).option("stream", name) \
            .option("filterSubject", f"{name}.eu").load()
    with pytest.raises(Exception, match="option timeout must be a number of seconds, not 'abc'"):
        load(spark, url, name, timeout="abc")
    with pytest.raises(Exception, match="startingOffsets=latest is for streaming queries only"):
        load(spark, url, name, startingOffsets="latest").collect()
    with pytest.raises(Exception, match="startingOffsets 5000 is after the end of the stream"):
        load(spark, url, name, startingOffsets=5000).collect()
    with pytest.raises(Exception, match="startingOffsets 300 is after endingOffsets"):
        load(spark, url, name, startingOffsets=300, endingOffsets=200).collect()
    assert load(spark, url, name, startingOffsets=N + 1).count() == 0  # at the end exactly: empty, not an error


def test_streaming_ending_offsets_error_is_clear(spark, orders, tmp_path):
    url, name, _expected = orders
    df = spark.readStream.format("jetstream").option("servers", url).option("stream", name) \
        .option("endingOffsets", "5").load()
    q = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "c")) \
        .trigger(availableNow=True).start()
    with pytest.raises(Exception) as e:
        q.awaitTermination(60)
    # the real error, not pyspark's UnboundLocalError from a reader that failed to initialise
    assert "endingOffsets is for batch queries only" in str(e.value)
    assert "UnboundLocalError" not in str(e.value)


def test_register_from_any_thread_and_session(spark):
    """Issue #18 item 5: register() needs no session argument - a thread other than the one that built the session
    has no active session in PySpark - and a new session (which starts without the registrations of another) can
    be registered the same way; the format is then found there."""
    import threading

    import pyspark_jetstream

    box = {}

    def other_thread():
        try:
            box["session"] = pyspark_jetstream.register()
            with pytest.raises(Exception, match="option 'stream' is required"):
                box["session"].read.format("jetstream").load().collect()
        except BaseException as e:  # pragma: no cover - reported below
            box["error"] = e

    t = threading.Thread(target=other_thread)
    t.start()
    t.join(120)
    assert "error" not in box, box.get("error")
    assert box["session"] is spark
    fresh = pyspark_jetstream.register(spark.newSession())
    with pytest.raises(Exception, match="(?i)unknown option 'filterSubject'"):
        fresh.read.format("jetstream").option("stream", "S").option("filterSubject", "x").load()


def _stored_ms(url: str, stream: str, seq: int) -> int:
    """The store time of message ``seq`` in ms since the epoch, floored (from STREAM.MSG.GET's RFC 3339 time)."""
    r = sync(url, lambda a: a.api(f"STREAM.MSG.GET.{stream}", {"seq": seq}))
    text = r["message"]["time"]  # e.g. 2026-11-26T17:10:05.123456789Z
    whole, _, frac = text.rstrip("Z").partition(".")
    t = dt.datetime.fromisoformat(whole).replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp()) * 1000 + int((frac + "000")[:3])


def test_starting_timestamp(spark, shared_server, tmp_path):
    """startingTimestamp (ms since the epoch, as Spark's Kafka source takes it) starts at the first message stored
    at or after it; a batch read past the last message is an error; startingOffsets beside it is refused."""
    import time

    url = shared_server.url
    name = unique("TS")

    async def first(a):
        await a.create(name)
        await a.publish_many([(f"{name}.a", b"%d" % i) for i in range(1, 11)])

    sync(url, first)
    time.sleep(0.05)  # seq 11 is stored at least 50 ms after seq 10
    sync(url, lambda a: a.publish_many([(f"{name}.b", b"%d" % i) for i in range(11, 21)]))
    t11 = _stored_ms(url, name, 11)
    assert _stored_ms(url, name, 10) < t11
    rows = load(spark, url, name, startingTimestamp=t11).collect()
    assert sorted(r.seq for r in rows) == list(range(11, 21))
    assert load(spark, url, name, startingTimestamp=0).count() == 20
    assert sorted(r.seq for r in load(spark, url, name, startingTimestamp=t11, endingOffsets=15).collect()) == \
        [11, 12, 13, 14]
    after = _stored_ms(url, name, 20) + 60_000
    with pytest.raises(Exception, match=f"no message stored at or after startingTimestamp {after}"):
        load(spark, url, name, startingTimestamp=after).collect()
    with pytest.raises(Exception, match="startingOffsets and startingTimestamp both name where to start"):
        load(spark, url, name, startingTimestamp=t11, startingOffsets="earliest")
    with pytest.raises(Exception, match="option startingTimestamp must be an integer"):
        load(spark, url, name, startingTimestamp="yesterday")
    # streaming: the same start, read to the end with Trigger.AvailableNow
    q = (spark.readStream.format("jetstream").option("servers", url).option("stream", name)
         .option("startingTimestamp", t11).load()
         .writeStream.format("memory").queryName(f"ts_{name}").option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert sorted(r.seq for r in spark.sql(f"select seq from ts_{name}").collect()) == list(range(11, 21))
