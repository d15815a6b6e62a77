"""Fixtures for JetStream stream tests: a small raw JetStream API client over nats-py, run against both targets.

``jsc`` is connected to the session's ``shared_server`` (one per target) and hands out unique names, so tests do not
see each other's streams; ``fresh_jsc`` is connected to a new server for tests that need an empty account.
``JsClient.api`` sends a request to ``$JS.API.<suffix>``, parses the JSON reply and validates it against the
schema of its ``type`` (schemas/ via ``check_schema``), so every reply a test looks at is also schema-checked.
"""
from __future__ import annotations

import asyncio
import gc
import itertools
import json
import os

import nats
import pytest

from tests.conftest import check_schema

_unique = itertools.count()
# The two values Skiff reports differently on purpose (it implements 2.12 / API level 2): never compare them.
DYNAMIC_META = ("_nats.ver", "_nats.level")


def validate(reply: dict) -> None:
    """Schema-check a reply by its ``type``.  Error replies are checked for the error object only: the schemas'
    ``oneOf`` (success | error) cannot tell them apart when nats-server adds the paging fields (``streams: null``)
    to an error, which the real server does."""
    t = reply.get("type")
    if not t:
        return
    err = reply.get("error")
    if err is not None:
        assert list(err) == ["code", "err_code", "description"], err
        assert isinstance(err["code"], int) and isinstance(err["err_code"], int) and isinstance(err["description"], str)
        return
    check_schema(reply, t)


def pub_ack_schema_check(ack: dict) -> None:
    check_schema(ack, "io.nats.jetstream.api.v1.pub_ack_response")


def strip_dynamic(cfg: dict) -> dict:
    cfg = dict(cfg)
    md = {k: v for k, v in (cfg.get("metadata") or {}).items() if k not in DYNAMIC_META}
    cfg["metadata"] = md
    return cfg


class JsClient:
    def __init__(self, nc, server, prefix: str) -> None:
        self.nc = nc
        self.server = server
        self.prefix = prefix
        self._n = itertools.count()

    def name(self, base: str = "S") -> str:
        """A stream name (and subject root) no other test uses on this server."""
        return f"{base}{self.prefix}_{next(self._n)}"

    async def request(self, subject: str, body: bytes | str | dict = b"", headers: dict | None = None,
                      timeout: float = 2.0):
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        return await self.nc.request(subject, body, timeout=timeout, headers=headers)

    async def api(self, suffix: str, body: bytes | str | dict = b"", headers: dict | None = None,
                  timeout: float = 2.0, check: bool = True) -> dict:
        msg = await self.request("$JS.API." + suffix, body, headers, timeout)
        reply = json.loads(msg.data)
        if check:
            validate(reply)
        return reply

    async def create(self, name: str, **cfg) -> dict:
        cfg.setdefault("subjects", [f"{name}.>"])
        r = await self.api(f"STREAM.CREATE.{name}", {"name": name, **cfg})
        assert "error" not in r, r
        return r

    async def info(self, name: str, body: dict | None = None) -> dict:
        return await self.api(f"STREAM.INFO.{name}", body or b"")

    async def pub(self, subject: str, data: bytes = b"", headers: dict | None = None, timeout: float = 2.0) -> dict:
        msg = await self.nc.request(subject, data, timeout=timeout, headers=headers)
        ack = json.loads(msg.data)
        pub_ack_schema_check(ack)
        return ack

    async def no_reply(self, subject: str, body: bytes | str | dict = b"", timeout: float = 0.3) -> bool:
        """True when nobody answers (timeout or no responders)."""
        try:
            await self.request(subject, body, timeout=timeout)
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            return True
        return False


async def _connect(server):
    return await nats.connect(server.url, connect_timeout=3, allow_reconnect=False)


@pytest.fixture
async def jsc(shared_server, request):
    nc = await _connect(shared_server)
    prefix = f"{os.getpid() % 1000}x{next(_unique)}"
    yield JsClient(nc, shared_server, prefix)
    await nc.close()


@pytest.fixture
async def fresh_jsc(server):
    nc = await _connect(server)
    yield JsClient(nc, server, "f")
    await nc.close()


async def collect(sub, n: int | None = None, timeout: float = 0.5) -> list:
    """Messages from a nats-py subscription until ``n`` arrived or nothing came for ``timeout``."""
    out = []
    while n is None or len(out) < n:
        try:
            out.append(await sub.next_msg(timeout=timeout))
        except (nats.errors.TimeoutError, asyncio.TimeoutError):
            break
    return out


@pytest.fixture
def no_collector():
    """The cyclic collector off for a test that checks objects are freed by reference counting alone (and what it
    froze unfrozen after)."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    gc.unfreeze()
    if was:
        gc.enable()
