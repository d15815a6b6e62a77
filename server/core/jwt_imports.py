"""Account JWT exports and imports in operator mode (nats-io/jwt v2 exports.go, imports.go, activation_claims.go;
nats-server accounts.go updateAccountClaimsWithRefresh, checkStreamExportApproved / checkServiceExportApproved,
checkAuth, checkActivation, isIssuerClaimTrusted).

Theory of operation
-------------------
An account JWT's ``exports`` become the account's :class:`~server.core.accounts.Export` list (the same objects
the ``accounts {}`` block makes), and its ``imports`` become the same bridges: the internal subscriptions of
``Accounts._stream_import`` / ``Accounts._service_import``.  What differs from the configuration file is who
decides whether an import is allowed, and when:

* An export is public, or ``token_req`` (the importer must present an *activation token*: a JWT of type
  ``activation`` whose ``sub`` is the importing account, signed by the exporting account, or by one of its signing
  keys naming it in ``issuer_account``, for a subject the import lies inside, not expired, and not revoked by the
  export's ``revocations`` (``sub`` -> time: tokens issued at or before it are void)), or it names the importer
  in the subject token at ``account_token_position``.
* An import the exporter does not allow is *not wired*, and its account still loads: nats-server logs it and
  goes on (``Error adding stream import``), so its users connect and simply see nothing of it (a request on an
  unwired service import gets "no responders").  An account JWT whose imports or exports fail jwt v2's own
  validation (a token signed for another account or importer, overlapping service imports, ...) is not loaded at
  all (jwt.account_errors).
* Stream import: ``subject`` is the exporter's subject; ``local_subject`` renames it in the importer (``$N``
  references), or the deprecated ``to`` prefixes it.  Service import: ``subject`` is what the importer's clients
  publish to and ``to`` the exporter's subject, or ``local_subject`` is the importer's subject and ``subject`` the
  exporter's.  The export's ``response_type`` (``Singleton``, ``Stream``, ``Chunked``) and
  ``response_threshold`` decide how long the reply route lives.

nats-server keeps imports up to date incrementally: an exporter's update re-checks the imports from it, an
importer whose exporter was missing is refreshed when the exporter is loaded, and an activation token's expiry
fires a timer that re-checks the import.  Skiff computes the same end state by rebuilding every JWT bridge
whenever an account JWT is loaded, updated or deleted and when an activation token expires (:meth:`rewire`);
updates are rare, and the rebuild is plain work on the event loop.  A reply route of a request in flight is its
own subscription and survives a rebuild.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skiff.protocol.subjects import is_subset, is_valid_literal_subject, is_valid_subject

from .accounts import RESPONSE_THRESHOLD, Export, untokenize
from .jwt import Claims, JWTError, activation_errors, decode, import_errors

if TYPE_CHECKING:  # pragma: no cover
    from .accounts import Account
    from .operator import OperatorMode

_RESPONSE_TYPES = {"Stream": "stream", "Chunked": "chunked"}  # otherwise Singleton


class JWTImports:
    def __init__(self, op: "OperatorMode") -> None:
        self.op = op
        self.server = op.server
        self.accounts = op.accounts
        self._subs: list = []
        self._timers: list = []
        self._busy = False
        self._again = False
        # What /accountz shows of each importer (monitor.go accountInfo): the imports that were wired, as ExtImport
        # documents, and the importers with an import that was not (Account.incomplete: "complete": false).
        self.listed: dict[str, list[dict]] = {}
        self.incomplete: set[str] = set()
        self._shown: dict[tuple[str, str, int], dict] = {}  # (importer, its JWT, index of the import) -> listed

    # ------------------------------------------------------------------ exports
    @staticmethod
    def exports(claims: Claims) -> list[Export]:
        """The account's exports (addStreamExportWithAccountPos / addServiceExportWithResponseAndAccountPos)."""
        out: list[Export] = []
        for ex in claims.nats.get("exports") or []:
            if not isinstance(ex, dict):
                continue
            subject = str(ex.get("subject") or "")
            pos = int(ex.get("account_token_position") or 0)
            if pos:
                toks = subject.split(".")
                if len(toks) < pos or toks[pos - 1] != "*":
                    continue  # setExportAuth: ErrInvalidSubject, the export is not added
            threshold = ex.get("response_threshold") or 0  # a Go time.Duration: nanoseconds
            out.append(Export(
                subject=subject, service=ex.get("type") == "service", accounts=None,
                response_type=_RESPONSE_TYPES.get(str(ex.get("response_type") or ""), "singleton"),
                threshold=threshold / 1e9 if threshold > 0 else RESPONSE_THRESHOLD,
                token_req=bool(ex.get("token_req")), revocations=dict(ex.get("revocations") or {}),
                account_pos=pos, allow_trace=ex.get("allow_trace") is True))
        return out

    # ------------------------------------------------------------------ bridges
    def rewire(self) -> None:
        """Rebuild every import bridge of the loaded account JWTs.  Loading an exporter from the resolver while
        wiring (lookupAccount) asks for another rebuild, which runs once this one is done."""
        if not self.op._started:
            return  # start() wires, once the server has its Sublists
        if self._busy:
            self._again = True
            return
        self._busy = True
        try:
            self._again = True
            while self._again:
                self._again = False
                self._rewire_once()
        finally:
            self._busy = False

    def stop(self) -> None:
        self._clear()

    def _clear(self) -> None:
        for sub in self._subs:
            self.server.unsubscribe_internal(sub)
        self._subs.clear()
        for t in self._timers:
            t.cancel()
        self._timers.clear()

    def _rewire_once(self) -> None:
        self._clear()
        before, self._shown = self._shown, {}
        self.listed = {}
        self.incomplete = set()
        for pub in list(self.op.loaded):
            claims = self.op.loaded.get(pub)
            importer = self.accounts.by_name.get(pub)
            if claims is None or importer is None:
                continue
            streams: set = set()
            services: set = set()
            listed = self.listed.setdefault(pub, [])
            for i, im in enumerate(claims.nats.get("imports") or []):
                if not isinstance(im, dict):
                    continue
                key = (pub, claims.token, i)
                ext = self._wire(importer, im, streams, services)
                if ext is None and key in before:
                    # nats-server keeps an import it wired and flags it "invalid" when its exporter's JWT changes
                    # (or goes) or its activation token expires (updateAccountClaimsWithRefresh,
                    # streamActivationExpired); only the importer's own new JWT drops it.
                    ext = {**before[key], "invalid": True}
                if ext is None:  # updateAccountClaimsWithRefresh: incompleteImports
                    self.incomplete.add(pub)
                else:
                    self._shown[key] = ext
                    listed.append(ext)

    def _wire(self, importer: "Account", im: dict, streams: set, services: set) -> dict | None:
        """Wire one import; the ExtImport /accountz lists for it (monitor.go accountInfo, newExtImport), or None
        when it is not wired."""
        log = self.server.log_debug
        name = str(im.get("account") or "")
        subject = str(im.get("subject") or "")
        kind = im.get("type")
        exporter = self.op.lookup(name)  # lookupAccount: fetched from the resolver when not loaded yet
        if exporter is None:
            self.server.log_error("Can't locate account for import", account=name, subject=subject, type=kind)
            return None
        local = str(im.get("local_subject") or "")
        to = str(im.get("to") or "")
        if kind == "service":
            frm, remote = (local, subject) if local else (subject, to or subject)
            if not is_valid_subject(untokenize(frm)) or not is_valid_subject(remote):
                log("Error adding service import", account=importer.name, error="invalid subject")
                return None
            export = self._authorized(exporter, importer, remote, True, im)
            if export is None:
                log("Error adding service import", account=importer.name, error="service import not authorized")
                return None
            key = (exporter.name, untokenize(frm))
            if key in services:  # addServiceImport: duplicate service import subject
                log("Error adding service import", account=importer.name, error="duplicate service import")
                return None
            services.add(key)
            spec = {"service": {"account": exporter.name, "subject": remote}, "to": frm}
            self._subs.append(self.accounts._service_import(importer, spec, export))
            # A service import is listed from the importer's side: subject is the exporter's, to and
            # local_subject the importer's (with each $N reference as the * it subscribes with).
            return {"subject": remote, "account": exporter.name, "to": untokenize(frm),
                    "local_subject": untokenize(frm), "type": "service", "invalid": False, "share": False,
                    "tracking": False}
        export = self._authorized(exporter, importer, subject, False, im)
        if export is None:
            log("Error adding stream import", account=importer.name, error="stream import not authorized")
            return None
        spec: dict[str, Any] = {"stream": {"account": exporter.name, "subject": subject},
                                "allow_trace": im.get("allow_trace") is True}
        if local:
            spec["to"] = local
        elif to:
            prefix = to.rstrip(".")
            if not is_valid_literal_subject(prefix):  # ErrStreamImportBadPrefix: the prefix must be literal
                log("Error adding stream import", account=importer.name, error="stream import prefix can not "
                    "contain wildcard tokens")
                return None
            spec["prefix"] = prefix
        key = (exporter.name, subject)
        if key in streams:  # isStreamImportDuplicate
            log("Error adding stream import", account=importer.name, error="stream import already exists")
            return None
        streams.add(key)
        self._subs.append(self.accounts._stream_import(importer, spec))
        # A stream import has no "to" in the listing; local_subject is where it lands (a prefix joined, $N
        # references as *: addStreamImportWithClaim, transformUntokenize).
        landing = untokenize(local) if local else (f"{spec['prefix']}.{subject}" if "prefix" in spec else subject)
        return {"subject": subject, "account": exporter.name, "local_subject": landing, "type": "stream",
                "invalid": False, "share": False, "tracking": False}

    # ------------------------------------------------------------------ authorization
    def _authorized(self, exporter: "Account", importer: "Account", subject: str, service: bool,
                    im: dict) -> Export | None:
        """checkStreamExportApproved / checkServiceExportApproved + checkAuth: the export that allows the import,
        or None.  An export of the very subject is checked first, then one the subject lies inside."""
        if not is_valid_subject(subject):
            return None
        exports = [e for e in exporter.exports if e.service == service]
        tokens: list[str] | None = None
        export = next((e for e in exports if e.subject == subject), None)
        if export is None:
            tokens = subject.split(".")
            export = next((e for e in exports if is_subset(subject, e.subject)), None)
            if export is None:
                return None
        if not export.token_req and not export.account_pos:
            return export
        if export.account_pos:
            pos = export.account_pos
            ok = tokens is not None and pos <= len(tokens) and tokens[pos - 1] == importer.name
            return export if ok else None
        return export if self._activation_ok(exporter, importer, im, export) else None

    def _activation_ok(self, exporter: "Account", importer: "Account", im: dict, export: Export) -> bool:
        """checkActivation: the import's token is valid for this importer, signed by a key the exporter trusts,
        within its times and not revoked by the export.  A token that expires later re-wires then."""
        token = im.get("token") or ""
        if not token:
            return False
        errs: list[str] = []
        import_errors(im, importer.name, errs)
        if errs:
            return False
        try:
            act = decode(token, "activation")
        except JWTError:
            return False
        ia = str(act.nats.get("issuer_account") or "")
        if ia:  # isIssuerClaimTrusted: a signing key of the exporter (or its own key, unless strict)
            if ia != exporter.name:
                self.server.log_error("Invalid issuer account in activation claim", issuer_account=ia,
                                      account=exporter.name)
                return False
            ec = self.op.loaded.get(exporter.name)
            if ec is None:
                return False
            keys = set(ec.signing_keys())
            if ec.issuer not in self.op.strict_keys:
                keys.add(exporter.name)
            if act.issuer not in keys:
                return False
        activation_errors(act, errs)
        now = self.op.now()
        if errs or act.time_error(now):
            return False
        if act.expires:
            tn = int(now)
            if act.expires <= tn:
                return False
            # checkActivation(expTimer): at expiry the import is checked again (and dropped).
            self._timers.append(self.server.clock.call_later(act.expires - tn, self.rewire))
        return not _revoked(export.revocations, act.subject, act.issued_at)


def _revoked(revs: dict, subject: str, iat: int) -> bool:
    from .operator import _revoked as revoked

    return revoked(revs, subject, iat)
