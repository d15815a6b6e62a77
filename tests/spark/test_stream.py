"""Structured Streaming through Spark: per-trigger limits, restarts that read only new messages, available-now,
failOnDataLoss, and a streaming sink that stays exactly-once when a batch is replayed."""
from __future__ import annotations

import os
import threading

import pytest

from tests.spark.helpers import sync, unique


class Batches:
    """A foreachBatch sink that records the stream sequences of every micro-batch, in the driver."""

    def __init__(self, during_first_batch=None) -> None:
        self.lock = threading.Lock()
        self.batches: list[tuple[int, list[int]]] = []
        self.during_first_batch = during_first_batch

    def __call__(self, df, batch_id: int) -> None:
        seqs = sorted(r.seq for r in df.select("seq").collect())
        with self.lock:
            self.batches.append((batch_id, seqs))
        if self.during_first_batch is not None and len(self.batches) == 1:
            self.during_first_batch()

    @property
    def seqs(self) -> list[int]:
        return [s for _b, seqs in self.batches for s in seqs]


def run_available_now(spark, url, stream, checkpoint, sink, **options):
    r = spark.readStream.format("jetstream").option("servers", url).option("stream", stream)
    for k, v in options.items():
        r = r.option(k, v)
    q = r.load().writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint).trigger(availableNow=True)
    q = q.start()
    q.awaitTermination(120)
    assert not q.isActive
    if q.exception():
        raise q.exception()
    return q


def publish(url, subject, start, stop):
    return sync(url, lambda a: a.publish_many([(subject, b"m%d" % i) for i in range(start, stop)]))


def test_trigger_limit_and_restart_reads_only_new(spark, shared_server, tmp_path):
    url = shared_server.url
    name = unique("ST")
    sync(url, lambda a: a.create(name))
    publish(url, f"{name}.a", 0, 25)
    ckpt = str(tmp_path / "ckpt")
    # messages published while an available-now run is going are not part of it (its target is fixed at start)
    first = Batches(during_first_batch=lambda: publish(url, f"{name}.a", 25, 30))
    run_available_now(spark, url, name, ckpt, first, startingOffsets="earliest", maxOffsetsPerTrigger=10)
    # at most 10 sequences per micro-batch, in order, no gaps, no duplicates
    assert [seqs for _b, seqs in first.batches if seqs] == [list(range(1, 11)), list(range(11, 21)),
                                                            list(range(21, 26))]
    # the restarted query reads exactly what came after: first the messages published during the first run ...
    second = Batches()
    run_available_now(spark, url, name, ckpt, second, startingOffsets="earliest", maxOffsetsPerTrigger=10)
    assert second.seqs == list(range(26, 31))
    # ... then, after new messages, only those
    publish(url, f"{name}.a", 30, 37)
    third = Batches()
    run_available_now(spark, url, name, ckpt, third, startingOffsets="earliest", maxOffsetsPerTrigger=10)
    assert third.seqs == list(range(31, 38))
    batch_ids = [b for run in (first, second, third) for b, s in run.batches if s]
    assert batch_ids == sorted(batch_ids) and len(set(batch_ids)) == len(batch_ids)


def test_starting_latest_and_filter(spark, shared_server, tmp_path):
    url = shared_server.url
    name = unique("SL")
    sync(url, lambda a: a.create(name))
    publish(url, f"{name}.a", 0, 5)
    ckpt = str(tmp_path / "ckpt")
    sink = Batches()
    # Kafka's default for streams: start at the end; the first run sees nothing that was there before
    run_available_now(spark, url, name, ckpt, sink, filterSubjects=f"{name}.b")
    assert sink.seqs == []
    sync(url, lambda a: a.publish_many([(f"{name}.{'ab'[i % 2]}", b"x") for i in range(10)]))  # seqs 6..15
    run_available_now(spark, url, name, ckpt, sink, filterSubjects=f"{name}.b")
    assert sink.seqs == [7, 9, 11, 13, 15]


