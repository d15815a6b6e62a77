"""The ``cluster { }`` block, key by key as nats-server reads it (server/opts.go parseCluster).

Every key nats-server reads is implemented here or refused with its ``file:line:col`` through the ``CLUSTER`` table
of support.py.  The block becomes ``settings["cluster"]``, a dict of ``ClusterOptions`` fields (server/options.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from skiff.server.conf import support
from skiff.server.conf.values import Token

if TYPE_CHECKING:  # pragma: no cover
    from skiff.server.conf.mapping import _Mapper

#: nats-server errors.go ErrClusterNameHasSpaces
NAME_HAS_SPACES = "cluster name cannot contain spaces"
#: Skiff does not replicate JetStream between servers (docs/clustering.md).
JETSTREAM_REFUSED = ("clustered JetStream (a cluster with jetstream enabled) is not implemented by Skiff: "
                     "nats-server would replicate streams over RAFT; run JetStream on a server without cluster {}")


def parse_cluster(m: "_Mapper", tok: Token) -> dict[str, Any]:
    def key(k: str, mk: str, mt: Token, out: dict[str, Any]) -> bool:
        if k == "name":
            name = m.expect(mt, str, mk)
            if " " in name or "\n" in name:
                m.err(mt, NAME_HAS_SPACES)
            else:
                out["name"] = name
        elif k == "authorization":
            _authorization(m, mt, out)
        elif k == "routes":
            out["routes"] = _routes(m, mt)
        elif k in ("cluster_advertise", "advertise"):
            out["advertise"] = m.expect(mt, str, mk)
        elif k == "no_advertise":
            out["no_advertise"] = m.expect(mt, bool, mk)
        elif k == "connect_retries":
            out["connect_retries"] = m.expect(mt, int, mk)
        elif k == "tls":
            out["tls"] = m.tls(mt)
        elif k == "pool_size":
            out["pool_size"] = m.expect(mt, int, mk)
        elif k == "accounts":
            out["accounts"] = m.string_list(mt, mk)
        else:
            return False
        return True

    return m.block(tok, support.CLUSTER, "cluster", "Expected map to define cluster, got {type}", key)


def _authorization(m: "_Mapper", tok: Token, out: dict) -> None:
    """parseAuthorization, then parseCluster's own limits: one user, no token."""
    am = m.expect(tok, dict, "authorization")
    for mk, mt in am.items():
        k = mk.lower()
        if m.auth_field(k, mt, mk, out):
            pass
        elif k == "users":
            m.err(tok, "Cluster authorization does not allow multiple users")
        elif k == "token":
            m.err(tok, "Cluster authorization does not support tokens")
        elif k == "permissions":
            m.err(mt, '"cluster.authorization.permissions" is not implemented by Skiff: route import/export '
                      "permissions")
        else:
            m.unknown(mt, mk)


def _routes(m: "_Mapper", tok: Token) -> list[str]:
    urls = m.string_list(tok, "routes")
    for u in urls:
        p = urlsplit(u)
        if not p.scheme or not p.hostname:
            m.err(tok, f"error parsing route url [{u!r}]")
        elif p.scheme not in ("nats-route", "nats", "route", "tls"):
            m.err(tok, f'route url "{u}": scheme {p.scheme!r} is not implemented by Skiff (nats-route:// only)')
    return urls


def validate(m: "_Mapper") -> None:
    s = m.settings
    cl = s.get("cluster")
    if cl is None:
        return
    tok = cl.pop("_tok", None)
    if cl.get("port") and s.get("jetstream"):
        m.err(tok, JETSTREAM_REFUSED)
    accounts = cl.get("accounts")
    if accounts:
        # server.go validateOptions; opts.go setBaselineOptions: pinned accounts mean pooling, 3 by default
        cl.setdefault("pool_size", 3)
        if cl["pool_size"] < 0:
            m.err(tok, "pool_size cannot be negative if pinned accounts are specified")
        pinned = list(accounts)
        sys_acc = s.get("system_account") or ("" if s.get("no_system_account") else "$SYS")
        if sys_acc and sys_acc not in pinned:
            pinned.append(sys_acc)  # as nats-server lists them: the system account added before the check
        for i, a in enumerate(pinned):
            if a in pinned[:i]:
                listed = " ".join(f'"{x}"' for x in pinned)
                m.err(tok, f'found duplicate account name "{a}" in pinned accounts list [{listed}]')
                break
