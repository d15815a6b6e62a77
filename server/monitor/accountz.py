"""An account's detail in /accountz?acc=, ``$SYS.REQ.ACCOUNT.<acc>.INFO`` and ``$SYS.REQ.SERVER.PING.ACCOUNTZ``
(nats-server monitor.go accountInfo, ExtImport, ExtExport, ExtVrIssues).

What it lists: the account's exports (the system account's own service exports included), its imports from the
``accounts {}`` block or its account JWT (server/core/jwt_imports.py wires those and keeps what to list), the
service imports nats-server gives every account from the system account (server.go registerSystemImports,
jetstream.go configJetStream), and for an account JWT the token, its issuer, tags, the claims as jwt v2 decodes them
(server/monitor/jwt_json.py) and their non-blocking validation issues.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from skiff.protocol.jsapi.subjects import ALL_API, API
from skiff.protocol.jsapi.timefmt import format_time
from skiff.protocol.subjects import subject_matches

from .jwt_json import go_json

if TYPE_CHECKING:  # pragma: no cover
    from ..core.accounts import Account
    from ..core.server import Server


def _sys_import(subject: str, account: str, local: str, share: bool) -> dict:
    return {"subject": subject, "account": account, "to": local, "local_subject": local, "type": "service",
            "invalid": False, "share": share, "tracking": False}


def _unix_time(secs: int) -> str:
    """Go's time.Unix(secs, 0) as JSON: in the server's local time zone (nats-server collectRevocations)."""
    return format_time(int(secs) * 1_000_000_000, time.localtime(int(secs)).tm_gmtoff)


def _ext_export(e) -> dict:
    """nats-server ExtExport (monitor.go accountInfo): subject, type, token_req, the response type by its
    ServiceRespType name (Singleton, Streamed, Chunked), the accounts a config export names, and revoked
    activations as times.  An export's name and account_token_position are not in it."""
    d: dict = {"subject": e.subject, "type": "service" if e.service else "stream"}
    if e.token_req:
        d["token_req"] = True
    if e.service:
        d["response_type"] = _RESPONSE_TYPE_NAMES.get(e.response_type, "Singleton")
    if e.accounts:
        d["approved_accounts"] = list(e.accounts)
    if e.revocations:
        d["revoked_activations"] = {k: _unix_time(v) for k, v in e.revocations.items()}
    return d


_RESPONSE_TYPE_NAMES = {"singleton": "Singleton", "stream": "Streamed", "chunked": "Chunked"}


def _validation_issues(claims, now: float) -> list[dict]:
    """jwt v2 AccountClaims.Validate's issues for a loaded account JWT, as ExtVrIssues: the time checks
    (ClaimsData.Validate) and a deprecation warning per import with "to" (Import.Validate).  Its blocking errors
    never show: nats-server does not load such an account, nor does Skiff (jwt.account_errors)."""
    out = []
    if claims.expires > 0 and int(now) > claims.expires:
        out.append({"description": "claim is expired", "blocking": False, "time_check": True})
    if claims.not_before > 0 and claims.not_before > int(now):
        out.append({"description": "claim is not yet valid", "blocking": False, "time_check": True})
    for im in claims.nats.get("imports") or []:
        if isinstance(im, dict) and im.get("to"):
            out.append({"description": "the field to has been deprecated (use LocalSubject instead)",
                        "blocking": False, "time_check": False})
    return out


