"""pyspark_jetstream: a JetStream stream as a Spark table and a Spark sink (PySpark Python Data Source API).

Install ``skiff[spark]`` (pyspark 4.x, pyarrow, pandas).  The format name is ``jetstream``; Spark finds it by itself
in every session and thread (it looks up ``pyspark_*`` packages with a ``DefaultSource`` on ``sys.path``; an
editable install gets a path file for that from Skiff's build backend, see spark/README.md).  Where the package is
importable some other way, register it with a session by hand::

    import pyspark_jetstream
    pyspark_jetstream.register(spark)

Batch read (options modelled on Spark's Kafka source)::

    df = (spark.read.format("jetstream")
          .option("servers", "nats://127.0.0.1:4222")      # comma-separated; nats://user:pass@host:port works
          .option("stream", "ORDERS")
          .option("startingOffsets", "earliest")            # earliest | latest | a stream sequence (inclusive)
          .option("endingOffsets", "latest")                # latest | a stream sequence (exclusive)
          # or .option("startingTimestamp", 1767225600000)  # ms since the epoch: first message stored then or later
          .option("filterSubjects", "orders.eu.*,orders.us.*")
          .option("minPartitions", 4)                       # at least this many tasks
          .option("maxSeqsPerPartition", 100000)            # at most this many sequences per task
          .load())
    # columns: stream string, subject string, seq long, timestamp timestamp,
    #          headers map<string,array<string>>, data binary

Streaming read: the same options plus ``maxOffsetsPerTrigger`` (sequences per micro-batch) and ``failOnDataLoss``
(default true: fail when retention removed messages the query has not read yet); ``startingOffsets`` defaults to
``latest`` like Kafka's.  Offsets are stream sequences checkpointed by Spark; ``Trigger.AvailableNow`` is
supported (pyspark >= 4.2).

Write (batch or streaming)::

    (df.select("subject", "data")          # data: binary or string; optional: subject, headers, msg_id
       .write.format("jetstream").mode("append")
       .option("servers", url).option("stream", "TOTALS")   # stream: check every PubAck came from it
       .option("subject", "totals.default")                 # for rows without a subject
       .save())

Every message carries a deterministic ``Nats-Msg-Id`` (the ``msg_id`` column, or one derived from the write /
query id, batch id, partition, row and a digest of the row), so a retried task or a restarted query is deduplicated
by the stream within its ``duplicate_window``, and a retry that sees rows in other places never drops one (see
spark/README.md, "Guarantees").  Unknown options are errors naming the close matches.  Other options: ``user``/``password``, ``token``, ``credsFile``,
``nkeySeedFile``, ``tlsCaFile``/``tlsCertFile``/``tlsKeyFile``/``tlsHandshakeFirst`` (or a ``tls://`` server),
``domain``, ``timeout`` (seconds: connects, API requests, and how long a read task that lost its server tries
the other URLs of ``servers`` - or the same one, restarted - before it fails; it goes on from the next sequence),
``readMethod`` (``consumer`` or ``direct`` for streams with ``allow_direct``), ``fetchBatch``, ``maxInFlight``,
``writeId``.

The connector speaks NATS itself (``wire``, ``client``, ``jetstream`` modules on Skiff's ``protocol`` package); it
does not use nats-py.  Modules that do not need Spark: wire, client, jetstream, offsets, options, rows (pyarrow).
"""
from __future__ import annotations

__all__ = ["JetStreamDataSource", "DefaultSource", "register"]


def __getattr__(name: str):
    # Spark-free modules must import without pyspark, so the DataSource class is loaded on first use.
    if name in ("JetStreamDataSource", "DefaultSource"):
        from .source import JetStreamDataSource

        return JetStreamDataSource
    raise AttributeError(name)


def register(spark=None):
    """Register the ``jetstream`` format with a SparkSession and return the session.

    Not needed after ``pip install`` (wheel or editable): Spark discovers the format by itself when
    ``pyspark_jetstream`` is listed on a plain ``sys.path`` entry.  For other setups (an import hook of one's own,
    a zip Spark cannot list).  A registration belongs to one session (``spark.newSession()`` starts without
    it).  With no argument: the session active in the calling thread, else the one this process created (a new
    thread has no active session in PySpark, yet ``format("jetstream")`` there uses that session)."""
    from .source import JetStreamDataSource

    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or SparkSession._instantiatedSession
        if spark is None:
            raise RuntimeError("pyspark_jetstream.register(): no SparkSession exists yet; pass the session")
    spark.dataSource.register(JetStreamDataSource)
    return spark
