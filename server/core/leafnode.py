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

TLS (leafnode.go createLeafNode, processLeafnodeInfo).  A hub with ``leafnodes { tls }`` sends its INFO in plain
text with ``tls_required`` (and ``tls_verify`` under ``verify``) and then expects a ClientHello; with
``handshake_first`` it sends nothing before the handshake and the INFO after it.  A spoke upgrades when its remote
has ``tls { }`` or when the hub's first INFO says ``tls_required`` (then with the system's roots and no certificate,
as nats-server's ``remote.TLS = true``), before it looks at that INFO any further; with the remote's
``handshake_first`` it starts TLS as soon as it is connected.  The spoke checks the hub's certificate against the
URL's host, or, when that is an IP address, against the first host name among the remote's URLs (saveTLSHostname).
A failed or timed-out handshake is logged ("TLS leafnode handshake error") and closes the link (TLS Handshake
Failure); the spoke dials again.  Both ends run TLS through tls.TLSLayer, as the client port does.

Compression (leafnode.go negotiateLeafCompression): s2_auto by default on both ends; the spoke speaks first, with an
INFO naming the mode it selected, then both ends write an S2 stream (leafnode_conn.py ``_negotiate``, link.py).

Not implemented, and refused at start-up (conf/leafnodes.py): WebSocket remotes, deny lists, isolation, leaf
connections together with JetStream (nats-server then splits JetStream domains across the link), and the TLS keys
the client port refuses too (support.TLS).
"""
from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import re
import secrets
import ssl
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..ids import nuid
from ..version import GO_FIELD, VERSION
from .leafnode_conn import AUTH_TIMEOUT, LEAF_PROTO, LOOP_DELAY, RECONNECT_INTERVAL, TLS_TIMEOUT, LeafConnection
from .link import LinkSet
from .tls import make_client_context, make_server_context

if TYPE_CHECKING:  # pragma: no cover
    from .server import Server

#: leafnode.go leafnodeTLSInsecureWarning, logged when the leaf listener starts
INSECURE_WARNING = ("TLS certificate chain and hostname of solicited leafnodes will not be verified. DO NOT USE IN "
                    "PRODUCTION!")
_CREDS = re.compile(rb"\s*(?:(?:[-]{3,}.*[-]{3,}\r?\n)([\w\-.=]+)(?:\r?\n[-]{3,}.*[-]{3,}\r?\n))")


class LeafNodes(LinkSet):
    """The leaf node listener (hub side), the remotes (spoke side) and the interest each link is told of."""

    def __init__(self, server: "Server", options: Any) -> None:
        super().__init__(server, options)
        self.links: list[LeafConnection] = []
        self._lds: dict[str, str] = {}  # account name -> its $LDS subject
        self._lds_subs: list = []
        # (account, subject, queue) -> {owner: count}; owner None = this server's clients and routes, else a link
        self.interest: dict[tuple[str, str, str], dict[Any, int]] = {}
        self.tls_server: ssl.SSLContext | None = make_server_context(options.tls) if options.tls is not None else None
        self._tls_clients: dict[int, ssl.SSLContext] = {}  # id(remote) -> its client context

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
            if any(t is not None and t.insecure for t in [opts.tls] + [r.tls for r in opts.remotes]):
                self.server.log_warning(INSECURE_WARNING)
        for remote in opts.remotes:
            self._dial(remote, 0.0)

    def registered_links(self) -> list[LeafConnection]:
        return list(self.links)

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
            subj = self._lds[acc.name] = "$LDS." + nuid()
            self._lds_subs.append(self.server.subscribe_internal(subj, _ignore, account=acc))
        return subj

    # ------------------------------------------------------------------ dialing
    def _dial(self, remote: Any, delay: float) -> None:
        if not self.running:
            return
        self._spawn(self._connect_loop(remote, delay))

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

    def client_tls(self, remote: Any, url: str) -> tuple[ssl.SSLContext, str]:
        """The context a spoke's handshake with ``remote`` uses (its tls {}, or the system's roots and no
        certificate when only the hub's INFO asked for TLS) and the name the hub's certificate must carry
        (client.go doTLSHandshake): the URL's host, unless that is an IP address and one of the remote's URLs
        names a host (leafnode.go saveTLSHostname)."""
        ctx = self._tls_clients.get(id(remote))
        if ctx is None:
            from ..options import TLSOptions

            ctx = self._tls_clients[id(remote)] = make_client_context(remote.tls or TLSOptions())
        host = urlsplit(url).hostname or ""
        if _is_ip(host):
            for u in remote.urls:
                name = urlsplit(u).hostname or ""
                if name and not _is_ip(name):
                    return ctx, name
        return ctx, host

    def auth_timeout(self) -> float:
        opts = self.options
        if opts.auth_timeout:
            return opts.auth_timeout
        return ((opts.tls.timeout or TLS_TIMEOUT) + 1.0) if opts.tls is not None else AUTH_TIMEOUT

    def remote_account(self, remote: Any) -> Any:
        accs = self.server.accounts
        return accs.lookup(remote.account) if remote.account else accs.gacc

    def connect_proto(self, remote: Any, url: str, nonce: str, compression: str = "") -> bytes:
        srv = self.server
        proto: dict[str, Any] = {"version": VERSION, "server_id": srv.server_id, "name": srv.server_name,
                                 "headers": True, "jetstream": False,
                                 "remote_account": self.remote_account(remote).name,
                                 # leafConnectInfo's JSON tag is "protocol" (the hub reads it into clientOpts): 3 says
                                 # this spoke traces messages (core/msgtrace.py), so a hub sends it trace-only ones
                                 "protocol": LEAF_PROTO}
        if srv.cluster is not None:
            proto["cluster"] = srv.cluster.name
        if compression:
            proto["compress_mode"] = compression  # leafnode.go leafConnectInfo.Compression
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
        if opts.tls is not None:
            info["tls_required"] = True
            if opts.tls.verify:
                info["tls_verify"] = True
        if srv.cluster is not None:
            info["cluster"] = srv.cluster.name
        if opts.compression != "not supported":
            info["compression"] = opts.compression
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
            u = auth.check(proto, link.nonce, link)  # in operator mode: the user JWT, signed nonce, leaf type
            return None if u is None else (accs.lookup(u.account) or accs.gacc)
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
    def max_leafs_reached(self, acc: Any) -> bool:
        """accounts.go maxTotalLeafNodesReached, asked when a link registers with its account on either end
        (client.go registerWithAccount): the account JWT's ``leaf`` limit against the account's leaf connections
        here and the ones the other servers of the cluster report (core/events.py)."""
        return acc.max_total_leafnodes_reached(self.count(acc))

    def count(self, acc: Any) -> int:
        """The account's leaf connections on this server (accounts.go nleafs)."""
        return sum(1 for lf in self.links if lf.account is acc)

    def add(self, link: LeafConnection) -> None:
        self.links.append(link)
        self.lds_subject(link.account)
        self._conns_changed(link.account)

    def closed(self, link: LeafConnection) -> None:
        self.pending.discard(link)
        if link in self.links:
            self.links.remove(link)
            self.server.log.info("Leafnode connection closed", remote=link.remote_name, reason=link.close_reason)
            self._conns_changed(link.account)
        link.registered = False
        if self.running and link.solicited:
            self._dial(link.remote, LOOP_DELAY if link.loop_detected else
                       (self.options.reconnect_interval or RECONNECT_INTERVAL))

    def _conns_changed(self, acc: Any) -> None:
        """accounts.go addClient / removeClient: a leaf connection coming or going changes the account's counts,
        which the other servers of the cluster are told (core/events.py account_conns_changed)."""
        sysacc = self.server.system
        if sysacc is not None and acc is not None:
            sysacc.events.account_conns_changed(acc)

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
        tls = opts.tls
        out: dict[str, Any] = {"host": opts.host, "port": self.port, "auth_timeout": _num(self.auth_timeout()),
                               "tls_timeout": _num((tls.timeout if tls is not None else 0) or TLS_TIMEOUT)}
        if tls is not None:
            out["tls_required"] = True
            if tls.verify:
                out["tls_verify"] = True
        return out


def _num(seconds: float) -> float | int:
    """A number of seconds as Go's JSON writes a float64: 3, not 3.0."""
    return int(seconds) if float(seconds).is_integer() else seconds


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _ignore(*_args) -> None:
    """The $LDS subscription: its interest is what matters, never a message."""
