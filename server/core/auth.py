"""Client authentication from CONNECT (nats-server auth.go processClientOrLeafAuthentication).

Who may connect, and as whom:

* a ``token`` (``authorization { token }``) or one ``user``/``password``: the global account ``$G``;
* ``authorization { users }``: users of ``$G``;
* ``accounts { A { users } }``: users of account A; an account's ``default_permissions`` apply to its users that
  have none of their own;
* nkey users (``{nkey: U...}``, in either place): the server puts a ``nonce`` in INFO and the client signs it; the
  CONNECT carries ``nkey`` and ``sig`` (see nkey.py);
* ``no_auth_user``: a CONNECT with no credentials at all logs in as that configured user;
* operator mode (``operator`` / ``trusted_keys``): only user JWTs, checked by operator.py (``jwt`` + ``sig`` over
  the nonce, or a bearer token); INFO always carries a nonce.

Passwords may be bcrypt hashes (``$2a$...``), compared with the ``bcrypt`` package.  ``check`` returns the
:class:`AuthUser` a CONNECT authenticates as, or None (the caller answers ``Authorization Violation``).
"""
from __future__ import annotations

# hmac.compare_digest is this function when OpenSSL is not there (hmac.py); importing hmac loads OpenSSL's hashlib,
# ~0.6 MiB of every server's memory
from _operator import _compare_digest as compare_digest
from typing import Any

from skiff.protocol.record import Fields

from .accounts import GLOBAL
from .permissions import Permissions


class AuthUser(Fields):
    # A plain class (protocol.record.Fields): a dataclass's __init__, equality and repr, without the code
    # dataclass() generates at import (issue #13, start-up).
    _fields = ("name", "account", "perms", "password", "nkey", "conn_types")

    def __init__(self, name: str, account: str = GLOBAL, perms: Permissions | None = None, password: str = "",
                 nkey: str = "", conn_types: frozenset[str] | None = None) -> None:
        self.name = name  # the user name, the nkey for nkey users, "" for token auth
        self.account = account
        self.perms = perms
        self.password = password
        self.nkey = nkey
        # allowed_connection_types, upper case; None: any.  nats-server connectionTypeAllowed: a user limited to
        # STANDARD is refused on the WebSocket port and one limited to WEBSOCKET on the client port.
        self.conn_types = conn_types


class Auth:
    def __init__(self, options, accounts=None) -> None:
        # Operator mode: users are user JWTs checked against the accounts' JWTs (core/operator.py).
        self.operator = getattr(accounts, "operator", None)
        self.token: str = getattr(options, "authorization", None) or getattr(options, "token", None) or ""
        self.users: dict[str, AuthUser] = {}
        self.nkeys: dict[str, AuthUser] = {}
        if getattr(options, "username", None):
            self.users[options.username] = AuthUser(options.username, password=options.password or "")
        for u in getattr(options, "users", None) or []:
            self._add(u, GLOBAL, None)
        for name, ac in (getattr(options, "accounts", None) or {}).items():
            ac = ac or {}
            default = ac.get("default_permissions")
            for u in ac.get("users") or []:
                self._add(u, name, default)
        self.no_auth_user: str = getattr(options, "no_auth_user", None) or ""
        # nats-server: 2s, or the TLS handshake timeout + 1s when TLS is on, unless configured.
        timeout = float(getattr(options, "auth_timeout", 0) or 0)
        if not timeout:
            tls = getattr(options, "tls", None)
            timeout = (float(tls.timeout) + 1.0) if tls is not None and getattr(tls, "cert_file", "") else 2.0
        self.timeout = timeout

    def _add(self, u: Any, account: str, default_perms: Any) -> None:
        get = u.get if isinstance(u, dict) else (lambda k, d=None: getattr(u, k, d))
        perms = get("permissions")
        if perms is None:
            perms = default_perms
        p = Permissions(perms) if perms is not None else None
        types = get("allowed_connection_types")
        ct = frozenset(t.upper() for t in types) if types else None
        nkey = get("nkey") or ""
        if nkey:
            self.nkeys[nkey] = AuthUser(nkey, account, p, nkey=nkey, conn_types=ct)
            return
        name = get("user")
        if name:
            self.users[name] = AuthUser(name, account, p, password=get("password") or "", conn_types=ct)

    @property
    def required(self) -> bool:
        return bool(self.token or self.users or self.nkeys or self.operator)

    @property
    def nonce_required(self) -> bool:
        """nats-server nonceRequired: INFO carries a nonce when nkey users or trusted operators exist."""
        return bool(self.nkeys or self.operator)

    @property
    def permissions(self) -> dict[str, Permissions]:
        """Permissions by user name (monitoring, tests)."""
        return {n: u.perms for n, u in {**self.users, **self.nkeys}.items() if u.perms is not None}

    def check(self, connect: dict, nonce: str = "", conn=None) -> AuthUser | None:
        """The user a CONNECT authenticates as, or None."""
        u = self._check(connect, nonce, conn)
        if u is not None and u.conn_types is not None and connection_type(conn) not in u.conn_types:
            return None  # nats-server connectionTypeAllowed
        return u

    def _check(self, connect: dict, nonce: str = "", conn=None) -> AuthUser | None:
        if self.operator is not None:  # nats-server: with trusted keys only a user JWT authenticates
            try:
                return self.operator.authenticate(connect, nonce, conn)
            except Exception as e:  # a JWT shape nobody foresaw refuses the client, never a traceback
                self.operator.server.log_error("user JWT authentication failed", error=repr(e))
                return None
        if self.token:
            tok = connect.get("auth_token")
            if isinstance(tok, str) and _eq(tok, self.token):
                return AuthUser("")
            if not self.users and not self.nkeys:
                return None
        nkey = connect.get("nkey")
        if self.nkeys and nkey:
            from .nkey import verify_signature

            u = self.nkeys.get(nkey) if isinstance(nkey, str) else None
            sig = connect.get("sig")
            if u is None or not nonce or not isinstance(sig, str) or not verify_signature(nkey, nonce, sig):
                return None
            return u
        user = connect.get("user")
        pw = connect.get("pass")
        if not user and self.no_auth_user and not connect.get("auth_token") and not nkey:
            return self.users.get(self.no_auth_user) or self.nkeys.get(self.no_auth_user)
        u = self.users.get(user) if isinstance(user, str) else None
        if u is None or not isinstance(pw, str):
            return None
        expected = u.password
        if expected.startswith("$2"):
            import bcrypt

            try:
                return u if bcrypt.checkpw(pw.encode(), expected.encode()) else None
            except ValueError:  # not a well-formed hash
                return None
        return u if _eq(pw, expected) else None


def connection_type(conn) -> str:
    """nats-server's connection type name of a client connection (jwt.ConnectionType*)."""
    kind = getattr(conn, "client_type", "nats")
    return "WEBSOCKET" if kind == "websocket" else "LEAFNODE" if kind == "leafnode" else "STANDARD"


def _eq(a: str, b: str) -> bool:
    return compare_digest(a.encode("utf-8", "surrogateescape"), b.encode("utf-8", "surrogateescape"))
