"""Leaf node connections (nats-server leafnode.go; wave2-notes section 6).

A leaf connection joins one account of this server to one account of another: the *hub* accepts it on the
``leafnodes { listen }`` port, the *spoke* dials it from ``leafnodes { remotes [...] }``.  Both sides then tell the
other every subject their account is interested in (``LS+``/``LS-``, the interest of clients, routes and other leaf
connections alike, except the link's own) and send messages for the other side's interest as ``LMSG`` (``HMSG`` with
headers); there is no account token, the link is bound to one account on each side.

Handshake.  The hub sends INFO (with a nonce, ``client_id`` and ``leafnode_urls``: a spoke that sees neither knows it
dialed a client port, "attempted to connect to wrong port"); the spoke answers CONNECT (user and password from the
URL, or the JWT of a ``credentials`` file with the nonce signed by its seed); the hub checks it against
``leafnodes { authorization }`` (a user's ``account`` binds the link to it; no authorization: the global account)
and sends INFO again with ``connect_info`` (``info_on_connect``), then both send their interest.

Loops.  Every account with leaf connections subscribes to ``$LDS.<random>``; that interest travels with the rest, so
a server that gets its own ``$LDS`` subject back from a leaf is in a loop: it answers ``-ERR 'Loop detected for
leafnode account="<acc>". Delaying attempt to reconnect for 30s'`` and closes, and a spoke that gets that error waits
30 s before dialing again (leafnodeReconnectDelayAfterLoopDetected).

Forwarding rules (client.go processMsgResults): a message from a client goes to routes and leaf connections with
interest; one from a route goes to leaf connections but not to other routes; one from a leaf connection goes to
routes and to the other leaf connections.  A queue group prefers members of this server or of the cluster and falls
back to a leaf connection's members.

Not implemented, and refused at start-up (conf/leafnodes.py): TLS, compression, WebSocket remotes, deny lists,
isolation, leaf connections together with JetStream (nats-server then splits JetStream domains across the link).
"""
from __future__ import annotations

import asyncio
import base64
import json
import re
import secrets
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from skiff.protocol import encoder
from skiff.protocol.parser import Connect, Err, Info, Ok, Ping, Pong, ProtocolError
from skiff.protocol.route import RouteParser, RSub, RUnsub, lmsg_head, ls_minus, ls_plus

from ..version import GO_FIELD, VERSION
from .link import SERVER_SHUTDOWN, Link

if TYPE_CHECKING:  # pragma: no cover
    from .server import Server

LOOP_DELAY = 30.0  # leafnodeReconnectDelayAfterLoopDetected
RECONNECT_INTERVAL = 1.0  # DEFAULT_LEAF_NODE_RECONNECT
LEAF_PROTO = 3
CLIENT_CLOSED = "Client Closed"
AUTH_VIOLATION = "Authentication Failure"
PROTOCOL_VIOLATION = "Protocol Violation"
WRONG_PORT = "Incorrect Port"
LOOP = "Loop Detected"
_CREDS = re.compile(rb"\s*(?:(?:[-]{3,}.*[-]{3,}\r?\n)([\w\-.=]+)(?:\r?\n[-]{3,}.*[-]{3,}\r?\n))")


