"""A consumer's ``meta.inf`` is written off the event loop, and only the requests on its stream wait for it; a file
stream's, at its create or update, too, with every API request waiting for it.

Consumer create, update and pause answer once the consumer's metadata is on disk (nats-server writes it before it
answers), and Skiff writes it in a worker thread (consumer_writes.create_files, ``ConsumerWrites.write_meta``).  The
API router holds the requests that name the same stream until then, in arrival order, but creates and updates of
other consumers of that stream, which join the write under way (their files are written by the next worker job, all
together); requests on other streams and account-level requests go on (api.py ``stream_scope``, issue #13: one slow
disk write held every API request).

A slow disk is made here by holding the worker's write of the ``meta.inf`` files under stream SLOW until the test
lets it go.  That needs the server in this process, so these tests are Skiff's only; what a client of either server
sees of the same requests (their order, their durability across kill -9) is in test_consumer_create_files.py.
"""
from __future__ import annotations

import asyncio
import json
import threading

import nats
import pytest

from skiff.server.core.server import Server
from skiff.server.jetstream import consumer_writes
from skiff.storage import meta

pytestmark = pytest.mark.skiff_only


@pytest.fixture
def slow_disk(monkeypatch):
    """A gate in front of every write of a ``meta.inf`` of stream SLOW or its consumers: each is recorded
    (``waited``), and while the gate is closed it waits there (it must be in a worker thread)."""
    gate = threading.Event()
    gate.set()
    write_atomic = meta.write_atomic
    waited = []

    def slow(path, data, durable=True):
        slow = "/SLOW/obs/" in str(path) or "/streams/SLOW/" in str(path)
        if slow and str(path).endswith(meta.META_FILE):
            waited.append(str(path))
            if not gate.is_set():
                assert threading.current_thread() is not threading.main_thread(), "meta.inf written on the loop"
                assert gate.wait(10), "the test never opened the gate"
        write_atomic(path, data, durable)

    monkeypatch.setattr(meta, "write_atomic", slow)
    gate.waited = waited
    yield gate
    gate.set()


def _cfg(stream: str, name: str, **extra) -> bytes:
    return json.dumps({"stream_name": stream, "config": {"durable_name": name, "ack_policy": "explicit",
                                                         **extra}}).encode()


class Pipeline:
    """Requests sent back to back on one connection; their replies by index, in the order they arrived."""

    def __init__(self, nc) -> None:
        self.nc = nc
        self.inbox = nc.new_inbox()
        self.replies: dict[int, dict] = {}
        self.order: list[int] = []
        self.changed = asyncio.Event()

    async def start(self) -> "Pipeline":
        async def on_reply(msg) -> None:
            i = int(msg.subject.rsplit(".", 1)[1])
            self.replies[i] = json.loads(msg.data)
            self.order.append(i)
            self.changed.set()

        await self.nc.subscribe(self.inbox + ".*", cb=on_reply)
        return self

    async def send(self, requests: list[tuple[str, bytes]]) -> None:
        for i, (subject, body) in enumerate(requests):
            await self.nc.publish(subject, body, reply=f"{self.inbox}.{i}")
        await self.nc.flush()

    async def until(self, indexes: set[int], timeout: float = 5) -> None:
        async def wait() -> None:
            while not indexes <= set(self.replies):
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(wait(), timeout)


async def _streams(nc) -> None:
    for name in ("SLOW", "FAST"):
        r = json.loads((await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(
            {"name": name, "subjects": [f"{name.lower()}.>"]}).encode(), timeout=5)).data)
        assert "error" not in r, r


