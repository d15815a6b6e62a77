"""NATS header blocks (ADR-4): ``NATS/1.0[ <code>[ <text>]]\\r\\n`` then ``Key: Value\\r\\n`` lines, then ``\\r\\n``.

nats-server looks headers up case-sensitively, first match, the key at a line start directly followed by ``:``,
leading spaces of the value skipped and nothing else trimmed (server/client.go getHeader, sliceHeader).
``get_exact``, ``nats_values`` + ``text`` and ``id_values`` read exactly that, so that Skiff reads ``Nats-Msg-Id``
and the other keys of a JetStream publish as the Go server does; ``get`` also trims tabs and trailing blanks.
"""
from __future__ import annotations

import re

HDR_LINE = b"NATS/1.0"


_NEEDLES: dict[str, bytes] = {}  # key -> b"\r\n<key>:", for the few dozen keys the server looks up


def _value_at(hdr: bytes, key: str) -> tuple[int, int] | None:
    """Where the first value of ``key`` lies in ``hdr`` (start after the colon, end of line), or None."""
    if not hdr:
        return None
    k = _NEEDLES.get(key)
    if k is None:
        k = b"\r\n" + key.encode() + b":"
        if len(_NEEDLES) < 256:
            _NEEDLES[key] = k
    i = hdr.find(k)
    if i < 0:
        return None
    i += len(k)
    j = hdr.find(b"\r\n", i)
    return i, (j if j >= 0 else len(hdr))


# A ``Nats-*`` key at a line start, up to its colon, and its value: leading spaces skipped as nats-server sliceHeader
# does (not tabs), then everything up to the next CRLF (a lone CR or LF belongs to the value, as in sliceHeader).  A
# match can only begin at a CRLF and its value stops before the next one, so the matches never overlap a line that
# ``get_exact`` would find (tests/protocol/test_headers.py holds the two side by side).
# (The value is written as runs of [^\r] so that the engine repeats one character class, not an alternation.)
_NATS_FIELD = re.compile(rb"\r\n(Nats-[^\r\n:]*): *([^\r]*(?:\r(?!\n)[^\r]*)*)")


def nats_values(hdr: bytes) -> dict[bytes, bytes]:
    """The first raw value of every ``Nats-*`` key of a header block, one scan (the publish checks of
    stream_publish.py and publish_checks.py read a dozen of them per message, most absent).
    ``text(nats_values(hdr)[key])`` is ``get_exact(hdr, key)`` (nats-server getHeader) for each of them; a key not in
    the dict is one it does not find."""
    if not hdr:
        return {}
    found = _NATS_FIELD.findall(hdr)
    values = dict(found)
    if len(values) != len(found):
        values = dict(reversed(found))  # a repeated key: the first wins, as in get
    return values


_ID_KEY = b"Nats-Msg-Id:"
_STREAM_KEY = b"Nats-Expected-Stream:"


def id_values(hdr: bytes) -> tuple[bytes | None, bytes | None] | None:
    """The raw values of ``Nats-Msg-Id`` and ``Nats-Expected-Stream`` (None for an absent one) of a header block that
    holds nothing else: no status, one or both of these lines, each once, and ``Nats-`` nowhere else in it (so no
    other key, and no value that a substring test for a key could take for one).  That is every JetStream publish of
    the Spark connector and of the clients' ``publish(msg_id=...)``; None for any other block, which then takes
    :func:`nats_values`.  When it is not None, ``nats_values(hdr)`` is exactly these keys with these values
    (tests/protocol/test_headers.py holds the two side by side), without the regular expression and the dict."""
    if hdr[:10] != b"NATS/1.0\r\n" or hdr[-4:] != b"\r\n\r\n":
        return None
    n = hdr.count(b"Nats-")
    if n == 1:
        line = hdr[10:-4]
        if b"\r\n" in line:
            return None
        if line[:12] == _ID_KEY:
            return line[12:].lstrip(b" "), None
        if line[:21] == _STREAM_KEY:
            return None, line[21:].lstrip(b" ")
        return None
    if n != 2:
        return None
    first, sep, second = hdr[10:-4].partition(b"\r\n")
    if b"\r\n" in second:
        return None
    if first[:12] == _ID_KEY and second[:21] == _STREAM_KEY:
        return first[12:].lstrip(b" "), second[21:].lstrip(b" ")
    if first[:21] == _STREAM_KEY and second[:12] == _ID_KEY:
        return second[12:].lstrip(b" "), first[21:].lstrip(b" ")
    return None


def text(raw: bytes) -> str:
    """A raw value of :func:`nats_values` or :func:`id_values` as :func:`get_exact` returns it."""
    return raw.decode("utf-8", "surrogateescape")


