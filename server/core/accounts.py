"""Accounts: separate subject spaces, and the exports and imports that join them (nats-server accounts.go).

Theory of operation
-------------------
Every connection belongs to one :class:`Account` and publishes and subscribes in that account's own ``Sublist``:
a subject in account A and the same subject in account B never meet.  Users outside any account, and every client
when no ``accounts {}`` block exists, are in the global account ``$G``.

Exports and imports are the only bridges, and they are plain internal subscriptions:

* **Stream import** (B imports stream ``S`` from A, optionally ``to`` a local subject or under a ``prefix``): an
  internal subscription on ``S`` in A's Sublist re-publishes each message into B under the mapped subject, reply
  subject unchanged (nats-server adds the importer's subscriptions to the exporter's Sublist as "shadow" subs,
  which gives the same deliveries).
* **Service import** (B imports service ``S`` from A, callable in B as ``to``): an internal subscription on the
  local subject in B forwards each request into A on ``S`` with a fresh reply subject ``_R_.<id>``; an internal
  subscription in A on that reply sends the responses back to the requester's reply subject in B.  The response
  mapping lives for one response (``singleton``, the default) or, for ``stream`` and ``chunked`` responses, until
  no response came for ``threshold`` (2 minutes by default; nats-server DEFAULT_SERVICE_EXPORT_RESPONSE_THRESHOLD).

An import is checked against the exporter's exports when the accounts are built: the subject must lie inside an
export, and a private export (``accounts: [...]``) must name the importer; nats-server refuses to start otherwise,
and so does Skiff (:class:`AccountError`).  Cycles of imports are cut by a depth limit on re-publishing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skiff.protocol.record import Fields
from skiff.protocol.subjects import is_subset

from ..ids import nuid
from .sublist import Sublist

if TYPE_CHECKING:  # pragma: no cover
    from .server import Server

GLOBAL = "$G"
DEFAULT_SYSTEM_ACCOUNT = "$SYS"
RESPONSE_THRESHOLD = 120.0  # nats-server DEFAULT_SERVICE_EXPORT_RESPONSE_THRESHOLD
MAX_IMPORT_DEPTH = 8  # re-publishes of one message through imports before it is dropped (import cycles)
_REPLY_PREFIX = "_R_."


class AccountError(Exception):
    """An account configuration nats-server refuses to start with."""


class Export(Fields):
    # A plain class (protocol.record.Fields): a dataclass's __init__, equality and repr, without the code
    # dataclass() generates at import (issue #13, start-up).
    _fields = ("subject", "service", "accounts", "response_type", "threshold", "token_req", "revocations",
               "account_pos", "allow_trace")

    def __init__(self, subject: str, service: bool, accounts: tuple[str, ...] | None = None,
                 response_type: str = "singleton", threshold: float = RESPONSE_THRESHOLD, token_req: bool = False,
                 revocations: dict | None = None, account_pos: int = 0, allow_trace: bool = False) -> None:
        self.subject = subject
        self.service = service
        self.accounts = accounts  # None: public
        self.response_type = response_type
        self.threshold = threshold
        # Account JWT exports (core/operator.py decides with them whether an import is authorized): an activation
        # token is required, which revocations (importing account -> time) it must not fall under, and the subject
        # token that must be the importing account's name (jwt v2 exports.go).
        self.token_req = token_req
        self.revocations = {} if revocations is None else revocations
        self.account_pos = account_pos
        self.allow_trace = allow_trace  # a service's: a traced request is traced on in this account (msgtrace.py)

    def allows(self, importer: str, subject: str) -> bool:
        return is_subset(subject, self.subject) and (self.accounts is None or importer in self.accounts)


class Account(Fields):
    # A plain class (protocol.record.Fields), as Export.
    _fields = ("name", "sublist", "jetstream", "exports", "imports", "nkey", "limits", "num_conns", "js_limits",
               "js_tier", "strack", "nrclients", "nrleafs", "trace_dest", "trace_sampling")

    def __init__(self, name: str, sublist: Sublist | None = None, jetstream: bool = False,
                 exports: list[Export] | None = None, imports: list[dict] | None = None, nkey: str = "",
                 limits: dict | None = None, num_conns: int = 0, js_limits: dict | None = None, js_tier: str = "",
                 strack: dict | None = None, nrclients: int = 0, nrleafs: int = 0, trace_dest: str = "",
                 trace_sampling: int = 0) -> None:
        self.name = name
        self.sublist = Sublist() if sublist is None else sublist
        self.jetstream = jetstream
        self.exports = [] if exports is None else exports
        self.imports = [] if imports is None else imports
        self.nkey = nkey
        # max_connections, max_subscriptions, max_payload (-1/absent: none)
        self.limits = {} if limits is None else limits
        self.num_conns = num_conns  # client connections registered with the account
        # jetstream { max_mem, max_file, max_streams ... } (server/jetstream)
        self.js_limits = {} if js_limits is None else js_limits
        self.js_tier = js_tier  # "R1" when js_limits are an account JWT's tiered_limits (core/operator.py)
        # The account's connections on the other servers of the cluster, as their account connection events report
        # them (accounts.go strack, nrclients, nrleafs): server id -> (clients, leaf connections), and the sums.
        self.strack = {} if strack is None else strack
        self.nrclients = nrclients
        self.nrleafs = nrleafs
        # msg_trace / an account JWT's trace: where a message with a sampled traceparent header is traced, and the
        # percentage of those that are (core/msgtrace.py; "" no destination, then traceparent starts no trace)
        self.trace_dest = trace_dest
        self.trace_sampling = trace_sampling

    def limit(self, name: str) -> int:
        """An account limit, or -1 for none (nats-server jwt.NoLimit).  Only -1 means none: nats-server compares
        any other value, so a limit below -1 is reached at once (``count >= -2``) and admits nothing (checked with
        nats-server 2.15.1: ``conn: -2`` refuses every client, ``subs: -5`` every SUB, ``payload: -3`` every PUB)."""
        v = self.limits.get(name)
        return -1 if v is None else v

    # ------------------------------------------------------------------ connection counts (cluster-wide)
    def max_total_connections_reached(self, local_leafs: int) -> bool:
        """accounts.go MaxTotalConnectionsReached: the account's clients and leaf connections here plus the clients
        the other servers report (not their leafs: nrclients) against ``conn``."""
        m = self.limit("max_connections")
        return m != -1 and self.num_conns + local_leafs + self.nrclients >= m

    def max_total_leafnodes_reached(self, local_leafs: int) -> bool:
        """accounts.go maxTotalLeafNodesReached: the leaf connections here and on the other servers against
        ``leaf``."""
        m = self.limit("max_leafnodes")
        return m != -1 and local_leafs + self.nrleafs >= m

    def update_remote_server(self, sid: str, conns: int, leafs: int) -> None:
        """accounts.go updateRemoteServer: one server's counts replace what it said before (idempotent)."""
        prev = self.strack.get(sid, (0, 0))
        self.strack[sid] = (conns, leafs)
        self.nrclients += conns - prev[0]
        self.nrleafs += leafs - prev[1]

    def remove_remote_server(self, sid: str) -> None:
        """accounts.go removeRemoteServer: a server that shut down (or went quiet) no longer counts."""
        prev = self.strack.pop(sid, None)
        if prev is not None:
            self.nrclients -= prev[0]
            self.nrleafs -= prev[1]

    def find_export(self, importer: str, subject: str, service: bool) -> Export | None:
        for e in self.exports:
            if e.service == service and e.allows(importer, subject):
                return e
        return None


