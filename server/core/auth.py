"""Client authentication from CONNECT: a token, one user/password, or a users list (nats-server auth.go).

Passwords may be stored as bcrypt hashes in nats-server configs (``$2a$...``); Skiff compares them only when the
``bcrypt`` module happens to be installed, and otherwise refuses such users (documented in docs/parity.md).
"""
from __future__ import annotations

import hmac

from .permissions import Permissions


class Auth:
    def __init__(self, options) -> None:
        self.token: str = getattr(options, "authorization", None) or getattr(options, "token", None) or ""
        self.users: dict[str, str] = {}
        self.permissions: dict[str, Permissions] = {}
        if getattr(options, "username", None):
            self.users[options.username] = options.password or ""
        for u in getattr(options, "users", None) or []:
            name = u.get("user") if isinstance(u, dict) else getattr(u, "user", None)
            pw = u.get("password") if isinstance(u, dict) else getattr(u, "password", None)
            if name:
                self.users[name] = pw or ""
                perms = u.get("permissions") if isinstance(u, dict) else getattr(u, "permissions", None)
                if perms is not None:
                    self.permissions[name] = Permissions(perms)
        self.no_auth_user: str = getattr(options, "no_auth_user", None) or ""
        # nats-server: 2s, or the TLS handshake timeout + 1s when TLS is on, unless configured.
        timeout = float(getattr(options, "auth_timeout", 0) or 0)
        if not timeout:
            tls = getattr(options, "tls", None)
            timeout = (float(tls.timeout) + 1.0) if tls is not None and getattr(tls, "cert_file", "") else 2.0
        self.timeout = timeout

    @property
    def required(self) -> bool:
        return bool(self.token or self.users)

    def check(self, connect: dict) -> str | None:
        """The authenticated user name ("" for token auth), or None when CONNECT does not authenticate."""
        if self.token:
            tok = connect.get("auth_token")
            if isinstance(tok, str) and _eq(tok, self.token):
                return ""
            if not self.users:
                return None
        user = connect.get("user")
        pw = connect.get("pass")
        if not user and self.no_auth_user and not connect.get("auth_token"):
            return self.no_auth_user if self.no_auth_user in self.users else None
        if not isinstance(user, str) or user not in self.users:
            return None
        expected = self.users[user]
        if not isinstance(pw, str):
            return None
        if expected.startswith("$2"):
            try:
                import bcrypt  # type: ignore
            except ImportError:
                return None
            return user if bcrypt.checkpw(pw.encode(), expected.encode()) else None
        return user if _eq(pw, expected) else None


def _eq(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())
