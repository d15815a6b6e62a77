"""The ``$JS.API`` router: one internal subscription on ``$JS.API.>``, dispatching on subject tokens.

Theory of operation
-------------------
nats-server registers each API subject pattern (``$JS.API.STREAM.INFO.*`` ...) in a sublist and answers only
requests that match one; anything else under ``$JS.API.>`` gets no reply at all (verified against 2.15.1:
``$JS.API.FOO`` and ``$JS.API.STREAM.INFO.S.x`` time out).  The patterns are the rows of the API table
(``protocol/jsapi/subjects.py`` ``API``): each handler is a method marked ``@serves("<row name>")``, the handler
objects are handed to :meth:`ApiRouter.serve`, and :meth:`ApiRouter.start` builds a :class:`Route` for every
``routed`` row, its handler looked up by the row's name, with the row's reply ``type`` and the fields an error
reply of that type carries.  A routed row without a handler, or two handlers for one row, stop the start.

The handler modules themselves (``api_streams`` with ``api_snapshot``, ``api_consumers`` with the consumer code it
imports) load with the first request to one of their rows, not at start (issue #13, start-up: ~24 M instructions of
every start, a test harness starts a fresh server per test and many never use the consumer API).  :data:`LAZY`
names the rows each of them serves; :meth:`ApiRouter.serve_later` takes these names in place of handlers, so the
check that every routed row has exactly one handler still runs at start, on names, without importing anything.  A
request to such a row finds a placeholder :class:`Route` (``handler`` None), and :meth:`ApiRouter.load` imports
the module, calls its ``register`` and rebuilds the routes before the request goes on as before; a module that
serves other rows than it is listed for stops there (tests/jetstream/test_api_table.py checks the lists).

A handler takes an :class:`ApiRequest` and returns a dict (the reply without ``type``), an
:class:`~protocol.errors.ApiError`, or None (no reply, as nats-server does in a few places).  The router adds
``type``, encodes Go-style JSON, publishes to the reply subject and keeps nats-server's API statistics: ``total``
counts answered requests, ``errors`` the error replies (``trackAPI`` / ``trackAPIErr``), both after the reply is
built (so ``$JS.API.INFO`` does not count itself).

A handler may return a coroutine (work that waits for a worker thread or goes on in slices): its reply goes out
when it finishes, and the requests that arrive meanwhile wait, so the API acts in arrival order.  By default every
later request waits.  A handler marked ``stream_scope=True`` (consumer create, update and pause, which wait for a
``meta.inf`` write) holds only the requests that name the same stream (the first ``*`` token of their row's
pattern, :attr:`Route.stream_at`); requests for other streams and account-level ones (``INFO``, ``STREAM.NAMES``,
``STREAM.LIST``) go on, so a slow disk under one stream does not delay the others (issue #13).  A handler marked
``joins=True`` as well (consumer create and update) does not wait behind another one on its stream when nothing
else waits there: it runs at once and its write goes with theirs (the consumer set batches the ``meta.inf`` writes
in flight, stream_consumers.py); the handler itself waits for a write in flight on the same consumer.  The held
requests of a stream are dispatched in order once none of its handlers is at work, each again through the same
checks.

Before the handler runs the router applies ``Nats-Required-Api-Level`` (ADR-44): a level above Skiff's
``API_LEVEL`` (or not a number) is 10185.  Handlers where nats-server checks it later (consumer create: after the
body; the cluster-only operations: never on a standalone server, 10010 comes first) are marked
``level_check=False`` and call :func:`api_level_error` themselves; Direct Get and pull requests use the same
:func:`api_level_too_high`.  ``$JS.<domain>.API.>`` is mapped onto ``$JS.API.>`` when a domain is configured.
"""
from __future__ import annotations

import asyncio
import importlib
import re
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Iterator

from skiff.protocol import headers
from skiff.protocol.errors import ApiError
from skiff.protocol.jsapi.subjects import (
    ALL_API, API, API_PREFIX, DIRECT_GET_PRE, DOMAIN_API_PRE_T, REQUEST_NEXT_PRE, REQUIRED_API_LEVEL_HDR, TYPE_PREFIX,
)
from skiff.protocol.record import NamedTuple  # typing's, without its annotation checks (start-up)