def _ref(tok: str) -> int:
    """N for a ``$N`` wildcard reference token (jwt v2 RenamingSubject), else 0."""
    return int(tok[1:]) if len(tok) > 1 and tok[0] == "$" and tok[1:].isdigit() else 0


def untokenize(pattern: str) -> str:
    """A pattern with ``$N`` references as the subscription subject it stands for (nats-server
    transformUntokenize: each reference is a ``*``)."""
    return ".".join("*" if _ref(t) else t for t in pattern.split("."))


def map_subject(src: str, dest: str, subject: str) -> str:
    """``subject`` (matched by pattern ``src``) written as ``dest``: ``dest``'s wildcard tokens take the values of
    ``src``'s (the mapping nats-server applies to an import's ``to`` / ``local_subject``).  The n-th ``*`` of either
    pattern is wildcard n, unless a ``$N`` reference names it: ``foo.*.*`` -> ``bar.$2.$1`` swaps two tokens."""
    if not dest or dest == src:
        return subject
    st, dt, toks = src.split("."), dest.split("."), subject.split(".")
    vals: dict = {}
    n = 0
    for i, t in enumerate(st):
        if t == ">":
            vals[">"] = ".".join(toks[i:])
        elif t == "*" or _ref(t):
            n += 1
            vals[_ref(t) or n] = toks[i]
    out, n = [], 0
    for t in dt:
        if t == ">" and ">" in vals:
            out.append(vals[">"])
        elif t == "*" or _ref(t):
            n += 1
            out.append(vals.get(_ref(t) or n, t))
        else:
            out.append(t)
    return ".".join(out)