async def test_a_slow_consumer_create_holds_only_its_stream(tmp_path, slow_disk, monkeypatch):
    batches: list[list[str]] = []
    run_batch = consumer_writes._run_meta_batch

    def recorded(items):
        batches.append([args[1] for fn, args in items if fn is consumer_writes.create_files])
        return run_batch(items)

    monkeypatch.setattr(consumer_writes, "_run_meta_batch", recorded)
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        await _streams(nc)
        slow_disk.clear()
        p = await Pipeline(nc).start()
        await p.send([
            ("$JS.API.CONSUMER.CREATE.SLOW.C1", _cfg("SLOW", "C1")),  # 0: waits for the disk
            ("$JS.API.CONSUMER.CREATE.SLOW.C2", _cfg("SLOW", "C2")),  # 1, 2: join it, written together after it
            ("$JS.API.CONSUMER.CREATE.SLOW.C3", _cfg("SLOW", "C3")),
            ("$JS.API.CONSUMER.INFO.SLOW.C1", b""),                    # 3: same stream: after 0-2
            ("$JS.API.STREAM.INFO.FAST", b""),                         # 4-7: other stream, account: not held
            ("$JS.API.CONSUMER.CREATE.FAST.F1", _cfg("FAST", "F1")),
            ("$JS.API.INFO", b""),
            ("$JS.API.STREAM.NAMES", b""),
            ("$JS.API.CONSUMER.NAMES.SLOW", b""),                      # 8: same stream: after 3
            ("$JS.API.CONSUMER.CREATE.SLOW.C4", _cfg("SLOW", "C4")),  # 9: a create behind waiting ones waits too
            ("$JS.API.STREAM.INFO.SLOW", b""),                         # 10: after 9
        ])
        await p.until({4, 5, 6, 7})
        await asyncio.sleep(0.1)
        assert slow_disk.waited and not {0, 1, 2, 3, 8, 9, 10} & set(p.replies), p.replies
        assert p.replies[4]["config"]["name"] == "FAST"
        assert p.replies[5]["config"]["durable_name"] == "F1"
        assert p.replies[6]["type"] == "io.nats.jetstream.api.v1.account_info_response"
        assert sorted(p.replies[7]["streams"]) == ["FAST", "SLOW"]
        slow_disk.set()
        await p.until({0, 1, 2, 3, 8, 9, 10})
        assert [i for i in p.order if i not in (4, 5, 6, 7)] == [0, 1, 2, 3, 8, 9, 10]
        assert [p.replies[i]["config"]["durable_name"] for i in (0, 1, 2, 9)] == ["C1", "C2", "C3", "C4"]
        assert p.replies[3]["name"] == "C1"  # the info waited for the create
        assert p.replies[8]["consumers"] == ["C1", "C2", "C3"]
        assert p.replies[10]["state"]["consumer_count"] == 4
        # C2 and C3 came while C1's write was held: one worker job wrote both
        assert [b for b in batches if b != ["F1"]] == [["C1"], ["C2", "C3"], ["C4"]], batches
        await nc.close()


async def test_update_and_pause_write_meta_off_the_loop_and_answer_after_it(tmp_path, slow_disk):
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        await _streams(nc)
        r = json.loads((await nc.request("$JS.API.CONSUMER.CREATE.SLOW.C1", _cfg("SLOW", "C1"), timeout=5)).data)
        assert "error" not in r, r
        async def echo_back(m) -> None:
            await nc.publish(m.reply, m.data)

        echo = await nc.subscribe("echo", cb=echo_back)
        slow_disk.clear()
        n = len(slow_disk.waited)
        p = await Pipeline(nc).start()
        await p.send([
            ("$JS.API.CONSUMER.CREATE.SLOW.C1", _cfg("SLOW", "C1", description="second")),  # 0: update
            ("$JS.API.CONSUMER.PAUSE.SLOW.C1", json.dumps({"pause_until": "2999-01-01T00:00:00Z"}).encode()),
            ("$JS.API.CONSUMER.INFO.SLOW.C1", b""),
            ("$JS.API.STREAM.INFO.FAST", b""),  # 3: not held
        ])
        await p.until({3})
        # The loop serves everyone meanwhile: the update's write waits in a worker thread.
        assert (await nc.request("echo", b"ping", timeout=1)).data == b"ping"
        await asyncio.sleep(0.1)
        assert len(slow_disk.waited) == n + 1 and not {0, 1, 2} & set(p.replies), p.replies
        slow_disk.set()
        await p.until({0, 1, 2})
        assert [i for i in p.order if i < 3] == [0, 1, 2]
        assert p.replies[0]["config"]["description"] == "second"
        assert p.replies[1]["paused"] is True and p.replies[1]["pause_until"] == "2999-01-01T00:00:00Z"
        assert p.replies[2]["config"]["description"] == "second" and p.replies[2]["paused"] is True
        assert len(slow_disk.waited) == n + 2  # the update's meta.inf, then the pause's
        await echo.unsubscribe()
        await nc.close()
    # Both were on disk before they were answered: the next start reads them back.
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        ci = json.loads((await nc.request("$JS.API.CONSUMER.INFO.SLOW.C1", b"", timeout=5)).data)
        assert ci["config"]["description"] == "second" and ci["config"]["pause_until"] == "2999-01-01T00:00:00Z"
        await nc.close()