def get(hdr: bytes, key: str) -> str | None:
    """The first value of ``key`` in a raw header block, or None."""
    at = _value_at(hdr, key)
    if at is None:
        return None
    return hdr[at[0]:at[1]].lstrip(b" \t").decode("utf-8", "surrogateescape").rstrip(" \t")


def get_exact(hdr: bytes, key: str) -> str | None:
    """nats-server sliceHeader/getHeader, exactly: the first ``key`` at a line start followed by ``:``, leading
    *spaces* skipped, nothing trimmed at the end (``@every 1s `` is an invalid schedule there, ``5 `` no number).
    :func:`get` also trims tabs and trailing blanks, which would accept what nats-server refuses."""
    at = _value_at(hdr, key)
    if at is None:
        return None
    return hdr[at[0]:at[1]].lstrip(b" ").decode("utf-8", "surrogateescape")


def parse(hdr: bytes) -> tuple[int, str, list[tuple[str, str]]]:
    """(status code or 0, status text, [(key, value), ...]) of a header block."""
    if not hdr:
        return 0, "", []
    lines = hdr.decode("utf-8", "surrogateescape").split("\r\n")
    first = lines[0]
    code, text = 0, ""
    rest = first[len("NATS/1.0") :].strip()
    if rest:
        parts = rest.split(" ", 1)
        if parts[0].isdigit():
            code = int(parts[0])
            text = parts[1] if len(parts) > 1 else ""
    items = []
    for line in lines[1:]:
        if not line:
            continue
        k, sep, v = line.partition(":")
        if sep:
            items.append((k, v.lstrip(" \t")))
    return code, text, items


def build(items=(), status: int = 0, text: str = "") -> bytes:
    """A header block from (key, value) pairs (a dict or a list for repeated keys)."""
    if isinstance(items, dict):
        items = items.items()
    first = HDR_LINE
    if status:
        first += b" %d" % status
        if text:
            first += b" " + text.encode()
    out = [first]
    for k, v in items:
        out.append(k.encode() + b": " + str(v).encode("utf-8", "surrogateescape"))
    return b"\r\n".join(out) + b"\r\n\r\n"


def set_values(hdr: bytes, updates: dict[str, str]) -> bytes:
    """Return ``hdr`` with each key in ``updates`` set (replacing existing values, others kept in order)."""
    code, text, items = parse(hdr)
    items = [(k, v) for k, v in items if k not in updates]
    items.extend(updates.items())
    return build(items, code, text)


def replace_value(hdr: bytes, key: str, value: str) -> bytes:
    """nats-server stream.go setHeader: the first value of ``key`` replaced where it stands (one space after the
    colon kept), the other lines byte for byte; ``hdr`` unchanged when the key is absent."""
    at = _value_at(hdr, key)
    if at is None:
        return hdr
    start, end = at
    if hdr[start:start + 1] == b" ":
        start += 1
    return hdr[:start] + value.encode("utf-8", "surrogateescape") + hdr[end:]


def remove(hdr: bytes, *keys: str) -> bytes:
    code, text, items = parse(hdr)
    kept = [(k, v) for k, v in items if k not in keys]
    if not kept and not code:
        return b""
    return build(kept, code, text)


def strip(hdr: bytes, keys: tuple[str, ...] = (), prefixes: tuple[str, ...] = ()) -> bytes:
    """Remove lines by key or key prefix, keeping the rest byte for byte (nats-server removeHeaderIfPresent /
    removeHeaderIfPrefixPresent); nothing left but the status line -> no header."""
    if not hdr:
        return hdr
    lines = hdr.split(b"\r\n")
    out = [lines[0]]
    for line in lines[1:]:
        if line:
            key = line.split(b":", 1)[0].decode("utf-8", "surrogateescape")
            if key in keys or key.startswith(prefixes):
                continue
        out.append(line)
    res = b"\r\n".join(out)
    return b"" if res == b"NATS/1.0\r\n\r\n" else res


def append(hdr: bytes, key: str, value: str) -> bytes:
    """nats-server genHeader: append ``key: value`` to a header block (or start one)."""
    line = key.encode() + b": " + value.encode("utf-8", "surrogateescape") + b"\r\n\r\n"
    if len(hdr) <= 2:
        return b"NATS/1.0\r\n" + line
    return hdr[:-2] + line


def accept_encoding(value: str) -> str:
    """The compression an ``Accept-Encoding`` value asks of a system reply or a trace event (events.go
    getAcceptEncoding): snappy (or s2) first, then gzip; "" for anything else."""
    v = value.lower()
    if "snappy" in v or "s2" in v:
        return "snappy"
    if "gzip" in v:
        return "gzip"
    return ""
