"""Batch writes through Spark: rows become messages with deterministic Nats-Msg-Id values, so a retried task or
a re-run write leaves exactly one copy of each row."""
from __future__ import annotations

import json
import time

import pytest

from pyspark_jetstream.writer import content_digest, message_id
from tests.spark.helpers import sync, unique


def messages(url, stream):
    return sync(url, lambda a: a.messages(stream))


def save(df, url, **options):
    w = df.write.format("jetstream").mode("append").option("servers", url)
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


def test_write_columns_and_read_back(spark, shared_server):
    url = shared_server.url
    name = unique("W")
    sync(url, lambda a: a.create(name))
    rows = [(f"{name}.a", "one", {"X": ["1", "2"]}, "id-1"),
            (None, "two", None, None),
            (f"{name}.b", "three", {"Y": ["y"]}, None)]
    df = spark.createDataFrame(rows, "subject string, data string, headers map<string,array<string>>, msg_id string")
    save(df.coalesce(1), url, stream=name, subject=f"{name}.default", writeId="job1")
    got = {bytes(d): (s, h) for _seq, s, d, h in messages(url, name)}
    assert set(got) == {b"one", b"two", b"three"}
    assert got[b"one"] == (f"{name}.a", {"X": ["1", "2"], "Nats-Msg-Id": ["id-1"], "Nats-Expected-Stream": [name]})
    # <writeId>:<partition>:<row>:<digest of subject, headers, data>; Nats-Expected-Stream from the stream option
    assert got[b"two"] == (f"{name}.default", {"Nats-Msg-Id": [message_id("job1", 0, 1, content_digest(
        f"{name}.default", (), b"two"))], "Nats-Expected-Stream": [name]})
    assert got[b"three"] == (f"{name}.b", {"Y": ["y"], "Nats-Msg-Id": [message_id("job1", 0, 2, content_digest(
        f"{name}.b", [("Y", "y")], b"three"))], "Nats-Expected-Stream": [name]})
    # the same write again (same writeId, same msg_id) is deduplicated entirely
    save(df.coalesce(1), url, stream=name, subject=f"{name}.default", writeId="job1")
    assert len(messages(url, name)) == 3
    # the sink refuses what it cannot do
    with pytest.raises(Exception, match="data"):
        save(spark.createDataFrame([("x",)], "subject string"), url)
    with pytest.raises(Exception, match="overwrite"):
        df.write.format("jetstream").mode("overwrite").option("servers", url).save()


PAD = b"x" * 2048


