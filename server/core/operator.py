"""Operator mode: accounts from account JWTs, users from user JWTs (nats-server jwt.go, auth.go
processClientOrLeafAuthentication, accounts.go updateAccountClaimsWithRefresh; nats-io/jwt v2).

Theory of operation
-------------------
With ``operator`` (or ``trusted_keys``) in the configuration there are no configured users: every client presents
a user JWT in CONNECT (``jwt``) and signs the INFO ``nonce`` with the user's key (``sig``).  The chain of trust is

    trusted operator key (the operator JWT's ``sub`` unless ``strict_signing_key_usage``, and its ``signing_keys``)
      -> signs the account JWT (``sub`` = account public key = the account's name in Skiff, as in nats-server)
        -> the account key or one of the account's ``signing_keys`` signs the user JWT (``issuer_account`` names
           the account when a signing key signed it)

:meth:`OperatorMode.authenticate` walks it in nats-server's order: the user JWT decodes and its times hold; the
account is found through the resolver (resolver.py) and was signed by a trusted key; the user's issuer is the
account or one of its signing keys (a *scoped* signing key replaces the user's permissions and limits with its
template); the account has not expired; a bearer token is refused when the account says ``disallow_bearer``;
the connection type is allowed; the nonce signature verifies (unless bearer); the user is not revoked
(``revocations[user or "*"] >= user iat``); the client's address is inside ``src``; the time of day lies in one of
the JWT's connect windows (``times`` in ``times_location``).  Any failure is nats-server's ``Authorization
Violation`` (the reason goes to the log).  A user whose JWT expires, or whose connect window ends, while connected
is closed with ``User Authentication Expired``.

An account JWT becomes an :class:`~server.core.accounts.Account` the first time it is needed (or at start for the
ones the resolver holds, so their JetStream starts with the server): its ``limits`` (``conn``, ``subs``,
``payload``, ``leaf``), JetStream limits (``mem_storage``, ``disk_storage``, ``streams``, ``consumer``...; JetStream is
on when either storage is not 0) and message trace destination (``trace``) become the account's.  An update
(resolver.py) re-applies them and closes the connections of users it revokes.  Its ``exports`` and ``imports`` are
wired by jwt_imports.py.  What an account JWT can ask for that Skiff does not do (mappings, auth callout, service
latency tracking) is refused: the account is not loaded and the update is answered with an
error, so nobody runs with an account that silently lacks part of its JWT.
"""
from __future__ import annotations

import ipaddress
import re
import time
from datetime import datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING, Any

from skiff.protocol import encoder
from skiff.protocol.subjects import is_valid_literal_subject

from .jwt_imports import JWTImports
from .jwt import Claims, JWTError, account_errors, decode
from .permissions import Permissions
from .resolver import ClaimsService, make_resolver

if TYPE_CHECKING:  # pragma: no cover
    from .accounts import Account, Accounts
    from .auth import AuthUser

AUTH_EXPIRED = "Authentication Expired"
AUTH_REVOKED = "Authentication Revoked"
NO_LIMIT = -1
_INT32_MAX = 2**31 - 1

# "leaf" (jwt LeafNodeConn, accounts.go mleafs) counts the account's leaf connections (leafnode.py
# max_leafs_reached); absent is 0 like the others, so an account JWT without it admits no leaf connection at all.
_LIMITS = {"conn": "max_connections", "subs": "max_subscriptions", "payload": "max_payload", "leaf": "max_leafnodes"}
_JS_LIMITS = {"mem_storage": "max_memory", "disk_storage": "max_storage", "streams": "max_streams",
              "consumer": "max_consumers", "max_ack_pending": "max_ack_pending",
              "mem_max_stream_bytes": "memory_max_stream_bytes", "disk_max_stream_bytes": "storage_max_stream_bytes"}
_JS_AS_IS = ("mem_storage", "disk_storage", "streams", "consumer")
_CONN_TYPES = ("STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS")


