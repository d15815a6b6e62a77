"""The system account and the ``$SYS.REQ`` services it answers (nats-server events.go initEventTracking).

Theory of operation
-------------------
nats-server always has a system account: the one ``system_account`` names, or else ``$SYS``, which it creates
itself (nobody can log into it unless the configuration defines ``$SYS`` with users; ``no_system_account: true``
turns it off).  Its subject space holds the server's services and events; the other accounts see none of it.

* **Requests** are internal subscriptions in the system account (a client must be a user of that account to
  reach them): ``$SYS.REQ.SERVER.PING`` (STATSZ), ``$SYS.REQ.SERVER.PING.<KIND>`` (every server answers) and
  ``$SYS.REQ.SERVER.<id>.<KIND>`` (this one), ``$SYS.REQ.ACCOUNT.<acc>.<KIND>`` and ``$SYS.REQ.USER.<acc>.INFO``.
  The documents are the monitoring ones (server/monitor/provider.py builds them for HTTP and for these alike),
  wrapped in nats-server's ServerAPIResponse envelope ``{"server": {...}, "data": {...}}`` or
  ``{"server": {...}, "error": {"code", "description"}}``.  A request body, when there is one, is the endpoint's
  options plus the filter fields (``server_name``, ``host``, ``cluster``, ``exact_match``, ``tags``, ``domain``); a
  server the filter does not select stays silent (events.go filterRequest); bad JSON is a 400 in the envelope.
* **Every other account** gets what nats-server imports into it from the system account (registerSystemImports):
  ``$SYS.REQ.USER.INFO`` (who am I), ``$SYS.REQ.SERVER.PING.CONNZ`` and ``$SYS.REQ.ACCOUNT.PING.CONNZ`` (the
  connections of the caller's own account) and ``$SYS.REQ.ACCOUNT.PING.STATZ`` (its statistics).  Skiff
  subscribes these in the account itself and answers for that account only, which is what the imports give.
* The handlers are plain internal subscriptions that run only for messages a client published (the
  confused-deputy guard of Server.subscribe_internal): a delivery, an advisory or an event the server publishes can
  never trigger one.  The answer is routed in the account the request came in, to its reply subject.

Events (connect, disconnect, statsz, account connection counts and the cluster-wide counts built from the other
servers' ones) are in events.py.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

from skiff.protocol import headers
from skiff.protocol.jsapi.gojson import go_check_valid
from skiff.protocol.jsapi.timefmt import format_time
from skiff.protocol.marshal import dumps

from ..version import VERSION
from .accounts import DEFAULT_SYSTEM_ACCOUNT

if TYPE_CHECKING:  # pragma: no cover
    from .accounts import Account
    from .server import Server

# events.go initEventTracking: the server-addressed kinds (monSrvc) and the account-addressed ones (monAccSrvc).
SERVER_KINDS = ("IDZ", "STATSZ", "VARZ", "SUBSZ", "CONNZ", "ROUTEZ", "GATEWAYZ", "LEAFZ", "ACCOUNTZ", "JSZ",
                "HEALTHZ", "PROFILEZ", "EXPVARZ", "IPQUEUESZ", "RAFTZ")
ACCOUNT_KINDS = ("SUBSZ", "CONNZ", "LEAFZ", "JSZ", "INFO", "STATZ", "CONNS")

# What nats-server 2.15.1 reports in ServerInfo.feature_flags (server/feature_flags.go defaults).
FEATURE_FLAGS = {"js_ack_fc_v2": False, "js_api_reply_v2": False, "js_raft_delete_range": True,
                 "js_snapshot_sources": False}
# ServerInfo.flags bits (events.go): JetStream enabled, binary stream snapshots, account NRG; 2.15.1 sets all three
# with JetStream on and none without.
_FLAGS_JS = 0x7

# Options of each document as a request body carries them (the JSON keys of nats-server's *Options structs),
# translated to the query parameters MonitorProvider reads.
_CONNZ_KEYS = {"sort": "sort", "auth": "auth", "offset": "offset", "limit": "limit", "cid": "cid", "state": "state",
               "acc": "acc", "user": "user", "filter_subject": "filter_subject"}
_SUBSZ_KEYS = {"offset": "offset", "limit": "limit", "account": "acc", "test": "test", "subscriptions": "subs"}
_JSZ_KEYS = {"account": "acc", "accounts": "accounts", "streams": "streams", "consumer": "consumers",
             "config": "config", "offset": "offset", "limit": "limit", "leader_only": "leader-only"}
_ACCOUNTZ_KEYS = {"account": "acc", "include_unused": "unused"}
_HEALTHZ_KEYS = {"js-enabled-only": "js-enabled-only", "js-server-only": "js-server-only", "account": "account",
                 "stream": "stream", "consumer": "consumer", "details": "details"}


class _Skip(Exception):
    """The request does not apply: no answer (nats-server errSkipZreq)."""


class SystemAccount:
    """The system account of one server and the request services it answers."""

    def __init__(self, server: "Server", account: "Account") -> None:
        self.server = server
        self.account = account
        self.seq = 0  # ServerInfo.seq: messages this server's system client sent
        self._subs: list = []
        self._own_provider = None
        from .events import Events

        self.events = Events(self)

    @classmethod
    def configure(cls, server: "Server") -> "SystemAccount | None":
        """The system account nats-server would have for these options: ``system_account``, else ``$SYS``
        (created when the configuration does not define it), none with ``no_system_account`` without JetStream."""
        opts = server.options
        accounts = server.accounts
        # nats-server keeps the system account under no_system_account when JetStream is on (JetStream needs it).
        if getattr(opts, "no_system_account", False) and not getattr(opts, "jetstream", False):
            accounts.system = None
            return None
        acc = accounts.system
        if acc is None:
            acc = accounts.get(DEFAULT_SYSTEM_ACCOUNT) or accounts._add(DEFAULT_SYSTEM_ACCOUNT)
            accounts.system = acc
        return cls(server, acc)

    @property
    def name(self) -> str:
        return self.account.name

    @property
    def provider(self):
        """The monitoring documents: the HTTP monitor's provider when it runs (one copy of the counters)."""
        mon = self.server.monitor
        if mon is not None and getattr(mon, "provider", None) is not None:
            return mon.provider
        if self._own_provider is None:
            from ..monitor.provider import MonitorProvider

            self._own_provider = MonitorProvider(self.server)
        return self._own_provider

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        srv = self.server
        sid = srv.server_id
        sub = self._subscribe
        sub("$SYS.REQ.SERVER.PING", self._kind_handler("STATSZ"))
        for kind in SERVER_KINDS:
            h = self._kind_handler(kind)
            sub(f"$SYS.REQ.SERVER.PING.{kind}", h)
            sub(f"$SYS.REQ.SERVER.{sid}.{kind}", h)
        for kind in ACCOUNT_KINDS:
            sub(f"$SYS.REQ.ACCOUNT.*.{kind}", self._account_handler(kind))
        sub("$SYS.REQ.ACCOUNT.PING.STATZ", self._statz_ping)
        sub(f"$SYS.REQ.SERVER.{sid}.KICK", self._kick)
        sub(f"$SYS.REQ.SERVER.{sid}.LDM", self._ldm)
        sub("$SYS.REQ.USER.*.INFO", self._user_info)
        # registerSystemImports: every account (the system account too, addSystemAccountExports) asks who it is;
        # the other accounts see their own connections and statistics.
        for acc in list(srv.accounts.by_name.values()):
            # (the subject each import maps to: what a traced request's service import event names, msgtrace.py)
            if acc is self.account:
                self._subscribe("$SYS.REQ.USER.INFO", self._user_info, acc)
                continue
            self._subscribe("$SYS.REQ.USER.INFO", self._user_info, acc, f"$SYS.REQ.USER.{acc.name}.INFO")
            connz = self._own_account_handler(acc, "CONNZ")
            self._subscribe("$SYS.REQ.SERVER.PING.CONNZ", connz, acc, f"$SYS.REQ.ACCOUNT.{acc.name}.CONNZ")
            self._subscribe("$SYS.REQ.ACCOUNT.PING.CONNZ", connz, acc, f"$SYS.REQ.ACCOUNT.{acc.name}.CONNZ")
            self._subscribe("$SYS.REQ.ACCOUNT.PING.STATZ", self._own_account_handler(acc, "STATZ"), acc,
                            f"$SYS.REQ.ACCOUNT.{acc.name}.STATZ")
        self.events.start()

    def stop(self) -> None:
        self.events.stop()
        for s in self._subs:
            self.server.unsubscribe_internal(s)
        self._subs.clear()

    def _subscribe(self, subject: str, handler: Callable, account: "Account | None" = None,
                   imported_as: str = "") -> Any:
        """``imported_as``: for a service nats-server gives an account through an import, the subject it maps to."""
        acc = account or self.account

        def cb(sub, subj, reply, hdr_len, data, origin) -> None:
            try:
                handler(acc, subj, reply, hdr_len, data, origin)
            except Exception as e:  # a request must never break the publishing client's read loop
                self.server.log_error("system request failed", subject=subj, error=repr(e))
                if reply:
                    self._respond(acc, reply, error={"code": 500, "description": str(e) or type(e).__name__},
                                  with_data=False)

        # The system account's own services are announced to the cluster (every server answers a PING); what an
        # account imports from it is served by each server for its own clients.
        if imported_as:  # a traced request shows it as the service import it is in nats-server (core/msgtrace.py)
            cb.trace_import = lambda subj: ("si", {"acc": self.account.name, "from": subj, "to": imported_as}, None)
        sub = self.server.subscribe_internal(subject, cb, account=acc, local=acc is not self.account)
        self._subs.append(sub)
        return sub

    # ------------------------------------------------------------------ sending
    def server_info(self) -> dict:
        """ServerInfo (events.go): who sent a system message; every message takes the next ``seq``."""
        srv = self.server
        self.seq += 1
        js = srv.jetstream is not None
        return {"name": srv.server_name, "host": srv.options.host, "id": srv.server_id, "ver": VERSION,
                "feature_flags": dict(FEATURE_FLAGS), "jetstream": js, "flags": _FLAGS_JS if js else 0,
                "seq": self.seq, "time": format_time(srv.clock.time_ns())}

    def send(self, subject: str, doc: Any, account: "Account | None" = None, hdr: bytes = b"") -> bool:
        """Publish ``doc`` as Go's json.Marshal writes it, from the server, in ``account`` (the system one)."""
        body = dumps(doc).encode()
        return self.send_raw(subject, body, account, hdr)

    def send_raw(self, subject: str, body: bytes, account: "Account | None" = None, hdr: bytes = b"") -> bool:
        srv = self.server
        acc = account or self.account
        return srv.route(None, subject, "", len(hdr), hdr + body if hdr else body, sublist=acc.sublist)

    def has_interest(self, subject: str) -> bool:
        return self.account.sublist.has_interest(subject)

    def _respond(self, acc: "Account", reply: str, data: Any = None, error: dict | None = None,
                 with_data: bool = True, accept: str = "") -> None:
        """The ServerAPIResponse envelope (events.go zReq / sendInternalResponse)."""
        doc: dict = {"server": self.server_info()}
        if with_data:
            doc["data"] = data
        if error is not None:
            doc["error"] = error
        body = dumps(doc).encode()
        hdr = b""
        if accept and error is None:
            enc = headers.accept_encoding(accept)
            if enc == "gzip":
                import gzip  # only for a request that asks for it: zlib and gzip are ~2 M instructions a start

                body = gzip.compress(body)
                hdr = b"NATS/1.0\r\nContent-Encoding: gzip\r\n\r\n"
        self.send_raw(reply, body, acc, hdr)

    # ------------------------------------------------------------------ request plumbing
    def _decode(self, hdr_len: int, data: bytes, type_name: str) -> dict:
        """The request body as an options object; ValueError carries Go's json.Unmarshal message."""
        body = data[hdr_len:]
        if not body:
            return {}
        err = go_check_valid(body)
        if err:
            raise ValueError(err)
        obj = json.loads(body)
        if not isinstance(obj, dict):
            kind = {list: "array", str: "string", bool: "bool", type(None): "null"}.get(type(obj), "number")
            if obj is None:
                return {}
            raise ValueError(f"json: cannot unmarshal {kind} into Go value of type server.{type_name}")
        return obj

    def _filtered(self, opts: dict) -> bool:
        """events.go filterRequest: True when the request's filter does not select this server."""
        srv = self.server
        name = _str(opts.get("server_name"))
        host = _str(opts.get("host"))
        cluster = _str(opts.get("cluster"))
        my_host = srv.options.host
        if opts.get("exact_match") is True:
            if (name and name != srv.server_name) or (host and host != my_host) or cluster:
                return True
        elif (name and name not in srv.server_name) or (host and host not in my_host) or cluster:
            return True
        tags = opts.get("tags")
        if isinstance(tags, list) and tags:
            return True  # Skiff has no server_tags (refused in the configuration)
        domain = _str(opts.get("domain"))
        if domain and domain != (getattr(srv.options, "jetstream_domain", "") or ""):
            return True
        return False

    def _zreq(self, acc: "Account", reply: str, hdr_len: int, data: bytes, type_name: str,
              build: Callable[[dict], Any]) -> None:
        """events.go zReq: decode the options, apply the filter, build the document, answer in the envelope."""
        if not reply:
            return
        try:
            opts = self._decode(hdr_len, data, type_name)
        except ValueError as e:
            self._respond(acc, reply, error={"code": 400, "description": str(e)}, with_data=False)
            return
        if self._filtered(opts):
            return
        try:
            doc = build(opts)
        except _Skip:
            return
        except LookupError as e:
            self._respond(acc, reply, data=None, error={"code": 500, "description": e.args[0]})
            return
        except ValueError as e:
            self._respond(acc, reply, data=None, error={"code": 500, "description": str(e)})
            return
        self._respond(acc, reply, doc, accept=headers.get_exact(data[:hdr_len], "Accept-Encoding") or "")

    # ------------------------------------------------------------------ server-addressed kinds
    def _kind_handler(self, kind: str) -> Callable:
        def handler(acc, subject, reply, hdr_len, data, origin) -> None:
            if kind == "IDZ":
                if reply:
                    srv = self.server
                    self.seq += 1
                    self.send(reply, {"name": srv.server_name, "host": srv.options.host, "id": srv.server_id}, acc)
                return
            if kind == "STATSZ":
                self._statsz_req(acc, reply, hdr_len, data)
                return
            self._zreq(acc, reply, hdr_len, data, _type_name(kind), lambda o: self._server_doc(kind, o))

        return handler

    def _statsz_req(self, acc, reply: str, hdr_len: int, data: bytes) -> None:
        """events.go statszReq: the statsz message itself (no data envelope); without a reply, the broadcast."""
        if not reply:
            reply = f"$SYS.SERVER.{self.server.server_id}.STATSZ"
        try:
            opts = self._decode(hdr_len, data, "StatszEventOptions")
        except ValueError as e:
            self._respond(acc, reply, error={"code": 400, "description": str(e)}, with_data=False)
            return
        if self._filtered(opts):
            return
        self.send(reply, self.events.statsz_msg(), acc)

    def _server_doc(self, kind: str, opts: dict) -> Any:
        p = self.provider
        if kind == "VARZ":
            return p.varz({}, http=False)
        if kind == "CONNZ":
            return p.connz(_connz_params(opts), http=False)
        if kind == "SUBSZ":
            return p.subsz(_params(opts, _SUBSZ_KEYS), http=False)
        if kind == "ACCOUNTZ":
            return p.accountz(_params(opts, _ACCOUNTZ_KEYS), http=False)
        if kind == "JSZ":
            return p.jsz(_params(opts, _JSZ_KEYS), http=False)
        if kind == "HEALTHZ":
            status, doc = p.healthz(_params(opts, _HEALTHZ_KEYS), http=False)
            if "status_code" not in doc:
                doc = {**doc, "status_code": status}
            return doc
        if kind == "ROUTEZ":  # $SYS.REQ.SERVER.*.ROUTEZ: the routes of this server (core/cluster.py)
            return p.routez(_params(opts, {"subscriptions": "subs"}), http=False)
        if kind == "LEAFZ":
            return p.leafz(_params(opts, {"subscriptions": "subs"}), http=False)
        if kind in ("GATEWAYZ", "IPQUEUESZ"):
            from ..monitor.http import standalone_doc

            return standalone_doc("/" + kind.lower(), p.identity())
        # RAFTZ (no Raft groups in a single server), PROFILEZ and EXPVARZ (Go runtime profiles): Skiff has
        # nothing true to put in them, so it says so instead of sending an empty document.
        raise ValueError(f"{kind} is not supported by this server (Skiff {VERSION} has no "
                         f"{'Raft groups' if kind == 'RAFTZ' else 'Go runtime profiles'})")

    # ------------------------------------------------------------------ account-addressed kinds
    def _account_handler(self, kind: str) -> Callable:
        def handler(acc, subject, reply, hdr_len, data, origin) -> None:
            tokens = subject.split(".")
            if len(tokens) != 5:
                return
            name = tokens[3]
            if kind == "CONNS":
                self.events.conns_request(name, reply, hdr_len, data)
                return
            self._zreq(acc, reply, hdr_len, data, _type_name(kind, account=True),
                       lambda o: self._account_doc(kind, name, o))

        return handler

    def _own_account_handler(self, own: "Account", kind: str) -> Callable:
        """What an imported ``$SYS.REQ.*.PING.CONNZ|STATZ`` gives a non-system account: its own document."""
        def handler(acc, subject, reply, hdr_len, data, origin) -> None:
            self._zreq(acc, reply, hdr_len, data, _type_name(kind, account=True),
                       lambda o: self._account_doc(kind, own.name, o))

        return handler

    def _account_doc(self, kind: str, name: str, opts: dict) -> Any:
        p = self.provider
        if kind == "CONNZ":
            params = _connz_params(opts)
            params["acc"] = name
            return p.connz(params, http=False)
        if kind == "SUBSZ":
            params = _params(opts, _SUBSZ_KEYS)
            params["subs"] = "1"
            params["acc"] = name
            return p.subsz(params, http=False)
        if kind == "JSZ":
            return p.jsz_account(name)
        if kind == "INFO":
            acc = self.server.accounts.get(name)
            if acc is None:
                raise LookupError(f"Account {name} does not exist")
            return p.account_info(acc)
        if kind == "STATZ":
            if name == "PING":
                raise _Skip()
            stz = p.accstatz({"accs": name, "unused": "1" if opts.get("include_unused") is True else ""},
                             http=False)
            if not stz["account_statz"]:
                raise _Skip()
            return stz
        if kind == "LEAFZ":
            return {"server_id": self.server.server_id, "now": format_time(self.server.clock.time_ns()),
                    "leafnodes": 0, "leafs": []}
        raise _Skip()

    def _statz_ping(self, acc, subject, reply, hdr_len, data, origin) -> None:
        """``$SYS.REQ.ACCOUNT.PING.STATZ`` in the system account: the statistics of every account in use."""
        def build(opts: dict) -> Any:
            accs = opts.get("accounts")
            params = {"unused": "1" if opts.get("include_unused") is True else ""}
            if isinstance(accs, list) and accs:
                params["accs"] = ",".join(str(a) for a in accs)
            stz = self.provider.accstatz(params, http=False)
            if not stz["account_statz"] and not params["unused"]:
                raise _Skip()
            return stz

        self._zreq(acc, reply, hdr_len, data, "AccountStatzEventOptions", build)

    # ------------------------------------------------------------------ kick, lame duck one client
    def _client_req(self, acc, reply: str, hdr_len: int, data: bytes, act: Callable) -> None:
        """events.go kickClient / ldmClient: body ``{"cid": N}`` (a bad body is only logged); the answer is the
        bare envelope, or an error 500 with nats-server's text."""
        try:
            req = json.loads(data[hdr_len:] or b"null")
            if not isinstance(req, dict):
                raise ValueError("not an object")
            cid = req.get("cid", 0)
            if not isinstance(cid, int) or isinstance(cid, bool) or cid < 0:
                raise ValueError("cid")
        except ValueError as e:
            self.server.log_error("Error unmarshalling kick client request", error=str(e))
            return
        if self._filtered(req):
            return
        err = act(cid)
        if reply:
            self._respond(acc, reply, with_data=False,
                          error={"code": 500, "description": err} if err else None)

    def _kick(self, acc, subject, reply, hdr_len, data, origin) -> None:
        def act(cid: int) -> str:
            c = self.server.clients.get(cid)
            if c is None:
                return "no such client or leafnode id"
            c.close("Kicked")  # nats-server DisconnectClientByID: ClosedState Kicked
            return ""

        self._client_req(acc, reply, hdr_len, data, act)

    def _ldm(self, acc, subject, reply, hdr_len, data, origin) -> None:
        def act(cid: int) -> str:
            c = self.server.clients.get(cid)
            if c is None:
                return "no such client id"
            if c.protocol < 1 or not c.first_pong_sent:
                return "client does not support Lame Duck Mode or is not ready to receive the notification"
            from skiff.protocol import encoder

            info = dict(self.server._info_base)
            info["ldm"] = True
            c.send(encoder.info(info))  # nats-server LDMClientByID: the server's INFO with ldm set
            return ""

        self._client_req(acc, reply, hdr_len, data, act)

    # ------------------------------------------------------------------ user info
    def _user_info(self, acc, subject, reply, hdr_len, data, origin) -> None:
        """events.go userInfoReq: the caller's user, account and permissions."""
        if not reply or origin is None:
            return
        user = origin.user or ""
        account = origin.account.name
        info: dict = {"user": user, "account": account, "account_name": account}
        pub = public_permissions(getattr(origin, "perms", None))
        if pub:
            info["permissions"] = pub
        self._respond(acc, reply, info)