from ..version import API_LEVEL
from . import advisories, jsonout

if TYPE_CHECKING:  # pragma: no cover
    from .consumer import Consumer
    from .engine import JetStream

# Subject prefixes (string prefixes, as nats-server compares them) its API subscription does not cover.
_OUTSIDE_API = (DIRECT_GET_PRE, REQUEST_NEXT_PRE)
# A request body this large goes through its route's ``prepare`` in a worker thread (ApiRouter._offload): about
# 1,300 subjects, whose checks cost ~10 ms; smaller ones are cheaper on the loop than the thread hand-off.
OFFLOAD_BODY = 16 * 1024


RESPONSE_TYPE = "Nats-Response-Type"  # stream.go JSResponseType
_STREAM_INFO = tuple(API["STREAM.INFO"].pattern.split("."))
_CREATE_TYPE = TYPE_PREFIX + API["STREAM.CREATE"].reply_type


class WithHeader(NamedTuple):
    """A handler's reply that goes out with a header block (the ``Nats-Stream-Identity`` of a sourcing consumer's
    create or reset, 2.15: jetstream_api.go sendAPIHdrResponse)."""
    body: dict
    hdr: bytes


class ApiRequest(NamedTuple):
    subject: str
    tokens: list[str]
    reply: str
    hdr: bytes
    body: bytes
    origin: Any
    prepared: Any = None  # what the route's ``prepare`` returned, when it ran off the loop


Handler = Callable[[ApiRequest], "dict | ApiError | None"]

# The handler modules loaded with the first request to one of their rows (see the module docstring): module (in
# this package) -> the API table rows its ``register`` serves.  api_streams also serves api_snapshot's rows and the
# cluster-only CONSUMER.LEADER.STEPDOWN (one handler for every JSClusterRequiredErr row).
LAZY: dict[str, tuple[str, ...]] = {
    "api_streams": (
        "INFO", "STREAM.CREATE", "STREAM.UPDATE", "STREAM.NAMES", "STREAM.LIST", "STREAM.INFO", "STREAM.DELETE",
        "STREAM.PURGE", "STREAM.MSG.GET", "STREAM.MSG.DELETE", "STREAM.SNAPSHOT", "STREAM.RESTORE",
        "STREAM.LEADER.STEPDOWN", "STREAM.PEER.REMOVE", "STREAM.PEER.EVACUATE", "STREAM.CANCEL_MOVE",
        "CONSUMER.LEADER.STEPDOWN",
    ),
    "api_consumers": (
        "CONSUMER.CREATE", "CONSUMER.CREATE.EX", "CONSUMER.DURABLE.CREATE", "CONSUMER.INFO", "CONSUMER.DELETE",
        "CONSUMER.NAMES", "CONSUMER.LIST", "CONSUMER.PAUSE", "CONSUMER.UNPIN", "CONSUMER.RESET",
    ),
}


class Serves(NamedTuple):
    """What ``@serves`` records on a handler: the API table rows it answers and how the router treats them."""
    names: tuple[str, ...]
    count_success: bool  # False: answered outside nats-server's API accounting (STREAM.MSG.GET)
    accounted: bool  # False: answered by a consumer's own subscription (CONSUMER.RESET), never counted
    level_check: bool  # False: the handler applies Nats-Required-Api-Level itself, at nats-server's point
    prepare: str | None  # the name of the method that parses and checks a large body in a worker thread
    stream_scope: bool  # True: while its coroutine runs, only requests naming the same stream wait
    joins: bool  # with stream_scope: may run beside another such handler on its stream when nothing waits there


def serves(*names: str, count_success: bool = True, accounted: bool = True, level_check: bool = True,
           prepare: str | None = None, stream_scope: bool = False, joins: bool = False) -> Callable:
    """Mark a method as the handler of the API table rows ``names`` (protocol/jsapi/subjects.py ``API``)."""
    for name in names:
        if name not in API:
            raise KeyError(f"@serves({name!r}): no such row in protocol/jsapi/subjects.py API")
    spec = Serves(names, count_success, accounted, level_check, prepare, stream_scope, joins)

    def mark(fn: Callable) -> Callable:
        fn.serves = spec
        return fn
    return mark


def handlers_of(obj: object) -> Iterator[tuple[str, Callable, Serves]]:
    """(row name, handler, its Serves) for every ``@serves`` method of ``obj`` (an instance, or a class for the
    plain functions), in the order the class defines them."""
    cls = obj if isinstance(obj, type) else type(obj)
    for attr, fn in vars(cls).items():
        spec = getattr(fn, "serves", None)
        if isinstance(spec, Serves):
            for name in spec.names:
                yield name, getattr(obj, attr), spec


class Route:
    """One routed row of the API table with its handler and how the router treats it (built by
    :meth:`ApiRouter.build_routes`).  A plain class: ``dataclass()`` execs generated code at import (issue #13)."""
    __slots__ = ("pattern", "handler", "type", "error_extra", "count_success", "accounted", "level_check",
                 "prepare", "stream_at", "stream_scope", "joins", "lazy")

    def __init__(self, pattern: tuple[str, ...], handler: "Handler | None", type: str, error_extra: dict,
                 count_success: bool = True, accounted: bool = True, level_check: bool = True,
                 prepare: "Callable[[ApiRequest], Any] | None" = None, stream_at: int | None = None,
                 stream_scope: bool = False, joins: bool = False, lazy: str = "") -> None:
        self.pattern = pattern
        self.handler = handler  # None until ``lazy`` (the module that serves the row) is loaded
        self.type = type
        self.error_extra = error_extra
        self.count_success = count_success  # STREAM.MSG.GET answers outside nats-server's API accounting
        # False: answered by a consumer's own subscription (CONSUMER.RESET), never counted
        self.accounted = accounted
        # False: the handler applies Nats-Required-Api-Level itself, at nats-server's point
        self.level_check = level_check
        # The request's parse-and-check part, pure but for reads of the engine's state: for a large body it runs in a
        # worker thread and the handler gets its result as ``req.prepared`` (see ApiRouter._offload).
        self.prepare = prepare
        # The index of the token that names the stream (the pattern's first ``*``: STREAM.INFO.*, CONSUMER.CREATE.*.>,
        # CONSUMER.DURABLE.CREATE.*.*), None for the account-level rows (INFO, STREAM.NAMES, STREAM.LIST).
        self.stream_at = stream_at
        self.stream_scope = stream_scope  # a coroutine of the handler holds only the requests naming the same stream
        self.joins = joins  # runs beside the stream's handlers at work when no request waits there (see above)
        self.lazy = lazy

    def matches(self, tokens: list[str]) -> bool:
        pat = self.pattern
        if pat[-1] == ">":
            if len(tokens) < len(pat):
                return False
            pat = pat[:-1]
        elif len(tokens) != len(pat):
            return False
        for p, t in zip(pat, tokens):
            if p != "*" and p != t:
                return False
        return True


class StreamHold:
    """The ``stream_scope`` handlers at work on one stream (``running``) and the requests waiting for them."""
    __slots__ = ("running", "waiting")

    def __init__(self) -> None:
        self.running = 0
        self.waiting: deque = deque()