class OperatorMode:
    def __init__(self, server: Any, accounts: "Accounts", options: Any) -> None:
        from .accounts import AccountError

        self.server = server
        self.accounts = accounts
        self.operators: list[Claims] = []
        for token in getattr(options, "trusted_operators", None) or []:
            try:
                self.operators.append(decode(token, "operator"))
            except JWTError as e:
                raise AccountError(f"error parsing operator JWT: {e}") from None
        self.operator_key = self.operators[0].subject if self.operators else ""
        self.strict = any(bool(o.nats.get("strict_signing_key_usage")) for o in self.operators)
        # validateTrustedOperators: the keys that may sign accounts.
        keys: list[str] = list(getattr(options, "trusted_keys", None) or [])
        for o in self.operators:
            if not o.nats.get("strict_signing_key_usage"):
                keys.append(o.subject)
            keys.extend(o.signing_keys())
        self.trusted: set[str] = set(keys)
        # Signing keys of strict operators: an account they signed may not sign users with its own key either
        # (server.go strictSigningKeyUsage, accounts.go UpdateAccountClaims: the account name is no signing key).
        self.strict_keys: set[str] = set()
        for o in self.operators:
            if o.nats.get("strict_signing_key_usage"):
                self.strict_keys.update(o.signing_keys())
        # Keys allowed to sign a CLAIMS.DELETE request (DirJWTStore.operator: the operators and their signing keys).
        self.operator_keys: set[str] = set()
        for o in self.operators:
            self.operator_keys.add(o.subject)
            self.operator_keys.update(o.signing_keys())
        self.resolver = make_resolver(getattr(options, "resolver", None))
        for pub, token in (getattr(options, "resolver_preload", None) or {}).items():
            try:
                self.resolver.store(pub, token)
            except Exception as e:  # a preload the store refuses (it was checked as a JWT when parsed)
                raise AccountError(f"preload for account {pub}: {e}") from None
        self.loaded: dict[str, Claims] = {}
        self._started = False
        self._expiry_timers: dict[str, Any] = {}  # account name -> timer of its JWT's exp
        self._js_disabled: dict[str, Any] = {}  # accounts loaded after start answered "JetStream not enabled"
        self.claims_service = ClaimsService(self)
        self.imports = JWTImports(self)
        # Every account the resolver holds is loaded now, so that JetStream starts with the server for the ones
        # that have it.  One nats-server would refuse to run with is an error; an expired one is just not loaded.
        for pub in self.resolver.keys():
            token = self.resolver.fetch(pub)
            if token is None:
                continue
            try:
                claims = decode(token, "account")
            except JWTError as e:
                raise AccountError(f"account {pub}: {e}") from None
            problem = self.unsupported(claims)
            if problem:
                raise AccountError(f"account {pub}: {problem}")
            err = self._load(pub, token)
            if err:
                server.log_warning("account JWT not loaded", account=pub, error=err)
        sys_name = getattr(options, "system_account", "") or ""
        if sys_name and sys_name not in accounts.by_name:
            # nats-server creates the system account even when its JWT is not (yet) known.
            accounts._add(sys_name)

    @staticmethod
    def now() -> float:
        return time.time()

    # ------------------------------------------------------------------ accounts
    def unsupported(self, claims: Claims) -> str:
        """What an account JWT asks for that Skiff does not do ("" when nothing)."""
        n = claims.nats
        if n.get("mappings"):
            return "subject mappings are not implemented by Skiff"
        for ex in n.get("exports") or []:
            if isinstance(ex, dict) and ex.get("service_latency") is not None:
                return "service latency tracking is not implemented by Skiff"
        for im in n.get("imports") or []:
            if isinstance(im, dict) and im.get("share"):
                return "service latency tracking is not implemented by Skiff"
        auth = n.get("authorization")
        if isinstance(auth, dict) and (auth.get("auth_users") or auth.get("allowed_accounts") or auth.get("xkey")):
            return "auth callout is not implemented by Skiff"
        tiers = (n.get("limits") or {}).get("tiered_limits") or {}
        if any(k != "R1" for k in tiers):
            return "JetStream limits for replicas other than R1 are not implemented by Skiff (a single server)"
        return ""

    def _check(self, claims: Claims) -> str:
        if claims.issuer not in self.trusted:
            return "Account JWT not signed by trusted operator"
        if account_errors(claims):  # verifyAccountClaims: AccountClaims.Validate, blocking errors
            return "account validation failed"
        return self.unsupported(claims)

    def lookup(self, pubkey: str) -> "Account | None":
        """The account named by ``pubkey``, loaded from the resolver when needed (nats-server LookupAccount)."""
        if pubkey in self.loaded:
            return self.accounts.by_name.get(pubkey)
        token = self.resolver.fetch(pubkey)
        if token is None:
            self.server.log_debug("Account JWT lookup error", account=pubkey, error="not found")
            return None
        err = self._load(pubkey, token)
        if err:
            self.server.log_debug("Account JWT lookup error", account=pubkey, error=err)
            return None
        return self.accounts.by_name.get(pubkey)

    def _load(self, pubkey: str, token: str) -> str:
        try:
            claims = decode(token, "account")
        except JWTError as e:
            return str(e)
        if claims.subject != pubkey:
            return "subject does not match jwt content"
        err = self._check(claims)
        if err:
            return err
        acc = self.accounts._add(pubkey)
        self.loaded[pubkey] = claims
        self._apply(acc, claims)
        if getattr(self.server, "running", False):
            self._serve_jetstream(acc)
            if self.server.system is not None:  # registerAccount -> enableAccountTracking (core/events.py)
                self.server.system.events.enable_account_tracking(acc)
        self.imports.rewire()
        return ""

    def _serve_jetstream(self, acc: "Account") -> None:
        """An account loaded while the server runs: its JetStream starts, or its $JS.API requests get 10039 "not
        enabled for account" from the first engine's router, as accounts loaded before start do (jetstream/api.py)."""
        if acc.jetstream:
            self._start_jetstream(acc)
            return
        first = getattr(self.server, "jetstream", None)
        if first is None or acc.name in self._js_disabled:
            return
        self._js_disabled[acc.name] = first.router.refuse_for(acc)

    def _apply(self, acc: "Account", claims: Claims) -> None:
        limits = claims.nats.get("limits") or {}
        acc.limits = {}
        for jk, key in _LIMITS.items():
            # A limit the JWT leaves out is Go's zero value: 0 connections, subscriptions, payload bytes (checked
            # with nats-server 2.15.1), and so is a null (Go's json leaves the int64 at zero); -1 is no limit.
            v = limits.get(jk)
            if v is None:
                v = 0
            if isinstance(v, int) and not isinstance(v, bool) and v != NO_LIMIT:
                # Any other value is a limit, below -1 too (one nothing meets); nats-server keeps it as an int32
                # (accounts.go clampInt64ToInt32).
                acc.limits[key] = max(min(v, _INT32_MAX), -_INT32_MAX - 1)
        # jwt v2 loadAccount drops the plain JetStream limits of a JWT with tiered_limits, and IsJSEnabled is then
        # true when a tier has mem_storage or disk_storage other than 0, else when the plain ones do; nats-server
        # takes the limits from there (accounts.go updateAccountClaimsWithRefresh).  R1 is the only tier a single
        # server has (unsupported() refuses others).  A value the JWT leaves out is Go's 0.
        tiers = limits.get("tiered_limits") or {}
        js_src = (tiers.get("R1") or {}) if tiers else limits
        acc.jetstream = bool(js_src.get("mem_storage") or js_src.get("disk_storage"))
        acc.js_tier = "R1" if tiers else ""
        js: dict = {}
        for jk, key in (_JS_LIMITS.items() if acc.jetstream else ()):
            v = js_src.get(jk)
            v = v if isinstance(v, int) and not isinstance(v, bool) else 0
            # streams, consumer, mem_storage, disk_storage as they are (0 and below -1 mean no limit where checked,
            # yet are reported so); the per-stream bytes and max_ack_pending through toUnlimited: -1 unless > 0.
            js[key] = v if jk in _JS_AS_IS or v > 0 else NO_LIMIT
        if acc.jetstream:
            js["max_bytes_required"] = bool(js_src.get("max_bytes_required"))
        acc.js_limits = js
        # accounts.go updateAccountClaimsWithRefresh: an invalid destination is none, a sampling out of 1..100 is 100
        trace = claims.nats.get("trace")
        dest = trace.get("dest") if isinstance(trace, dict) else None
        had = acc.trace_dest
        if isinstance(dest, str) and is_valid_literal_subject(dest):
            sampling = trace.get("sampling")
            ok = isinstance(sampling, int) and not isinstance(sampling, bool) and 0 < sampling <= 100
            acc.trace_dest, acc.trace_sampling = dest, sampling if ok else 100
        else:
            acc.trace_dest, acc.trace_sampling = "", 0
        if bool(had) != bool(acc.trace_dest):  # its clients' messages are looked at for traceparent, or no longer
            # and so are routed ones while any account has a destination (core/route.py)
            self.accounts.trace_dests = any(a.trace_dest for a in self.accounts.by_name.values())
            for c in list(self.server.clients.values()):
                if c.account is acc and c.connected:
                    c._update_pub_path()
        acc.exports = self.imports.exports(claims)
        if self._started:  # before start there is no loop to time on: start() arms every loaded account
            self._arm_expiry(acc, claims)
        engine = getattr(self.server, "jetstreams", {}).get(acc.name)
        if engine is not None:  # limits of a running engine follow the account JWT
            engine.set_account_limits(js, acc.js_tier)

    def _arm_expiry(self, acc: "Account", claims: Claims) -> None:
        """accounts.go checkExpiration / expiredTimeout: when the account JWT expires, every client and leaf
        connection of the account gets 'Account Authentication Expired' and is closed (a newer JWT re-arms or
        cancels the timer)."""
        old = self._expiry_timers.pop(acc.name, None)
        if old is not None:
            old.cancel()
        if claims.expires <= 0:
            return
        delay = claims.expires - self.now()
        if delay <= 0:
            return  # already expired: its users are refused at connect

        def expired() -> None:
            self._expiry_timers.pop(acc.name, None)
            self._expire_connections(acc.name)

        self._expiry_timers[acc.name] = self.server.clock.call_later(delay, expired)

    def _expire_connections(self, name: str) -> None:
        """accounts.go expiredTimeout: every client and leaf connection of the account (Account.clients holds
        both) gets ``-ERR 'Account Authentication Expired'`` and is closed."""
        ln = self.server.leafnodes
        links = [lf for lf in ln.links if lf.account is not None and lf.account.name == name] if ln else []
        for conn in [c for c in self.server.clients.values() if c.account.name == name] + links:
            if not conn.closed:
                conn.send(encoder.err("Account Authentication Expired"))
                conn.close(AUTH_EXPIRED)
        self.server.flush_pending()

    def update_account(self, pubkey: str, token: str) -> str:
        """Apply a new JWT to a loaded account; "" or the error."""
        try:
            claims = decode(token, "account")
        except JWTError as e:
            return str(e)
        err = self._check(claims)
        if err:
            return err
        if self.resolver.kind == "mem":
            self.resolver.store(pubkey, token)
        self.account_changed(pubkey, claims)
        return ""

    def account_changed(self, pubkey: str, claims: Claims | None = None) -> None:
        """The resolver holds a new JWT for ``pubkey`` (DirJWTStore.changed): a loaded account takes it."""
        if pubkey not in self.loaded:
            return
        if claims is None:
            token = self.resolver.fetch(pubkey)
            try:
                claims = decode(token or "", "account")
            except JWTError as e:
                self.server.log_error("DirResolver - Update got error on load", account=pubkey, error=str(e))
                return
            if self._check(claims):
                self.server.log_error("DirResolver - Update resulted in error", account=pubkey,
                                      error=self._check(claims))
                return
        acc = self.accounts.by_name[pubkey]
        had_js = acc.jetstream
        self.loaded[pubkey] = claims
        self._apply(acc, claims)
        if acc.jetstream and not had_js:
            self._start_jetstream(acc)
        self._enforce(acc, claims)
        self.imports.rewire()

    def account_deleted(self, pubkey: str) -> None:
        """A deleted account's users can no longer connect, and the connected ones go: accounts.go removeCb ->
        expiredTimeout sends every client and leaf connection of the account ``-ERR 'Account Authentication
        Expired'`` and closes it ("Authentication Expired"; checked with nats-server 2.15.1).  A spoke dials again
        and is refused (the account is no longer found)."""
        self.loaded.pop(pubkey, None)
        self._expire_connections(pubkey)
        acc = self.accounts.by_name.get(pubkey)
        if acc is not None:  # removeCb: the account's exports go, and with them the imports of others from it
            acc.exports = []
        self.imports.rewire()

    def _enforce(self, acc: "Account", claims: Claims) -> None:
        """updateAccountClaimsWithRefresh: the account's connections, oldest first, are counted against the new
        connection limit and the ones past it closed; the others are checked against the revocations.  A leaf
        connection is one of them (Account.addClient: ``conn`` counts clients and leafs alike; checked with
        nats-server 2.15.1: lowering ``conn`` closes the newest, leaf or client).  A lower ``leaf`` limit closes
        nothing on one server (only accounts.go updateRemoteServer, fed by the other servers of a cluster, trims
        leafs); it refuses the next leaf."""
        revs = claims.nats.get("revocations") or {}
        ln = self.server.leafnodes
        conns = [c for c in self.server.clients.values() if c.account is acc and not c.closed]
        conns += [lf for lf in ln.links if lf.account is acc and not lf.closed] if ln is not None else []
        mconns = acc.limit("max_connections")
        for i, c in enumerate(sorted(conns, key=lambda c: c.start_ns)):
            if mconns != NO_LIMIT and i >= mconns:
                c.send(encoder.err("maximum account active connections exceeded"))
                c.close("Maximum Account Connections Exceeded")
                continue
            juc = getattr(c, "jwt_user", None)
            if juc is not None and _revoked(revs, juc.subject, juc.issued_at):
                c.send(encoder.err("User Authentication Revoked"))
                c.close(AUTH_REVOKED)

    def _start_jetstream(self, acc: "Account") -> None:
        """JetStream for an account that got it after start (DirResolver changed -> configJetStream)."""
        srv = self.server
        if not getattr(srv, "running", False) or getattr(srv, "jetstream", None) is None:
            if not srv.options.jetstream:
                srv.log_warning("account JWT enables JetStream but the server has none", account=acc.name)
            return
        if acc.name in srv.jetstreams:
            return
        disabled = self._js_disabled.pop(acc.name, None)
        if disabled is not None:
            srv.unsubscribe_internal(disabled)
        from ..jetstream import JetStream
        from .account_server import AccountServer

        view = AccountServer(srv, acc)
        view.jetstream = srv.jetstreams[acc.name] = JetStream(view)
        srv._other_engines.append(view.jetstream)
        view.jetstream.start()

    # ------------------------------------------------------------------ users
    def authenticate(self, connect: dict, nonce: str, conn: Any = None) -> "AuthUser | None":
        from .auth import AuthUser

        log = self.server.log_debug
        ujwt = connect.get("jwt")
        if not isinstance(ujwt, str) or not ujwt:
            log("Authentication requires a user JWT")
            return None
        try:
            juc = decode(ujwt, "user")
        except JWTError as e:
            log("User JWT not valid", error=str(e))
            return None
        now = self.now()
        t_err = juc.time_error(now)
        if t_err:
            log("User JWT no longer valid", error=t_err)
            return None
        n = juc.nats
        issuer = str(n.get("issuer_account") or "") or juc.issuer
        acc = self.lookup(issuer)
        if acc is None:
            return None
        ac = self.loaded[issuer]
        keys = ac.signing_keys()
        own_key_signs = ac.issuer not in self.strict_keys
        if not (juc.issuer in keys or (own_key_signs and juc.issuer == issuer)):
            log("User JWT issuer is not known")
            return None
        if n.get("issuer_account") and juc.issuer == issuer:
            log("User JWT not valid", error="issuer_account names the issuer itself")
            return None
        scope = keys.get(juc.issuer)
        if scope is not None:
            if not _empty_permissions(n):
                log("User JWT is not valid", error="scoped users require no permissions or limits set")
                return None
            try:
                n = _apply_template(n, scope.get("template") or {}, juc, ac)
            except ValueError:
                log("User JWT generated invalid permissions")
                return None
        if ac.expires > 0 and now >= ac.expires:  # the expiry timer has fired (or would have): Account.IsExpired
            log("Account JWT has expired")
            return None
        if n.get("bearer_token") and (ac.nats.get("limits") or {}).get("disallow_bearer"):
            log("Account does not allow bearer tokens")
            return None
        types = n.get("allowed_connection_types") or []
        if types:
            from .auth import connection_type

            known = [t for t in types if t in _CONN_TYPES]
            if not known or connection_type(conn) not in known:
                log("Connection type not allowed")
                return None
        if not n.get("bearer_token"):
            sig = connect.get("sig")
            from .nkey import verify_signature

            if not isinstance(sig, str) or not sig:
                log("Signature missing")
                return None
            if not nonce or not verify_signature(juc.subject, nonce, sig):
                log("Signature not verified")
                return None
        if _revoked(ac.nats.get("revocations") or {}, juc.subject, juc.issued_at):
            log("User authentication revoked")
            return None
        src = n.get("src") or []
        if isinstance(src, str):
            src = [s for s in src.split(",") if s]
        if src and not _src_allowed(src, getattr(conn, "host", "")):
            self.server.log_error("Bad src Ip", host=getattr(conn, "host", ""))
            return None
        allow_now, valid_for = validate_times(n, now)
        if not allow_now:  # auth.go: validateTimes, "Outside connect times"
            self.server.log_error("Outside connect times", user=juc.subject)
            return None
        perms = _permissions(n) or _permissions(ac.nats.get("default_permissions") or {})
        user = AuthUser(juc.subject, acc.name, Permissions(perms) if perms else None, nkey=juc.subject)
        if conn is not None:
            self._bind(conn, juc, n, valid_for)
        return user

    def _bind(self, conn: Any, juc: Claims, n: dict, valid_for: float = 0.0) -> None:
        """Keep the user JWT on the connection (revocation on update), lower its limits to the user's, and close it
        when the JWT expires (nats-server setExpiration / authExpired)."""
        conn.jwt_user = juc
        # v2: absent is 0, as for the account's limits; a v1 user JWT is migrated with no limits (checked against
        # 2.15.1: a v1 account JWT's absent "conn" still admits nobody, a v1 user JWT's absent "subs" is unlimited).
        absent = NO_LIMIT if juc.v1 else 0
        # Only -1 is no limit (client.go applyAccountLimits); one below it refuses every SUB, as 0 does, and every
        # PUB, even an empty one.
        subs = n.get("subs", absent)
        if isinstance(subs, int) and not isinstance(subs, bool) and subs != NO_LIMIT:
            subs = max(subs, 0)
            conn.max_subs = subs if conn.max_subs < 0 else min(conn.max_subs, subs)
        pay = n.get("payload", absent)
        if isinstance(pay, int) and not isinstance(pay, bool) and pay != NO_LIMIT and pay < conn.parser.max_payload:
            conn.parser.max_payload = pay
        if conn.max_subs == 0 or _at_limit(self._account_subs(juc), 0):
            # applyAccountLimits -> subsAtLimit: with a limit of 0 subscriptions the client is told at once and
            # closed 20 ms later (a user JWT that leaves "subs" out gets exactly that).
            def kick() -> None:
                if not conn.closed and getattr(conn, "jwt_user", None) is juc:
                    conn.send(encoder.err("maximum subscriptions exceeded"))
                    self.server.flush_pending()
                    self.server.clock.call_later(0.02, lambda: conn.close("Maximum Subscriptions Exceeded"))

            self.server.clock.call_later(0, kick)
        # client.go setExpiration: the JWT's exp (whole seconds from now), or the end of the connect window when
        # that comes first.
        delay = None
        if juc.expires > 0:
            tn = int(self.now())
            delay = float(juc.expires - tn) if juc.expires > tn else 0.0
            if valid_for and valid_for < delay:
                delay = valid_for
        elif valid_for:
            delay = valid_for
        if delay is not None:
            conn_ref = conn

            def expired() -> None:
                if not conn_ref.closed and getattr(conn_ref, "jwt_user", None) is juc:
                    conn_ref.send(encoder.err("User Authentication Expired"))
                    conn_ref.close(AUTH_EXPIRED)
                    self.server.flush_pending()

            self.server.clock.call_later(delay, expired)

    def _account_subs(self, juc: Claims) -> int:
        issuer = str(juc.nats.get("issuer_account") or "") or juc.issuer
        acc = self.accounts.by_name.get(issuer)
        return acc.limit("max_subscriptions") if acc is not None else NO_LIMIT

    def start(self) -> None:
        self._started = True
        for pub, claims in self.loaded.items():
            self._arm_expiry(self.accounts.by_name[pub], claims)
        self.claims_service.start()
        self.imports.rewire()
        # Accounts loaded after start have no "JetStream not enabled" answers yet: the first engine's router
        # answers for them (jetstream/api.py); accounts loaded before start got them from the router itself.

    def stop(self) -> None:
        self.claims_service.stop()
        self.imports.stop()
        for t in self._expiry_timers.values():
            t.cancel()
        self._expiry_timers.clear()


