"""The in-order append of a fast batch (batching_fast.py ``FastBatches.append``, taken from Stream._inbound for a
message without headers whose reply subject is the one the batch expects next) against the general path
(``FastBatches.process``): the same replies, in the same order, and the same stored messages, for random runs of
appends, gaps, pings, commits, duplicates, oversized messages, headers, two batches at once, a stream update that
turns batching off and on, and batches timed out on the clock.

Embedded Skiff only: the general path is what the other fast batch tests (test_batch_fast.py, on both servers)
hold to nats-server's replies; this file holds the short cut to the general path.
"""
from __future__ import annotations

import json
import random

import pytest

from tests.jetstream.conftest import collect
from tests.jetstream.test_priority_support import ClockEnv

pytestmark = pytest.mark.skiff_only

SEEDS = 20
STEPS = 70


class NoShortCut(dict):
    """A ``FastBatches.expect`` that never holds a batch: every message takes the general path."""

    def __setitem__(self, key, value) -> None:
        pass


def script(rng: random.Random) -> list[tuple]:
    """A run of publishes and stream actions, the same for both streams."""
    lseq = {"a": 0, "b": 0}
    out: list[tuple] = []
    for _ in range(STEPS):
        bid = rng.choice("aab")
        gap = "ok" if bid == "b" else rng.choice(("ok", "fail", "fail"))
        nxt = lseq[bid] + 1
        r = rng.random()
        hdr = None
        data = b"d%d" % rng.randrange(1000)
        if lseq[bid] == 0 or r < 0.03:
            seq, op = 1, 0
        elif r < 0.70:
            seq, op = nxt, 1
        elif r < 0.74:
            seq, op = nxt + rng.randrange(1, 3), 1  # a forward gap
        elif r < 0.76:
            seq, op = max(nxt - 2, 2), 1  # backwards (or a repeat)
        elif r < 0.79:
            seq, op = rng.choice((lseq[bid], nxt)), 4  # a ping
        elif r < 0.81:
            seq, op = nxt, rng.choice((2, 3))  # commit, commit at end of batch
        elif r < 0.84:
            seq, op, hdr = nxt, 1, {"Nats-Msg-Id": "m%d" % rng.randrange(4)}  # duplicates now and then
        elif r < 0.87:
            seq, op, data = nxt, 1, b"y" * 90  # over max_msg_size
        elif r < 0.89:
            seq, op = nxt, 1
            out.append(("batched", False))
            out.append(("pub", bid, gap, seq, op, hdr, data))
            out.append(("batched", True))
            continue
        elif r < 0.90:
            out.append(("idle",))  # every open batch times out
            lseq = {"a": 0, "b": 0}
            continue
        elif r < 0.92:
            seq, op = "0%d" % nxt, 1  # not the canonical spelling: parse_reply reads it as the same number
        else:
            seq, op = nxt, 1
        out.append(("pub", bid, gap, seq, op, hdr, data))
        # What the client believes: good enough to keep most messages in order.
        if op in (2, 3):
            lseq[bid] = 0
        elif op != 4 and isinstance(seq, int):
            lseq[bid] = max(lseq[bid], seq)
        elif isinstance(seq, str):
            lseq[bid] = nxt
    return out


async def run(env: ClockEnv, name: str, steps: list[tuple], no_ack: bool) -> tuple[list, list]:
    cfg = {"name": name, "subjects": [f"{name}.>"], "allow_batched": True, "max_msg_size": 64, "no_ack": no_ack,
           "duplicate_window": 60_000_000_000}
    r = await env.api(f"STREAM.CREATE.{name}", cfg)
    assert "error" not in r, r
    sub = await env.nc.subscribe(f"_{name}.>")
    for step in steps:
        if step[0] == "batched":
            r = await env.api(f"STREAM.UPDATE.{name}", {**cfg, "allow_batched": step[1]})
            assert "error" not in r, r
        elif step[0] == "idle":
            await env.nc.flush()
            await env.advance(10.5)
        else:
            _, bid, gap, seq, op, hdr, data = step
            await env.nc.publish(f"{name}.x", data, reply=f"_{name}.{bid}.50.{gap}.{seq}.{op}.$FI", headers=hdr)
    await env.nc.flush()
    replies = [(m.subject.split(".", 1)[1], json.loads(m.data)) for m in await collect(sub, timeout=0.2)]
    for _, body in replies:
        if body.get("stream") == name:
            body["stream"] = "S"
    info = await env.api(f"STREAM.INFO.{name}")
    stored = []
    for seq in range(info["state"]["first_seq"], info["state"]["last_seq"] + 1):
        m = await env.api(f"STREAM.MSG.GET.{name}", {"seq": seq})
        if "message" in m:
            stored.append((seq, m["message"].get("data"), m["message"].get("hdrs")))
    await env.api(f"STREAM.DELETE.{name}")
    return replies, stored


@pytest.fixture
async def env(tmp_path):
    e = await ClockEnv.start(str(tmp_path))
    yield e
    await e.stop()


async def test_short_cut_matches_the_general_path(env, target, monkeypatch):
    from skiff.server.jetstream import batching_fast

    cls = batching_fast.FastBatches
    real_init, real_append = cls.__init__, cls.append
    taken = [0]

    def counting_append(self, *args):
        taken[0] += 1
        return real_append(self, *args)

    def general_only_init(self, owner):
        real_init(self, owner)
        self.expect = NoShortCut()

    for seed in range(SEEDS):
        steps = script(random.Random(seed))
        no_ack = seed % 5 == 4
        monkeypatch.setattr(cls, "append", counting_append)
        with_short_cut = await run(env, f"F{seed}", steps, no_ack)
        monkeypatch.setattr(cls, "append", real_append)
        monkeypatch.setattr(cls, "__init__", general_only_init)  # streams created now never take the short cut
        general = await run(env, f"G{seed}", steps, no_ack)
        monkeypatch.setattr(cls, "__init__", real_init)
        assert with_short_cut == general, f"seed {seed}"
    # The runs are mostly in-order appends: most of them took the short cut.
    assert taken[0] > SEEDS * 10, taken
