"""Faults injected into a running embedded server, each doing to the client what the real event does.

``Faults(server)`` (``skiff.testing.faults``) acts on a :class:`~skiff.server.core.server.Server` running in the
test's loop; the ``$SKIFF.FAULTS.<METHOD>`` control requests call the same methods for a Skiff process
(skiff/testing/control.py).  A fault that lasts returns a :class:`Fault`: ``fault.undo()`` ends it, and it is a
context manager (``with faults.stall(name="app", writes=True): ...``).

====================================  =========================================================================
fault                                  what the client sees, as with the real event
====================================  =========================================================================
``drop(cid=|name=)``                   its connection cut without a word (a network failure): it reconnects
``stall(cid=|name=, reads, writes)``   the server stops reading it (its writes back up in the kernel) or stops
                                       writing to it: its output is held until ``max_pending``, then it is
                                       closed as a slow consumer, as nats-server does
``latency(seconds, cid=|name=)``       everything the server sends it arrives ``seconds`` later
``bandwidth(bytes_per_second,          its output leaves at most that fast, like a slow link: the rest waits and
cid=|name=|every=True)``               counts as pending, so a reader that falls ``max_pending`` behind is closed
                                       as a slow consumer, as nats-server does; ``every=True``: every connection,
                                       those accepted later too, until ``undo()``
``refuse_connections(seconds=None)``   the listener closes: new connections are refused (ECONNREFUSED) until
                                       ``undo()`` (or ``seconds``) opens it again on the same port
``fail_next_write(error, fsync)``      the file store's next write (or fsync) fails with ENOSPC / EIO: the
                                       publisher gets the error PubAck (10077) that a full disk gives
``crash_before_ack(stream=None)``      the next stored message's PubAck never leaves: the server dies right after
                                       handing it to the OS (connections cut, listener closed, stores left as a
                                       kill -9 leaves them); restart it on the same store to see it kept
``power_loss()``                       the machine loses power now: the server dies as above and every file of
                                       the stores keeps only what was fsynced (sync_interval's promise): blocks
                                       are cut back, unsynced state files left empty, new blocks gone
``api_status(status, count)``          the next ``count`` JetStream API requests are answered with a status
                                       message instead (503: no responders, as when JetStream is unavailable)
====================================  =========================================================================

Nothing here costs the server anything until a fault is armed: connection faults swap the connection's output
holder (client.py's ``_held``, which the publish path checks anyway), store faults swap the store's injectable
``write``/``fsync`` functions, the API fault sets one attribute the router checks per request.  A fault on every
connection (``every=True``) also reaches the connections accepted while it lasts, as a toxiproxy toxic does for
every connection through its proxy: meanwhile ``server.clients`` is an :class:`_Accepting` dict, which applies the
fault when ``connection_made`` registers a connection (before its INFO is written, so from its first byte); when the
last such fault ends it is a plain dict again.
"""
from __future__ import annotations

import asyncio
import errno
import os
import time
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # pragma: no cover
    from skiff.server.core.client import ClientConnection
    from skiff.server.core.server import Server


class Fault:
    """An armed fault: ``undo()`` ends it (once); usable as a context manager."""

    def __init__(self, what: str, undo: Callable[[], None]) -> None:
        self.what = what
        self._undo: Callable[[], None] | None = undo

    def undo(self) -> None:
        undo, self._undo = self._undo, None
        if undo is not None:
            undo()

    @property
    def active(self) -> bool:
        return self._undo is not None

    def __enter__(self) -> "Fault":
        return self

    def __exit__(self, *exc) -> None:
        self.undo()

    def __repr__(self) -> str:
        return f"<Fault {self.what}{'' if self.active else ' (undone)'}>"


class _Pinned(list):
    """Output held for a connection whose writes are stalled: resume_writing leaves it alone (client.py)."""

    pinned = True


class _Delayed(list):
    """Output that reaches the socket ``delay`` seconds after the server wrote it (a slow link)."""

    pinned = True

    def __init__(self, conn: "ClientConnection", delay: float) -> None:
        super().__init__()
        self.conn = conn
        self.delay = delay

    def append(self, data: bytes) -> None:  # called by ClientConnection.flush instead of transport.write
        asyncio.get_running_loop().call_later(self.delay, self._write, data)

    def _write(self, data: bytes) -> None:
        conn = self.conn
        conn._held_bytes -= len(data)
        if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
            conn.transport.write(data)


class _Throttled(list):
    """Output that reaches the socket at most ``rate`` bytes a second (a slow link), drained by a loop timer.

    A token bucket on the loop's real time (a link's speed is not the server's driven clock): every ``TICK`` the
    bytes earned since the last drain are written, a message split wherever the budget ends, as TCP would.  What
    waits is this list's items, counted in the connection's ``_held_bytes``, so ``pending_bytes`` (connz) and the
    slow-consumer check (client.py ``_check_pending``) see it as they see a real reader's unread output, and a
    close writes it out or frees it as it does any held output (client.py ``close``)."""

    pinned = True
    TICK = 0.01

    def __init__(self, conn: "ClientConnection", rate: float) -> None:
        super().__init__()
        self.conn = conn
        self.rate = rate
        self.timer: asyncio.TimerHandle | None = None
        self.credit = 0.0
        self.last = time.monotonic()
        self.burst = max(rate * self.TICK, 1.0)  # an idle link does not save up a burst beyond one tick
        self.interval = self.TICK if rate * self.TICK >= 1 else 1.0 / rate

    def append(self, data: bytes) -> None:  # called by ClientConnection.flush instead of transport.write
        super().append(data)
        if self.timer is None:  # never written from inside flush: it counts _held_bytes after this returns
            self.timer = asyncio.get_running_loop().call_soon(self._drain)

    def _drain(self) -> None:
        self.timer = None
        conn = self.conn
        transport = conn.transport
        if conn.closed or conn._held is not self or transport is None or transport.is_closing():
            return  # closed (close wrote or freed the items) or undone
        now = time.monotonic()
        self.credit = min(self.credit + (now - self.last) * self.rate, self.burst)
        self.last = now
        budget = int(self.credit)
        sent = done = 0
        while done < len(self) and budget > 0:
            data = self[done]
            if len(data) <= budget:
                done += 1
            else:
                self[done], data = data[budget:], data[:budget]
            transport.write(data)
            budget -= len(data)
            sent += len(data)
        del self[:done]
        self.credit -= sent
        conn._held_bytes -= sent
        if self:
            self.timer = asyncio.get_running_loop().call_later(self.interval, self._drain)

    def release(self) -> list[bytes]:
        """Stop draining; what still waits, in order."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        rest = list(self)
        self.clear()
        return rest


class _Accepting(dict):
    """``server.clients`` while a fault waits for new connections.  ``ClientConnection.connection_made`` registers
    every accepted connection with ``srv.clients[cid] = conn`` before it writes INFO (client.py), so a hook called
    here covers the connection from its first byte.  ``hooks``: fault kind -> hook; one per kind, since two faults
    cannot both own a connection's output."""

    __slots__ = ("hooks",)

    def __init__(self, clients: dict) -> None:
        super().__init__(clients)
        self.hooks: dict[str, Callable[["ClientConnection"], None]] = {}

    def __setitem__(self, cid: int, conn: "ClientConnection") -> None:
        super().__setitem__(cid, conn)
        for hook in list(self.hooks.values()):
            hook(conn)


def _on_accept(srv: "Server", kind: str, hook: Callable[["ClientConnection"], None]) -> Callable[[], None]:
    """Call ``hook`` with every connection the server accepts from now on; returns the function that stops it."""
    clients = srv.clients
    if not isinstance(clients, _Accepting):
        clients = srv.clients = _Accepting(clients)
    if kind in clients.hooks:
        raise ValueError(f"a {kind} fault on every connection is armed already")
    clients.hooks[kind] = hook

    def stop() -> None:
        current = srv.clients
        if isinstance(current, _Accepting) and current.hooks.get(kind) is hook:
            del current.hooks[kind]
            if not current.hooks:
                srv.clients = dict(current)  # nothing waits for connections: registering is a plain dict store again

    return stop