def test_fail_on_data_loss(spark, shared_server, tmp_path):
    url = shared_server.url
    name = unique("SD")
    sync(url, lambda a: a.create(name, max_msgs=10))
    publish(url, f"{name}.a", 0, 10)
    ckpt = str(tmp_path / "ckpt")
    run_available_now(spark, url, name, ckpt, Batches(), startingOffsets="earliest")
    publish(url, f"{name}.a", 10, 40)  # retention keeps 31..40: 11..30 were never read
    with pytest.raises(Exception, match="removed"):
        run_available_now(spark, url, name, ckpt, Batches())
    sink = Batches()
    run_available_now(spark, url, name, ckpt, sink, failOnDataLoss="false")
    assert sink.seqs == list(range(31, 41))


def test_streaming_write_replayed_batch_is_deduplicated(spark, shared_server, tmp_path):
    url = shared_server.url
    src, dst = unique("SRC"), unique("DST")
    sync(url, lambda a: a.create(src))
    sync(url, lambda a: a.create(dst))
    publish(url, f"{src}.a", 0, 20)
    ckpt = str(tmp_path / "ckpt")

    def run():
        df = (spark.readStream.format("jetstream").option("servers", url).option("stream", src)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 8).load()
              .selectExpr(f"concat('{dst}.', cast(seq as string)) as subject", "data"))
        q = (df.writeStream.format("jetstream").option("servers", url).option("stream", dst)
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
        q.awaitTermination(120)
        if q.exception():
            raise q.exception()
        return q

    q = run()
    msgs = sync(url, lambda a: a.messages(dst))
    assert sorted(int(subj.rsplit(".", 1)[1]) for _s, subj, _d, _h in msgs) == list(range(1, 21))
    ids = {h["Nats-Msg-Id"][0] for *_x, h in msgs}
    assert len(ids) == 20 and all(i.startswith(q.id + ":") for i in ids)  # <query id>:<batch id>:<part>:<row>
    # forget that the last batch was committed: the restarted query replays it with the same ids
    commits = sorted(int(f) for f in os.listdir(os.path.join(ckpt, "commits")) if f.isdigit())
    for f in (str(commits[-1]), f".{commits[-1]}.crc"):
        if os.path.exists(os.path.join(ckpt, "commits", f)):
            os.remove(os.path.join(ckpt, "commits", f))
    replay = run()
    assert sum(p["numInputRows"] for p in replay.recentProgress) == 4  # batch 2 (17..20) was written again
    again = sync(url, lambda a: a.messages(dst))
    assert len(again) == 20


def test_recreated_stream_is_data_loss(spark, shared_server, tmp_path):
    """Issue #18 item 1: 10 read, the stream deleted and re-created with 6 - the checkpoint (next seq 11) is past
    its end; after 9 more it is not, but the new 1..10 were never read.  Under failOnDataLoss=true both are
    errors (the offset holds the stream's creation time); under false the query restarts at the new start."""
    url = shared_server.url
    name = unique("RC")
    sync(url, lambda a: a.create(name))
    publish(url, f"{name}.a", 0, 10)
    ckpt = str(tmp_path / "ckpt")
    first = Batches()
    run_available_now(spark, url, name, ckpt, first, startingOffsets="earliest")
    assert first.seqs == list(range(1, 11))

    async def recreate(a):
        r = await a.api(f"STREAM.DELETE.{name}")
        assert r.get("success"), r
        await a.create(name)

    sync(url, recreate)
    publish(url, f"{name}.a", 100, 106)  # the new stream: seqs 1..6
    with pytest.raises(Exception, match="re-created"):
        run_available_now(spark, url, name, ckpt, Batches())
    publish(url, f"{name}.a", 106, 115)  # 1..15: the checkpointed seq 11 is inside the new stream now
    with pytest.raises(Exception, match="re-created"):
        run_available_now(spark, url, name, ckpt, Batches())
    sink = Batches()
    run_available_now(spark, url, name, ckpt, sink, failOnDataLoss="false")
    assert sink.seqs == list(range(1, 16))  # every message of the new stream, none skipped
    publish(url, f"{name}.a", 115, 118)
    after = Batches()
    run_available_now(spark, url, name, ckpt, after)  # back to normal, failOnDataLoss=true again
    assert after.seqs == [16, 17, 18]