class Accounts:
    """The accounts of one server, built from the options; wires imports to exports."""

    def __init__(self, server: "Server", options: Any) -> None:
        self.server = server
        self.by_name: dict[str, Account] = {}
        self.gacc = self._add(GLOBAL)
        self._depth = 0
        cfg = getattr(options, "accounts", None) or {}
        for name, ac in cfg.items():
            acc = self._add(name)
            ac = ac or {}
            acc.jetstream = bool(ac.get("jetstream"))
            acc.js_limits = dict(ac.get("jetstream_limits") or {})
            acc.nkey = ac.get("nkey") or ""
            acc.limits = dict(ac.get("limits") or {})
            acc.trace_dest = ac.get("trace_dest") or ""
            acc.trace_sampling = ac.get("trace_sampling") or 0
            for ex in ac.get("exports") or []:
                acc.exports.append(_export(ex))
            acc.imports = list(ac.get("imports") or [])
        # Whether any account has a message trace destination: then a routed message's traceparent is looked at
        # (core/route.py; set again by core/operator.py for an account JWT with one).
        self.trace_dests = any(a.trace_dest for a in self.by_name.values())
        # Operator mode (core/operator.py): the accounts are account JWTs from the resolver, named by public key.
        self.operator = None
        if getattr(options, "trusted_operators", None) or getattr(options, "trusted_keys", None):
            from .operator import OperatorMode

            self.operator = OperatorMode(server, self, options)
        self.configured = bool(cfg) or self.operator is not None
        sys_name = getattr(options, "system_account", "") or ""
        self.system = self.by_name.get(sys_name) if sys_name else None
        if sys_name and self.system is None:
            raise AccountError(f"system account {sys_name!r} not defined")
        if not self.configured:
            self.gacc.jetstream = True
        for acc in list(self.by_name.values()):
            self._check_imports(acc)

    def _add(self, name: str) -> Account:
        acc = self.by_name.get(name)
        if acc is None:
            acc = self.by_name[name] = Account(name)
        return acc

    def get(self, name: str) -> Account | None:
        return self.by_name.get(name)

    def lookup(self, name: str) -> Account | None:
        """``get``, and in operator mode the account JWT from the resolver when it is not loaded yet
        (LookupAccount): a route or leaf connection may name an account no local client has used."""
        acc = self.by_name.get(name)
        if acc is None and self.operator is not None:
            acc = self.operator.lookup(name)
        return acc

    @property
    def jetstream_accounts(self) -> list[Account]:
        return [a for a in self.by_name.values() if a.jetstream]

    # ------------------------------------------------------------------ imports
    def _check_imports(self, acc: Account) -> None:
        for im in acc.imports:
            service = "service" in im
            src = im["service" if service else "stream"]
            exporter = self.by_name.get(src.get("account", ""))
            kind = "service" if service else "stream"
            if exporter is None:
                raise AccountError(f"{src.get('account', '')!r} account not defined for {kind} import")
            if exporter.find_export(acc.name, src["subject"], service) is None:
                raise AccountError(
                    f"{kind} import {src['subject']!r} from account {exporter.name!r} not authorized for account "
                    f"{acc.name!r}")

    def start(self) -> None:
        """Subscribe the bridges (after the server made its Sublists)."""
        if self.operator is not None:
            self.operator.start()
        for acc in self.by_name.values():
            for im in acc.imports:
                if "service" in im:
                    self._service_import(acc, im)
                else:
                    self._stream_import(acc, im)

    def _stream_import(self, importer: Account, im: dict) -> Any:
        src = im["stream"]
        exporter = self.by_name[src["account"]]
        subject = src["subject"]
        to = im.get("to") or ""
        prefix = im.get("prefix") or ""
        srv = self.server

        def mapped(subj: str) -> str:
            return map_subject(subject, to, subj) if to else (f"{prefix}.{subj}" if prefix else subj)

        def forward(sub, subj, reply, hdr_len, data, origin, msg_subject=None) -> None:
            # A consumer delivery keeps its message's own subject across the import, as in nats-server (a
            # push consumer or a mirror in the importing account sees the stored subject, not the deliver subject).
            self._republish(importer, origin, mapped(subj), reply, hdr_len, data, msg_subject)

        def shadow(sub_subject: str) -> str:
            # nats-server delivers through the importer's shadow subscriptions in the exporter's account: an egress
            # names that subject (the subscription's, mapped back)
            if to:
                return map_subject(to, subject, sub_subject)
            if prefix and sub_subject.startswith(prefix + "."):
                return sub_subject[len(prefix) + 1:]
            return sub_subject

        def traced(t, subj, reply, hdr_len, data, origin) -> bool:
            # allow_trace on the import: the trace goes on in the importing account (processMsgResults, sub.im.atrc)
            return self._traced_republish(t, importer, origin, mapped(subj), reply, hdr_len, data, shadow)

        # A traced message crossing here (core/msgtrace.py): nats-server's stream export event, and what then.
        forward.trace_import = lambda subj: ("se", {"acc": importer.name, "to": mapped(subj)},
                                             traced if im.get("allow_trace") else None)
        return srv.subscribe_internal(subject, forward, server_msgs=True, account=exporter, msg_subject=True,
                                      local=True)

    def _service_import(self, importer: Account, im: dict, export: Export | None = None) -> Any:
        src = im["service"]
        exporter = self.by_name[src["account"]]
        remote = src["subject"]
        local = im.get("to") or remote
        if export is None:
            export = exporter.find_export(importer.name, remote, True)
        srv = self.server

        def request(sub, subj, reply, hdr_len, data, origin) -> None:
            target = map_subject(local, remote, subj)
            new_reply = ""
            if reply:
                new_reply = self._response_route(exporter, importer, reply, export)
            if not self._republish(exporter, origin, target, new_reply, hdr_len, data) and reply and \
                    origin is not None and origin.no_responders:
                srv.no_responders(subj, reply, origin)

        def traced(t, subj, reply, hdr_len, data, origin) -> bool:
            # allow_trace on the export (processServiceImport, si.atrc): the trace goes on in the exporting account;
            # servers there send their events to a response subject that leads back to the destination
            from .msgtrace import TRACE_DEST, set_header

            hdr_len, data = set_header(data, hdr_len, TRACE_DEST,
                                       self._response_route(exporter, t.account, t.dest, export, "stream"))
            new_reply = self._response_route(exporter, importer, reply, export) if reply else ""
            done = self._traced_republish(t, exporter, origin, map_subject(local, remote, subj), new_reply, hdr_len,
                                          data)
            if not done and reply and origin is not None and origin.no_responders:
                srv.no_responders(subj, reply, origin)
            return done

        # A traced message crossing here (core/msgtrace.py): nats-server's service import event, and what then.
        request.trace_import = lambda subj: ("si", {"acc": exporter.name, "from": subj,
                                                    "to": map_subject(local, remote, subj)},
                                             traced if export is not None and export.allow_trace else None)
        # A local subject with $N references (an account JWT's local_subject) subscribes with a * for each.
        return srv.subscribe_internal(untokenize(local), request, server_msgs=True, account=importer, local=True)

    def _response_route(self, exporter: Account, importer: Account, reply: str, export: Export,
                        response_type: str = "") -> str:
        """A reply subject in the exporter's account that carries responses back to ``reply`` in the importer's
        (``response_type``: the export's unless given: a trace's events come one per server, "stream")."""
        response_type = response_type or export.response_type
        srv = self.server
        new_reply = _REPLY_PREFIX + nuid(16)
        state: dict[str, Any] = {"timer": None}

        def done() -> None:
            sub = state.pop("sub", None)
            if sub is not None:
                srv.unsubscribe_internal(sub)
            t = state.pop("timer", None)
            if t is not None:
                t.cancel()

        def arm() -> None:
            t = state.get("timer")
            if t is not None:
                t.cancel()
            state["timer"] = srv.clock.call_later(export.threshold, done)

        def respond(sub, subj, r, hdr_len, data, origin) -> None:
            if response_type == "singleton":
                done()
            else:
                arm()
            self._republish(importer, origin, reply, r, hdr_len, data)

        state["sub"] = srv.subscribe_internal(new_reply, respond, server_msgs=True, account=exporter)
        arm()
        return new_reply

    def _traced_republish(self, t: Any, acc: Account, origin, subject: str, reply: str, hdr_len: int,
                          data: bytes, shadow: Any = None) -> bool:
        """:meth:`_republish` of a traced message an import lets the trace follow (allow_trace): delivered into
        ``acc`` by core/msgtrace.py, with its events, under the same depth limit (``shadow``: how its egress events
        name a subscription, see _stream_import)."""
        from .msgtrace_delivery import deliver_traced

        if self._depth >= MAX_IMPORT_DEPTH:
            return False
        self._depth += 1
        try:
            return deliver_traced(self.server, t, origin, acc, subject, reply, hdr_len, data, shadow)
        finally:
            self._depth -= 1

    def _republish(self, acc: Account, origin, subject: str, reply: str, hdr_len: int, data: bytes,
                   msg_subject: str | None = None) -> bool:
        if self._depth >= MAX_IMPORT_DEPTH:
            return False
        self._depth += 1
        try:
            return self.server.route(origin, subject, reply, hdr_len, data, msg_subject, sublist=acc.sublist)
        finally:
            self._depth -= 1


def _export(ex: dict) -> Export:
    service = "service" in ex
    subject = ex["service"] if service else ex["stream"]
    accounts = ex.get("accounts")
    return Export(
        subject=subject,
        service=service,
        accounts=tuple(accounts) if accounts is not None else None,
        response_type=ex.get("response_type") or "singleton",
        threshold=float(ex.get("threshold") or RESPONSE_THRESHOLD),
        allow_trace=bool(ex.get("allow_trace")),
    )

