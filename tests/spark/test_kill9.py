"""kill -9 of a Spark job at a random point, then the job run again (issue #18, done-when): each row is stored
exactly once - for a batch write re-run with another number of partitions, and for a streaming write restarted
from its checkpoint.  Against both servers.

The killed driver (tests/spark/kill9_driver.py) is killed with everything it started: the Python driver, its JVM
and the JVM's Python workers at once, as a crashed driver machine would lose them.  The second run is the same
job in the test's own session (for the streaming case: the same checkpoint, hence the same query id).  The kill comes when the target stream
holds a random share (10-50 %) of the rows, polled, so it always lands in the middle of the write; the seed is in
every assertion message.

What each case shows (spark/README.md, "Guarantees"):

* batch write with a ``msg_id`` column (a key), re-run with 3 partitions instead of 4: exactly once whatever the
  partitioning;
* batch write with ``writeId``, re-run with the same partitioning: exactly once (position + content ids repeat);
* streaming write restarted with the same options: the replayed micro-batch repeats its ``<query id>:<batch id>``
  ids, so what the killed run stored of it is deduplicated;
* streaming write with ``msg_id`` = ``<source stream>:<seq>``, restarted with another ``minPartitions``: exactly
  once although the replayed batch is split differently.
"""
from __future__ import annotations

import asyncio
import collections
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from tests.spark.conftest import ROOT
from tests.spark.helpers import stored_data, sync, unique
from tests.spark.kill9_driver import run

ROWS = 4_000


def start_driver(job: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.spark.kill9_driver", json.dumps(job)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc: each process's parent is field 4 of /proc/<pid>/stat)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL the driver and everything it started.  Not its process group alone: PySpark's worker daemon puts
    itself in a group of its own (pyspark/daemon.py ``os.setpgid(0, 0)``), and its workers would go on writing
    what they had already read.  Everything is stopped first, so nothing forks between the listing and the kill."""
    procs = {pid} | descendants(pid)
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        procs |= descendants(pid)
        for p in procs:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass


def kill_midway(proc: subprocess.Popen, url: str, stream: str, seed: int, timeout: float = 180) -> int:
    """kill -9 the driver and all its processes once ``stream`` holds a random 10-50 % of ROWS; the count then."""
    threshold = int(ROWS * random.Random(seed).uniform(0.1, 0.5))

    async def watch(admin):
        deadline = time.monotonic() + timeout
        try:
            while (n := (await admin.info(stream))["state"]["messages"]) < threshold:
                assert proc.poll() is None, f"seed {seed}: the driver ended before the kill:\n{proc.stdout.read()}"
                assert time.monotonic() < deadline, f"seed {seed}: {n} of {threshold} rows after {timeout}s"
                await asyncio.sleep(0.01)
        finally:
            kill_tree(proc.pid)
            proc.wait()
            proc.stdout.close()
        await asyncio.sleep(0.5)  # what was already in the server's socket buffers lands
        return n, (await admin.info(stream))["state"]["messages"]

    seen, n = sync(url, watch)
    assert 0 < n < ROWS, (f"seed {seed}: the kill did not land in the middle of the write ({n} of {ROWS} stored; "
                          f"{seen} when the kill was sent, threshold {threshold})")
    return n


def assert_each_row_once(url: str, stream: str, expected: list[bytes], seed: int) -> None:
    counts = collections.Counter(asyncio.run(stored_data(url, stream)))
    missing = [d for d in expected if counts[d] == 0]
    twice = {d: c for d, c in counts.items() if c > 1}
    assert not missing and not twice and sum(counts.values()) == len(expected), \
        f"seed {seed}: {len(missing)} rows missing (e.g. {missing[:3]}), {len(twice)} stored more than once"


@pytest.mark.parametrize("key, partitions", [(True, (4, 3)), (False, (4, 4))], ids=["msg_id-4-then-3", "writeId"])
def test_batch_write_killed_and_rerun(spark, shared_server, key, partitions):
    url = shared_server.url
    name = unique("K9W")
    sync(url, lambda a: a.create(name))
    seed = random.randrange(1 << 30)
    job = {"job": "batch", "url": url, "stream": name, "rows": ROWS, "key": key, "writeId": f"nightly-{name}"}
    kill_midway(start_driver({**job, "partitions": partitions[0]}), url, name, seed)
    run(spark, {**job, "partitions": partitions[1]}, slowly=False)
    assert_each_row_once(url, name, [b"row-%d" % i for i in range(ROWS)], seed)


@pytest.mark.parametrize("key, min_partitions", [(False, (2, 2)), (True, (2, 3))],
                         ids=["same-options", "msg_id-2-then-3"])
def test_streaming_write_killed_and_restarted(spark, shared_server, tmp_path, key, min_partitions):
    url = shared_server.url
    src, dst = unique("K9S"), unique("K9D")
    sync(url, lambda a: a.create(src))
    sync(url, lambda a: a.create(dst))
    sync(url, lambda a: a.publish_many([(f"{src}.in", b"m%d" % i) for i in range(ROWS)]))
    seed = random.randrange(1 << 30)
    job = {"job": "stream", "url": url, "source": src, "stream": dst, "checkpoint": str(tmp_path / "ckpt"),
           "perTrigger": ROWS // 2, "key": key}
    kill_midway(start_driver({**job, "minPartitions": min_partitions[0]}), url, dst, seed)
    run(spark, {**job, "minPartitions": min_partitions[1]}, slowly=False)
    assert_each_row_once(url, dst, [b"m%d" % i for i in range(ROWS)], seed)
