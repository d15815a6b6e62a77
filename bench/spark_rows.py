"""Rows per second of the PySpark ``jetstream`` data source, read and write, on Skiff and on nats-server.

    python -m bench.spark_rows                     # 200k rows of 128 bytes, both servers
    python -m bench.spark_rows --rows 50000 --targets skiff
    python -m bench.spark_rows --only write --runs 3   # the write alone, 3 alternating runs, best of each

For each server (started by bench.servers, file store, default profile) it measures, with a local[2] Spark
session whose Python workers are already warm:

* ``connector publish``: the connector's pipelined publisher alone (no Spark), filling the stream read below;
* ``connector read``: one ephemeral-consumer range read of the whole stream alone (no Spark);
* ``spark read (consumer)`` / ``spark read (direct)``: ``spark.read.format("jetstream")`` with 2 partitions,
  materialised with the ``noop`` sink (every row built, nothing collected);
* ``spark write``: ``spark.range(rows)`` as (subject, 128-byte data) written with ``format("jetstream")`` in
  2 partitions, every message with a Nats-Msg-Id and all PubAcks awaited.

Each figure is rows / wall-clock seconds of the whole action (planning, task start, connections included).
On a shared 2-core machine those move with the load, so each row also shows the CPU time the server process spent
in the action (from /proc), as rows per server CPU-second: the rate the server could sustain on one core of its
own, which tells a server-bound action from a connector- or Spark-bound one.  ``connector publish`` and
``connector read`` also show the connector's own CPU (this process) the same way.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "spark"), str(ROOT)]

from bench.servers import BenchServer  # noqa: E402
from pyspark_jetstream.jetstream import Publisher, read_range  # noqa: E402
from pyspark_jetstream.options import ConnectOptions  # noqa: E402
from pyspark_jetstream.runner import open_jetstream  # noqa: E402


async def fill(url: str, stream: str, rows: int, size: int) -> float:
    js = await open_jetstream(ConnectOptions(servers=url))
    try:
        await js.api(f"STREAM.CREATE.{stream}", {"name": stream, "subjects": [f"{stream}.>"], "storage": "file",
                                                  "allow_direct": True})
        payload = b"x" * size
        pub = Publisher(js.conn, max_in_flight=4096)
        t = time.perf_counter()
        for i in range(rows):
            await pub.publish(f"{stream}.{i % 8}", payload)
        await pub.wait()
        return rows / (time.perf_counter() - t)
    finally:
        await js.conn.close()


async def client_read(url: str, stream: str, rows: int) -> float:
    js = await open_jetstream(ConnectOptions(servers=url))
    try:
        t = time.perf_counter()
        n = 0
        async for chunk in read_range(js, stream, 1, rows, []):
            n += len(chunk)
        assert n == rows, (n, rows)
        return rows / (time.perf_counter() - t)
    finally:
        await js.conn.close()


async def create(url: str, stream: str) -> None:
    js = await open_jetstream(ConnectOptions(servers=url))
    try:
        await js.api(f"STREAM.CREATE.{stream}", {"name": stream, "subjects": [f"{stream}.>"], "storage": "file"})
    finally:
        await js.conn.close()


def spark_session():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "spark"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    from pyspark.sql import SparkSession

    # no register(): Spark's own lookup finds pyspark_jetstream on the workers' PYTHONPATH set above
    spark = (SparkSession.builder.master("local[2]").appName("spark-rows-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_read(spark, url: str, stream: str, rows: int, method: str) -> float:
    df = (spark.read.format("jetstream").option("servers", url).option("stream", stream)
          .option("minPartitions", 2).option("maxSeqsPerPartition", 10**9).option("readMethod", method).load())
    t = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return rows / (time.perf_counter() - t)


def check_rows(spark, url: str, stream: str, rows: int, method: str) -> None:
    df = (spark.read.format("jetstream").option("servers", url).option("stream", stream)
          .option("readMethod", method).load())
    assert df.count() == rows


def spark_write(spark, url: str, stream: str, rows: int, size: int) -> float:
    from pyspark.sql import functions as F

    df = spark.range(0, rows, 1, 2).select(
        F.concat(F.lit(f"{stream}."), (F.col("id") % 8).cast("string")).alias("subject"),
        F.expr(f"repeat('x', {size})").cast("binary").alias("data"))
    t = time.perf_counter()
    df.write.format("jetstream").mode("append").option("servers", url).option("stream", stream).save()
    return rows / (time.perf_counter() - t)


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measured(srv, rows: int, fn):
    """(rows/s wall, rows per server CPU-second, rows per CPU-second of this process) of ``fn()``."""
    s0, c0 = proc_cpu(srv.proc.pid), own_cpu()
    rate = fn()
    s1, c1 = proc_cpu(srv.proc.pid), own_cpu()
    return rate, rows / max(s1 - s0, 1e-3), rows / max(c1 - c0, 1e-3)


def one_server(spark, srv, args, wants) -> dict[str, tuple]:
    url = srv.url
    r: dict[str, tuple] = {}
    n = args.rows
    # warm-up: Python workers, JIT of the JVM paths, connections
    if wants("spark-read"):
        asyncio.run(fill(url, "WARM", 2000, args.size))
        spark_read(spark, url, "WARM", 2000, "consumer")
    if wants("write"):
        asyncio.run(create(url, "WARMW"))
        spark_write(spark, url, "WARMW", 2000, args.size)
    if wants("publish"):
        r["connector publish"] = measured(srv, n, lambda: asyncio.run(fill(url, "R", n, args.size)))
    if wants("read"):
        r["connector read"] = measured(srv, n, lambda: asyncio.run(client_read(url, "R", n)))
    if wants("spark-read"):
        r["spark read (consumer)"] = measured(srv, n, lambda: spark_read(spark, url, "R", n, "consumer"))
        r["spark read (direct)"] = measured(srv, n, lambda: spark_read(spark, url, "R", n, "direct"))
        check_rows(spark, url, "R", n, "consumer")
        check_rows(spark, url, "R", n, "direct")
    if wants("write"):
        asyncio.run(create(url, "W"))
        r["spark write"] = measured(srv, n, lambda: spark_write(spark, url, "W", n, args.size))
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--targets", default="skiff,nats-server")
    ap.add_argument("--only", default="", metavar="ACTIONS",
                    help="comma-separated subset of: publish, read, spark-read, write (default: all; the reads need "
                         "publish)")
    ap.add_argument("--runs", type=int, default=1,
                    help="servers started per target, alternating targets; each row shows the best run")
    args = ap.parse_args()
    only = {a.strip() for a in args.only.split(",") if a.strip()}
    unknown = only - {"publish", "read", "spark-read", "write"}
    if unknown:
        ap.error(f"unknown --only actions {sorted(unknown)}")
    wants = (lambda a: not only or a in only)
    if (wants("read") or wants("spark-read")) and not wants("publish"):
        ap.error("the reads read what publish wrote: add publish to --only")
    spark = spark_session()
    results: dict[str, dict[str, tuple]] = {}
    try:
        for run in range(args.runs):
            for kind in args.targets.split(","):
                srv = BenchServer(kind)
                if not srv.start():
                    print(f"{kind}: {srv.error}")
                    continue
                try:
                    r = one_server(spark, srv, args, wants)
                    print(f"run {run + 1}/{args.runs}", srv.label, {k: round(v[0]) for k, v in r.items()},
                          f"load average {os.getloadavg()[0]:.1f}", flush=True)
                    best = results.setdefault(srv.label, {})
                    for key, value in r.items():
                        if key not in best or value[0] > best[key][0]:
                            best[key] = value
                finally:
                    srv.stop()
                    srv.cleanup()
    finally:
        spark.stop()
    labels = list(results)
    print()
    print(f"{args.rows} rows of {args.size} bytes, local[2], {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}" + (f", best of {args.runs} runs" if args.runs > 1 else ""))
    print()
    print("rows/second, wall clock (in brackets: rows per CPU-second of the server; for the connector alone also of"
          " the connector)")
    print()
    print("| rows/second | " + " | ".join(labels) + (" | Skiff / nats-server |" if len(labels) == 2 else " |"))
    print("|---|" + "---:|" * (len(labels) + (1 if len(labels) == 2 else 0)))
    for key in next(iter(results.values()), {}):
        cells = []
        for lbl in labels:
            rate, per_server, per_own = results[lbl][key]
            extra = f"; connector {per_own:,.0f}" if key.startswith("connector") else ""
            cells.append(f"{rate:,.0f} (server {per_server:,.0f}{extra})")
        if len(labels) == 2:
            cells.append(f"{results[labels[0]][key][0] / results[labels[1]][key][0]:.2f}")
        print(f"| {key} | " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