class LeafConnection(Link):
    kind = "Leafnode"
    client_type = "leafnode"  # auth.py connection_type: LEAFNODE for allowed_connection_types
    closed_reason = CLIENT_CLOSED

    def __init__(self, leafnodes: "LeafNodes", remote: Any = None, url: str = "") -> None:
        super().__init__(leafnodes.server, RouteParser(leafnodes.server.options.max_payload * 64, leaf=True))
        self.leafnodes = leafnodes
        self.remote = remote  # the remotes {} entry this spoke dialed, None on the hub side
        self.solicited = remote is not None
        self.url = url
        self.account = None  # the Account this link is bound to
        self.nonce = "" if self.solicited else secrets.token_urlsafe(11)
        self.loop_detected = False

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._made(transport)
        srv = self.server
        self.leafnodes.pending.add(self)
        if not self.solicited:
            self.send(encoder.info(self.leafnodes.hub_info(self)))
            self._timer = srv.clock.call_later(self.leafnodes.options.auth_timeout or 2.0, self._auth_timeout)
        self.flush()
        srv.log_debug("Leafnode connection created", cid=self.cid, addr=f"{self.host}:{self.port}")

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
    def on_rmsg(self, account: str, subject: str, reply: str, queues: tuple, hdr_len: int, data: bytes) -> None:
        self.in_msgs += 1
        self.in_bytes += len(data)
        if not self.registered:
            return
        self.server.deliver_routed(self, self.account.sublist, subject, reply, queues, hdr_len, data)

    def on_route_op(self, op: Any) -> None:
        if not self.solicited and not self.registered and not isinstance(op, (Connect, ProtocolError)):
            # Anything but CONNECT first on the hub side (leafnode.go: an unauthenticated leaf).
            self.send(encoder.err("Authorization Violation"))
            return self.close(AUTH_VIOLATION)
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
            if op.err:
                self.send(encoder.err(op.err))
            self.server.log_error("Leafnode protocol error", cid=self.cid, error=op.err or op.detail)
            self.close(PROTOCOL_VIOLATION)
        elif isinstance(op, Ok):
            pass

    def _info(self, data: bytes) -> None:
        info = self._json(data)
        if info is None:
            return self.on_route_op(ProtocolError("", "bad leafnode INFO"))
        if not self.solicited or self.registered:
            return  # the hub's INFO with connect_info, or an update: nothing Skiff acts on
        if not info.get("client_id") or info.get("leafnode_urls") is None:
            self.server.log_error("attempted to connect to wrong port", url=self.url)
            return self.close(WRONG_PORT)
        self.remote_id = str(info.get("server_id") or "")
        self.remote_name = str(info.get("server_name") or "")
        nonce = str(info.get("nonce") or "")
        try:
            self.send(self.leafnodes.connect_proto(self.remote, self.url, nonce))
        except (OSError, ValueError) as e:
            self.server.log_error("Leafnode credentials", error=str(e))
            return self.close(CLIENT_CLOSED)
        self._register(self.leafnodes.remote_account(self.remote))

    def _connect(self, data: bytes) -> None:
        if self.solicited or self.registered:
            return
        proto = self._json(data)
        if proto is None:
            return self.on_route_op(ProtocolError("", "bad leafnode CONNECT"))
        acc = self.leafnodes.authenticate(proto, self)
        if acc is None:
            self.send(encoder.err("Authorization Violation"))
            return self.close(AUTH_VIOLATION)
        self._cancel_timer()
        self.remote_id = str(proto.get("server_id") or "")
        self.remote_name = str(proto.get("name") or "")
        info = self.leafnodes.hub_info(self)
        info.update({"connect_info": True, "remote_account": acc.name})
        self.send(encoder.info(info))
        self._register(acc)

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


