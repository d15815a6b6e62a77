"""Batch and streaming writers: publish each row as a JetStream message, pipelined, with a deterministic
``Nats-Msg-Id``.

Theory of operation
-------------------
A write task owns one connection and one :class:`~.jetstream.Publisher`: it publishes row after row without
waiting (up to ``maxInFlight`` PubAcks outstanding), then waits for every PubAck before it reports success, so a
task that returned has every one of its rows stored.  A task that fails still waits (briefly) for the acks of what
it already sent, then re-raises: Spark retries it.

Exactly-once within the duplicate window comes from ``Nats-Msg-Id`` (nats-server dedupes a repeated id within the
stream's ``duplicate_window`` and acks it with ``"duplicate": true``).  The id of a row is, in order of preference:

1. the row's ``msg_id`` column, when present and not null - stable across anything;
2. a ``Nats-Msg-Id`` in the row's ``headers``;
3. generated: ``<prefix>:<partition>:<row index in the partition>`` where the prefix is
   - streaming: ``<query id>:<batch id>`` (Spark's local properties ``sql.streaming.queryId`` and
     ``streaming.sql.batchId``; the query id survives restarts from the same checkpoint, and a replayed batch
     holds the same rows in the same partitions when its source is replayable, as the jetstream source is);
   - batch: the ``writeId`` option, or else an id drawn once when the write is planned, shared by every attempt
     of every task of that write (so a retried task repeats its ids; a *new* write is new data unless it passes
     the same ``writeId``).

Rows need ``data`` (binary or string); ``subject`` (else the ``subject`` option), ``headers``
(map<string,string> or map<string,array<string>>) and ``msg_id`` are optional; other columns are ignored.
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Iterator

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from protocol import headers as hdrs

from .jetstream import Publisher
from .options import WriteOptions
from .runner import LoopRunner, open_jetstream
from .schema import check_write_schema

try:
    from pyspark.sql.datasource import DataSourceArrowWriter
except ImportError:  # pragma: no cover
    DataSourceArrowWriter = DataSourceWriter
try:  # pyspark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
    _STREAM_ARROW = True
except ImportError:  # pragma: no cover
    DataSourceStreamArrowWriter = DataSourceStreamWriter
    _STREAM_ARROW = False

__all__ = ["JetStreamBatchWriter", "JetStreamStreamWriter", "JetStreamCommit", "message_id"]

MSG_ID = "Nats-Msg-Id"
_COLUMNS = ("data", "subject", "headers", "msg_id")


@dataclass
class JetStreamCommit(WriterCommitMessage):
    partition: int
    published: int
    duplicates: int


def message_id(prefix: str, partition: int, row: int) -> str:
    return f"{prefix}:{partition}:{row}"


def _header_block(entries, msg_id: str | None) -> tuple[bytes, str | None]:
    """The header block for a row's ``headers`` map entries (values str or list of str) and its Nats-Msg-Id."""
    items = []
    found = None
    for k, v in entries or ():
        values = v if isinstance(v, (list, tuple)) else [v]
        for one in values:
            if one is None:
                continue
            if k == MSG_ID:
                found = found or one
                continue
            items.append((k, one))
    mid = msg_id or found
    if mid:
        items.append((MSG_ID, mid))
    return (hdrs.build(items) if items else b""), mid


def _columns_from_arrow(batches) -> Iterator[dict]:
    for batch in batches:
        names = batch.schema.names
        yield {c: batch.column(names.index(c)).to_pylist() for c in _COLUMNS if c in names}


def _columns_from_rows(rows, chunk: int = 4096) -> Iterator[dict]:
    cols: dict = {}
    n = 0
    for row in rows:
        d = row.asDict() if hasattr(row, "asDict") else dict(row)
        if not cols:
            cols = {c: [] for c in _COLUMNS if c in d}
        for c, lst in cols.items():
            v = d[c]
            lst.append(list(v.items()) if isinstance(v, dict) else v)
        n += 1
        if n == chunk:
            yield cols
            cols, n = {}, 0
    if n:
        yield cols


async def _publish_columns(pub: Publisher, cols: dict, default_subject: str | None, prefix: str, partition: int,
                           row: int) -> int:
    data = cols["data"]
    subjects = cols.get("subject")
    headers = cols.get("headers")
    ids = cols.get("msg_id")
    for i in range(len(data)):
        subject = (subjects[i] if subjects is not None else None) or default_subject
        if not subject:
            raise ValueError("a row has no subject: add a 'subject' column or the 'subject' option")
        payload = data[i]
        if payload is None:
            payload = b""
        elif isinstance(payload, str):
            payload = payload.encode()
        mid = ids[i] if ids is not None else None
        entries = headers[i] if headers is not None else None
        if mid is None and not entries:
            hdr = b"NATS/1.0\r\n" + MSG_ID.encode() + b": " + message_id(prefix, partition, row).encode() + b"\r\n\r\n"
        else:
            hdr, found = _header_block(entries, mid)
            if found is None:
                hdr, _ = _header_block(entries, message_id(prefix, partition, row))
        await pub.publish(subject, payload, hdr)
        row += 1
    return row


def write_partition(opts: WriteOptions, column_chunks: Iterator[dict], prefix: str) -> JetStreamCommit:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    runner = LoopRunner()
    js = None
    try:
        js = runner.run(open_jetstream(opts.connect, name="pyspark-jetstream write"))
        pub = Publisher(js.conn, max_in_flight=opts.max_in_flight, timeout=max(opts.connect.timeout, 30.0),
                        expected_stream=opts.stream)
        row = 0
        try:
            for cols in column_chunks:
                row = runner.run(_publish_columns(pub, cols, opts.subject, prefix, partition, row))
        except BaseException:
            # the task fails, but what it sent should land before the retry repeats it (and gets deduplicated)
            try:
                runner.run(asyncio.wait_for(pub.wait(), 10.0))
            except Exception:
                pass
            raise
        runner.run(pub.wait())
        return JetStreamCommit(partition, pub.published, pub.duplicates)
    finally:
        if js is not None:
            runner.run(js.conn.close())
        runner.close()


class JetStreamBatchWriter(DataSourceArrowWriter):
    def __init__(self, options, schema, overwrite: bool) -> None:
        if overwrite:
            raise ValueError("the jetstream sink appends to a stream; mode 'overwrite' is not supported")
        check_write_schema(schema)
        self.opts = WriteOptions.parse(options)
        # drawn once, on the driver: every attempt of every task of this write shares it
        self.prefix = self.opts.write_id or uuid.uuid4().hex

    def write(self, iterator) -> JetStreamCommit:
        chunks = _columns_from_arrow(iterator) if DataSourceArrowWriter is not DataSourceWriter \
            else _columns_from_rows(iterator)
        return write_partition(self.opts, chunks, self.prefix)

    def commit(self, messages) -> None:
        pass  # every task already waited for all its PubAcks

    def abort(self, messages) -> None:
        pass  # a stream cannot take messages back; a retried write is deduplicated by Nats-Msg-Id


class JetStreamStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options, schema, overwrite: bool) -> None:
        check_write_schema(schema)
        self.opts = WriteOptions.parse(options)
        self.fallback_prefix = self.opts.write_id or uuid.uuid4().hex

    def _prefix(self) -> str:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        query = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        if query is None or batch is None:
            return f"{self.fallback_prefix}:{batch}"
        return f"{query}:{batch}"

    def write(self, iterator) -> JetStreamCommit:
        chunks = _columns_from_arrow(iterator) if _STREAM_ARROW else _columns_from_rows(iterator)
        return write_partition(self.opts, chunks, self._prefix())

    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass
