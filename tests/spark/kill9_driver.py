"""A Spark driver for tests/spark/test_kill9.py, run as its own process so that the test can kill -9 it with
everything it started: the Python driver, its JVM and the JVM's Python workers, as a crashed driver machine loses
them.

    python -m tests.spark.kill9_driver '<json>'

The JSON names the job:

* ``{"job": "batch", "url", "stream", "rows", "partitions", "key": bool, "writeId": str | null}``: a batch write
  of ``rows`` rows (``data`` = ``row-<i>``) in ``partitions`` partitions; with ``key`` each row has a ``msg_id``
  column (``row-<i>``), else the ``writeId`` option names the write.
* ``{"job": "stream", "url", "source", "stream", "checkpoint", "perTrigger", "minPartitions", "key": bool}``: an
  available-now query from stream ``source`` into stream ``stream``, ``perTrigger`` source sequences per
  micro-batch; with ``key`` the sink rows carry ``msg_id`` = ``<source>:<seq>``.

Rows pass a step that takes 2 ms a row, so a write lasts long enough for the test to kill it in the middle.  The
process prints ``started`` once its session is up and ``done`` when the job has finished.  :func:`run` is also
what the test calls for the second run, in its own session (one JVM start less per case).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def slow(batches):
    """mapInArrow body: the rows unchanged, in slices of 50, 0.1 s each (2 ms a row)."""
    for batch in batches:
        for offset in range(0, batch.num_rows, 50):
            time.sleep(0.1)
            yield batch.slice(offset, 50)


def run(spark, job: dict, slowly: bool = True) -> None:
    """Run the job in ``spark`` to its end (the test runs it again in its own session after the kill)."""
    if job["job"] == "batch":
        df = spark.range(0, job["rows"], 1, job["partitions"]).selectExpr(
            f"'{job['stream']}.rows' as subject", "concat('row-', cast(id as string)) as data",
            *(["concat('row-', cast(id as string)) as msg_id"] if job["key"] else []))
        if slowly:
            df = df.mapInArrow(slow, df.schema)
        w = df.write.format("jetstream").mode("append").option("servers", job["url"]).option("stream", job["stream"])
        if job.get("writeId"):
            w = w.option("writeId", job["writeId"])
        w.save()
    else:
        df = (spark.readStream.format("jetstream").option("servers", job["url"]).option("stream", job["source"])
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", job["perTrigger"])
              .option("minPartitions", job["minPartitions"]).load()
              .selectExpr(f"'{job['stream']}.rows' as subject", "data",
                          *(["concat(stream, ':', cast(seq as string)) as msg_id"] if job["key"] else [])))
        if slowly:
            df = df.mapInArrow(slow, df.schema)
        q = (df.writeStream.format("jetstream").option("servers", job["url"]).option("stream", job["stream"])
             .option("checkpointLocation", job["checkpoint"]).trigger(availableNow=True).start())
        q.awaitTermination()
        if q.exception():
            raise q.exception()


def main(job: dict) -> None:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "spark"), str(ROOT)])
    from pyspark.sql import SparkSession

    from tests.spark.helpers import JVM_OPTIONS

    spark = (SparkSession.builder.master("local[2]").appName("skiff-kill9")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    print("started", flush=True)
    run(spark, job)
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
