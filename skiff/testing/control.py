"""The ``$SKIFF.>`` request API: the clock, inspection, the recorder and faults for tests in any language.

Theory of operation
-------------------
Off unless the process starts with ``--control`` (server/cli.py; flags, not configuration keys, so that the same
configuration file still runs on nats-server).  When on, an internal subscription on ``$SKIFF.>`` in every
configured account answers requests: a JSON object in, a JSON object out, ``{"error": {"code", "description"}}``
for anything refused (unknown commands included), never silence.  Any client can then drive Skiff with a plain
request (``nats req '$SKIFF.CLOCK.ADVANCE' '{"seconds": 30}'``, nats.js ``nc.request``).

Who may call: with no authentication configured (a developer's or CI's loopback server) any client; when the server
requires authentication, start-up refuses ``--control`` without ``--control_token`` (or ``SKIFF_CONTROL_TOKEN``),
and with a token every request must carry it in a ``Skiff-Control-Token`` header.

Commands (subject after ``$SKIFF.``; the body's keys are the arguments):

======================= =====================================================================================
CLOCK.NOW               ``{}`` -> ``{"time_ns", "manual"}``
CLOCK.ADVANCE           ``{"seconds": 5}`` or ``{"ns": ...}``: runs every timer that falls due (needs --clock=manual)
CLOCK.SET               ``{"time_ns": ...}``: forward only (needs --clock=manual)
INSPECT.ACCOUNTS        -> ``{"accounts": [...]}``
INSPECT.STREAMS         ``{"account"?}`` -> ``{"streams": [...]}``
INSPECT.STREAM          ``{"name", "account"?}`` -> ``{"stream": {...}}``
INSPECT.MESSAGES        ``{"stream", "subject"?, "start_seq"?, "limit"?}`` -> ``{"messages": [...]}`` (base64)
INSPECT.CONSUMERS       ``{"stream"}`` -> ``{"consumers": [...]}``
INSPECT.CONSUMER        ``{"stream", "name"}`` -> ``{"consumer": {...}}`` (pending, redelivered, waiting...)
INSPECT.CONNECTIONS     ``{"account"?}`` -> ``{"connections": [...]}``
INSPECT.CONNECTION      ``{"cid"}`` -> ``{"connection": {...}}``
RECORDER.START / STOP   ``{"payloads"?, "limit"?}`` / ``{}``
RECORDER.READ           ``{"cid"?, "name"?, "direction"?, "op"?, "subject"?}`` -> ``{"ops": [...]}``
RECORDER.ACKS           ``{"cid"?, "name"?, "stream"?, "consumer"?, "kind"?}`` -> ``{"acks": [...]}``
RECORDER.CLEAR          ``{}``
FAULTS.DROP             ``{"cid"}`` or ``{"name"}``: cut the connection(s) at once, as a network failure would
FAULTS.<METHOD>         any public method of skiff.testing.faults.Faults (lower-cased name, the body as keyword
                        arguments), when that module is installed; one that returns an undo (or a context
                        manager) answers a ``handle``
FAULTS.UNDO             ``{"handle"}``: undo that fault
======================= =====================================================================================

Clock commands run on the next loop turn, outside the routing of the request, so the timers they fire (a
redelivery, an expiry) go out before the reply: a client that got the reply has been sent their effects.
"""
from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Callable

from skiff.protocol import headers as hdrs

from .inspect import Inspector, to_json
from .recorder import Recorder

if TYPE_CHECKING:  # pragma: no cover
    from skiff.server.core.server import Server

PREFIX = "$SKIFF."
TOKEN_HEADER = "Skiff-Control-Token"


class ControlError(Exception):
    """Start-up refused (``--control`` with authentication and no token)."""


