"""spark/README.md's example runs as printed: its python block is executed here with ``spark`` (a local session)
and ``url`` (a server with the streams it reads and writes), on both servers.  tests/test_docs_commands.py accepts
the block because this module lists the file in DOC_BLOCKS_RUN."""
from __future__ import annotations

import re

from tests.harness import ROOT
from tests.spark.helpers import sync

DOC_BLOCKS_RUN = ["spark/README.md"]


def _blocks() -> list[str]:
    text = (ROOT / DOC_BLOCKS_RUN[0]).read_text()
    return re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)


def test_readme_example_runs_as_printed(spark, server, tmp_path):
    url = server.url

    async def setup(a):
        await a.create("ORDERS", subjects=["orders.>"])
        await a.create("TOTALS", subjects=["totals.>"])
        for i, region in enumerate(["eu", "eu", "us"]):
            await a.publish(f"orders.{region}.new", b"order %d" % i)

    sync(url, setup)
    blocks = _blocks()
    assert blocks, "spark/README.md has no python block"
    for block in blocks:
        block = block.replace("/tmp/ckpt", str(tmp_path / "ckpt"))  # the one path a test must not share
        namespace = {"spark": spark, "url": url}
        exec(compile(block, DOC_BLOCKS_RUN[0], "exec"), namespace)
        q = namespace.get("q")
        if q is not None:
            q.awaitTermination(60)
            assert q.exception() is None, q.exception()
    rows = spark.read.format("jetstream").option("servers", url).option("stream", "TOTALS").load().collect()
    # the batch write: one total per subject of ORDERS matching orders.eu.* ...
    assert any(r.subject == "totals.orders.eu.new" and r.data == b"2" for r in rows), rows
    # ... and the streaming query (availableNow, from the latest offset) found nothing new to copy: ORDERS still
    # holds its three orders, and the query ended cleanly (checked above)
    info = sync(url, lambda a: a.info("ORDERS"))
    assert info["state"]["messages"] == 3, info["state"]
