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
When the connection breaks mid-read (the server went away, or stopped answering PINGs) the task does not fail: it
connects again - to the next URL of ``servers``, wrapping round to the same one (a server restarted on its port)
- for at most ``timeout`` seconds, checks that the stream is still the one it planned on, and goes on from the
sequence after the last message it handed to Spark (:func:`_read_resuming`).  Rows are never repeated or skipped
by a reconnect; only if it fails does the task fail, and Spark's retry reads the whole range again.

*Streaming* offsets are ``{"stream", "seq", "created"}`` (offsets.py): ``created`` is the stream's creation time,
so a checkpoint of a stream that was deleted and re-created since is recognised as data loss (an error, or with
``failOnDataLoss=false`` a clean restart at the new stream's first message) instead of silently skipping the new
stream's first sequences.  ``latestOffset(start, limit)`` honours Spark's read
limits: ``maxOffsetsPerTrigger`` becomes the default ``ReadMaxRows`` (counted in sequences, like Kafka counts
offsets), ``ReadAllAvailable`` ignores it.  ``Trigger.AvailableNow`` calls ``prepareForTriggerAvailableNow`` first:
the end of the stream at that moment becomes a ceiling that later ``latestOffset`` calls never pass, so the query
stops once it has read what was there when it started (in as many rate-limited batches as it takes).  Nothing is
committed to the server: the ephemeral consumers are gone after each task, and Spark's checkpoint is the only
position.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Iterator

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from .client import NatsError, NoRespondersError
from .jetstream import ConnectionLost, JetStream, read_range, read_range_direct
from .offsets import (
    OffsetError, StreamBounds, StreamReset, check_position, check_start, decode_position, encode_offset, limit_end,
    resolve_end, resolve_start, split_range,
)
from .options import ReadOptions
from .rows import to_record_batch
from .runner import LoopRunner, open_jetstream_within
from .schema import read_arrow_schema

try:  # pyspark >= 4.2: read limits and Trigger.AvailableNow for Python streaming sources
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - pyspark 4.0 / 4.1
    ReadAllAvailable = ReadMaxRows = None

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

__all__ = ["SeqRange", "JetStreamBatchReader", "JetStreamStreamReader", "FailedStreamReader", "read_partition",
           "fetch_bounds", "fetch_start"]

log = logging.getLogger("pyspark_jetstream")


@dataclass
class SeqRange(InputPartition):
    """Stream sequences ``[start, end)`` of one task."""

    index: int
    start: int
    end: int
    created: str | None = None  # the incarnation of the stream the range was planned on

    def __post_init__(self) -> None:
        InputPartition.__init__(self, (self.start, self.end))


def fetch_bounds(opts: ReadOptions, at_time: bool = False) -> tuple[StreamBounds, int | None]:
    """The stream's bounds; with ``at_time``, also the first sequence at ``startingTimestamp`` (None: none)."""
    with LoopRunner() as runner:

        async def info():
            # a server restarting under a running streaming query: wait for it (or the next URL) up to timeout,
            # also when the connection breaks while a request is in flight (the requests only read: asked again)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + opts.connect.timeout
            name, first, why = f"pyspark-jetstream plan {opts.stream}", 0, ""
            while True:
                js = await open_jetstream_within(opts.connect, name, deadline, first, why)
                try:
                    info = await js.stream_info(opts.stream)
                    seq = await js.seq_at_time(opts.stream, opts.starting_timestamp) if at_time else None
                    return info, seq
                except NatsError as e:
                    if not _connection_failed(js, e, False) or loop.time() >= deadline:
                        raise
                    log.warning("jetstream %s: %s; planning again over a new connection", opts.stream, e)
                    first, why = js.conn.server_index + 1, str(e)
                finally:
                    await js.conn.close()

        info, seq = runner.run(info())
        return StreamBounds.from_info(info), seq


def fetch_start(opts: ReadOptions, streaming: bool) -> tuple[StreamBounds, int]:
    """The bounds and the first sequence to read from ``startingOffsets`` or ``startingTimestamp``.

    A time after the last message: a streaming query starts at the end (every message from then on is newer); a
    batch query fails, as Spark's Kafka source does by default when no offset matches a timestamp."""
    if opts.starting_timestamp is None:
        bounds = fetch_bounds(opts)[0]
        return bounds, resolve_start(opts.starting, bounds)
    bounds, seq = fetch_bounds(opts, at_time=True)
    if seq is not None:
        return bounds, seq
    if streaming:
        return bounds, bounds.end
    raise OffsetError(f"stream {opts.stream!r}: no message stored at or after startingTimestamp "
                      f"{opts.starting_timestamp} (the stream holds sequences {bounds.start}..{bounds.last_seq})")


def plan(opts: ReadOptions, start: int, end: int, created: str | None = None) -> list[SeqRange]:
    pieces = split_range(start, end, opts.min_partitions, opts.max_seqs_per_partition)
    return [SeqRange(i, s, e, created) for i, (s, e) in enumerate(pieces)]


def _connection_failed(js: JetStream, error: Exception, reconnecting: bool) -> bool:
    """The error is the connection's, not the server's answer: the read can go on over a new connection.  Right
    after a reconnect, no responders counts too (a server whose JetStream is not serving yet)."""
    return isinstance(error, ConnectionLost) or js.conn.error is not None or (
        reconnecting and isinstance(error, NoRespondersError))


async def _read_resuming(opts: ReadOptions, start: int, end: int, created: str | None):
    """Lists of :class:`StoredMsg` for sequences ``[start, end)``, going on over a new connection when one breaks.

    The position is the sequence after the last message handed out, so a read that resumes - on the next server
    of the list, or on the same one after a restart - neither repeats nor skips a message.  Each (re)connection
    first checks, under ``failOnDataLoss``, that the stream is still the one the range was planned on (same
    creation time) and still holds the next sequence.  Reconnecting is given ``timeout`` seconds from the moment
    the connection broke; that clock starts afresh only once the read has made progress again, so a server that
    takes connections but fails every read does not keep the task alive for ever."""
    loop = asyncio.get_running_loop()
    name = f"pyspark-jetstream read {opts.stream}"
    js = await open_jetstream_within(opts.connect, name, loop.time() + opts.connect.timeout)
    next_seq = start
    deadline = None  # set while reconnecting: the end of the time given to get the read going again
    progress_at = start  # next_seq when the deadline was set
    try:
        while True:
            try:
                if opts.fail_on_data_loss:
                    bounds = StreamBounds.from_info(await js.stream_info(opts.stream))
                    if created and bounds.created and created != bounds.created:  # re-created since planning
                        raise StreamReset(opts.stream, f"it was deleted and re-created while the query ran "
                                                       f"(planned on the stream created {created}, now created "
                                                       f"{bounds.created})", bounds.start)
                    check_start(opts.stream, next_seq, bounds, True, end)
                filters = list(opts.filter_subjects)
                if opts.read_method == "direct":
                    agen = read_range_direct(js, opts.stream, next_seq, end - 1, filters, chunk=opts.fetch_batch,
                                             timeout=opts.connect.timeout)
                else:
                    agen = read_range(js, opts.stream, next_seq, end - 1, filters, chunk=opts.fetch_batch,
                                      pull_timeout=opts.connect.timeout)
                try:
                    async for msgs in agen:
                        next_seq = msgs[-1].seq + 1
                        yield msgs
                finally:
                    await agen.aclose()  # a read stopped early (a LIMIT): delete the consumer first
                return
            except NatsError as e:
                if not _connection_failed(js, e, deadline is not None):
                    raise
                lost = e
            if deadline is None or next_seq != progress_at:
                deadline = loop.time() + opts.connect.timeout
                progress_at = next_seq
            log.warning("jetstream %s: %s; reconnecting to go on at sequence %d", opts.stream, lost, next_seq)
            old = js
            await old.conn.close()
            js = await open_jetstream_within(opts.connect, name, deadline, old.conn.server_index + 1, str(lost))
    finally:
        await js.conn.close()


def read_partition(opts: ReadOptions, start: int, end: int, schema, created: str | None = None) -> Iterator:
    """Arrow record batches of the messages with stream sequences in ``[start, end)``."""
    if end <= start:
        return
    runner = LoopRunner()
    batches = None
    try:
        batches = runner.iterate(_read_resuming(opts, start, end, created))
        for msgs in batches:
            yield to_record_batch(opts.stream, msgs, schema)
    finally:
        if batches is not None:
            batches.close()  # closes the read (its consumer, its connection) before the loop goes
        runner.close()


class JetStreamBatchReader(DataSourceReader):
    def __init__(self, options, schema: StructType) -> None:
        self.opts = ReadOptions.parse(options)
        self.arrow_schema = read_arrow_schema(schema)

    def partitions(self) -> list[SeqRange]:
        opts = self.opts
        bounds, start = fetch_start(opts, streaming=False)
        end = resolve_end(opts.ending, bounds)
        if start > end:
            # Kafka's batch source fails the same way ("starting offset ... is after the ending offset")
            what = "the end of the stream" if end == bounds.end else "endingOffsets"
            raise OffsetError(f"stream {opts.stream!r}: startingOffsets {start} is after {what} ({end}, exclusive;"
                              f" the stream holds sequences {bounds.start}..{bounds.last_seq})")
        start = check_start(opts.stream, start, bounds, opts.fail_on_data_loss, end)
        parts = plan(opts, start, end, bounds.created)
        log.info("jetstream %s: reading [%d, %d) in %d partitions", opts.stream, start, end, len(parts))
        return parts

    def read(self, partition: SeqRange):
        if not isinstance(partition, SeqRange):
            return iter(())  # an empty range plans no partitions; Spark then runs one with a bare InputPartition
        return read_partition(self.opts, partition.start, partition.end, self.arrow_schema, partition.created)


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options, schema: StructType) -> None:
        self.opts = ReadOptions.parse(options, streaming=True)
        self.arrow_schema = read_arrow_schema(schema)
        self._target: int | None = None  # Trigger.AvailableNow ceiling
        self._last: int | None = None  # the end last returned (old latestOffset() without arguments)

    def initialOffset(self) -> dict:
        bounds, start = fetch_start(self.opts, streaming=True)
        return encode_offset(self.opts.stream, start, bounds.created)

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = fetch_bounds(self.opts)[0].end
        log.info("jetstream %s: available-now target end %d", self.opts.stream, self._target)

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        opts = self.opts
        if start is None and self._last is None:  # pyspark < 4.2: latestOffset() with no arguments, no limit
            bounds, first = fetch_start(opts, streaming=True)
        else:
            bounds, first = fetch_bounds(opts)[0], None
        if start is None:
            pos = self._last if self._last is not None else decode_position(
                encode_offset(opts.stream, first, bounds.created), opts.stream)
            max_rows = None
        else:
            pos = decode_position(start, opts.stream)
            if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
                max_rows = limit.max_rows
            else:
                max_rows = None  # ReadAllAvailable (or a limit kind that means nothing here)
        available = bounds.end if self._target is None else min(bounds.end, self._target)
        base, reset = check_position(opts.stream, pos, bounds, opts.fail_on_data_loss)
        if reset:
            # failOnDataLoss=false and the stream was re-created: this batch starts afresh at ``base`` of the new
            # incarnation; the offset records it so that partitions() (and a replay) plans the same range
            end = limit_end(base, max(available, base), max_rows)
            log.warning("jetstream %s: the checkpoint does not belong to the stream as it is now (re-created?); "
                        "restarting at sequence %d", opts.stream, base)
            off = encode_offset(opts.stream, end, bounds.created, reset=base)
        else:
            end = max(pos.seq, limit_end(base, available, max_rows))
            off = encode_offset(opts.stream, end, bounds.created or pos.created)
        self._last = decode_position(off, opts.stream)
        return off

    def reportLatestOffset(self) -> dict:
        bounds = fetch_bounds(self.opts)[0]
        return encode_offset(self.opts.stream, bounds.end, bounds.created)

    def partitions(self, start: dict, end: dict) -> list[SeqRange]:
        s = decode_position(start, self.opts.stream)
        e = decode_position(end, self.opts.stream)
        first = e.reset if e.reset is not None else s.seq
        return plan(self.opts, first, e.seq, e.created)

    def read(self, partition: SeqRange):
        return read_partition(self.opts, partition.start, partition.end, self.arrow_schema, partition.created)

    def commit(self, end: dict) -> None:
        pass  # the checkpoint is the position; nothing lives on the server between batches

    def stop(self) -> None:
        pass


class FailedStreamReader(DataSourceStreamReader):
    """A streaming reader whose options were refused: every call raises that error (see source.streamReader)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def initialOffset(self) -> dict:
        raise self.error

    def latestOffset(self, start=None, limit=None) -> dict:
        raise self.error

    def partitions(self, start: dict, end: dict):
        raise self.error

    def read(self, partition):
        raise self.error

    def stop(self) -> None:
        pass