class CommandError(Exception):
    def __init__(self, code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.description = description


def _arg(body: dict, key: str, kind: type | tuple, required: bool = True, default: Any = None) -> Any:
    if key not in body:
        if required:
            raise CommandError(400, f"missing {key!r}")
        return default
    v = body[key]
    if isinstance(v, bool) and kind is not bool and not (isinstance(kind, tuple) and bool in kind):
        raise CommandError(400, f"{key!r} must be {_kind_name(kind)}")
    if not isinstance(v, kind):
        raise CommandError(400, f"{key!r} must be {_kind_name(kind)}")
    return v


def _kind_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({int: "an integer", float: "a number", str: "a string", bool: "a boolean"}.get(k, k.__name__)
                       for k in kinds)


class Control:
    def __init__(self, server: "Server", token: str = "") -> None:
        self.server = server
        self.token = token
        self.inspector = Inspector(server)
        self.recorder: Recorder | None = None
        self._faults: Any = None
        self._undo: dict[int, Any] = {}  # FAULTS.UNDO handle -> what a fault method returned
        self._handles = 0
        self._subs: list = []
        self._commands: dict[str, Callable[[dict], Any]] = {
            "CLOCK.NOW": self._clock_now,
            "INSPECT.ACCOUNTS": lambda b: {"accounts": to_json(self.inspector.accounts())},
            "INSPECT.STREAMS": lambda b: {"streams": to_json(self.inspector.streams(_arg(b, "account", str, False)))},
            "INSPECT.STREAM": lambda b: {"stream": to_json(self.inspector.stream(
                _arg(b, "name", str), _arg(b, "account", str, False)))},
            "INSPECT.MESSAGES": lambda b: {"messages": to_json(self.inspector.messages(
                _arg(b, "stream", str), subject=_arg(b, "subject", str, False, ""),
                start_seq=_arg(b, "start_seq", int, False, 0), limit=_arg(b, "limit", int, False),
                account=_arg(b, "account", str, False)))},
            "INSPECT.CONSUMERS": lambda b: {"consumers": to_json(self.inspector.consumers(
                _arg(b, "stream", str), _arg(b, "account", str, False)))},
            "INSPECT.CONSUMER": lambda b: {"consumer": to_json(self.inspector.consumer(
                _arg(b, "stream", str), _arg(b, "name", str), _arg(b, "account", str, False)))},
            "INSPECT.CONNECTIONS": lambda b: {"connections": to_json(self.inspector.connections(
                _arg(b, "account", str, False)))},
            "INSPECT.CONNECTION": lambda b: {"connection": to_json(self.inspector.connection(_arg(b, "cid", int)))},
            "RECORDER.START": self._recorder_start,
            "RECORDER.STOP": self._recorder_stop,
            "RECORDER.READ": self._recorder_read,
            "RECORDER.ACKS": self._recorder_acks,
            "RECORDER.CLEAR": self._recorder_clear,
            "FAULTS.DROP": self._drop,
            "FAULTS.UNDO": self._faults_undo,
        }
        # Run on the next loop turn (see the module docstring), then answered.
        self._deferred = {"CLOCK.ADVANCE": self._clock_advance, "CLOCK.SET": self._clock_set}

    # ------------------------------------------------------------------ life cycle
    def refusal(self) -> str | None:
        """Why this control API may not run on this server, or None (checked before anything listens)."""
        if self.server.auth.required and not self.token:
            return "--control with authentication configured needs --control_token (or SKIFF_CONTROL_TOKEN)"
        return None

    def start(self) -> "Control":
        srv = self.server
        refusal = self.refusal()
        if refusal:
            raise ControlError(refusal)
        for acc in list(srv.accounts.by_name.values()):
            self._subs.append(srv.subscribe_internal(PREFIX + ">", self._request, account=acc))
        srv.log.info("Skiff control API on $SKIFF.>", clock="manual" if self.manual else "real",
                     token=bool(self.token))
        return self

    def stop(self) -> None:
        for sub in self._subs:
            self.server.unsubscribe_internal(sub)
        self._subs = []
        if self.recorder is not None:
            self.recorder.stop()

    @property
    def manual(self) -> bool:
        return hasattr(self.server.clock, "advance")

    # ------------------------------------------------------------------ requests
    def _request(self, sub, subject: str, reply: str, hdr_len: int, data: bytes, origin) -> None:
        if origin is None:
            return  # only client requests (never a message the server itself published)
        sublist = sub.sublist

        def answer(doc: dict) -> None:
            if reply:
                self.server.route(None, reply, "", 0, json.dumps(doc).encode(), sublist=sublist)

        try:
            cmd, body = self._parse(subject, bytes(data[:hdr_len]), bytes(data[hdr_len:]))
            deferred = self._deferred.get(cmd)
            if deferred is not None:
                asyncio.get_running_loop().call_soon(self._run_deferred, deferred, body, answer)
                return
            handler = self._commands.get(cmd)
            if handler is None:
                handler = self._faults_method(cmd)
            answer(handler(body))
        except CommandError as e:
            answer({"error": {"code": e.code, "description": e.description}})
        except KeyError as e:  # the inspector's "not found"
            answer({"error": {"code": 404, "description": str(e.args[0]) if e.args else "not found"}})
        except Exception as e:  # noqa: BLE001 - a request must never break the routing loop
            self.server.log_error("control request failed", subject=subject, error=f"{type(e).__name__}: {e}")
            answer({"error": {"code": 500, "description": f"{type(e).__name__}: {e}"}})

    def _run_deferred(self, fn, body: dict, answer) -> None:
        try:
            doc = fn(body)
        except CommandError as e:
            doc = {"error": {"code": e.code, "description": e.description}}
        answer(doc)
        self.server.flush_pending()

    def _parse(self, subject: str, hdr: bytes, payload: bytes) -> tuple[str, dict]:
        if self.token and (hdrs.get(hdr, TOKEN_HEADER) if hdr else None) != self.token:
            raise CommandError(401, f"{TOKEN_HEADER} header missing or wrong")
        cmd = subject[len(PREFIX):]
        if payload.strip():
            try:
                body = json.loads(payload)
            except ValueError:
                raise CommandError(400, "request body is not JSON") from None
            if not isinstance(body, dict):
                raise CommandError(400, "request body must be a JSON object")
        else:
            body = {}
        return cmd, body

    # ------------------------------------------------------------------ clock
    def _clock_now(self, body: dict) -> dict:
        return {"time_ns": self.server.clock.time_ns(), "manual": self.manual}

    def _manual_clock(self):
        if not self.manual:
            raise CommandError(409, "the clock is real time: start the server with --clock=manual to move it")
        return self.server.clock

    def _clock_advance(self, body: dict) -> dict:
        clock = self._manual_clock()
        if "ns" in body:
            seconds = _arg(body, "ns", int) / 1e9
        else:
            seconds = float(_arg(body, "seconds", (int, float)))
        if seconds < 0:
            raise CommandError(400, "time only moves forward")
        ran = clock.advance(seconds)
        return {"time_ns": clock.time_ns(), "timers_ran": ran}

    def _clock_set(self, body: dict) -> dict:
        clock = self._manual_clock()
        target = _arg(body, "time_ns", int)
        now = clock.time_ns()
        if target < now:
            raise CommandError(400, f"time only moves forward (now {now})")
        ran = clock.advance((target - now) / 1e9)
        return {"time_ns": clock.time_ns(), "timers_ran": ran}

    # ------------------------------------------------------------------ recorder
    def _recorder_start(self, body: dict) -> dict:
        if self.recorder is not None and self.recorder.armed:
            raise CommandError(409, "the recorder is already started")
        self.recorder = Recorder(self.server, payloads=_arg(body, "payloads", bool, False, True),
                                 limit=_arg(body, "limit", int, False)).start()
        return {"recording": True}

    def _recorder_stop(self, body: dict) -> dict:
        rec = self._rec()
        rec.stop()
        return {"recording": False, "ops": len(rec.ops())}

    def _rec(self) -> Recorder:
        if self.recorder is None:
            raise CommandError(409, "the recorder was never started ($SKIFF.RECORDER.START)")
        return self.recorder

    def _recorder_read(self, body: dict) -> dict:
        ops = self._rec().ops(_arg(body, "cid", int, False), name=_arg(body, "name", str, False),
                              direction=_arg(body, "direction", str, False), op=_arg(body, "op", str, False),
                              subject=_arg(body, "subject", str, False))
        return {"ops": to_json(ops)}

    def _recorder_acks(self, body: dict) -> dict:
        acks = self._rec().acks(_arg(body, "cid", int, False), name=_arg(body, "name", str, False),
                                stream=_arg(body, "stream", str, False), consumer=_arg(body, "consumer", str, False),
                                kind=_arg(body, "kind", str, False))
        return {"acks": [{k: v for k, v in to_json(a).items() if k != "op"} for a in acks]}

    def _recorder_clear(self, body: dict) -> dict:
        self._rec().clear()
        return {"cleared": True}

    # ------------------------------------------------------------------ faults
    def _drop(self, body: dict) -> dict:
        """Close connections at once, without a -ERR, as when the network between them fails (transport abort)."""
        from skiff.server.core.client import CLIENT_CLOSED

        cid = _arg(body, "cid", int, False)
        name = _arg(body, "name", str, False)
        if (cid is None) == (name is None):
            raise CommandError(400, "give one of 'cid' or 'name'")
        victims = [c for c in list(self.server.clients.values())
                   if (c.cid == cid if cid is not None else c.name == name)]
        if not victims:
            raise CommandError(404, "no such connection")
        # After the reply went out: dropping the requester in the middle of its own request would lose the answer.
        loop = asyncio.get_running_loop()
        for c in victims:
            loop.call_soon(c.close, CLIENT_CLOSED, True)
        return {"dropped": [c.cid for c in victims]}

    def _faults_method(self, cmd: str) -> Callable[[dict], Any]:
        if not cmd.startswith("FAULTS."):
            raise CommandError(404, f"unknown command {PREFIX}{cmd}")
        faults = self._faults_object()
        name = cmd[len("FAULTS."):].lower()
        method = getattr(faults, name, None) if faults is not None and not name.startswith("_") else None
        if method is None or not callable(method):
            raise CommandError(404, f"unknown command {PREFIX}{cmd}")

        def call(body: dict) -> dict:
            try:
                result = method(**body)
            except TypeError as e:
                raise CommandError(400, f"bad arguments for {PREFIX}{cmd}: {e}") from None
            except ValueError as e:  # the fault refused its arguments
                raise CommandError(400, f"{PREFIX}{cmd}: {e}") from None
            if hasattr(result, "undo") or hasattr(result, "__exit__"):
                # A fault with an undo (or a context manager): keep it, so that FAULTS.UNDO can end it later.
                self._handles += 1
                self._undo[self._handles] = result
                return {"result": repr(result), "handle": self._handles}
            return {"result": _plain(result)}

        return call

    def _faults_undo(self, body: dict) -> dict:
        handle = _arg(body, "handle", int)
        fault = self._undo.pop(handle, None)
        if fault is None:
            raise CommandError(404, f"no fault with handle {handle}")
        if hasattr(fault, "undo"):
            fault.undo()
        else:
            fault.__exit__(None, None, None)
        return {"undone": handle}

    def _faults_object(self):
        """The server's Faults (``server.faults`` when it has one, else ``skiff.testing.faults.Faults(server)``
        made once), or None while that module does not exist."""
        if self._faults is None:
            faults = getattr(self.server, "faults", None)
            if faults is None:
                try:
                    from .faults import Faults  # skiff.testing.faults, when present
                except ImportError:
                    return None
                faults = Faults(self.server)
            self._faults = faults
        return self._faults


def _plain(value: Any) -> Any:
    value = to_json(value)
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)
