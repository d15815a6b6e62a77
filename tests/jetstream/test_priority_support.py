"""Helpers for the priority-group and pause tests (no tests here): pull clients that keep their own inbox, advisory
subscriptions, and schema checks of the priority-group advisories.

Everything goes over the wire with nats-py's core client (nats-py 2.16 has no priority-group options on ``fetch``),
so the same helper runs against Skiff and nats-server.
"""
from __future__ import annotations

import asyncio
import json

import jsonschema
import nats

from tests.conftest import check_schema, load_schema
from tests.jetstream.test_consumer_support import ack_info, status

PIN_HDR = "Nats-Pin-Id"
ADV = "$JS.EVENT.ADVISORY.CONSUMER."


def validate_group_event(ev: dict) -> None:
    """Schema-check a PINNED / UNPINNED advisory.  The published schemas (jsm.go) require a ``server`` field that
    nats-server 2.15.1 does not send (JSConsumerGroupPinnedAdvisory has none): the real server wins."""
    schema = load_schema(ev["type"])
    schema["required"] = [r for r in schema["required"] if r != "server"]
    jsonschema.validate(ev, schema)


def validate_event(ev: dict) -> None:
    check_schema(ev)


async def events(nc, kind: str, stream: str, consumer: str):
    """Subscribe to ``$JS.EVENT.ADVISORY.CONSUMER.<kind>.<stream>.<consumer>``."""
    sub = await nc.subscribe(f"{ADV}{kind}.{stream}.{consumer}")
    await nc.flush()  # the server must know the subscription before the event happens
    return sub


async def next_event(sub, timeout: float = 2.0) -> dict:
    return json.loads((await sub.next_msg(timeout=timeout)).data)


async def no_event(sub, timeout: float = 0.2) -> bool:
    try:
        await sub.next_msg(timeout=timeout)
    except (nats.errors.TimeoutError, asyncio.TimeoutError):
        return True
    return False


class Puller:
    """One pull client: its own inbox, any number of MSG.NEXT requests on it, and the pin id it was given
    (as ADR-42 asks of clients: keep the id from ``Nats-Pin-Id``, drop it on a 423)."""

    def __init__(self, nc, stream: str, consumer: str, group: str = "G") -> None:
        self.nc, self.stream, self.consumer, self.group = nc, stream, consumer, group
        self.inbox = nc.new_inbox()
        self.sub = None
        self.pin = ""

    async def request(self, batch: int = 1, *, expires: int = 0, use_pin: bool = True, **extra) -> None:
        if self.sub is None:
            self.sub = await self.nc.subscribe(self.inbox)
        body: dict = {"batch": batch, **extra}
        if self.group:
            body["group"] = self.group
        if expires:
            body["expires"] = expires
        if use_pin and self.pin:
            body["id"] = self.pin
        await self.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{self.consumer}", json.dumps(body).encode(),
                              reply=self.inbox)
        await self.nc.flush()

    async def collect(self, n: int | None = None, timeout: float = 0.3) -> list:
        """What arrived: until ``n`` items or nothing for ``timeout`` seconds.  Remembers a pin, forgets it on 423."""
        out = []
        while n is None or len(out) < n:
            try:
                m = await self.sub.next_msg(timeout=timeout)
            except (nats.errors.TimeoutError, asyncio.TimeoutError):
                break
            out.append(m)
            st = status(m)
            if st is None and m.headers and m.headers.get(PIN_HDR):
                self.pin = m.headers[PIN_HDR]
            elif st is not None and st[0] == 423:
                self.pin = ""
        return out

    async def close(self) -> None:
        if self.sub is not None:
            await self.sub.unsubscribe()
            self.sub = None


def data(msgs) -> list[bytes]:
    return [m.data for m in msgs if status(m) is None]


def statuses(msgs) -> list:
    return [status(m) for m in msgs if status(m) is not None]


def delivered(m) -> int:
    return ack_info(m.reply)["delivered"]


def stream_seq(m) -> int:
    return ack_info(m.reply)["stream_seq"]


class ClockEnv:
    """An embedded Skiff driven by a ManualClock (skiff_only tests): a nats-py connection, stream ``S`` on
    ``s.>``, and ``advance(seconds)`` that moves time and lets the resulting messages reach the client."""

    def __init__(self, clock, srv, nc) -> None:
        self.clock, self.srv, self.nc = clock, srv, nc

    @classmethod
    async def start(cls, store_dir: str) -> "ClockEnv":
        from skiff.server.clock import ManualClock
        from skiff.server.core.server import Server

        clock = ManualClock()
        srv = Server(clock=clock, jetstream=True, store_dir=store_dir)
        await srv.start()
        nc = await nats.connect(srv.client_url, allow_reconnect=False)
        env = cls(clock, srv, nc)
        r = await env.api("STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
        assert "error" not in r, r
        return env

    async def stop(self) -> None:
        await self.nc.close()
        await self.srv.shutdown()

    async def api(self, suffix: str, body: bytes | dict = b"") -> dict:
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        return json.loads((await self.nc.request("$JS.API." + suffix, body, timeout=2)).data)

    async def pub(self, subject: str, data: bytes = b"x") -> None:
        await self.nc.request(subject, data, timeout=2)

    async def consumer(self, name: str, **cfg) -> dict:
        cfg.setdefault("durable_name", name)
        r = await self.api(f"CONSUMER.CREATE.S.{name}", {"stream_name": "S", "config": cfg})
        assert "error" not in r, r
        return r

    async def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await self.nc.flush()
        await asyncio.sleep(0)

    def now_ns(self) -> int:
        return self.clock.time_ns()
