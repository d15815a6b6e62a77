"""The ``jetstream`` data source: a JetStream stream as a Spark table (batch and streaming) and sink."""
from __future__ import annotations

from pyspark.sql.datasource import DataSource

from .schema import READ_SCHEMA

__all__ = ["JetStreamDataSource"]


class JetStreamDataSource(DataSource):
    """``spark.read.format("jetstream").option("servers", url).option("stream", name).load()``.

    See the package docstring for the options.
    """

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self):
        return READ_SCHEMA

    def reader(self, schema):
        from .reader import JetStreamBatchReader

        return JetStreamBatchReader(self.options, schema)

    def streamReader(self, schema):
        from .reader import JetStreamStreamReader

        return JetStreamStreamReader(self.options, schema)

    def writer(self, schema, overwrite: bool):
        from .writer import JetStreamBatchWriter

        return JetStreamBatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        from .writer import JetStreamStreamWriter

        return JetStreamStreamWriter(self.options, schema, overwrite)
