"""The ``leafnodes { }`` block, key by key as nats-server reads it (server/opts.go parseLeafNodes,
parseRemoteLeafNodes, parseLeafAuthorization).

Every key is implemented here or refused with its ``file:line:col`` through the ``LEAFNODES`` / ``LEAF_REMOTE``
tables of support.py.  The block becomes ``settings["leafnodes"]``, a dict of ``LeafNodeOptions`` fields.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from skiff.server.conf import support
from skiff.server.conf.cluster import compression
from skiff.server.conf.mapping import tls_problem
from skiff.server.conf.values import Token

if TYPE_CHECKING:  # pragma: no cover
    from skiff.server.conf.mapping import _Mapper

#: Skiff does not carry JetStream across leaf connections (nats-server splits domains there).
JETSTREAM_REFUSED = ("leaf node connections together with JetStream are not implemented by Skiff: nats-server would "
                     "extend or split JetStream domains across the link; run JetStream on a server without leafnodes {}")


def parse_leafnodes(m: "_Mapper", tok: Token) -> dict[str, Any]:
    def key(k: str, mk: str, mt: Token, out: dict[str, Any]) -> bool:
        if k == "authorization":
            _authorization(m, mt, out)
        elif k == "remotes":
            out["remotes"] = _remotes(m, mt)
        elif k in ("reconnect", "reconnect_delay", "reconnect_interval"):
            out["reconnect_interval"] = m.duration(mt, mk)
        elif k in ("leafnode_advertise", "advertise"):
            out["advertise"] = m.expect(mt, str, mk)
        elif k == "no_advertise":
            out["no_advertise"] = m.expect(mt, bool, mk)
        elif k == "tls":
            out["tls"] = m.tls(mt, check=leaf_tls_problem)
        elif k == "compression":
            out["compression_rtts"] = rtts = []
            out["compression"] = compression(m, mt, mk, "s2_auto", rtts)  # opts.go parseLeafNodes: on is s2_auto
        else:
            return False
        return True

    return m.block(tok, support.LEAFNODES, "leafnodes", "Expected map to define a leafnode, got {type}", key)


def _authorization(m: "_Mapper", tok: Token, out: dict) -> None:
    am = m.expect(tok, dict, "authorization")
    for mk, mt in am.items():
        k = mk.lower()
        if m.auth_field(k, mt, mk, out):
            pass
        elif k == "account":
            out["account"] = m.expect(mt, str, mk)
        elif k == "users":
            users = []
            for ut in m.expect(mt, list, mk):
                um = m.expect(ut, dict, "users")
                u: dict[str, str] = {}
                for uk, uv in um.items():
                    lk = uk.lower()
                    if lk in ("user", "username"):
                        u["user"] = m.expect(uv, str, uk)
                    elif lk in ("pass", "password"):
                        u["password"] = m.expect(uv, str, uk)
                    elif lk == "account":
                        u["account"] = m.expect(uv, str, uk)
                    else:
                        m.err(uv, f'"leafnodes.authorization.users.{uk}" is not implemented by Skiff: leaf users '
                                  "take user, password and account")
                users.append(u)
            out["users"] = users
        elif k in ("nkey", "proxy_required"):
            m.err(mt, f'"leafnodes.authorization.{mk}" is not implemented by Skiff: leaf authorization by user and '
                      "password only")
        else:
            m.unknown(mt, mk)


def _remotes(m: "_Mapper", tok: Token) -> list[dict[str, Any]]:
    out = []
    for rt in m.expect(tok, list, "remotes"):
        rm = m.expect(rt, dict, "remotes")
        r: dict[str, Any] = {}
        for mk, mt in rm.items():
            k = mk.lower()
            if m.not_implemented(support.LEAF_REMOTE, k, mt, f"leafnodes.remotes.{mk}"):
                continue
            try:
                if k in ("url", "urls"):
                    urls = m.string_list(mt, mk)
                    for u in urls:
                        p = urlsplit(u)
                        # tls:// asks for nothing more than nats-leaf:// in nats-server 2.15 (only wss:// implies
                        # TLS, leafnode.go newLeafNodeCfg): TLS comes from the remote's tls {} or the hub's INFO.
                        if p.scheme not in ("nats-leaf", "nats", "leafnode", "tls") or not p.hostname:
                            m.err(mt, f'leafnode remote url "{u}": only nats-leaf://, nats:// and tls:// URLs are '
                                      "implemented by Skiff")
                    r["urls"] = urls
                elif k == "tls":
                    r["tls"] = m.tls(mt, check=leaf_tls_problem, remote=True)
                elif k == "compression":
                    r["compression_rtts"] = rtts = []
                    r["compression"] = compression(m, mt, mk, "s2_auto", rtts)
                elif k in ("account", "local"):
                    r["account"] = m.expect(mt, str, mk)
                elif k in ("creds", "credentials"):
                    r["credentials"] = m.expect(mt, str, mk)
                elif k in ("no_randomize", "dont_randomize", "ignore_discovered_servers"):
                    m.expect(mt, bool, mk)  # Skiff dials the URLs in order and discovers none: both are its way
                elif k in support.LEAF_REMOTE:
                    pass
                else:
                    m.unknown(mt, mk)
            except m.Bad:
                continue
        out.append(r)
    return out


def leaf_tls_problem(tls: dict[str, Any]) -> str | None:
    """What nats-server's GenTLSConfig says about a leaf ``tls { }`` block's files, or None when they load.

    Unlike the client port's (mapping.tls_problem), a leaf block may have no certificate at all: a remote's is a
    client's configuration (a certificate only when the hub asks for one), and a hub's starts too, every handshake
    then failing as Go's does."""
    import ssl

    cert, key, ca = tls.get("cert_file") or "", tls.get("key_file") or "", tls.get("ca_file") or ""
    if cert and not key:
        return "missing 'key_file' in TLS configuration"
    if key and not cert:
        return "missing 'cert_file' in TLS configuration"
    if cert:
        problem = tls_problem({"cert_file": cert, "key_file": key})
        if problem:
            return problem
    if ca:
        try:
            with open(ca, "rb"):
                pass
        except OSError as e:
            return f"open {ca}: {(e.strerror or str(e)).lower()}"
        try:
            ssl.create_default_context(cafile=ca)
        except ssl.SSLError:
            return "failed to parse root ca certificate"
    return None


def validate(m: "_Mapper") -> None:
    s = m.settings
    ln = s.get("leafnodes")
    if ln is None:
        return
    tok = ln.pop("_tok", None)
    if (ln.get("port") or ln.get("remotes")) and s.get("jetstream"):
        m.err(tok, JETSTREAM_REFUSED)
    for r in ln.get("remotes") or []:
        if not r.get("urls"):
            m.err(tok, "leafnode remote is missing the url")
