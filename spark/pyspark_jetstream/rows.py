"""Stored messages -> Arrow record batches with the data source's row schema (needs pyarrow, not Spark).

Row schema (Spark DDL)::

    stream string, subject string, seq long, timestamp timestamp,
    headers map<string, array<string>>, data binary

``headers`` is a map of lists because NATS headers repeat (``A: 1`` and ``A: 2`` in one block, ADR-4); it is null
for a message published without headers.  ``timestamp`` is the store time the server assigned (microseconds, as
Spark's TimestampType holds; the nanoseconds are cut, never rounded up past the next message).  A user-given schema
may name a subset of these columns: only those are built.
"""
from __future__ import annotations

import pyarrow as pa

from skiff.protocol import headers as hdrs

__all__ = ["COLUMNS", "ARROW_TYPES", "arrow_schema", "to_record_batch", "parse_header_map"]

COLUMNS = ("stream", "subject", "seq", "timestamp", "headers", "data")

ARROW_TYPES = {
    "stream": pa.string(),
    "subject": pa.string(),
    "seq": pa.int64(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "headers": pa.map_(pa.string(), pa.list_(pa.string())),
    "data": pa.binary(),
}


def arrow_schema(columns=COLUMNS) -> pa.Schema:
    return pa.schema([pa.field(c, ARROW_TYPES[c]) for c in columns])


def parse_header_map(hdr: bytes) -> list[tuple[str, list[str]]] | None:
    """A header block as map entries, repeated keys folded into one list in arrival order; None for no block."""
    if not hdr:
        return None
    _code, _text, items = hdrs.parse(hdr)
    out: dict[str, list[str]] = {}
    for k, v in items:
        lst = out.get(k)
        if lst is None:
            out[k] = [v]
        else:
            lst.append(v)
    return list(out.items())


def to_record_batch(stream: str, msgs, schema: pa.Schema) -> pa.RecordBatch:
    """One record batch of ``msgs`` (:class:`~.jetstream.StoredMsg`) with exactly the columns of ``schema``."""
    n = len(msgs)
    arrays = []
    for field in schema:
        name = field.name
        if name == "stream":
            arr = pa.array([stream] * n, field.type)
        elif name == "subject":
            arr = pa.array([m.subject for m in msgs], field.type)
        elif name == "seq":
            arr = pa.array([m.seq for m in msgs], field.type)
        elif name == "timestamp":
            arr = pa.array([m.time_ns // 1000 for m in msgs], pa.int64()).cast(field.type)
        elif name == "headers":
            arr = pa.array([parse_header_map(m.hdr) for m in msgs], field.type)
        elif name == "data":
            arr = pa.array([m.data for m in msgs], field.type)
        else:
            raise ValueError(f"unknown column {name!r}; the jetstream source has {', '.join(COLUMNS)}")
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
