"""An end-to-end Spark pipeline on JetStream: ORDERS -> totals per subject -> ORDER_TOTALS.  One command:

    python examples/orders_pipeline.py                     # starts a throw-away Skiff server for the run
    python examples/orders_pipeline.py --server nats://127.0.0.1:4222   # or use a running server (Skiff or NATS)

It needs ``pip install 'skiff[spark]'`` (pyspark 4.x, pyarrow, pandas) and a Java 17 runtime.  Steps:

1. create the streams ORDERS (``orders.>``) and ORDER_TOTALS (``totals.>``) and publish some JSON orders
   (with the connector's own client - no other NATS library is needed);
2. batch-read ORDERS with ``spark.read.format("jetstream")``, parse the JSON, sum the amounts per subject;
3. write one message per subject to ORDER_TOTALS (``totals.<region>``) with ``df.write.format("jetstream")``
   - ``msg_id`` makes the write idempotent, so running the example twice does not add a second set of totals;
4. read ORDER_TOTALS back through Spark and print it.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "spark"), str(ROOT)]  # run from a checkout without installing

from pyspark_jetstream.jetstream import ApiError, Publisher  # noqa: E402
from pyspark_jetstream.options import ConnectOptions  # noqa: E402
from pyspark_jetstream.runner import open_jetstream  # noqa: E402

REGIONS = ("eu", "us", "apac")


def start_skiff() -> tuple[subprocess.Popen, str, str]:
    """A Skiff server on a free loopback port with JetStream in a temporary directory."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = tempfile.mkdtemp(prefix="skiff-example-")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "skiff.server", "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", store],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"nats://127.0.0.1:{port}", store
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("could not start Skiff (python -m skiff.server)")


async def prepare(url: str, orders: int) -> None:
    js = await open_jetstream(ConnectOptions(servers=url))
    try:
        for name, subjects in (("ORDERS", ["orders.>"]), ("ORDER_TOTALS", ["totals.>"])):
            try:
                await js.api(f"STREAM.CREATE.{name}", {"name": name, "subjects": subjects, "storage": "file"})
            except ApiError as e:
                if e.err_code != 10058:  # stream name already in use: keep it
                    raise
        rnd = random.Random(7)
        pub = Publisher(js.conn, expected_stream="ORDERS")
        for i in range(orders):
            region = rnd.choice(REGIONS)
            body = json.dumps({"id": i, "region": region, "amount": round(rnd.uniform(5, 500), 2)}).encode()
            await pub.publish(f"orders.{region}", body, b"NATS/1.0\r\nNats-Msg-Id: order-%d\r\n\r\n" % i)
        await pub.wait()
        print(f"published {pub.published} orders ({pub.duplicates} already there) to ORDERS")
    finally:
        await js.conn.close()


def run_spark(url: str) -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "spark"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    from pyspark.sql import SparkSession, functions as F

    import pyspark_jetstream

    spark = (SparkSession.builder.master("local[2]").appName("orders-pipeline")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pyspark_jetstream.register(spark)
    try:
        orders = (spark.read.format("jetstream").option("servers", url).option("stream", "ORDERS")
                  .option("maxSeqsPerPartition", 500).load())
        amount = F.get_json_object(F.col("data").cast("string"), "$.amount").cast("double")
        totals = (orders.groupBy("subject")
                  .agg(F.count("*").alias("orders"), F.round(F.sum(amount), 2).alias("total"))
                  .orderBy("subject"))
        totals.show()
        out = totals.select(
            F.concat(F.lit("totals."), F.element_at(F.split("subject", r"\."), -1)).alias("subject"),
            F.to_json(F.struct("subject", "orders", "total")).alias("data"),
            F.concat(F.lit("totals:"), F.col("subject"), F.lit(":"), F.col("orders").cast("string")).alias("msg_id"),
        )
        out.write.format("jetstream").mode("append").option("servers", url).option("stream", "ORDER_TOTALS").save()
        print("ORDER_TOTALS now holds:")
        (spark.read.format("jetstream").option("servers", url).option("stream", "ORDER_TOTALS").load()
         .select("seq", "subject", F.col("data").cast("string").alias("data"),
                 F.col("headers")["Nats-Msg-Id"][0].alias("msg_id"))
         .show(truncate=False))
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", help="NATS URL of a JetStream server (default: start a temporary Skiff)")
    ap.add_argument("--orders", type=int, default=2000, help="orders to publish (default 2000)")
    args = ap.parse_args()
    if shutil.which("java") is None:
        raise SystemExit("Spark needs a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless)")
    proc = store = None
    url = args.server
    if url is None:
        proc, url, store = start_skiff()
        print(f"started Skiff at {url}")
    try:
        asyncio.run(prepare(url, args.orders))
        run_spark(url)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
            shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main()