class ApiRouter:
    def __init__(self, js: "JetStream") -> None:
        self.js = js
        self.server = js.server
        self.total = 0
        self.errors = 0
        self._routes: dict[str, list[Route]] = {}
        self._handlers: dict[str, tuple[Handler, Serves, object]] = {}  # row name -> handler (serve)
        self._later: dict[str, str] = {}  # row name -> the module that serves it, not loaded yet (serve_later)
        self._loaded: dict[str, Any] = {}  # module -> what its ``register`` returned (load)
        self._subs: list = []
        # While an offloaded request is prepared, later requests wait here, so the API acts in arrival order and
        # what ``prepare`` read (streams, limits) is still true when its handler runs.
        self._held: deque | None = None
        # stream name -> its ``stream_scope`` handlers at work and the requests naming that stream that wait.
        self._busy: dict[str, StreamHold] = {}
        self._stopped = False
        self.fault: dict | None = None  # skiff.testing.faults api_status: answer the next requests with a status

    def serve(self, *handlers: object) -> None:
        """Take the ``@serves`` methods of ``handlers`` as the handlers of their API table rows (routed rows only:
        the others are answered by subscriptions of their own)."""
        for obj in handlers:
            for name, fn, spec in handlers_of(obj):
                if not API[name].routed:
                    continue
                self._check_unserved(name, fn)
                self._handlers[name] = (fn, spec, obj)

    def serve_later(self, *modules: str) -> None:
        """Take the rows :data:`LAZY` lists for ``modules`` as served by them, loaded with the first request to one
        of their rows (:meth:`load`)."""
        for module in modules:
            for name in LAZY[module]:
                if not API[name].routed:
                    raise ValueError(f"API table row {name} is not routed: {module} cannot serve it later")
                self._check_unserved(name, module)
                self._later[name] = module

    def _check_unserved(self, name: str, by: object) -> None:
        """Refuse a second handler (a method, or a module loaded later) for API table row ``name``."""
        if name in self._handlers or name in self._later:
            other = self._handlers[name][0] if name in self._handlers else self._later[name]
            raise ValueError(f"two handlers for API table row {name}: {other} and {by}")

    def load(self, module: str) -> Any:
        """Import a :meth:`serve_later` module, have its ``register`` serve its rows, and route them; returns
        what ``register`` returned (the consumer API object for api_consumers).  Loaded once."""
        if module in self._loaded:
            return self._loaded[module]
        rows = sorted(n for n, m in self._later.items() if m == module)
        mod = importlib.import_module("." + module, __package__)
        for name in rows:  # its own handlers take these rows over (serve refuses a row served twice)
            del self._later[name]
        before = set(self._handlers)
        self._loaded[module] = out = mod.register(self)
        served = sorted(set(self._handlers) - before)
        if served != rows:
            raise LookupError(f"{module} serves API table rows {served}, listed for it: {rows} (api.py LAZY)")
        self.build_routes()
        return out

    def build_routes(self) -> None:
        """One :class:`Route` per routed row of the API table, its handler looked up by the row's name (a
        placeholder without handler for a row whose module loads later)."""
        self._routes = {}
        for row in API.values():
            if not row.routed:
                continue
            toks = tuple(row.pattern.split("."))
            if row.name in self._later:
                route = Route(toks, None, TYPE_PREFIX + row.reply_type, dict(row.error_fields),
                              lazy=self._later[row.name])
                self._routes.setdefault(toks[0], []).append(route)
                continue
            if row.name not in self._handlers:
                raise LookupError(f"no handler serves API table row {row.name} ({row.subject})")
            fn, spec, obj = self._handlers[row.name]
            prepare = getattr(obj, spec.prepare) if spec.prepare else None
            stream_at = toks.index("*") if "*" in toks else None
            if spec.stream_scope and stream_at is None:
                raise ValueError(f"API table row {row.name}: stream_scope on a row that names no stream")
            route = Route(toks, fn, TYPE_PREFIX + row.reply_type, dict(row.error_fields),
                          spec.count_success and spec.accounted, spec.accounted, spec.level_check, prepare,
                          stream_at, spec.stream_scope, spec.stream_scope and spec.joins)
            self._routes.setdefault(toks[0], []).append(route)

    def start(self) -> None:
        self.build_routes()
        srv = self.server
        self._subs.append(srv.subscribe_internal(ALL_API, self._dispatch))
        # Accounts without JetStream get nats-server's 10039 from the same route table (core/accounts.py);
        # the first engine (the one on the Server itself, not an AccountServer) answers for all of them.
        if not getattr(srv, "is_account_view", False):
            for acc in srv.accounts.by_name.values():
                if not acc.jetstream and acc is not srv.js_account:
                    self.refuse_for(acc)
        domain = srv.options.jetstream_domain
        if domain:
            self._subs.append(srv.subscribe_internal(DOMAIN_API_PRE_T.format(domain=domain) + ">",
                                                     self._dispatch_domain))

    def trace_import(self, subject: str) -> tuple[str, dict, None]:
        """A traced API request (core/msgtrace.py): in nats-server an account reaches the JetStream API through a
        service import from the system account, so its trace shows that import (and a trace-only request stops
        there, unanswered but for no responders); asked of nats-server 2.15.1."""
        system = self.server.system
        name = system.account.name if system is not None else "$SYS"
        return "si", {"acc": name, "from": subject, "to": subject}, None

    def refuse_for(self, acc) -> Any:
        """Answer ``acc``'s ``$JS.API`` requests with 10039 (an account without JetStream); returns the
        subscription, which :meth:`stop` removes."""
        sub = self.server.subscribe_internal(ALL_API, self._dispatch_disabled, account=acc)
        self._subs.append(sub)
        return sub

    def stop(self) -> None:
        self._stopped = True
        for sub in self._subs:
            self.server.unsubscribe_internal(sub)
        self._subs = []

    def _dispatch_domain(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        toks = subject.split(".", 3)
        self._dispatch(sub, API_PREFIX + (toks[3] if len(toks) > 3 else ""), reply, hdr_len, data, origin)

    def _find(self, subject: str) -> tuple[list[str], "Route | None"]:
        tokens = subject.split(".")[2:]
        if tokens:
            for r in self._routes.get(tokens[0], ()):
                if r.matches(tokens):
                    return tokens, r
        return tokens, None

    def _dispatch_disabled(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        """A request from an account without JetStream: every API route answers 10039 "JetStream not enabled for
        account" with its own reply type (verified against 2.15.1); MSG.NEXT and DIRECT.GET have no responders."""
        tokens, route = self._find(subject)
        if route is None:
            if reply and origin is not None and subject.startswith(_OUTSIDE_API):
                self._no_responders(sub, subject, reply, origin)
            return
        if not reply:
            return
        out: dict = {"type": route.type, "error": ApiError.of("JSNotEnabledForAccountErr").to_dict()}
        out.update(route.error_extra)
        self.server.route(None, reply, "", 0, jsonout.dumpb(out), sublist=sub.sublist)

    def _dispatch(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        if self.fault is not None and reply and self._faulted(reply):
            return
        if subject.startswith(DIRECT_GET_PRE):
            # No row of the table is routed here: the streams' own queue subscriptions answer (direct_get.py), and
            # all this subscription owes the requester is the no-responders status when nobody else is there (what
            # _dispatch_now ends in for these subjects, held or not, with JetStream on or off).  Checked first: every
            # KV get is one of these (issue #13).
            if reply and origin is not None:
                self._no_responders(sub, subject, reply, origin)
            return
        self._dispatch_now(sub, subject, reply, hdr_len, data, origin)

    def _dispatch_now(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        """:meth:`_dispatch` after the test fault check; a held request comes back here when its turn comes."""
        if self._held is not None:
            self._held.append((sub, subject, reply, hdr_len, bytes(data), origin))
            return
        if not self.server.js_account.jetstream:
            return self._dispatch_disabled(sub, subject, reply, hdr_len, data, origin)
        tokens, route = self._find(subject)
        if not tokens:
            return
        if route is None:
            if reply and origin is not None and subject.startswith(_OUTSIDE_API):
                self._no_responders(sub, subject, reply, origin)
            return
        if route.handler is None:  # the first request to a row of a module loaded later: load it, route again
            try:
                self.load(route.lazy)
            except Exception as e:  # as a handler failure (_run): the server goes on, the requester hears why
                self.server.log_error("JetStream API handlers failed to load", module=route.lazy, error=repr(e))
                self.reply_error(ApiRequest(subject, tokens, reply, b"", b"", origin), route,
                                 ApiError.of("JSStreamGeneralErrorF", err=str(e) or type(e).__name__))
                return
            tokens, route = self._find(subject)
        if self._busy and route.stream_at is not None:
            hold = self._busy.get(tokens[route.stream_at])
            # A request on this stream is still at work: this one acts after it, unless it may join it.
            if hold is not None and (hold.waiting or not route.joins):
                hold.waiting.append((sub, subject, reply, hdr_len, bytes(data), origin))
                return
        hdr = bytes(data[:hdr_len]) if hdr_len else b""
        body = bytes(data[hdr_len:]) if hdr_len else bytes(data)
        req = ApiRequest(subject, tokens, reply, hdr, body, origin)
        if hdr and route.level_check and api_level_too_high(hdr):
            self.reply_error(req, route, ApiError.of("JSRequiredApiLevelErr"))
            return
        if route.prepare is not None and len(body) >= OFFLOAD_BODY:
            self._offload(route, req)
            return
        self._run(route, req)

    def _faulted(self, reply: str) -> bool:
        """An armed api_status fault answers this request with its status message (skiff.testing.faults)."""
        fault = self.fault
        fault["left"] -= 1
        if fault["left"] <= 0:
            self.fault = None
        text = f"NATS/1.0 {fault['status']}" + (f" {fault['description']}" if fault["description"] else "")
        self.server.publish(reply, b"", "", (text + "\r\n\r\n").encode())
        return True

    def _offload(self, route: Route, req: ApiRequest) -> None:
        """Issue #15 finding 8: no client's request may stall the others for more than 50 ms.  A 5,000-subject
        STREAM.CREATE spends ~40 ms parsing and checking subject overlaps (in Go a goroutine of its own); in a worker
        thread the loop still gets the interpreter every switch interval (5 ms), so other clients go on.  The
        handler then runs on the loop with the result: only the work that changes state stays there."""
        self._held = deque()

        def done(fut) -> None:
            held, self._held = self._held, None
            if not self._stopped:
                self._run(route, req._replace(prepared=self._outcome(fut, req)))
            self._release(held)

        asyncio.get_running_loop().run_in_executor(None, route.prepare, req).add_done_callback(done)

    def _release(self, held: deque) -> None:
        """Dispatch the requests that waited, in order, until one of them has to wait in turn."""
        while held:
            if self._held is not None:  # a held request went off the loop or awaits: the rest wait for it
                self._held.extend(held)
                return
            self._dispatch_now(*held.popleft())

    def _release_stream(self, held: deque) -> None:
        """Dispatch the requests that waited for a stream, in order.  One that starts a write on the stream
        holds the ones after it again (``_dispatch_now`` queues them behind it, in order); if one holds the
        whole API, the rest go in front of what waits there: they arrived before it (while the API was held no
        request reached a stream's queue, so all that the API's queue holds came later)."""
        while held:
            if self._held is not None:
                self._held.extendleft(reversed(held))
                return
            self._dispatch_now(*held.popleft())

    def _outcome(self, fut, req: ApiRequest):
        try:
            return fut.result()
        except Exception as e:  # as a handler failure in _run
            self.server.log_error("JetStream API handler failed", subject=req.subject, error=repr(e))
            return ApiError.of("JSStreamGeneralErrorF", err=str(e) or type(e).__name__)

    def _run(self, route: Route, req: ApiRequest) -> None:
        try:
            res = route.handler(req)
        except ApiError as e:
            res = e
        except Exception as e:  # a handler bug must never take the server down
            self.server.log_error("JetStream API handler failed", subject=req.subject, error=repr(e))
            res = ApiError.of("JSStreamGeneralErrorF", err=str(e) or type(e).__name__)
        if asyncio.iscoroutine(res):
            if route.stream_scope:
                self._await_on_stream(route, req, res)
                return
            # A handler that finishes its work in slices (a 5,000-subject create): later requests wait for it.
            self._held = deque()

            def done(task) -> None:
                held, self._held = self._held, None
                self._answer(route, req, self._outcome(task, req))
                self._release(held)

            asyncio.get_running_loop().create_task(res).add_done_callback(done)
            return
        self._answer(route, req, res)

    def _await_on_stream(self, route: Route, req: ApiRequest, coro) -> None:
        """Run a ``stream_scope`` handler's coroutine; until it and the others at work on its stream answered,
        the requests naming the stream wait (but joiners, see :meth:`_dispatch_now`)."""
        name = req.tokens[route.stream_at]
        hold = self._busy.get(name)
        if hold is None:
            hold = self._busy[name] = StreamHold()
        hold.running += 1

        def done(task) -> None:
            hold.running -= 1
            self._answer(route, req, self._outcome(task, req))
            if hold.running == 0 and self._busy.get(name) is hold:
                del self._busy[name]
                self._release_stream(hold.waiting)

        asyncio.get_running_loop().create_task(coro).add_done_callback(done)

    def _answer(self, route: Route, req: ApiRequest, res) -> None:
        if res is None:
            return
        rtype = route.type
        if req.hdr and route.pattern == _STREAM_INFO and headers.get(req.hdr, RESPONSE_TYPE) == "create":
            # jsStreamInfoRequest: a clustered create that found its stream asks for its info as a create response
            rtype = _CREATE_TYPE
        if isinstance(res, ApiError):
            self.reply_error(req, route, res, rtype)
        else:
            self.reply_ok(req, route, res, rtype)

    def _no_responders(self, sub, subject: str, reply: str, origin) -> None:
        """``DIRECT.GET`` and ``CONSUMER.MSG.NEXT`` are answered by the streams and consumers themselves, not by
        nats-server's API import: with nobody else subscribed the requester gets a 503 no-responders status
        (verified against 2.15.1), where any other unknown ``$JS.API`` subject just times out."""
        if not origin.no_responders:
            return
        plain, queues = (sub.sublist or self.server.sublist).match(subject)
        if queues or any(s is not sub for s in plain):
            return
        self.server.no_responders(subject, reply, origin)

    def reply_ok(self, req: ApiRequest, route: Route, body: "dict | WithHeader", rtype: str = "") -> None:
        hdr = b""
        if isinstance(body, WithHeader):
            body, hdr = body
        out = {"type": rtype or route.type}
        out.update(body)
        data = jsonout.dumpb(out)
        if req.reply:
            self.server.publish(req.reply, data, "", hdr)
        if route.count_success:  # MSG.GET answers outside the API layer: no stats, no audit
            self.total += 1
            advisories.api_audit(self.server, req.origin, req.subject, req.body, data)

    def reply_error(self, req: ApiRequest, route: Route, err: ApiError, rtype: str = "") -> None:
        out: dict = {"type": rtype or route.type, "error": err.to_dict()}
        out.update(route.error_extra)
        data = jsonout.dumpb(out)
        if req.reply:
            self.server.publish(req.reply, data)
        if route.accounted:
            self.total += 1
            self.errors += 1
            advisories.api_audit(self.server, req.origin, req.subject, req.body, data)


def api_level_error(req: ApiRequest) -> "ApiError | None":
    """For handlers registered with ``level_check=False``: 10185 when the request's required level is too high."""
    if req.hdr and api_level_too_high(req.hdr):
        return ApiError.of("JSRequiredApiLevelErr")
    return None


def consumer_of(js: "JetStream", req: ApiRequest) -> "Consumer | ApiError":
    """The consumer a ``$JS.API.CONSUMER.<verb>.<stream>.<consumer>`` request names, or nats-server's error for the
    first lookup that fails (the stream's, then the consumer's)."""
    stream = js.streams.get(req.tokens[2])
    if stream is None:
        return ApiError.of("JSStreamNotFoundErr")
    c = stream.consumers.get(req.tokens[3])
    return ApiError.of("JSConsumerNotFoundErr") if c is None else c


_ATOI = re.compile(r"[+-]?[0-9]+")  # Go strconv.Atoi: an optional sign and ASCII digits


def level_too_high(level: str | None) -> bool:
    """nats-server errorOnRequiredApiLevel: a ``Nats-Required-Api-Level`` above ours, or one that is not a number
    (Go strconv.Atoi), fails; none or an empty one passes."""
    if not level:
        return False
    if not _ATOI.fullmatch(level):  # Python's int() would also take blanks, underscores and other digits
        return True
    n = int(level)
    return n > API_LEVEL or not -(1 << 63) <= n < 1 << 63  # out of int64: Atoi's range error


def api_level_too_high(hdr: bytes) -> bool:
    """:func:`level_too_high` for the ``Nats-Required-Api-Level`` of a request's header block."""
    return level_too_high(headers.get_exact(hdr, REQUIRED_API_LEVEL_HDR))  # getHeader: ``0 `` is no number