_CLOCK = re.compile(r"(\d{1,2}):(\d{2}):(\d{2})(?:[.,]\d+)?")


def _clock(text: Any) -> tuple[int, int, int] | None:
    """Go time.Parse("15:04:05", text): an hour of one or two digits, two-digit minutes and seconds (a fraction of
    a second may follow and is dropped), nothing else."""
    m = _CLOCK.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        return None
    h, mi, sec = (int(g) for g in m.groups())
    return (h, mi, sec) if h < 24 and mi < 60 and sec < 60 else None


def _location(name: str) -> "tzinfo | None | bool":
    """Go time.LoadLocation: "" and "UTC" are UTC, "Local" the server's zone (None here), else an IANA name;
    False when it is not one."""
    if name in ("", "UTC"):
        return timezone.utc
    if name == "Local":
        return None
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except Exception:  # ZoneInfoNotFoundError, ValueError for a malformed key
        return False


def validate_times(n: dict, now: float) -> tuple[bool, float]:
    """nats-server jwt.go validateTimesAt: whether ``now`` lies in one of the user JWT's connect windows
    (``times``: "HH:MM:SS" start/end on today's date in ``times_location``, the server's local zone when it is
    not given; a window whose start is after its end crosses midnight), and the seconds left until that window
    ends (the longest, when several hold).  A time or location that does not parse lets nobody in (jwt v2
    TimeRange.Validate / Limits.Validate make the JWT invalid)."""
    times = n.get("times") or []
    if not times:
        return True, 0.0
    loc = _location(str(n.get("times_location") or ""))
    if loc is False:
        return False, 0.0
    at = datetime.fromtimestamp(now, loc)  # type: ignore[arg-type]
    ok, valid_for = False, 0.0
    for tr in times:
        tr = tr if isinstance(tr, dict) else {}
        s, e = _clock(tr.get("start")), _clock(tr.get("end"))
        if s is None or e is None:
            return False, 0.0
        start = at.replace(hour=s[0], minute=s[1], second=s[2], microsecond=0).timestamp()
        end_dt = at.replace(hour=e[0], minute=e[1], second=e[2], microsecond=0)
        end = end_dt.timestamp()
        left = 0.0
        inside = start < now < end
        if inside:
            left = end - now
        elif start > end:  # validateTimeRangeAt: the window crosses midnight
            if end > now:
                inside, left = True, end - now
            else:
                end = (end_dt + timedelta(days=1)).timestamp()
                if start < now < end:
                    inside, left = True, end - now
        if inside and (not ok or left > valid_for):
            ok, valid_for = True, left
    return ok, valid_for