class LeafNodes:
    """The leaf node listener (hub side), the remotes (spoke side) and the interest each link is told of."""

    def __init__(self, server: "Server", options: Any) -> None:
        self.server = server
        self.options = options
        self.links: list[LeafConnection] = []
        self.pending: set[LeafConnection] = set()
        self.port = 0
        self.running = False
        self._listener = None
        self._tasks: set[asyncio.Task] = set()
        self._lds: dict[str, str] = {}  # account name -> its $LDS subject
        self._lds_subs: list = []
        # (account, subject, queue) -> {owner: count}; owner None = this server's clients and routes, else a link
        self.interest: dict[tuple[str, str, str], dict[Any, int]] = {}

    # ------------------------------------------------------------------ life cycle
    async def start(self) -> None:
        opts = self.options
        loop = asyncio.get_running_loop()
        self.running = True
        for acc in self._accounts_in_use():
            self.lds_subject(acc)
        if opts.port:
            port = 0 if opts.port == -1 else opts.port
            self._listener = await loop.create_server(lambda: LeafConnection(self), host=opts.host, port=port,
                                                      reuse_address=True)
            self.port = self._listener.sockets[0].getsockname()[1]
            self.server.log.info("Listening for leafnode connections", host=opts.host, port=self.port)
        for remote in opts.remotes:
            self._dial(remote, 0.0)

    async def stop(self) -> None:
        self.running = False
        if self._listener is not None:
            self._listener.close()
        for t in list(self._tasks):
            t.cancel()
        for link in list(self.links) + list(self.pending):
            link.close(SERVER_SHUTDOWN)
        self.server.flush_pending()

    def _accounts_in_use(self) -> list:
        accs = self.server.accounts
        out = [self.remote_account(r) for r in self.options.remotes]
        if self.options.port:
            out.append(accs.gacc)
            for u in self.options.users:
                a = accs.get(u.get("account") or "")
                if a is not None:
                    out.append(a)
        return out

    def lds_subject(self, acc: Any) -> str:
        """The account's loop detection subject, subscribed so that it travels with the account's interest."""
        subj = self._lds.get(acc.name)
        if subj is None:
            subj = self._lds[acc.name] = "$LDS." + secrets.token_urlsafe(16).replace("-", "A").replace("_", "B")
            self._lds_subs.append(self.server.subscribe_internal(subj, _ignore, account=acc))
        return subj

    # ------------------------------------------------------------------ dialing
    def _dial(self, remote: Any, delay: float) -> None:
        if not self.running:
            return
        task = asyncio.get_running_loop().create_task(self._connect_loop(remote, delay))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect_loop(self, remote: Any, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        loop = asyncio.get_running_loop()
        i = 0
        while self.running:
            url = remote.urls[i % len(remote.urls)]
            i += 1
            parts = urlsplit(url)
            try:
                await asyncio.wait_for(loop.create_connection(lambda: LeafConnection(self, remote, url),
                                                              parts.hostname or "127.0.0.1", parts.port or 7422), 1.0)
                return
            except (OSError, asyncio.TimeoutError) as e:
                self.server.log_debug("Error trying to connect as leafnode to remote server", url=url,
                                      error=str(e))
            await asyncio.sleep(self.options.reconnect_interval or RECONNECT_INTERVAL)

    def remote_account(self, remote: Any) -> Any:
        accs = self.server.accounts
        return accs.lookup(remote.account) if remote.account else accs.gacc

    def connect_proto(self, remote: Any, url: str, nonce: str) -> bytes:
        srv = self.server
        proto: dict[str, Any] = {"version": VERSION, "server_id": srv.server_id, "name": srv.server_name,
                                 "headers": True, "jetstream": False,
                                 "remote_account": self.remote_account(remote).name, "proto": LEAF_PROTO}
        if srv.cluster is not None:
            proto["cluster"] = srv.cluster.name
        if remote.credentials:
            with open(remote.credentials, "rb") as f:
                items = _CREDS.findall(f.read())
            if len(items) < 2:
                raise ValueError("Credentials file malformed")
            import nkeys

            kp = nkeys.from_seed(items[1])
            proto["jwt"] = items[0].decode()
            proto["sig"] = base64.urlsafe_b64encode(kp.sign(nonce.encode())).rstrip(b"=").decode()
        parts = urlsplit(url)
        if parts.username:
            proto["user"] = parts.username
            if parts.password is not None:
                proto["pass"] = parts.password
            else:
                proto["auth_token"] = parts.username
        return b"CONNECT " + json.dumps(proto, separators=(",", ":")).encode() + b"\r\n"

    # ------------------------------------------------------------------ hub side
    def hub_info(self, link: LeafConnection) -> dict:
        srv = self.server
        opts = self.options
        host = opts.host if opts.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        url = opts.advertise or f"{host}:{self.port}"
        info: dict[str, Any] = {
            "server_id": srv.server_id, "server_name": srv.server_name, "version": VERSION, "proto": LEAF_PROTO,
            "go": GO_FIELD, "host": host, "port": self.port, "headers": True, "auth_required": True,
            "max_payload": srv.options.max_payload, "ip": url, "client_id": link.cid, "nonce": link.nonce,
            "info_on_connect": True, "leafnode_urls": [] if opts.no_advertise else [url],
        }
        if srv.cluster is not None:
            info["cluster"] = srv.cluster.name
        return info

    def authenticate(self, proto: dict, link: LeafConnection) -> Any:
        """The account a leaf CONNECT binds to, or None (auth.go isLeafNodeAuthorized): the users of
        ``leafnodes { authorization }`` when it has any; otherwise the server's own client users, as a client
        would log in (with no client authentication configured: the global account)."""
        opts = self.options
        accs = self.server.accounts
        user, password = str(proto.get("user") or ""), str(proto.get("pass") or "")
        if not opts.users and not opts.username:
            auth = self.server.auth
            if not auth.required:
                return accs.get(opts.account) if opts.account else accs.gacc
            u = auth.check(proto, link.nonce, link)
            return None if u is None else (accs.get(u.account) or accs.gacc)
        if opts.users:
            for u in opts.users:
                if secrets.compare_digest(user, u.get("user", "")) and \
                        secrets.compare_digest(password, u.get("password", "")):
                    return accs.get(u.get("account") or "") or accs.gacc
            return None
        if opts.username:
            if not (secrets.compare_digest(user, opts.username) and secrets.compare_digest(password, opts.password)):
                return None
            return accs.get(opts.account) if opts.account else accs.gacc
        return accs.get(opts.account) if opts.account else accs.gacc

    # ------------------------------------------------------------------ links
    def add(self, link: LeafConnection) -> None:
        self.links.append(link)
        self.lds_subject(link.account)

    def closed(self, link: LeafConnection) -> None:
        self.pending.discard(link)
        if link in self.links:
            self.links.remove(link)
            self.server.log.info("Leafnode connection closed", remote=link.remote_name, reason=link.close_reason)
        link.registered = False
        if self.running and link.solicited:
            self._dial(link.remote, LOOP_DELAY if link.loop_detected else
                       (self.options.reconnect_interval or RECONNECT_INTERVAL))

    # ------------------------------------------------------------------ interest
    def sub_changed(self, acc_name: str, sub: Any, delta: int) -> None:
        """A subscription came (+1) or went (-1) in ``acc_name``: tell the links of that account whose view of it
        changed (every owner's subscriptions count but the link's own)."""
        owner = sub.route if sub.route is not None and not sub.route.is_route else None
        key = (acc_name, sub.subject, sub.queue)
        owners = self.interest.setdefault(key, {})
        before = sum(owners.values())
        owners[owner] = owners.get(owner, 0) + delta
        if owners[owner] <= 0:
            del owners[owner]
        if not owners:
            del self.interest[key]
        after = before + delta
        for link in self.links:
            if link is owner or link.account is None or link.account.name != acc_name:
                continue
            own = owners.get(link, 0)
            b, a = before - own, after - own
            if sub.queue:
                if a != b:
                    link.send_interest(sub.subject, sub.queue, max(a, 0))
            elif (b == 0) != (a == 0):
                link.send_interest(sub.subject, "", 1 if a else 0)

    def interest_for(self, link: LeafConnection) -> list[tuple[str, str, int]]:
        out = []
        name = link.account.name
        for (acc, subject, queue), owners in self.interest.items():
            if acc != name:
                continue
            n = sum(c for o, c in owners.items() if o is not link)
            if n > 0:
                out.append((subject, queue, n if queue else 0))
        return out

    def varz(self) -> dict:
        opts = self.options
        return {"host": opts.host, "port": self.port, "auth_timeout": int(opts.auth_timeout or 2), "tls_timeout": 2}


def _ignore(*_args) -> None:
    """The $LDS subscription: its interest is what matters, never a message."""
