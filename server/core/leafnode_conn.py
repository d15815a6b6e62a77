"""A leaf node connection: one link, its handshake and its TLS steps on either end (nats-server leafnode.go).

The manager that listens, dials, authenticates and keeps the interest every link is told of is leafnode.py's
LeafNodes; that module's docstring describes the protocol, the loop detection and the TLS rules this connection
follows.
"""
from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING, Any

from skiff.protocol import encoder
from skiff.protocol.parser import Connect, Err, Info, Ok, Ping, Pong, ProtocolError
from skiff.protocol.route import RouteParser, RSub, RUnsub, lmsg_head, ls_minus, ls_plus

from .link import (
    AUTO_THRESHOLDS, NOT_SUPPORTED, OFF, PROTOCOL_VIOLATION, S2_AUTO, Link, announced_proto, needs_compression,
)
from .tls import TLSError, TLSLayer

if TYPE_CHECKING:  # pragma: no cover
    from .leafnode import LeafNodes

LOOP_DELAY = 30.0  # leafnodeReconnectDelayAfterLoopDetected
RECONNECT_INTERVAL = 1.0  # DEFAULT_LEAF_NODE_RECONNECT
LEAF_PROTO = 3
CLIENT_CLOSED = "Client Closed"
WRONG_PORT = "Incorrect Port"
LOOP = "Loop Detected"
TLS_HANDSHAKE_FAILURE = "TLS Handshake Failure"
READ_ERROR = "Read Error"
MAX_ACCOUNT_CONNECTIONS = "Maximum Account Connections Exceeded"
TLS_TIMEOUT = 2.0  # TLS_TIMEOUT and DEFAULT_LEAF_TLS_TIMEOUT (const.go)
AUTH_TIMEOUT = 2.0  # AUTH_TIMEOUT; with TLS the TLS timeout + 1 s (opts.go getDefaultAuthTimeout)
#: Go's tls.RecordHeaderError for plain text where a TLS record is due; logged at debug level, as a probe
#: (client.go isClientProbeTLSHandshakeError)
NOT_TLS = "tls: first record does not look like a TLS handshake"