def account_detail(s: "Server", acc: "Account") -> dict:
    """nats-server AccountInfo (accountz?acc=, $SYS.REQ.ACCOUNT.<acc>.INFO; monitor.go accountInfo) but for its
    ``sublist_stats``, which the provider adds as /subsz counts them.  Go writes exports and imports from maps, so
    their order means nothing; so does Skiff's."""
    system = s.accounts.system
    op = s.accounts.operator
    claims = op.loaded.get(acc.name) if op is not None else None
    now = op.now() if op is not None else 0.0
    d: dict = {"account_name": acc.name, "update_time": format_time(s.start_ns)}
    if acc is system:
        d["is_system"] = True
    d.update({"expired": bool(claims is not None and claims.expires and now > claims.expires),
              "complete": op is None or acc.name not in op.imports.incomplete,
              "jetstream_enabled": bool(acc.jetstream), "leafnode_connections": 0,
              "client_connections": acc.num_conns, "subscriptions": acc.sublist.count})
    exports = [_ext_export(e) for e in acc.exports]
    if acc is system:
        exports += [{"subject": "$SYS.REQ.USER.*.INFO", "type": "service", "response_type": "Singleton"},
                    {"subject": "$SYS.REQ.ACCOUNT.*.CONNZ", "type": "service", "response_type": "Streamed"},
                    {"subject": "$SYS.REQ.ACCOUNT.*.STATZ", "type": "service", "response_type": "Streamed"}]
    if exports:
        d["exports"] = exports
    imports = []
    for im in acc.imports:  # the accounts {} block's
        service = "service" in im
        src = im["service" if service else "stream"]
        if service:
            local = im.get("to") or src["subject"]
            imports.append({"subject": src["subject"], "account": src.get("account", ""), "to": local,
                            "local_subject": local, "type": "service", "invalid": False, "share": False,
                            "tracking": False})
        else:  # a stream import is listed without "to": local_subject is where it lands
            local = im.get("to") or (f"{im['prefix']}.{src['subject']}" if im.get("prefix") else src["subject"])
            imports.append({"subject": src["subject"], "account": src.get("account", ""),
                            "local_subject": local, "type": "stream", "invalid": False, "share": False,
                            "tracking": False})
    if op is not None:  # an account JWT's (jwt_imports.py wires them and keeps what to list)
        imports += [dict(x) for x in op.imports.listed.get(acc.name, ())]
    if system is not None:
        sysname = system.name
        if acc is not system:
            for local, remote in (("$SYS.REQ.SERVER.PING.CONNZ", f"$SYS.REQ.ACCOUNT.{acc.name}.CONNZ"),
                                  ("$SYS.REQ.ACCOUNT.PING.STATZ", f"$SYS.REQ.ACCOUNT.{acc.name}.STATZ")):
                imports.append(_sys_import(remote, sysname, local, share=False))
        imports.append(_sys_import(f"$SYS.REQ.USER.{acc.name}.INFO", sysname, "$SYS.REQ.USER.INFO", share=True))
        if acc is not system:
            imports.append(_sys_import(f"$SYS.REQ.ACCOUNT.{acc.name}.CONNZ", sysname,
                                       "$SYS.REQ.ACCOUNT.PING.CONNZ", share=False))
        # nats-server configJetStream: with JetStream on, every other account imports the API from the system
        # account, shared (enableAllJetStreamServiceImportsAndMappings); one without JetStream only when no
        # service import of its own already takes $JS.API.INFO (enableJetStreamInfoServiceImportOnly).
        if acc is not system and s.options.jetstream and (acc.jetstream or not any(
                im["type"] == "service" and subject_matches(im["local_subject"], API["INFO"].subject)
                for im in imports)):
            imports.append(_sys_import(ALL_API, sysname, ALL_API, share=True))
    if imports:
        d["imports"] = imports
    if claims is not None:
        # The account JWT as loaded, who signed it, its name as name_tag, its tags, and the claims decoded
        # into jwt v2's struct and validated now (non-blocking issues only: a blocking one is never loaded).
        d["jwt"] = claims.token
        d["issuer_key"] = claims.issuer
        d["name_tag"] = claims.name or acc.name
        tags = claims.nats.get("tags")
        if tags:
            d["tags"] = tags
        d["decoded_jwt"] = go_json({**claims.payload, "nats": claims.nats})  # a v1 account's migrated
        issues = _validation_issues(claims, now)
        if issues:
            d["validation_result_jwt"] = issues
        revoked = claims.nats.get("revocations") or {}
        if revoked:
            d["revoked_user"] = {k: _unix_time(v) for k, v in revoked.items()}
    else:
        d["name_tag"] = acc.name
    return d

