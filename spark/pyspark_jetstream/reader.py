"""Batch and streaming readers: plan sequence ranges on the driver, read each range in a task.

Theory of operation
-------------------
*Planning* asks STREAM.INFO once for ``first_seq``/``last_seq`` and fixes the range: for a batch query from
``startingOffsets`` and ``endingOffsets`` (offsets.py); for a micro-batch Spark hands over the checkpointed start
and the end :meth:`JetStreamStreamReader.latestOffset` chose.  :func:`~.offsets.split_range` cuts it into
:class:`SeqRange` partitions.  Because the range is fixed before any task runs, messages published during the
query are not read by it (a batch query sees a snapshot by sequence), and a retried task reads the same range.

*Reading* (:func:`read_partition`, in the task) connects, re-checks data loss when asked to (retention may have
moved ``first_seq`` since planning), reads the range with an ephemeral ack-none consumer or batched Direct Get
(jetstream.py) and yields one Arrow record batch per delivery burst, so a partition is never held in memory whole.

*Streaming* offsets are ``{"stream", "seq"}`` (offsets.py).  ``latestOffset(start, limit)`` honours Spark's read
limits: ``maxOffsetsPerTrigger`` becomes the default ``ReadMaxRows`` (counted in sequences, like Kafka counts
offsets), ``ReadAllAvailable`` ignores it.  ``Trigger.AvailableNow`` calls ``prepareForTriggerAvailableNow`` first:
the end of the stream at that moment becomes a ceiling that later ``latestOffset`` calls never pass, so the query
stops once it has read what was there when it started (in as many rate-limited batches as it takes).  Nothing is
committed to the server: the ephemeral consumers are gone after each task, and Spark's checkpoint is the only
position.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from .jetstream import read_range, read_range_direct
from .offsets import (
    StreamBounds, check_start, decode_offset, encode_offset, limit_end, resolve_end, resolve_start, split_range,
)
from .options import ReadOptions
from .rows import to_record_batch
from .runner import LoopRunner, open_jetstream
from .schema import read_arrow_schema

try:  # pyspark >= 4.2: read limits and Trigger.AvailableNow for Python streaming sources
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - pyspark 4.0 / 4.1
    ReadAllAvailable = ReadMaxRows = None

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

__all__ = ["SeqRange", "JetStreamBatchReader", "JetStreamStreamReader", "read_partition", "fetch_bounds"]

log = logging.getLogger("pyspark_jetstream")


@dataclass
class SeqRange(InputPartition):
    """Stream sequences ``[start, end)`` of one task."""

    index: int
    start: int
    end: int

    def __post_init__(self) -> None:
        InputPartition.__init__(self, (self.start, self.end))


def fetch_bounds(opts: ReadOptions) -> StreamBounds:
    with LoopRunner() as runner:

        async def info():
            js = await open_jetstream(opts.connect, name=f"pyspark-jetstream plan {opts.stream}")
            try:
                return await js.stream_info(opts.stream)
            finally:
                await js.conn.close()

        return StreamBounds.from_state(runner.run(info())["state"])


def plan(opts: ReadOptions, start: int, end: int) -> list[SeqRange]:
    pieces = split_range(start, end, opts.min_partitions, opts.max_seqs_per_partition)
    return [SeqRange(i, s, e) for i, (s, e) in enumerate(pieces)]


def read_partition(opts: ReadOptions, start: int, end: int, schema) -> Iterator:
    """Arrow record batches of the messages with stream sequences in ``[start, end)``."""
    if end <= start:
        return
    runner = LoopRunner()
    js = None
    batches = None
    try:
        js = runner.run(open_jetstream(opts.connect, name=f"pyspark-jetstream read {opts.stream}"))
        if opts.fail_on_data_loss:
            bounds = StreamBounds.from_state(runner.run(js.stream_info(opts.stream))["state"])
            check_start(opts.stream, start, bounds, True, end)
        filters = list(opts.filter_subjects)
        if opts.read_method == "direct":
            agen = read_range_direct(js, opts.stream, start, end - 1, filters, chunk=opts.fetch_batch)
        else:
            agen = read_range(js, opts.stream, start, end - 1, filters, chunk=opts.fetch_batch)
        batches = runner.iterate(agen)
        for msgs in batches:
            yield to_record_batch(opts.stream, msgs, schema)
    finally:
        if batches is not None:
            batches.close()  # a read stopped early (a LIMIT): delete the consumer before the connection goes
        if js is not None:
            runner.run(js.conn.close())
        runner.close()


class JetStreamBatchReader(DataSourceReader):
    def __init__(self, options, schema: StructType) -> None:
        self.opts = ReadOptions.parse(options)
        self.arrow_schema = read_arrow_schema(schema)

    def partitions(self) -> list[SeqRange]:
        opts = self.opts
        bounds = fetch_bounds(opts)
        start = resolve_start(opts.starting, bounds)
        end = resolve_end(opts.ending, bounds)
        start = check_start(opts.stream, start, bounds, opts.fail_on_data_loss, end)
        parts = plan(opts, start, end)
        log.info("jetstream %s: reading [%d, %d) in %d partitions", opts.stream, start, end, len(parts))
        return parts

    def read(self, partition: SeqRange):
        if not isinstance(partition, SeqRange):
            return iter(())  # an empty range plans no partitions; Spark then runs one with a bare InputPartition
        return read_partition(self.opts, partition.start, partition.end, self.arrow_schema)


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options, schema: StructType) -> None:
        self.opts = ReadOptions.parse(options, streaming=True)
        self.arrow_schema = read_arrow_schema(schema)
        self._target: int | None = None  # Trigger.AvailableNow ceiling
        self._last: int | None = None  # the end last returned (old latestOffset() without arguments)

    def initialOffset(self) -> dict:
        bounds = fetch_bounds(self.opts)
        return encode_offset(self.opts.stream, resolve_start(self.opts.starting, bounds))

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = fetch_bounds(self.opts).end
        log.info("jetstream %s: available-now target end %d", self.opts.stream, self._target)

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        opts = self.opts
        bounds = fetch_bounds(opts)
        if start is None:  # pyspark < 4.2 calls latestOffset() with no arguments and no read limit
            s = self._last if self._last is not None else resolve_start(opts.starting, bounds)
            max_rows = None
        else:
            s = decode_offset(start, opts.stream)
            if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
                max_rows = limit.max_rows
            else:
                max_rows = None  # ReadAllAvailable (or a limit kind that means nothing here)
        available = bounds.end if self._target is None else min(bounds.end, self._target)
        base = check_start(opts.stream, s, bounds, opts.fail_on_data_loss)
        end = max(s, limit_end(base, available, max_rows))
        self._last = end
        return encode_offset(opts.stream, end)

    def reportLatestOffset(self) -> dict:
        return encode_offset(self.opts.stream, fetch_bounds(self.opts).end)

    def partitions(self, start: dict, end: dict) -> list[SeqRange]:
        s = decode_offset(start, self.opts.stream)
        e = decode_offset(end, self.opts.stream)
        return plan(self.opts, s, e)

    def read(self, partition: SeqRange):
        return read_partition(self.opts, partition.start, partition.end, self.arrow_schema)

    def commit(self, end: dict) -> None:
        pass  # the checkpoint is the position; nothing lives on the server between batches

    def stop(self) -> None:
        pass