def _flaky_rows(name: str, url: str, marker: str):
    """mapInArrow body: partition 1's first attempt sends 100 rows, waits until 50 are stored, then fails.

    Rows carry 2 KB of padding: a Python worker's output reaches the JVM (and from there the writer) in 64 KB
    buffers, so the upstream worker must have produced more than that for the writer to see rows before the
    failure."""

    def fn(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        from tests.spark.helpers import sync as _sync

        ctx = TaskContext.get()
        flaky = ctx.partitionId() == 1 and ctx.attemptNumber() == 0
        sent = 0
        for batch in batches:
            ids = batch.column(0).to_pylist()
            for i in range(0, len(ids), 10):
                chunk = ids[i : i + 10]
                yield pa.RecordBatch.from_pydict({
                    "subject": [f"{name}.p{ctx.partitionId()}"] * len(chunk),
                    "data": [b"row-%d|" % v + PAD for v in chunk],
                })
                sent += len(chunk)
                if flaky and sent == 100:
                    deadline = time.monotonic() + 15
                    stored = 0
                    while time.monotonic() < deadline:
                        info = _sync(url, lambda a: a.api(f"STREAM.INFO.{name}", {"subjects_filter": f"{name}.p1"}))
                        stored = (info["state"].get("subjects") or {}).get(f"{name}.p1", 0)
                        if stored >= 50:
                            break
                        time.sleep(0.05)
                    with open(marker, "w") as f:
                        json.dump({"stored_before_failure": stored}, f)
                    raise RuntimeError("injected failure after 50 rows")

    return fn


def test_task_retried_after_failure_leaves_one_copy(spark, shared_server, tmp_path):
    url = shared_server.url
    name = unique("RT")
    sync(url, lambda a: a.create(name))
    marker = str(tmp_path / "failed.json")
    df = spark.range(0, 300, 1, 3).mapInArrow(_flaky_rows(name, url, marker), "subject string, data binary")
    # small Arrow batches into the writer, so it publishes rows while the flaky task is still running
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
    try:
        save(df, url, stream=name, maxInFlight=16)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    # the first attempt of partition 1 really stored rows before it failed ...
    with open(marker) as f:
        assert json.load(f)["stored_before_failure"] >= 50
    # ... and the retry repeated them with the same Nats-Msg-Id: one copy of every row
    msgs = messages(url, name)
    data = sorted(bytes(d) for _s, _subj, d, _h in msgs)
    assert data == sorted(b"row-%d|" % i + PAD for i in range(300))
    ids = [h["Nats-Msg-Id"][0] for *_x, h in msgs]
    assert len(set(ids)) == 300


def test_failed_write_rerun_with_write_id_leaves_one_copy(spark, shared_server):
    url = shared_server.url
    name = unique("RR")
    late = f"{name}X.late"
    sync(url, lambda a: a.create(name))
    # partition 1's last row goes to a subject no stream has yet: every attempt of that task fails on its PubAck
    rows = [(f"{name}.r", f"r{i}") for i in range(60)]
    rows[59] = (late, "r59")
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), "subject string, data string")
    with pytest.raises(Exception, match="no responders|no stream"):
        save(df, url, stream=name, writeId="nightly-42")
    # four attempts of the failing task, yet each row it sent is stored once; the other partition is complete
    after_failure = sorted(bytes(d).decode() for _s, _subj, d, _h in messages(url, name))
    assert after_failure == sorted(f"r{i}" for i in range(59))
    # fix the cause and run the same write again with the same writeId: exactly one copy of every row
    sync(url, lambda a: a.api(f"STREAM.UPDATE.{name}", {"name": name, "subjects": [f"{name}.>", late],
                                                         "storage": "memory"}))
    save(df, url, stream=name, writeId="nightly-42")
    final = sorted(bytes(d).decode() for _s, _subj, d, _h in messages(url, name))
    assert final == sorted(f"r{i}" for i in range(60))


def test_rerun_with_other_partitioning_never_drops_a_row(spark, shared_server):
    """Issue #18 item 2: generated ids followed a row's position only, so a re-run with 3 partitions instead of 4
    matched ids of *other* rows stored by the first run, and the stream dropped those rows as duplicates."""
    url = shared_server.url
    name = unique("RP")
    sync(url, lambda a: a.create(name))
    rows = [(f"{name}.r", f"r{i}") for i in range(40)]
    df4 = spark.createDataFrame(spark.sparkContext.parallelize(rows, 4), "subject string, data string")
    # the first run is killed midway: only its tasks for partitions 0 and 1 (r0..r19) completed
    save(df4.where("spark_partition_id() < 2"), url, stream=name, writeId="job-9")
    assert len(messages(url, name)) == 20
    # the re-run: same rows, same writeId, 3 partitions
    df3 = spark.createDataFrame(spark.sparkContext.parallelize(rows, 3), "subject string, data string")
    save(df3, url, stream=name, writeId="job-9")
    stored = [bytes(d).decode() for _s, _subj, d, _h in messages(url, name)]
    assert sorted(set(stored)) == sorted(f"r{i}" for i in range(40)), "rows dropped"
    # rows that kept their position (partition 0: r0..r9) are deduplicated; rows that moved are written again
    assert all(stored.count(f"r{i}") == 1 for i in range(10))


def test_write_to_the_wrong_stream_is_refused_by_the_server(spark, shared_server):
    """Issue #18 item 7: with the stream option, a row whose subject belongs to another stream is refused by the
    server (Nats-Expected-Stream, err_code 10060) instead of being stored there first and reported after."""
    url = shared_server.url
    mine, other = unique("MINE"), unique("OTHER")
    sync(url, lambda a: a.create(mine))
    sync(url, lambda a: a.create(other))
    df = spark.createDataFrame([(f"{other}.x", "stray")], "subject string, data string").coalesce(1)
    with pytest.raises(Exception, match="expected stream does not match"):
        save(df, url, stream=mine)
    assert messages(url, other) == []
    assert messages(url, mine) == []
