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
3. generated: ``<prefix>:<partition>:<row index in the partition>:<digest of the row>`` where the prefix is
   - streaming: ``<query id>:<batch id>`` (Spark's local properties ``sql.streaming.queryId`` and
     ``streaming.sql.batchId``; the query id survives restarts from the same checkpoint, and a replayed batch
     holds the same rows in the same partitions when its source is replayable, as the jetstream source is);
   - batch: the ``writeId`` option, or else an id drawn once when the write is planned, shared by every attempt
     of every task of that write (so a retried task repeats its ids; a *new* write is new data unless it passes
     the same ``writeId``).

   The digest (BLAKE2b of subject, headers and data) is what makes a position-derived id safe when a retry sees
   the rows in other places - a job re-run with 3 partitions instead of 4, an upstream shuffle that is not
   deterministic: an id can then only match a stored message *with the same content*, so a retry never drops a
   row.  Its ids are pairwise distinct (distinct positions), so each of its rows maps to its own stored message
   of the same content: for every content the stream holds at least as many copies as the retry wrote.  What a
   changed partitioning costs is duplicates (rows that moved are stored again), never loss; only a ``msg_id``
   column (a key) gives exactly-once whatever the partitioning.

With the ``stream`` option every message carries ``Nats-Expected-Stream``, so a message whose subject belongs to
another stream is refused by the server (``expected stream does not match``, err_code 10060) instead of being
stored there and reported after.

Rows need ``data`` (binary or string); ``subject`` (else the ``subject`` option), ``headers``
(map<string,string> or map<string,array<string>>) and ``msg_id`` are optional; other columns are ignored.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import uuid
from dataclasses import dataclass
from typing import Iterator

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from skiff.protocol import headers as hdrs

from .jetstream import Publisher
from .options import WriteOptions
from .runner import LoopRunner, open_jetstream_within
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
EXPECTED_STREAM = "Nats-Expected-Stream"
_COLUMNS = ("data", "subject", "headers", "msg_id")


@dataclass
class JetStreamCommit(WriterCommitMessage):
    partition: int
    published: int
    duplicates: int


def content_digest(subject: str, hdr_items, payload: bytes) -> str:
    """16 characters (96 bits) of BLAKE2b over a row's subject, headers and data."""
    # one buffer hashed at once (the same digest as feeding the pieces one by one, at a third of the calls)
    head = subject + "\0" + "".join(f"{k}\0{v}\0" for k, v in hdr_items) + "\0"
    h = hashlib.blake2b(head.encode("utf-8", "surrogateescape") + payload, digest_size=12)
    return base64.urlsafe_b64encode(h.digest()).decode()


def message_id(prefix: str, partition: int, row: int, digest: str) -> str:
    return f"{prefix}:{partition}:{row}:{digest}"


def _header_items(entries, expected_stream: str | None = None) -> tuple[list, str | None]:
    """A row's ``headers`` map entries (values str or list of str) as header items, and the Nats-Msg-Id in them.

    A row's own ``Nats-Expected-Stream`` is kept when the ``stream`` option is not set; with the option it must
    agree (the option's header is added by the caller)."""
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
            if k == EXPECTED_STREAM and expected_stream:
                if one != expected_stream:
                    raise ValueError(f"a row's {EXPECTED_STREAM} header says {one!r} but option stream is "
                                     f"{expected_stream!r}")
                continue
            items.append((k, one))
    return items, found


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
                           row: int, expected_stream: str | None = None) -> int:
    data = cols["data"]
    subjects = cols.get("subject")
    headers = cols.get("headers")
    ids = cols.get("msg_id")
    tail = [(EXPECTED_STREAM, expected_stream)] if expected_stream else []
    fast_tail = b"".join(f"{k}: {v}\r\n".encode() for k, v in tail) + b"\r\n"
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
            mid = message_id(prefix, partition, row, content_digest(subject, (), payload))
            hdr = b"NATS/1.0\r\nNats-Msg-Id: " + mid.encode() + b"\r\n" + fast_tail
        else:
            items, found = _header_items(entries, expected_stream)
            mid = mid or found or message_id(prefix, partition, row, content_digest(subject, items, payload))
            hdr = hdrs.build(items + [(MSG_ID, mid)] + tail)
        pub.send(subject, payload, hdr)
        if pub.full:  # the only await of the loop: a coroutine per row costs more than building the row
            await pub.room()
        row += 1
    return row


def write_partition(opts: WriteOptions, column_chunks: Iterator[dict], prefix: str) -> JetStreamCommit:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    runner = LoopRunner()
    js = None
    try:
        # a server restarting as the task starts: wait for it up to timeout, as reads do
        js = runner.run(open_jetstream_within(opts.connect, "pyspark-jetstream write",
                                              runner.loop.time() + opts.connect.timeout))
        pub = Publisher(js.conn, max_in_flight=opts.max_in_flight, timeout=opts.connect.timeout,
                        expected_stream=opts.stream)
        row = 0
        try:
            for cols in column_chunks:
                row = runner.run(_publish_columns(pub, cols, opts.subject, prefix, partition, row, opts.stream))
        except BaseException:
            # the task fails, but what it sent should land before the retry repeats it (and gets deduplicated)
            try:
                runner.run(asyncio.wait_for(pub.wait(), 10.0))
            except Exception:
                pass
            raise
        runner.run(pub.wait())
        pub.close()
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
        self.opts = WriteOptions.parse(options, streaming=True)
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
