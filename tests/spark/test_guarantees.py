"""The cells of spark/README.md's "Guarantees" table that no other test file shows (tests/spark/test_kill9.py has
the driver kills and re-runs, test_reconnect.py the reads across a server restart, test_write.py and
test_stream.py the retried tasks and replayed batches): an executor-side Python process killed in the middle of a
read task and of a write task, and a write whose server is killed (-9) and started again under it.  Both servers.

Spark runs ``local[2,4]`` here (tests/spark/conftest.py): a failed task gets up to 4 attempts, as on a cluster.
"""
from __future__ import annotations

import asyncio
import collections
import threading
import time

from tests.spark.helpers import stored_data, sync, unique

ROWS = 3000


def die_once(batches):
    """mapInArrow body: rows unchanged; the first attempt of partition 1 kills its own Python worker (os._exit, no
    clean-up: what a killed executor process leaves) after passing 500 rows on."""
    import os

    from pyspark import TaskContext

    ctx = TaskContext.get()
    doomed = ctx.partitionId() == 1 and ctx.attemptNumber() == 0
    passed = 0
    for batch in batches:
        for offset in range(0, batch.num_rows, 100):
            piece = batch.slice(offset, 100)
            yield piece
            passed += piece.num_rows
            if doomed and passed >= 500:
                os._exit(1)


def fill(url: str, n: int = ROWS) -> str:
    name = unique("G")
    sync(url, lambda a: a.create(name, storage="file"))
    sync(url, lambda a: a.publish_many([(f"{name}.in", b"m%d" % i) for i in range(1, n + 1)]))
    return name


def test_read_task_whose_worker_is_killed_is_retried_with_the_same_rows(spark, shared_server):
    url = shared_server.url
    name = fill(url)
    df = (spark.read.format("jetstream").option("servers", url).option("stream", name).option("minPartitions", 3)
          .option("fetchBatch", 100).load().select("seq", "data"))
    rows = df.mapInArrow(die_once, df.schema).collect()
    assert sorted(r.seq for r in rows) == list(range(1, ROWS + 1))
    assert all(bytes(r.data) == b"m%d" % r.seq for r in rows)


PAD = b"x" * 2048


def rows_then_die(url: str, name: str):
    """mapInArrow body making rows ``row-<id>|<2 KB>`` on subject ``<name>.p<partition>``; the first attempt of
    partition 1 kills its own Python worker (os._exit) once the stream holds 200 of its rows - so the killed
    attempt really stored rows that the retry sends again.  (The padding: a worker's output reaches the writer in
    64 KB buffers.)"""

    def fn(batches):
        import os

        import pyarrow as pa
        from pyspark import TaskContext

        from tests.spark.helpers import sync as _sync

        ctx = TaskContext.get()
        doomed = ctx.partitionId() == 1 and ctx.attemptNumber() == 0
        subject = f"{name}.p{ctx.partitionId()}"
        passed = 0
        for batch in batches:
            ids = batch.column(0).to_pylist()
            for i in range(0, len(ids), 50):
                yield pa.RecordBatch.from_pydict({"subject": [subject] * len(ids[i:i + 50]),
                                                  "data": [b"row-%d|" % v + PAD for v in ids[i:i + 50]]})
                passed += len(ids[i:i + 50])
                if doomed and passed >= 400:
                    deadline = time.monotonic() + 15
                    while time.monotonic() < deadline:
                        info = _sync(url, lambda a: a.api(f"STREAM.INFO.{name}", {"subjects_filter": subject}))
                        if (info["state"].get("subjects") or {}).get(subject, 0) >= 200:
                            break
                        time.sleep(0.05)
                    os._exit(1)

    return fn


def test_write_task_whose_worker_is_killed_is_retried_exactly_once(spark, shared_server):
    url = shared_server.url
    name = unique("GW")
    sync(url, lambda a: a.create(name))
    df = spark.range(0, ROWS, 1, 3).mapInArrow(rows_then_die(url, name), "subject string, data binary")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")  # rows reach the writer as they pass
    try:
        (df.write.format("jetstream").mode("append").option("servers", url).option("stream", name)
         .option("maxInFlight", 16).save())
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    counts = collections.Counter(_stored(url, name))
    assert sorted(counts) == sorted(b"row-%d|" % i + PAD for i in range(ROWS)) and set(counts.values()) == {1}


def _stored(url: str, stream: str) -> list[bytes]:
    return asyncio.run(stored_data(url, stream))


def slower(batches):
    """mapInArrow body: the rows unchanged, in slices of 25, 0.1 s each (4 ms a row: a partition of 1,500 rows takes
    6 s, so the restart below lands well inside the write; with ``slow``'s 2 ms a row a CI run once saw the whole
    write stored before its first count)."""
    for batch in batches:
        for offset in range(0, batch.num_rows, 25):
            time.sleep(0.1)
            yield batch.slice(offset, 25)


def test_write_across_a_server_restart_stores_each_row_once(spark, server_factory):
    """kill -9 of the server while a write runs, started again a second later on its port and store: the write
    tasks that lose their connection fail, Spark retries them, the retries wait (``timeout``) for the server and
    repeat their message ids, and the server's de-duplication - rebuilt from the file store after the restart -
    keeps one copy of what the first attempts had stored."""
    server = server_factory()
    name = unique("GR")
    sync(server.url, lambda a: a.create(name, storage="file"))
    df = spark.range(0, ROWS, 1, 2).selectExpr(f"'{name}.rows' as subject",
                                               "concat('row-', cast(id as string)) as data")
    restarted = []

    def restart_midway() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                n = sync(server.url, lambda a: a.info(name))["state"]["messages"]
            except Exception:
                n = 0
            if n >= ROWS // 10:
                break
            time.sleep(0.02)
        server.kill()
        restarted.append(n)
        time.sleep(1.0)
        server.start()

    t = threading.Thread(target=restart_midway)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    t.start()
    try:
        (df.mapInArrow(slower, df.schema).write.format("jetstream").mode("append").option("servers", server.url)
         .option("stream", name).option("writeId", name).option("timeout", "30").save())
    finally:
        t.join()
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert restarted and restarted[0] < ROWS, restarted  # the restart came in the middle of the write
    counts = collections.Counter(_stored(server.url, name))
    assert sorted(counts) == sorted(b"row-%d" % i for i in range(ROWS)) and set(counts.values()) == {1}