async def test_a_stream_update_writes_meta_off_the_loop_and_answers_after_it(tmp_path, slow_disk):
    # A stream update changes what other streams may take (its subjects): every API request waits for its
    # meta.inf, as before, but clients and the stream itself go on.
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        await _streams(nc)
        slow_disk.clear()
        n = len(slow_disk.waited)
        p = await Pipeline(nc).start()
        await p.send([
            ("$JS.API.STREAM.UPDATE.SLOW", json.dumps({"name": "SLOW", "subjects": ["slow.>"],
                                                       "description": "second"}).encode()),
            ("$JS.API.STREAM.INFO.FAST", b""),
            ("$JS.API.STREAM.INFO.SLOW", b""),
        ])
        ack = json.loads((await nc.request("slow.a", b"still stored", timeout=2)).data)
        assert ack == {"stream": "SLOW", "seq": 1}
        await asyncio.sleep(0.1)
        assert len(slow_disk.waited) == n + 1 and not p.replies, p.replies
        slow_disk.set()
        await p.until({0, 1, 2})
        assert p.order == [0, 1, 2]
        assert p.replies[0]["config"]["description"] == "second"
        assert p.replies[2]["config"]["description"] == "second"
        await nc.close()
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        si = json.loads((await nc.request("$JS.API.STREAM.INFO.SLOW", b"", timeout=5)).data)
        assert si["config"]["description"] == "second" and si["state"]["messages"] == 1
        await nc.close()


async def test_a_file_stream_create_writes_meta_off_the_loop_and_answers_after_it(tmp_path, slow_disk):
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")

        async def echo_back(m) -> None:
            await nc.publish(m.reply, m.data)

        await nc.subscribe("echo", cb=echo_back)
        slow_disk.clear()
        p = await Pipeline(nc).start()
        await p.send([
            ("$JS.API.STREAM.CREATE.SLOW", json.dumps({"name": "SLOW", "subjects": ["slow.>"]}).encode()),
            ("$JS.API.STREAM.INFO.SLOW", b""),
            ("$JS.API.INFO", b""),
        ])
        assert (await nc.request("echo", b"ping", timeout=1)).data == b"ping"  # the loop serves meanwhile
        await asyncio.sleep(0.1)
        assert len(slow_disk.waited) == 1 and not p.replies, p.replies
        slow_disk.set()
        await p.until({0, 1, 2})
        assert p.order == [0, 1, 2]  # every API request waited for the create (it may change what they see)
        assert p.replies[0]["did_create"] is True and p.replies[1]["config"]["name"] == "SLOW"
        assert p.replies[2]["streams"] == 1
        ack = json.loads((await nc.request("slow.a", b"x", timeout=2)).data)
        assert ack == {"stream": "SLOW", "seq": 1}
        await nc.close()
    async with Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        si = json.loads((await nc.request("$JS.API.STREAM.INFO.SLOW", b"", timeout=5)).data)
        assert si["state"]["messages"] == 1, si
        await nc.close()
