"""The Spark schemas of the data source: the rows it reads, and the columns a DataFrame to write may have."""
from __future__ import annotations

from pyspark.sql.types import (
    ArrayType, BinaryType, LongType, MapType, StringType, StructField, StructType, TimestampType,
)

from .rows import ARROW_TYPES, COLUMNS, arrow_schema

__all__ = ["READ_SCHEMA", "read_arrow_schema", "check_write_schema"]

READ_SCHEMA = StructType([
    StructField("stream", StringType(), nullable=False),
    StructField("subject", StringType(), nullable=False),
    StructField("seq", LongType(), nullable=False),
    StructField("timestamp", TimestampType(), nullable=False),
    StructField("headers", MapType(StringType(), ArrayType(StringType())), nullable=True),
    StructField("data", BinaryType(), nullable=False),
])


def read_arrow_schema(schema: StructType):
    """The Arrow schema a read task must produce for ``schema`` (the full row schema or a subset of it)."""
    expected = {f.name: f.dataType for f in READ_SCHEMA.fields}
    names = []
    for f in schema.fields:
        if f.name not in expected:
            raise ValueError(f"the jetstream source has no column {f.name!r}; it has {', '.join(COLUMNS)}")
        if f.dataType != expected[f.name]:
            raise ValueError(f"column {f.name!r} of the jetstream source is {expected[f.name].simpleString()}, "
                             f"not {f.dataType.simpleString()}")
        names.append(f.name)
    try:  # exactly what Spark checks the batches against (field nullability included)
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(schema, timezone="UTC")
    except ImportError:  # pragma: no cover
        return arrow_schema(names)


_WRITE_TYPES = {
    "data": (BinaryType, StringType),
    "subject": (StringType,),
    "msg_id": (StringType,),
}


def check_write_schema(schema: StructType) -> None:
    """A DataFrame to write needs ``data``; ``subject``, ``headers`` and ``msg_id`` are optional; others ignored."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "data" not in fields:
        raise ValueError("the jetstream sink needs a 'data' column (binary or string)")
    for name, types in _WRITE_TYPES.items():
        if name in fields and not isinstance(fields[name], types):
            raise ValueError(f"column {name!r} must be {' or '.join(t.typeName() for t in types)}, "
                             f"not {fields[name].simpleString()}")
    if "headers" in fields:
        t = fields["headers"]
        ok = (isinstance(t, MapType) and isinstance(t.keyType, StringType)
              and (isinstance(t.valueType, StringType)
                   or (isinstance(t.valueType, ArrayType) and isinstance(t.valueType.elementType, StringType))))
        if not ok:
            raise ValueError("column 'headers' must be map<string,string> or map<string,array<string>>, "
                             f"not {t.simpleString()}")


assert set(ARROW_TYPES) == {f.name for f in READ_SCHEMA.fields}
