"""The ``cluster { }`` block, key by key as nats-server reads it (server/opts.go parseCluster).

Every key nats-server reads is implemented here or refused with its ``file:line:col`` through the ``CLUSTER`` table
of support.py.  The block becomes ``settings["cluster"]``, a dict of ``ClusterOptions`` fields (server/options.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from skiff.server.conf import support
from skiff.server.conf.values import Token, format_duration, parse_duration

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
        elif k == "compression":
            out["compression_rtts"] = rtts = []
            out["compression"] = compression(m, mt, mk, "s2_fast", rtts)
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


#: server.go validateAndNormalizeCompressionOption: the spellings nats-server takes for each mode
_MODES = {"not supported": "not supported", "not_supported": "not supported", "disabled": "off", "off": "off",
          "false": "off", "accept": "accept", "auto": "s2_auto", "s2_auto": "s2_auto", "fast": "s2_fast",
          "s2_fast": "s2_fast", "better": "s2_better", "s2_better": "s2_better", "best": "s2_best",
          "s2_best": "s2_best"}


def compression(m: "_Mapper", tok: Token, key: str, on_mode: str, rtts: list | None = None) -> str:
    """opts.go parseCompression and validateAndNormalizeCompressionOption: a mode name, a boolean (``true`` is
    ``on_mode``) or ``{ mode, rtt_thresholds }``; the mode normalized as nats-server does.  For ``s2_auto``,
    ``rtts`` gets the RTT thresholds in seconds at which the level changes, checked as nats-server checks them when
    it starts."""
    v = tok.value
    given: list[float] = []
    given_tok = tok
    if isinstance(v, bool):
        return on_mode if v else "off"
    if isinstance(v, dict):
        mode = ""
        for mk, mt in v.items():
            k = mk.lower()
            if k == "mode":
                mode = m.expect(mt, str, mk)
            elif k in ("rtt_thresholds", "thresholds", "rtts", "rtt"):
                given_tok = mt
                for it in m.expect(mt, list, mk):
                    try:
                        given.append(parse_duration(it.value if isinstance(it, Token) else it))
                    except ValueError as e:
                        m.err(mt, str(e))
                        return "off"
            else:
                m.err(mt, f'unknown field "{mk}"')
        v = mode
    if not isinstance(v, str):
        m.err(tok, f'field "{key}" should be a boolean or a structure, got {_go_type(v)}')
        return "off"
    low = v.lower()
    if low in ("on", "enabled", "true"):
        low = on_mode
    if low not in _MODES:
        m.err(tok, f'unsupported compression mode "{v}"')
        return "off"
    if _MODES[low] == "s2_auto" and rtts is not None:
        err = _auto_thresholds(v, given, rtts)
        if err:
            m.err(given_tok, err)
    return _MODES[low]


def _auto_thresholds(mode: str, given: list[float], out: list) -> str:
    """validateAndNormalizeCompressionOption for s2_auto: negative values are 0 (a level not used), the others
    ascending, trailing zeros dropped, 1 to 4 left; ``out`` gets them (none given: nothing, the links use
    nats-server's defaults, core/link.py AUTO_THRESHOLDS), or the error in nats-server's words."""
    if not given:
        return ""
    listed = "[" + " ".join(format_duration(g) for g in given) + "]"
    rtts: list[float] = []
    for n in given:
        n = max(n, 0.0)
        if rtts and n != 0 and any(n < x for x in rtts):
            return f"RTT threshold values {listed} should be in ascending order"
        rtts.append(n)
    while rtts and rtts[-1] == 0:
        rtts.pop()
    if len(rtts) > 4:
        return f'compression mode "{mode}" should have no more than 4 RTT thresholds: {listed}'
    if not rtts:
        return f'compression mode "{mode}" requires at least one RTT threshold'
    out.extend(rtts)
    return ""


def _go_type(v: Any) -> str:
    return {int: "int64", float: "float64", list: "[]interface {}"}.get(type(v), type(v).__name__)