class LeafConnection(Link):
    kind = "Leafnode"
    log_name = "Leafnode"
    client_type = "leafnode"  # auth.py connection_type: LEAFNODE for allowed_connection_types
    closed_reason = CLIENT_CLOSED
    # What an operator-mode login (operator.py _bind) keeps and lowers on the connection: the user JWT and the
    # subscription limit (nats-server applies a leaf user's JWT limits as a client's)
    jwt_user = None
    max_subs = -1

    def __init__(self, leafnodes: "LeafNodes", remote: Any = None, url: str = "") -> None:
        super().__init__(leafnodes.server, RouteParser(leafnodes.server.options.max_payload * 64, leaf=True))
        self.leafnodes = leafnodes
        self.remote = remote  # the remotes {} entry this spoke dialed, None on the hub side
        self.solicited = remote is not None
        self.url = url
        self.account = None  # the Account this link is bound to
        self.nonce = "" if self.solicited else secrets.token_urlsafe(11)
        self.loop_detected = False
        self.tls: TLSLayer | None = None
        self._tls_seen = False  # a first TLS record came from the other side
        self._tls_timer = None
        self._tls_info: dict | None = None  # spoke: the hub's first INFO, acted on once the handshake is done
        self._first = True  # hub: nothing of the protocol received yet
        self._comp_negotiated = False  # compression settled (leafnode.go compressionNegotiated)

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._made(transport)
        srv = self.server
        ln = self.leafnodes
        ln.pending.add(self)
        srv.log_debug("Leafnode connection created", cid=self.cid, addr=f"{self.host}:{self.port}")
        if not self.solicited:
            tls = ln.options.tls
            if tls is None or not tls.handshake_first:
                self.send(encoder.info(ln.hub_info(self)))
                self.flush()  # in plain text, before the ClientHello it asks for
            if tls is not None:
                srv.log_debug("Starting TLS leafnode server handshake", cid=self.cid)
                self.tls = TLSLayer(ln.tls_server)
                self._tls_timer = srv.clock.call_later(tls.timeout or TLS_TIMEOUT, self._tls_timeout)
            self._timer = srv.clock.call_later(ln.auth_timeout(), self._auth_timeout)
        elif self.remote.tls is not None and self.remote.tls.handshake_first:
            self._start_client_tls()
        self.flush()

    def data_received(self, data: bytes) -> None:
        tls = self.tls
        if tls is None or self.closed:
            return self._receive(data)
        if not self._tls_seen:
            if data[:1] != b"\x16":  # not a handshake record where the other side's first flight is due
                return self._tls_failed(NOT_TLS, probe=True)
            self._tls_seen = True
        try:
            plain, done = tls.receive(data)
        except TLSError as e:
            if tls.established:
                # After the handshake: a broken record, or the hub's alert for a certificate it refused (TLS 1.3
                # ends the client's handshake before the server has checked the client's certificate).  Go's
                # read loop gets the error: "Read Error".
                self.server.log_debug("Leafnode read error", cid=self.cid, error=str(e))
                return self.close(READ_ERROR)
            return self._tls_failed(str(e))
        out = tls.take_out()
        if out and not self.transport.is_closing():
            self.transport.write(out)
        if done:
            self._handshake_done()
        if plain and not self.closed:
            self._receive(plain)
        if tls.peer_closed and not self.closed:
            self.close(CLIENT_CLOSED)  # close_notify: answered with ours (close), as Go's tls.Conn does
        self.flush()
        self.server.flush_pending()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed and self.tls is not None and self.tls.started and not self.tls.established:
            # The other end went during the handshake (Go: "TLS leafnode handshake error: EOF").
            self.server.log_error("TLS leafnode handshake error", cid=self.cid, addr=f"{self.host}:{self.port}",
                                  error="EOF")
            self.close_reason = TLS_HANDSHAKE_FAILURE
        super().connection_lost(exc)

    def _receive(self, data: bytes) -> None:
        """Protocol bytes (decrypted when the link has TLS)."""
        if self._first and not self.solicited and data and not self.closed:
            self._first = False
            if data[:1] not in (b"C", b"c") and not (data[:1] in (b"I", b"i") and self._mode_wants_compression()):
                # parser.go OP_START: a leaf's first operation must be CONNECT; any other first byte (among them
                # the ClientHello of a spoke with TLS, sent to a hub without) is an authorization violation.
                self.server.log_error("authentication error", cid=self.cid, addr=f"{self.host}:{self.port}")
                return self._auth_violation()
        super().data_received(data)

    def flush(self) -> None:
        tls = self.tls
        if tls is None:
            return super().flush()
        if not tls.established or not self.out or self.transport is None:
            return  # nothing goes out in the clear once TLS has begun: kept until the handshake is done
        payload = b"".join(self.out)
        self.out.clear()
        if self._s2_out is not None:
            payload = self._s2_out.encode(payload)  # compressed inside TLS, as Go's writer under its tls.Conn
        data = tls.wrap(payload)
        if not self.transport.is_closing():
            self.transport.write(data)

    def close(self, reason: str = "") -> None:
        if not self.closed and self.tls is not None and self.transport is not None:
            self.flush()
            if not self.transport.is_closing():
                out = self.tls.shutdown()  # close_notify after the last output (tls.py)
                if out:
                    self.transport.write(out)
        super().close(reason)

    # ------------------------------------------------------------------ compression
    def _mode(self) -> str:
        return self.remote.compression if self.solicited else self.leafnodes.options.compression

    def auto_thresholds(self) -> Any:
        if self._mode() != S2_AUTO:
            return None
        opts = self.remote if self.solicited else self.leafnodes.options
        return opts.compression_rtts or AUTO_THRESHOLDS

    def _mode_wants_compression(self) -> bool:
        return needs_compression(self._mode())

    def _negotiate(self, info: dict) -> bool:
        """leafnode.go processLeafnodeInfo / negotiateLeafCompression on the first INFO: False when compression
        was agreed, this side's INFO sent and the switch made (what comes next is compressed)."""
        self._comp_negotiated = True
        mode = self._mode()
        theirs = info.get("compression")
        theirs = theirs if isinstance(theirs, str) else ""
        if not needs_compression(mode):
            self.compression = NOT_SUPPORTED if not theirs or mode == NOT_SUPPORTED else OFF
            return True
        try:
            cm = self.agreed_compression(mode, theirs)
        except ValueError:
            # selectCompressionMode's error, "route" in its text for leaf connections too
            self.send(encoder.err(f'unsupported route compression mode "{theirs}"'))
            self.server.log_error("Leafnode error", cid=self.cid, error=f"unsupported compression {theirs!r}")
            self.close(PROTOCOL_VIOLATION)
            return False
        self.compression = cm
        if not needs_compression(cm):
            return True
        info_out = self.leafnodes.hub_info(self)
        info_out["compression"] = S2_AUTO if mode == S2_AUTO else cm  # compressionModeForInfoProtocol
        if self.solicited:
            info_out["nonce"] = ""
            self.send(encoder.info(info_out))  # before this side compresses; the hub's after
            self.start_compression()
        else:
            self.start_compression()
            self.send(encoder.info(info_out))
        return False

    # ------------------------------------------------------------------ TLS
    def _start_client_tls(self) -> None:
        """The spoke's end of the handshake (leafnode.go leafClientHandshakeIfNeeded): its ClientHello now, the
        hub's answer in data_received."""
        ctx, name = self.leafnodes.client_tls(self.remote, self.url)
        srv = self.server
        srv.log_debug("Starting TLS leafnode client handshake", cid=self.cid)
        self.tls = TLSLayer(ctx, server_side=False, server_hostname=name)
        timeout = (self.remote.tls.timeout if self.remote.tls is not None else 0) or TLS_TIMEOUT
        self._tls_timer = srv.clock.call_later(timeout, self._tls_timeout)
        try:
            hello = self.tls.begin()
        except TLSError as e:
            return self._tls_failed(str(e))
        self.transport.write(hello)

    def _handshake_done(self) -> None:
        if self._tls_timer is not None:
            self._tls_timer.cancel()
            self._tls_timer = None
        if not self.solicited:
            if self.leafnodes.options.tls.handshake_first:
                self.send(encoder.info(self.leafnodes.hub_info(self)))
            return
        info, self._tls_info = self._tls_info, None
        if info is not None:
            self._after_info(info)

    def _tls_failed(self, error: str, probe: bool = False) -> None:
        """leafnode.go doTLSHandshake: the error logged (a probe's at debug level), OpenSSL's alert sent as Go sends
        its own, and the link closed."""
        alert = self.tls.take_out() if self.tls is not None else b""
        if alert and not self.transport.is_closing():
            self.transport.write(alert)
        log = self.server.log_debug if probe else self.server.log_error
        log("TLS leafnode handshake error", cid=self.cid, addr=f"{self.host}:{self.port}", error=error)
        self.close(TLS_HANDSHAKE_FAILURE)

    def _tls_timeout(self) -> None:
        self._tls_timer = None
        if not self.closed and self.tls is not None and not self.tls.established:
            self.server.log_debug("TLS handshake timeout", cid=self.cid)  # debug for leafs (server.go tlsTimeout)
            self.close(TLS_HANDSHAKE_FAILURE)

    def _teardown(self) -> None:
        if self._tls_timer is not None:
            self._tls_timer.cancel()
            self._tls_timer = None
        super()._teardown()

    def send_msg(self, account: str, subject: str, reply: str, queues: list[str] | tuple, hdr_len: int,
                 data: bytes) -> None:
        if not self.registered:
            return
        if not self.out:
            self.server.mark_pending(self)
        self.out += (lmsg_head(subject, reply, queues, hdr_len, len(data)), data, b"\r\n")
        self.out_msgs += 1
        self.out_bytes += len(data)

    # ------------------------------------------------------------------ input
    def on_rmsg(self, account: str, subject: str, reply: str, queues: tuple, hdr_len: int, data: bytes,
                traced: bool = False) -> None:
        self.in_msgs += 1
        self.in_bytes += len(data)
        if not self.registered:
            return
        if hdr_len and (traced or self.account.trace_dest):  # a trace asked for, or a traceparent may start one
            from .msgtrace_delivery import link_traced

            if link_traced(self.server, self, self.account, subject, reply, queues, hdr_len, data, traced):
                return
        self.server.deliver_routed(self, self.account.sublist, subject, reply, queues, hdr_len, data)

    def on_traced_rmsg(self, *msg: Any) -> None:
        """A message whose header block asks for a trace (the parser tells it apart): core/msgtrace_delivery.py."""
        self.on_rmsg(*msg, traced=True)

    def on_route_op(self, op: Any) -> None:
        if not self.solicited and not self.registered and not isinstance(op, (Connect, ProtocolError)) and \
                not (isinstance(op, Info) and self._mode_wants_compression() and not self._comp_negotiated):
            # Anything but CONNECT first on the hub side (leafnode.go: an unauthenticated leaf).
            return self._auth_violation()
        if isinstance(op, RSub):
            return self._remote_sub(op)
        if isinstance(op, RUnsub):
            return self._remove_remote_sub((op.subject, op.queue))
        if isinstance(op, Ping):
            self.send(encoder.PONG)
        elif isinstance(op, Pong):
            self._pong()
        elif isinstance(op, Info):
            self._info(op.raw)
        elif isinstance(op, Connect):
            self._connect(op.raw)
        elif isinstance(op, Err):
            text = op.text.decode("utf-8", "replace")
            self.server.log_error("Leafnode error", remote=self.remote_name or f"{self.host}:{self.port}",
                                  error=text)
            if "Loop detected" in text:
                self.loop_detected = True
            self.close(CLIENT_CLOSED)
        elif isinstance(op, ProtocolError):
            self._protocol_error(op)
        elif isinstance(op, Ok):
            pass

    def _info(self, data: bytes) -> None:
        info = self._json(data, "INFO")
        if info is None:
            return
        if not self.solicited and not self.registered and not self._comp_negotiated:
            self._negotiate(info)  # a spoke that compresses speaks first (leafnode.go processLeafnodeInfo)
            return
        if not self.solicited or self.registered or self._tls_info is not None:
            return  # the hub's INFO with connect_info, or an update: nothing Skiff acts on
        if self.tls is None and (self.remote.tls is not None or info.get("tls_required")):
            # TLS before anything else, even without a tls {} of our own when the hub requires it
            # (processLeafnodeInfo: remote.TLS = true); the rest of this INFO is acted on once it is done.
            self._tls_info = info
            return self._start_client_tls()
        self._after_info(info)

    def _after_info(self, info: dict) -> None:
        if not info.get("client_id") or info.get("leafnode_urls") is None:
            self.server.log_error("attempted to connect to wrong port", url=self.url)
            return self.close(WRONG_PORT)
        if not self._comp_negotiated and not self._negotiate(info):
            return  # compression starts: the hub's next INFO, compressed, is the one to act on
        self.remote_id = str(info.get("server_id") or "")
        self.remote_name = str(info.get("server_name") or "")
        self.remote_proto = announced_proto(info.get("proto"))
        nonce = str(info.get("nonce") or "")
        try:
            self.send(self.leafnodes.connect_proto(self.remote, self.url, nonce, self.compression))
        except (OSError, ValueError) as e:
            self.server.log_error("Leafnode credentials", error=str(e))
            return self.close(CLIENT_CLOSED)
        acc = self.leafnodes.remote_account(self.remote)
        if self.leafnodes.max_leafs_reached(acc):  # leafNodeFinishConnectProcess: the spoke's own account's limit
            return self._max_leafs_exceeded()
        self._register(acc)

    def _connect(self, data: bytes) -> None:
        if self.solicited or self.registered:
            return
        proto = self._json(data, "CONNECT")
        if proto is None:
            return
        self.remote_proto = announced_proto(proto.get("protocol"))  # leafConnectInfo's tag for it
        acc = self.leafnodes.authenticate(proto, self)
        if acc is None:
            return self._auth_violation()
        if self.leafnodes.max_leafs_reached(acc):  # auth.go RegisterNkeyUser -> registerWithAccount
            return self._max_leafs_exceeded()
        self._cancel_timer()
        if not self._comp_negotiated:  # a spoke that did not negotiate: what its CONNECT says (processLeafNodeConnect)
            mode = proto.get("compress_mode")
            self.compression = mode if isinstance(mode, str) and mode else NOT_SUPPORTED
        self.remote_id = str(proto.get("server_id") or "")
        self.remote_name = str(proto.get("name") or "")
        info = self.leafnodes.hub_info(self)
        info.update({"connect_info": True, "remote_account": acc.name})
        self.send(encoder.info(info))
        self._register(acc)

    def _max_leafs_exceeded(self) -> None:
        """client.go maxAccountConnExceeded: the account's ``leaf`` limit is reached (ErrTooManyAccountConnections,
        the same words as for clients); the other end logs the error and a spoke dials again."""
        self.server.log_error("maximum account active connections exceeded", cid=self.cid)
        self.send(encoder.err("maximum account active connections exceeded"))
        self.close(MAX_ACCOUNT_CONNECTIONS)

    def _register(self, acc: Any) -> None:
        self.account = acc
        self.registered = True
        self.leafnodes.pending.discard(self)
        self.leafnodes.add(self)
        for subject, queue, weight in self.leafnodes.interest_for(self):
            self.send(ls_plus(subject, queue, weight))
        self.server.log.info("Leafnode connection registered", remote=self.remote_name, account=acc.name)

    # ------------------------------------------------------------------ interest
    def _remote_sub(self, op: RSub) -> None:
        if not self.registered:
            return
        if op.subject == self.leafnodes.lds_subject(self.account):
            return self._loop()
        self._add_remote_sub((op.subject, op.queue), self.account.name, self.account.sublist, op.subject, op.queue,
                             op.weight, "L")

    def _loop(self) -> None:
        """Our own $LDS subject came back: this link closes a loop (leafnode.go isLoopDetected)."""
        self.send(encoder.err(f'Loop detected for leafnode account="{self.account.name}". Delaying attempt to '
                              f"reconnect for {int(LOOP_DELAY)}s"))
        self.server.log_error("Loop detected for leafnode account", account=self.account.name)
        self.loop_detected = True
        self.close(LOOP)

    def send_interest(self, subject: str, queue: str, weight: int) -> None:
        if self.registered:
            self.send(ls_plus(subject, queue, weight) if weight else ls_minus(subject, queue))

    # ------------------------------------------------------------------ closing
    def _known(self) -> bool:
        return self in self.leafnodes.pending

    def _gone(self) -> None:
        self.leafnodes.closed(self)