class Faults:
    def __init__(self, server: "Server") -> None:
        self.server = server

    # ------------------------------------------------------------------ connections
    def _conns(self, cid: int | None, name: str | None, every: bool = False) -> list["ClientConnection"]:
        if every:  # the connections there are now; the caller covers later ones (_on_accept)
            if cid is not None or name is not None:
                raise ValueError("give 'every' or one of 'cid' or 'name', not both")
            return [c for c in list(self.server.clients.values()) if not c.closed]
        if (cid is None) == (name is None):
            raise ValueError("give one of 'cid' or 'name'")
        found = [c for c in list(self.server.clients.values()) if (c.cid == cid if cid is not None else c.name == name)]
        if not found:
            raise ValueError(f"no connection with {'cid ' + str(cid) if cid is not None else 'name ' + repr(name)}")
        return found

    def drop(self, cid: int | None = None, name: str | None = None) -> list[int]:
        """Cut the connections at once, without -ERR: what a network failure does (the transport is aborted)."""
        from skiff.server.core.client import CLIENT_CLOSED

        conns = self._conns(cid, name)
        for c in conns:
            c.close(CLIENT_CLOSED, abort=True)
        return [c.cid for c in conns]

    def stall(self, cid: int | None = None, name: str | None = None, reads: bool = True,
              writes: bool = False) -> Fault:
        """Stop reading from the client (``reads``) and/or writing to it (``writes``)."""
        if not (reads or writes):
            raise ValueError("stall what: reads, writes or both")
        conns = self._conns(cid, name)
        for c in conns:
            if reads:
                c._fault_read_stall = True
                if c.transport is not None:
                    c.transport.pause_reading()
            if writes:
                # Output goes to a held list the transport never drains: the connection's pending bytes grow
                # until max_pending, where it is closed as a slow consumer (client.py _check_pending).
                pinned = _Pinned(c._held or ())
                c._held = pinned

        def undo() -> None:
            for c in conns:
                if reads and getattr(c, "_fault_read_stall", False):
                    c._fault_read_stall = False
                    if not c.closed and c.transport is not None and not c._read_paused:
                        c.transport.resume_reading()
                if writes and isinstance(c._held, _Pinned):
                    held, c._held = list(c._held), []
                    c._held = None if not held else c._held
                    c._held_bytes = 0
                    if not c.closed and c.transport is not None:
                        for data in held:
                            c.transport.write(data)

        return Fault(f"stall {[c.cid for c in conns]} reads={reads} writes={writes}", undo)

    def latency(self, seconds: float, cid: int | None = None, name: str | None = None) -> Fault:
        """Everything the server sends these clients reaches their socket ``seconds`` later."""
        if seconds <= 0:
            raise ValueError("latency must be positive")
        conns = self._conns(cid, name)
        for c in conns:
            if getattr(c._held, "pinned", False):  # an empty throttle is falsy, but it owns the output
                raise ValueError(f"connection {c.cid} has a fault on its output already")
            if c._held:  # already behind: keep the order
                raise ValueError(f"connection {c.cid} has output held; try again when it caught up")
        for c in conns:
            c._held = _Delayed(c, seconds)

        def undo() -> None:
            for c in conns:
                if isinstance(c._held, _Delayed):
                    c._held = None  # what is already delayed still arrives, later output goes straight out

        return Fault(f"latency {seconds}s on {[c.cid for c in conns]}", undo)

    def bandwidth(self, bytes_per_second: float, cid: int | None = None, name: str | None = None,
                  every: bool = False) -> Fault:
        """What the server sends these clients leaves at most ``bytes_per_second``: a slow network reader that is
        not stalled.  The output waiting for the link counts as pending, so a reader more than ``max_pending``
        behind is closed as a slow consumer.  ``every=True``: every connection, the ones connected now and the
        ones accepted until ``undo()`` (as a toxiproxy bandwidth toxic limits every connection through its
        proxy); ``undo()`` lifts the limit from all of them."""
        if not isinstance(bytes_per_second, (int, float)) or bytes_per_second <= 0:
            raise ValueError("bytes_per_second must be positive")
        rate = float(bytes_per_second)
        conns = self._conns(cid, name, every)
        for c in conns:
            if getattr(c._held, "pinned", False):
                raise ValueError(f"connection {c.cid} has a fault on its output already")
        stop = None
        if every:

            def accepted(c: "ClientConnection") -> None:
                if not c.closed:
                    conns[:] = [k for k in conns if not k.closed]  # a churn of connections does not pile up here
                    conns.append(c)
                    _throttle(c, rate)

            stop = _on_accept(self.server, "output", accepted)
        for c in list(conns):
            _throttle(c, rate)

        def undo() -> None:
            if stop is not None:
                stop()
            for c in conns:
                held = c._held
                if isinstance(held, _Throttled):
                    rest = held.release()
                    c._held, c._held_bytes = None, 0
                    if not c.closed and c.transport is not None:
                        for data in rest:  # the link is fast again: what waited leaves now, in order
                            c.transport.write(data)

        on = "every connection" if every else str([c.cid for c in conns])
        return Fault(f"bandwidth {bytes_per_second} B/s on {on}", undo)

    def refuse_connections(self, seconds: float | None = None) -> Fault:
        """Close the client listener: new connections are refused (ECONNREFUSED) until undo() reopens it on the
        same port (or ``seconds`` pass).  Connected clients stay connected."""
        srv = self.server
        listener = srv._listener
        if listener is None:
            raise ValueError("the server is not listening")
        listener.close()
        srv._listener = None
        loop = asyncio.get_running_loop()
        timer = None

        def undo() -> None:
            if timer is not None:
                timer.cancel()
            loop.create_task(_listen_again(srv))

        fault = Fault(f"refuse connections on port {srv.port}", undo)
        if seconds is not None:
            timer = loop.call_later(seconds, fault.undo)
        return fault

    # ------------------------------------------------------------------ the store
    def fail_next_write(self, error: str = "ENOSPC", fsync: bool = False, count: int = 1) -> Fault:
        """Make the next ``count`` writes (or fsyncs) of every file store fail with ``error`` (ENOSPC, EIO...)."""
        code = getattr(errno, error, None)
        if not isinstance(code, int):
            raise ValueError(f"unknown errno name {error!r}")
        stores = [st.store for js in self.server.jetstreams.values() for st in js.streams.values()
                  if hasattr(st.store, "_write")]
        if not stores:
            raise ValueError("no file-backed stream to fail")
        attr = "_fsync" if fsync else "_write"
        left = [count]
        originals = {id(s): getattr(s, attr) for s in stores}

        def wrap(store, real):
            def failing(*args):
                if left[0] > 0:
                    left[0] -= 1
                    if left[0] == 0:
                        setattr(store, attr, real)
                    raise OSError(code, os.strerror(code))
                return real(*args)
            return failing

        for s in stores:
            setattr(s, attr, wrap(s, originals[id(s)]))

        def undo() -> None:
            for s in stores:
                setattr(s, attr, originals[id(s)])

        return Fault(f"fail next {count} {'fsync' if fsync else 'write'} with {error}", undo)

    def crash_before_ack(self, stream: str | None = None) -> Fault:
        """Arm a one-shot crash between store and ack: the next flush that has a PubAck to send for a message
        stored in ``stream`` (any stream when None) hands the message to the OS, then the server dies instead of
        acking (server/jetstream/durability.py ``Durability.before_ack``).

        Dying is what a ``kill -9`` of nats-server does to the outside: every client connection is cut (the
        publisher's request is left without an answer: it times out), the listener is closed (connections refused),
        and the stores are closed without another write, so neither the stream's state file nor consumer states nor
        an fsync follows: recovery on restart reads the blocks as the OS has them.  Under ``sync_always`` this is
        before the message's fsync.  The dead server still needs ``nats_server_factory.restart(server)`` (or its
        ``shutdown()``), which then writes nothing."""
        jss = list(self.server.jetstreams.values())
        if not jss:
            raise ValueError("JetStream is not enabled")
        if any(js.durability.before_ack is not None for js in jss):
            raise ValueError("a crash is armed already")

        def hook(acks: list[tuple]) -> bool:
            if not any(s is not None and (stream is None or s.name == stream) for s, *_ in acks):
                return False
            undo()
            self._die()
            return True

        for js in jss:
            js.durability.before_ack = hook

        def undo() -> None:
            for js in jss:
                if js.durability.before_ack is hook:
                    js.durability.before_ack = None

        return Fault(f"crash before the PubAck of {stream or 'any stream'}", undo)

    def power_loss(self) -> dict:
        """The machine loses power now: the server dies as in :meth:`crash_before_ack`, and every file of every
        file store loses what the server wrote since its last fsync (the page cache is gone).  Restart it on the
        same store (``nats_server_factory.restart``) to see what ``sync_interval`` guaranteed: with
        ``sync_always`` every acknowledged message and every confirmed consumer ack, otherwise what the last
        background fsync (every ``sync_interval``) covered.

        The worst case is modelled: none of the unsynced writes reached the disk, however long ago they were made.

        - message blocks are cut back to their fsynced length, and a block created since the last fsync of
          ``msgs/`` is gone (its name never reached the disk);
        - files replaced atomically (temp file + rename) and not fsynced since are left empty: the rename reached
          the disk, their data did not (the delayed-allocation outcome of ext4/XFS).  These are the stream state
          file ``msgs/state.dat`` and the block summaries ``msgs/<n>.idx``, and without ``sync_always`` a
          consumer's ``o.dat`` and ``meta.inf`` (nats-server fsyncs them only with sync_always as well:
          filestore.go writeFileWithOptionalSync).

        What the store found on disk when it opened counts as on the disk (what the kernel wrote back before a
        restart cannot be known).  Not modelled: files deleted or renamed aside stay so (their content is gone),
        directories stay, and records erased in place (secure delete) stay erased.

        Returns ``{"lost_bytes": {stream: bytes of blocks lost}, "emptied": [paths], "removed": [paths]}``."""
        if not self.server.jetstreams:
            raise ValueError("JetStream is not enabled")
        streams = [st for js in self.server.jetstreams.values() for st in js.streams.values()]
        consumers = [c.store for st in streams for c in list(getattr(st, "consumers", {}).values())
                     if getattr(getattr(c, "store", None), "found", None) is not None]
        self._die()  # first: from here on neither the loop nor a worker thread writes (store._closed)
        lost: dict[str, int] = {}
        emptied: list[str] = []
        removed: list[str] = []
        for st in streams:
            store = st.store
            if not hasattr(store, "_sync_lock"):
                continue  # a memory store: everything goes, as it goes on restart anyway
            # The state lock keeps a background sync that is still running from writing the state file after
            # the power is gone (it checks _closed under it); the sync lock gives the lengths it settled.
            with store._state_lock, store._sync_lock:
                fresh = {b.path for b in store._fresh}
                cuts = [(b.path, b.synced, b.flushed) for b in [*store._chunks, *store._dead] if b.path not in fresh]
                unsynced = sorted(store._unsynced_files)
                for path in sorted(fresh):
                    if _remove(path):
                        removed.append(path)
                for path, synced, flushed in cuts:
                    if flushed > synced and _truncate(path, synced):
                        lost[st.name] = lost.get(st.name, 0) + flushed - synced
                lost_fresh = sum(b.flushed for b in store._fresh)
                if lost_fresh:
                    lost[st.name] = lost.get(st.name, 0) + lost_fresh
                for path in unsynced:
                    if _truncate(path, 0):
                        emptied.append(path)
        from skiff.storage.consumer import FILES, file_identity

        for cstore in consumers:  # not sync_always: replaced since the store opened means never fsynced
            for name, found in zip(FILES, cstore.found):
                path = cstore.dir / name
                if file_identity(path) != found and _truncate(path, 0):
                    emptied.append(str(path))
        return {"lost_bytes": lost, "emptied": emptied, "removed": removed}

    def _die(self) -> None:
        """The server process is gone: the OS closes its sockets; its files keep what was written, nothing more."""
        from skiff.server.core.client import CLIENT_CLOSED

        srv = self.server
        if srv._listener is not None:
            srv._listener.close()
            srv._listener = None
        for js in srv.jetstreams.values():
            d = js.durability
            d.stopped = True  # no group commit, no background fsync from here on
            if d._bg_timer is not None:
                d._bg_timer.cancel()
                d._bg_timer = None
            d._acks, d._sync_wait, d._dirty, d._unsynced, d._cwrites, d._csnap = [], [], {}, {}, {}, {}
            for st in js.streams.values():
                for consumer in list(getattr(st, "consumers", {}).values()):
                    cstore = getattr(consumer, "store", None)
                    if cstore is not None and hasattr(cstore, "discard"):
                        cstore.discard()  # closed without touching the disk
                store = st.store
                if hasattr(store, "_close_fds"):  # a file store: close its files without writing
                    store._close_fds()
                    store._closed = True
        for c in list(srv.clients.values()):
            c.close(CLIENT_CLOSED, abort=True)

    # ------------------------------------------------------------------ the JetStream API
    def api_status(self, status: int = 503, count: int = 1, description: str = "") -> Fault:
        """Answer the next ``count`` JetStream API requests with a status message (``NATS/1.0 <status>``) instead
        of the reply: 503 is what a client gets when no JetStream answers (nats.py NoRespondersError)."""
        if not 100 <= status <= 999:
            raise ValueError("status is a 3-digit code")
        routers = [js.router for js in self.server.jetstreams.values()]
        if not routers:
            raise ValueError("JetStream is not enabled")
        state = {"left": count, "status": status, "description": description}
        for r in routers:
            r.fault = state

        def undo() -> None:
            for r in routers:
                if r.fault is state:
                    r.fault = None

        return Fault(f"API answers {status} x{count}", undo)


def _throttle(c: "ClientConnection", rate: float) -> None:
    earlier = c._held or ()  # output already held by the transport's backpressure goes first
    throttled = _Throttled(c, rate)
    c._held = throttled
    for data in earlier:
        throttled.append(data)  # already counted in _held_bytes


def _truncate(path, length: int) -> bool:
    """Cut a file to ``length`` bytes (the power loss): False when it is not there (deleted meanwhile)."""
    try:
        os.truncate(path, length)
    except FileNotFoundError:
        return False
    return True


def _remove(path) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


async def _listen_again(srv: "Server") -> None:
    from skiff.server.core.client import ClientConnection

    if srv._listener is not None or not srv.running:
        return
    loop = asyncio.get_running_loop()
    srv._listener = await loop.create_server(lambda: ClientConnection(srv, srv.tls_mode), host=srv.options.host,
                                             port=srv.port, reuse_address=True, backlog=4096)