def public_permissions(perms: Any) -> dict:
    """The user's permissions as nats-server's client.publicPermissions writes them (Permissions JSON: publish and
    subscribe with allow/deny lists, queue entries as "subject queue", responses as max and ttl in ns)."""
    if perms is None:
        return {}
    out: dict = {}
    pub: dict = {}
    if perms.pub_allow is not None:
        pub["allow"] = list(perms.pub_allow)
    if perms.pub_deny:
        pub["deny"] = list(perms.pub_deny)
    if pub:
        out["publish"] = pub
    sub: dict = {}
    if perms.sub_allow is not None:
        sub["allow"] = [f"{s} {q}" if q else s for s, q in perms.sub_allow]
    if perms.sub_deny:
        sub["deny"] = [f"{s} {q}" if q else s for s, q in perms.sub_deny]
    if sub:
        out["subscribe"] = sub
    if perms.resp_max is not None:
        out["responses"] = {"max": perms.resp_max, "ttl": int(perms.resp_expires * 1e9)}
    return out


# ---------------------------------------------------------------------------------------------------------------
def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _params(opts: dict, keys: dict) -> dict:
    """Request-body options as the query parameters MonitorProvider reads."""
    out: dict = {}
    for k, p in keys.items():
        v = opts.get(k)
        if v is None or v == "" or v is False:
            continue
        out[p] = "1" if v is True else str(v)
    return out


def _connz_params(opts: dict) -> dict:
    """A CONNZ request's options as /connz's query parameters (``subscriptions_detail`` wins over
    ``subscriptions``)."""
    params = _params(opts, _CONNZ_KEYS)
    if opts.get("subscriptions_detail") is True:
        params["subs"] = "detail"
    elif opts.get("subscriptions") is True:
        params["subs"] = "1"
    return params


def _type_name(kind: str, account: bool = False) -> str:
    names = {"VARZ": "Varz", "CONNZ": "Connz", "SUBSZ": "Subsz", "ROUTEZ": "Routez", "GATEWAYZ": "Gatewayz",
             "LEAFZ": "Leafz", "ACCOUNTZ": "Accountz", "JSZ": "Jsz", "HEALTHZ": "Healthz", "EXPVARZ": "Expvarz",
             "IPQUEUESZ": "Ipqueuesz", "RAFTZ": "Raftz", "PROFILEZ": "Profilez", "INFO": "AccInfo",
             "STATZ": "AccountStatz"}
    return names.get(kind, kind.title()) + "EventOptions"
