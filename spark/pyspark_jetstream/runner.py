"""Driving the asyncio client from Spark's synchronous callbacks.

Spark calls ``partitions()``, ``read()``, ``write()``, ``latestOffset()`` ... as plain functions in a Python worker.
Each such call gets a private event loop (uvloop when it imports, as the server uses): :meth:`LoopRunner.run` runs
one coroutine to completion, :meth:`LoopRunner.iterate` turns an async generator into a plain generator, one
``run_until_complete`` per item, so a read task hands Spark each Arrow batch as soon as it is built and never holds
a whole partition in memory.  The loop is never shared between threads; if the caller already runs a loop (a
notebook calling the planner directly), the work happens on a helper thread with its own loop.
"""
from __future__ import annotations

import asyncio
import threading

from .client import ConnectError, Connection, read_creds, read_seed
from .jetstream import ConnectionLost, JetStream
from .options import ConnectOptions

__all__ = ["LoopRunner", "open_jetstream", "open_jetstream_within"]


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is there on Linux/macOS
        return asyncio.new_event_loop()


class LoopRunner:
    def __init__(self) -> None:
        try:
            asyncio.get_running_loop()
            nested = True
        except RuntimeError:
            nested = False
        self._thread_mode = nested
        self.loop = _new_loop()

    def run(self, coro):
        if not self._thread_mode:
            return self.loop.run_until_complete(coro)
        box: dict = {}

        def target():
            try:
                box["v"] = self.loop.run_until_complete(coro)
            except BaseException as e:  # re-raised in the caller's thread
                box["e"] = e

        t = threading.Thread(target=target, name="pyspark-jetstream-loop")
        t.start()
        t.join()
        if "e" in box:
            raise box["e"]
        return box["v"]

    def iterate(self, agen):
        """A plain generator over an async generator; closing it closes the async one (its ``finally`` runs)."""
        try:
            while True:
                try:
                    item = self.run(agen.__anext__())
                except StopAsyncIteration:
                    return
                yield item
        finally:
            self.run(agen.aclose())

    def close(self) -> None:
        if not self.loop.is_closed():
            self.loop.close()

    def __enter__(self) -> "LoopRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _auth_files(opts: ConnectOptions) -> tuple[str | None, bytes | None]:
    """(user JWT, nkey seed) from the credsFile or nkeySeedFile option; errors name the option."""
    try:
        if opts.creds_file:
            return read_creds(opts.creds_file)
        if opts.nkey_seed_file:
            return None, read_seed(opts.nkey_seed_file)
    except (OSError, ValueError) as e:
        which = "credsFile" if opts.creds_file else "nkeySeedFile"
        raise ValueError(f"option {which}: {e}") from None
    return None, None


async def open_jetstream(opts: ConnectOptions, name: str = "pyspark-jetstream", first: int = 0,
                         timeout: float | None = None) -> JetStream:
    """A connection to the first server of ``opts.servers`` (from index ``first`` on) that answers.  ``timeout``
    (default: the option's) bounds each connect attempt."""
    jwt, seed = _auth_files(opts)
    conn = await Connection.connect(opts.servers, user=opts.user, password=opts.password, token=opts.token,
                                    name=name, timeout=timeout or opts.timeout, tls=opts.ssl_context(),
                                    tls_handshake_first=opts.tls_handshake_first, jwt=jwt, nkey_seed=seed,
                                    first=first)
    return JetStream(conn, domain=opts.domain, timeout=opts.timeout)


async def open_jetstream_within(opts: ConnectOptions, name: str, deadline: float, first: int = 0,
                                why: str = "") -> JetStream:
    """:func:`open_jetstream`, tried in rounds with a growing pause until ``deadline`` (loop time): the servers
    from index ``first`` on, wrapping round (a server restarted on its port comes back at the same URL).  Only
    while every attempt fails as a server that is down does: a refusal (authorization, TLS) is raised at once.
    The error at the deadline names ``why`` (what broke before) and the last attempt's reasons."""
    loop = asyncio.get_running_loop()
    pause = 0.05
    while True:
        left = deadline - loop.time()
        try:
            return await open_jetstream(opts, name=name, first=first, timeout=max(min(left, opts.timeout), 0.1))
        except ConnectError as e:
            left = deadline - loop.time()
            if not e.transient:
                raise
            if left <= 0:
                raise ConnectionLost(f"{why + '; ' if why else ''}no server of {opts.servers} answered within "
                                     f"timeout={opts.timeout:g}s (last attempt: {e})") from None
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, 1.0)