def _at_limit(limit: int, count: int) -> bool:
    """nats-server's limit checks (subsAtLimit and the like): -1 is none, any other value is reached at ``count``."""
    return limit != NO_LIMIT and count >= limit


def _revoked(revs: dict, subject: str, iat: int) -> bool:
    """jwt v2 RevocationList.IsRevoked: an entry for the key, or for "*", at or after the JWT's iat."""
    for key in (subject, "*"):
        ts = revs.get(key)
        if isinstance(ts, (int, float)) and not isinstance(ts, bool) and ts >= iat:
            return True
    return False


def _src_allowed(src: list, host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    for cidr in src:
        try:
            if ip in ipaddress.ip_network(str(cidr).strip(), strict=False):
                return True
        except ValueError:
            continue
    return False


def _perm_list(p: Any, key: str) -> list[str]:
    v = p.get(key) if isinstance(p, dict) else None
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


def _permissions(n: dict) -> dict | None:
    """buildInternalNkeyUser: the user's pub/sub/resp as a permissions block, or None when it has none (an empty
    allow list means "everything")."""
    out: dict = {}
    for jk, key in (("pub", "publish"), ("sub", "subscribe")):
        p = n.get(jk) or {}
        allow, deny = _perm_list(p, "allow"), _perm_list(p, "deny")
        if allow or deny:
            sp: dict = {}
            if allow:
                sp["allow"] = allow
            if deny:
                sp["deny"] = deny
            out[key] = sp
    resp = n.get("resp")
    if isinstance(resp, dict):
        ttl = resp.get("ttl", 0)
        out["allow_responses"] = {"max_msgs": int(resp.get("max") or 0),
                                  "expires": (ttl / 1e9) if isinstance(ttl, (int, float)) else 0}
    return out or None


def _empty_permissions(n: dict) -> bool:
    """jwt v2 HasEmptyPermissions: the user's UserPermissionLimits equal Go's zero value (reflect.DeepEqual), which
    is what a user signed by a scoped key must have: no permissions, and limits left out (0, not -1).  A list that
    is present, even empty, is not nil to DeepEqual."""
    for jk in ("pub", "sub"):
        p = n.get(jk)
        if p is not None and (not isinstance(p, dict) or p.get("allow") is not None or p.get("deny") is not None):
            return False
    for k in ("resp", "src", "times", "allowed_connection_types"):
        if n.get(k) is not None:
            return False
    if n.get("times_location") or n.get("bearer_token"):
        return False
    return all(n.get(k, 0) == 0 for k in ("subs", "data", "payload"))


def _apply_template(n: dict, template: dict, juc: Claims, ac: Claims) -> dict:
    """processUserPermissionsTemplate: the scope's template becomes the user's permissions and limits, with
    {{name()}}, {{subject()}}, {{account-name()}}, {{account-subject()}}, {{tag(k)}}, {{account-tag(k)}} filled
    in; a subject that fills in empty is an error."""
    import re

    def tags(c: Claims, key: str) -> list[str]:
        out = []
        for t in c.nats.get("tags") or []:
            if isinstance(t, str) and ":" in t:
                k, v = t.split(":", 1)
                if k.lower() == key.lower():
                    out.append(v)
        return out

    def fill(subject: str) -> list[str]:
        vals = [subject]
        for m in re.finditer(r"\{\{\s*([a-z-]+)\(\s*([^)]*?)\s*\)\s*\}\}", subject):
            fn, arg = m.group(1), m.group(2)
            if fn == "name":
                repl = [juc.name]
            elif fn == "subject":
                repl = [juc.subject]
            elif fn == "account-name":
                repl = [ac.name]
            elif fn == "account-subject":
                repl = [ac.subject]
            elif fn == "tag":
                repl = tags(juc, arg)
            elif fn == "account-tag":
                repl = tags(ac, arg)
            else:
                raise ValueError(f"unknown template function {fn}")
            if not repl or any(not r or " " in r for r in repl):
                raise ValueError("template produced an invalid subject")
            vals = [v.replace(m.group(0), r) for v in vals for r in repl]
        return vals

    out = dict(n)
    for k, v in template.items():
        out[k] = v
    for jk in ("pub", "sub"):
        p = out.get(jk) or {}
        if isinstance(p, dict):
            out[jk] = {lk: [s for e in _perm_list(p, lk) for s in fill(e)] for lk in ("allow", "deny")}
    return out
