"""The running server's collector settings (server/core/gcpolicy.py, issue #13).

Each case runs in a child process: ``install`` freezes and re-tunes the collector of the whole process, which this
pytest process must keep as it is.
"""
from __future__ import annotations


import subprocess
import sys
import textwrap

import nats
import pytest

from tests.harness import server_env

pytestmark = pytest.mark.skiff_only

PRELUDE = """
import gc, weakref
from skiff.server.core import gcpolicy

class Part:  # stands for a consumer's objects: no reference cycle
    __slots__ = ("payload", "__weakref__")
    def __init__(self):
        self.payload = [object() for _ in range(3)]

def make(n):
    out = []
    for _ in range(n):
        out.append(Part())
        gcpolicy.created()
    return out

gc.disable()
P = gcpolicy.POLICY
P.install()
assert gc.isenabled() and gc.get_threshold() == (gcpolicy.YOUNG, *gcpolicy.OLDER)
"""


def _run(body: str) -> str:
    out = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], capture_output=True, text=True,
                         env=server_env(), timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_bulk_creations_are_frozen_and_older_passes_stay_short():
    out = _run("""
        frozen0 = gc.get_freeze_count()
        parts = make(3 * gcpolicy.FREEZE_AFTER)
        for _ in range(3):  # young passes happen as allocations go on
            junk = [[] for _ in range(gcpolicy.YOUNG + 1)]
            del junk
        assert P.freezes >= 1, P.freezes
        assert gc.get_freeze_count() >= frozen0 + gcpolicy.FREEZE_AFTER * 4  # the parts and their payloads
        # A full pass now walks only what was allocated since the last freeze, not the thousands of parts.
        assert len(gc.get_objects(2)) + len(gc.get_objects(1)) < gcpolicy.FREEZE_AFTER, len(gc.get_objects(2))
        print("ok", P.freezes)
    """)
    assert out.startswith("ok")


def test_frozen_objects_without_cycles_are_still_freed():
    _run("""
        parts = make(2 * gcpolicy.FREEZE_AFTER)
        junk = [[] for _ in range(gcpolicy.YOUNG + 1)]
        del junk
        assert P.freezes >= 1
        refs = [weakref.ref(p) for p in parts]
        gc.disable()  # reference counting alone
        del parts
        assert all(r() is None for r in refs)
    """)


def test_a_pass_that_found_cyclic_garbage_postpones_the_freeze():
    _run("""
        parts = make(2 * gcpolicy.FREEZE_AFTER)
        class Cyclic:
            pass
        for _ in range(gcpolicy.YOUNG // 2 + 1):  # garbage the young pass has to collect
            a, b = Cyclic(), Cyclic()
            a.b, b.a = b, a
        del a, b
        before = P.freezes
        gc.collect(0)
        assert P.freezes == before, "froze while cyclic garbage was being made"
        gc.collect(0)  # nothing cyclic left: now it may
        assert P.freezes == before + 1
    """)


async def test_each_consumer_made_counts_as_a_bulk_creation(tmp_path):
    """Created by the API or recovered at start (ConsumerSet.add): the count the freeze waits for."""
    from skiff.server.core import gcpolicy
    from skiff.server.core.server import Server

    before = gcpolicy.POLICY.created
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        for i in range(3):
            await js.add_consumer("S", durable_name=f"C{i}")
        await nc.close()
    assert gcpolicy.POLICY.created == before + 3
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)):  # recovered
        assert gcpolicy.POLICY.created == before + 6

