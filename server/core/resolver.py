"""Account resolvers: where operator mode finds account JWTs (nats-server accounts.go MemAccResolver,
DirAccResolver; dirstore.go DirJWTStore), and the ``$SYS`` requests that update and read them.

Theory of operation
-------------------
* ``resolver: MEMORY`` (:class:`MemResolver`): the accounts are the ``resolver_preload`` map, nothing else.  An
  update request (``$SYS.REQ.ACCOUNT.<acc>.CLAIMS.UPDATE``, old form ``$SYS.ACCOUNT.<acc>.CLAIMS.UPDATE``) changes
  an account the server already loaded and is otherwise "jwt update skipped" (events.go accountClaimUpdate).
* ``resolver { type: full, dir }`` (:class:`DirResolver`): one file ``<dir>/<ACCOUNT_PUBKEY>.jwt`` per account
  (DirJWTStore, not sharded), written to a temporary file, fsynced and renamed so a kill -9 leaves the old JWT or
  the new one.  A JWT replaces the stored one unless the stored one was issued later (saveIfNewer).  Preloads are
  stored too.  It answers (DirAccResolver.Start):

  - ``$SYS.REQ.CLAIMS.UPDATE`` (any account; the body may carry headers) and the per-account update subjects;
  - ``$SYS.REQ.ACCOUNT.<acc>.CLAIMS.LOOKUP``: the stored JWT, or an empty message when there is none;
  - ``$SYS.REQ.CLAIMS.LIST``: ``{"server":..,"data":[account ids]}``;
  - ``$SYS.REQ.CLAIMS.DELETE``: a generic JWT self-signed by the operator (or its signing key) whose ``data``
    holds ``accounts: [...]``; only with ``allow_delete`` (renamed to ``.jwt.deleted``, or removed with
    ``hard_delete``).

  ``$SYS.REQ.CLAIMS.PACK`` is how the servers of a cluster compare stores; a single server has nobody to
  compare with and does not subscribe it (a request gets "no responders").

Every reply is nats-server's ServerAPIClaimUpdateResponse: ``{"server": {...}, "data": {"account", "code": 200,
"message"}}`` or ``{"server": {...}, "error": {"account", "code": 500, "description": "<message> - <error>"}}``.
The handlers are internal subscriptions of the system account, so only a user of the system account can reach
them, and only with a message it published itself (the confused-deputy guard of Server.subscribe_internal).
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from .jwt import JWTError, account_errors, decode

if TYPE_CHECKING:  # pragma: no cover
    from .operator import OperatorMode

JWT_EXT = ".jwt"
DELETED_EXT = ".jwt.deleted"


class ResolverError(Exception):
    pass


class MemResolver:
    kind = "mem"

    def __init__(self) -> None:
        self.jwts: dict[str, str] = {}

    def fetch(self, pubkey: str) -> str | None:
        return self.jwts.get(pubkey)

    def store(self, pubkey: str, token: str) -> None:
        self.jwts[pubkey] = token

    def keys(self) -> list[str]:
        return list(self.jwts)


class DirResolver:
    """DirJWTStore of a FULL resolver."""

    kind = "full"

    def __init__(self, directory: str, allow_delete: bool = False, hard_delete: bool = False,
                 limit: int = 0) -> None:
        self.dir = directory
        self.allow_delete = allow_delete
        self.hard_delete = hard_delete
        self.limit = limit if limit > 0 else 0
        os.makedirs(directory, mode=0o750, exist_ok=True)

    def _path(self, pubkey: str) -> str:
        from .nkey import decode_public_key

        if not isinstance(pubkey, str) or len(pubkey) < 2 or decode_public_key(pubkey, pubkey[0]) is None:
            raise ResolverError("invalid public key")
        return os.path.join(self.dir, pubkey + JWT_EXT)

    def fetch(self, pubkey: str) -> str | None:
        try:
            path = self._path(pubkey)
        except ResolverError:
            return None
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().strip()
        except OSError:
            return None

    def keys(self) -> list[str]:
        try:
            names = sorted(os.listdir(self.dir))
        except OSError:
            return []
        return [n[: -len(JWT_EXT)] for n in names if n.endswith(JWT_EXT)]

    def store(self, pubkey: str, token: str) -> bool:
        """saveIfNewer: True when the file changed."""
        path = self._path(pubkey)
        existing = self.fetch(pubkey)
        if existing is not None:
            new = decode(token)
            try:
                old = decode(existing)
            except JWTError:
                old = None
            if old is not None:
                if old.jti and old.jti == new.jti:
                    return False
                if old.issued_at > new.issued_at:
                    return False
                if new.subject != pubkey:
                    raise ResolverError("jwt subject nkey and provided nkey do not match")
                if old.subject != new.subject:
                    raise ResolverError("subject of existing and new jwt do not match")
        elif self.limit and len(self.keys()) >= self.limit:
            raise ResolverError("jwt store is full")
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(token)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        try:
            fd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:  # pragma: no cover - directories that cannot be fsynced
            pass
        return True

    def delete(self, pubkey: str) -> None:
        path = self._path(pubkey)
        if not os.path.exists(path):
            raise ResolverError(f"jwt for {pubkey} not found")  # nats-server: os.ErrNotExist, reported as text
        if self.hard_delete:
            os.remove(path)
        else:
            os.replace(path, path[: -len(JWT_EXT)] + DELETED_EXT)


def make_resolver(cfg: dict | None):
    cfg = cfg or {}
    if cfg.get("type") == "full":
        return DirResolver(cfg.get("dir") or "", bool(cfg.get("allow_delete")), bool(cfg.get("hard_delete")),
                           int(cfg.get("limit") or 0))
    return MemResolver()


class ClaimsService:
    """The ``$SYS`` claim requests of one server's resolver, answered in the system account."""

    def __init__(self, op: "OperatorMode") -> None:
        self.op = op
        self.server = op.server
        self._subs: list = []

    def start(self) -> None:
        acc = self.op.accounts.system
        if acc is None:
            return
        res = self.op.resolver
        sub = self._subscribe
        if isinstance(res, DirResolver):
            sub("$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE", self._dir_update_one)
            sub("$SYS.ACCOUNT.*.CLAIMS.UPDATE", self._dir_update_one)
            sub("$SYS.REQ.CLAIMS.UPDATE", self._dir_update)
            sub("$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP", self._lookup)
            sub("$SYS.REQ.CLAIMS.LIST", self._list)
            sub("$SYS.REQ.CLAIMS.DELETE", self._delete)
        else:
            sub("$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE", self._mem_update)
            sub("$SYS.ACCOUNT.*.CLAIMS.UPDATE", self._mem_update)

    def stop(self) -> None:
        for s in self._subs:
            self.server.unsubscribe_internal(s)
        self._subs.clear()

    def _subscribe(self, subject: str, handler) -> None:
        acc = self.op.accounts.system

        def cb(sub, subj, reply, hdr_len, data, origin) -> None:
            try:
                handler(subj, reply, data[hdr_len:])
            except Exception as e:  # never a traceback into the routing loop
                self.server.log_error("claims request failed", subject=subj, error=repr(e))

        self._subs.append(self.server.subscribe_internal(subject, cb, account=acc))

    # ------------------------------------------------------------------ replies
    def _respond(self, reply: str, account: str, message: str, err: str | None = None) -> None:
        if err is None:
            self.server.log_debug(message, account=account)
        else:
            self.server.log_error(message, account=account, error=err)
        if not reply:
            return
        m: dict[str, Any] = {}
        if account:
            m["account"] = account
        if err is None:
            m["code"] = 200
            m["message"] = message
            doc = {"server": self._server_info(), "data": m}
        else:
            m["code"] = 500
            m["description"] = f"{message} - {err}"
            doc = {"server": self._server_info(), "error": m}
        self._send(reply, json.dumps(doc, separators=(",", ":")).encode())

    def _server_info(self) -> dict:
        system = getattr(self.server, "system", None)
        if system is not None and hasattr(system, "server_info"):
            return system.server_info()
        return {"name": self.server.server_name, "id": self.server.server_id}

    def _send(self, reply: str, body: bytes) -> None:
        srv = self.server
        srv.route(None, reply, "", 0, body, sublist=self.op.accounts.system.sublist)

    # ------------------------------------------------------------------ handlers
    @staticmethod
    def _account_token(subject: str) -> str:
        toks = subject.split(".")
        if len(toks) == 6:  # $SYS.REQ.ACCOUNT.<acc>.CLAIMS.UPDATE
            return toks[3]
        if len(toks) == 5:  # $SYS.ACCOUNT.<acc>.CLAIMS.UPDATE
            return toks[2]
        return ""

    def _dir_update_one(self, subject: str, reply: str, body: bytes) -> None:
        pubkey = self._account_token(subject)
        if not pubkey:
            return
        self._dir_store(reply, body, pubkey)

    def _dir_update(self, subject: str, reply: str, body: bytes) -> None:
        self._dir_store(reply, body, None)

    def _dir_store(self, reply: str, body: bytes, pubkey: str | None) -> None:
        op = self.op
        token = body.decode("utf-8", "replace")
        try:
            claims = decode(token, "account")
        except JWTError as e:
            return self._respond(reply, "n/a", "jwt update resulted in error", str(e))
        errs = account_errors(claims)
        if errs:  # claimValidate: the blocking (non-time) errors of AccountClaims.Validate, as Go prints a []error
            return self._respond(reply, claims.subject, "jwt validation failed",
                                 f"validation errors: [{' '.join(errs)}]")
        if pubkey is None and claims.issuer == op.operator_key and op.strict:
            return self._respond(reply, claims.subject, "jwt update resulted in error",
                                 "operator requires issuer to be a signing key")
        # claimValidate uses IsBlocking(false): time checks do not block, an expired account JWT is stored (and its
        # users are refused at connect: "Account JWT has expired"); checked with nats-server 2.15.1.
        if pubkey is not None and claims.subject != pubkey:
            return self._respond(reply, pubkey, "jwt update resulted in error", "subject does not match jwt content")
        if pubkey is not None and claims.issuer == op.operator_key and op.strict:
            return self._respond(reply, pubkey, "jwt update resulted in error",
                                 "operator requires issuer to be a signing key")
        problem = op.unsupported(claims)
        if problem:
            return self._respond(reply, claims.subject, "jwt update resulted in error", problem)
        try:
            changed = op.resolver.store(claims.subject, token)
        except (ResolverError, JWTError, OSError) as e:
            return self._respond(reply, claims.subject, "jwt update resulted in error", str(e))
        if changed:
            op.account_changed(claims.subject)
        self._respond(reply, claims.subject, "jwt updated")

    def _mem_update(self, subject: str, reply: str, body: bytes) -> None:
        op = self.op
        pubkey = self._account_token(subject)
        if not pubkey:
            return
        if not body:
            return self._respond(reply, pubkey, "jwt update error", "request body is empty")
        token = body.decode("utf-8", "replace")
        try:
            claims = decode(token, "account")
        except JWTError as e:
            return self._respond(reply, pubkey, "jwt update resulted in error", str(e))
        if claims.subject != pubkey:
            return self._respond(reply, pubkey, "jwt update resulted in error", "subject does not match jwt content")
        if pubkey not in op.loaded:
            return self._respond(reply, pubkey, "jwt update skipped")
        err = op.update_account(pubkey, token)
        if err:
            return self._respond(reply, pubkey, "jwt update resulted in error", err)
        self._respond(reply, pubkey, "jwt updated")

    def _lookup(self, subject: str, reply: str, body: bytes) -> None:
        if not reply:
            return
        toks = subject.split(".")
        if len(toks) != 6:
            return
        token = self.op.resolver.fetch(toks[3])
        self._send(reply, (token or "").encode())

    def _list(self, subject: str, reply: str, body: bytes) -> None:
        if not reply:
            return
        doc = {"server": self._server_info(), "data": self.op.resolver.keys()}
        self._send(reply, json.dumps(doc, separators=(",", ":")).encode())

    def _delete(self, subject: str, reply: str, body: bytes) -> None:
        """handleDeleteRequest: only the operator (or its signing key), signing for itself, deletes accounts."""
        op = self.op
        res: DirResolver = op.resolver
        subj = ""
        err = ""
        ids: list = []
        try:
            gk = decode(body.decode("utf-8", "replace"))
        except JWTError as e:
            gk = None
            err = str(e)
        if gk is not None:
            subj = gk.subject
            data = gk.nats  # GenericClaims.Data is the "nats" object
            from .nkey import is_public_key

            sys_name = op.accounts.system.name if op.accounts.system is not None else ""
            if not res.allow_delete:
                err = "delete must be enabled in server config"
            elif subj != gk.issuer:
                err = "not self signed"
            elif gk.issuer not in op.operator_keys:
                err = "not trusted"
            elif not isinstance(data, dict) or "accounts" not in data:
                err = "malformed request"
            elif not isinstance(data["accounts"], list):
                err = "malformed request"
            else:
                ids = data["accounts"]
                for a in ids:
                    if not isinstance(a, str) or not a or not is_public_key(a, "A"):
                        err = "malformed request"
                        break
                    if a == sys_name:
                        err = "not allowed to delete system account"
                        break
        if err:
            return self._respond(reply, "", f"delete accounts request by {subj} failed", err)
        errs: list[str] = []
        passed = 0
        for a in ids:
            try:
                res.delete(a)
                passed += 1
                op.account_deleted(a)
            except (ResolverError, OSError) as e:
                errs.append(str(e))
        if not errs:
            self._respond(reply, "", f"deleted {passed} accounts")
        else:
            self._respond(reply, "", f"deleted {passed} accounts, failed for {len(errs)}", "\n".join(errs))
