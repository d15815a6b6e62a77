"""The ``jetstream`` data source: a JetStream stream as a Spark table (batch and streaming) and sink."""
from __future__ import annotations

from pyspark.sql.datasource import DataSource

from .options import validate
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
        # Spark calls this from load(): the place where a bad option should fail, before any query runs
        validate(self.options)
        return READ_SCHEMA

    def reader(self, schema):
        from .reader import JetStreamBatchReader

        return JetStreamBatchReader(self.options, schema)

    def streamReader(self, schema):
        from .reader import FailedStreamReader, JetStreamStreamReader

        try:
            return JetStreamStreamReader(self.options, schema)
        except ValueError as e:
            # pyspark 4.x's streaming source runner hides an exception raised here behind an UnboundLocalError
            # of its own (python_streaming_source_runner.py calls reader.stop() on a reader it never got): hand
            # over a reader that raises the real error from its first call instead
            return FailedStreamReader(e)

    def writer(self, schema, overwrite: bool):
        from .writer import JetStreamBatchWriter

        return JetStreamBatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        from .writer import JetStreamStreamWriter

        return JetStreamStreamWriter(self.options, schema, overwrite)
