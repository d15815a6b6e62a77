"""The compiled helpers (protocol/_speedups.c) against their pure-Python twins: the PUB/HPUB scanner against the
parser's fast path (protocol/parser.py), msg_parts against protocol/encoder.py's.

The compiled scanner must take exactly the lines the pure fast path takes and leave everything else to the general
path, so the two parsers must hand the same operations to the sink, in the same order, for any input split at any
points, with the same counts, and stop at the same place when the sink closes.  Hypothesis draws byte streams built
from PUB/HPUB lines near the edges of the fast path's form (separators, sizes, line ends, limits) mixed with other
operations and stray bytes.  The other tests: the extension is really what the suite runs (so a build that lost it
cannot pass unnoticed), and SKIFF_PURE_PYTHON=1 turns it off.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from skiff.protocol import encoder
from skiff.protocol import parser as parser_mod
from skiff.protocol.parser import Parser, ProtocolError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOT_BUILT = ("skiff.protocol._speedups is not built in this checkout: `make setup` (the editable install compiles it) "
             "or `python setup.py build_ext --inplace`")

# A survey of what a strategy draws (tests "the generator reaches ..."): 300 draws without shrinking or the example
# database, the same draws every run: 4 s for both such tests here, where 300 calls of Strategy.example() (meant for
# the console) took 26 s.
SAMPLE = settings(max_examples=300, phases=[Phase.generate], derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))


def compiled():
    """The extension module; a failure, not a skip, where it is missing but could be built: the suite must test both
    paths.  Only a machine with no C compiler at all (where the install rightly went on without it, and the README's
    ``make test`` could not install one: not root) skips, saying why, as the other tests that need system packages."""
    try:
        from skiff.protocol import _speedups
    except ImportError:
        if not any(shutil.which(cc) for cc in ("cc", "gcc", "clang")):
            pytest.skip("no C compiler on this machine: the optional accelerator is not built, the pure path runs")
        pytest.fail(NOT_BUILT)
    return _speedups

SUBJECTS = [b"a", b"foo.bar", b"x" * 40, b"\xc3\xa9t\xc3\xa9", b"\xff\xfe", b"a\x0bb", b"a\x00b", b"a\rb", b"1", b"$JS.API.INFO"]
REPLIES = [b"r", b"_INBOX.abc.1", b"12", b"\xf0\x9f\x98\x80"]
SEPS = [b"\t", b"  ", b"\r", b"\n", b" \t", b"\x0b", b"\t "]  # each instead of the one space
EOLS = [b"\n", b"\r\r\n", b" \r\n", b"\rx\n", b"\r"]  # instead of CRLF after the line
PAYLOADS = [b"", b"x", b"hello", b"a b\r\nc", b"\x00\xff" * 3, b"PUB a 1\r\nx\r\n"]
TAILS = [b"\n", b"x\r\n", b"\r", b""]  # instead of CRLF after the payload
OTHER = [b"PING\r\n", b"PONG\r\n", b"SUB a 1\r\n", b"UNSUB 1\r\n", b"+OK\r\n", b"CONNECT {}\r\n", b"INFO {}\r\n",
         b"pub a 1\r\nx\r\n", b"Hpub a 0 1\r\nx\r\n", b"PU", b"HPU", b"H", b"P", b"-ERR 'x'\r\n", b"XYZ\r\n"]


def size_variants(n: int) -> list[bytes]:
    """A size as a client might write it, near the edge of what the fast path takes (1-18 ASCII digits)."""
    return [b"%d" % (n + 1), b"%d" % max(n - 1, 0), b"0%d" % n, b"%018d" % n, b"%019d" % n, b"-%d" % n, b"+%d" % n,
            b"%dx" % n, b"", b"9" * 18, b"9" * 19, b"\xd9"]


@st.composite
def pub(draw) -> bytes:
    """A PUB or HPUB in the fast path's own form, or (one time in two) with exactly one thing changed: a separator,
    the line end, the end of the payload, one size, the number of fields, the op word's case."""
    hpub = draw(st.booleans())
    payload = draw(st.sampled_from(PAYLOADS))
    hdr = draw(st.sampled_from([b"", b"NATS/1.0\r\n\r\n", b"NATS/1.0\r\nA: b\r\n\r\n"])) if hpub else b""
    data = hdr + payload
    fields = [draw(st.sampled_from(SUBJECTS))] + ([draw(st.sampled_from(REPLIES))] if draw(st.booleans()) else [])
    fields += ([b"%d" % len(hdr)] if hpub else []) + [b"%d" % len(data)]
    seps = [b" "] * len(fields)
    word, eol, tail = (b"HPUB" if hpub else b"PUB"), b"\r\n", b"\r\n"
    change = draw(st.sampled_from(["none"] * 7 + ["sep", "eol", "tail", "size", "hdr", "fields", "case"]))
    if change == "sep":
        seps[draw(st.integers(0, len(seps) - 1))] = draw(st.sampled_from(SEPS + [b"\r\n", b"\x00"]))
    elif change == "eol":
        eol = draw(st.sampled_from(EOLS + [b"\r\r", b"\n\r"]))
    elif change == "tail":
        tail = draw(st.sampled_from(TAILS))
    elif change == "size":
        fields[-1] = draw(st.sampled_from(size_variants(len(data))))
    elif change == "hdr" and hpub:
        fields[-2] = draw(st.sampled_from(size_variants(len(hdr)) + [b"%d" % (len(data) + 1)]))
    elif change == "fields":
        if draw(st.booleans()):
            fields.insert(1, draw(st.sampled_from(REPLIES)))
        else:
            del fields[draw(st.integers(0, len(fields) - 1))]
        seps = [b" "] * len(fields)
    elif change == "case":
        word = draw(st.sampled_from([word.lower(), word.capitalize(), b"P" + word[1:].lower()]))
    return word + b"".join(sep + f for sep, f in zip(seps, fields)) + eol + data + tail


chunk = st.one_of(pub(), pub(), pub(), st.sampled_from(OTHER), st.binary(max_size=4))


@st.composite
def stream(draw) -> tuple[bytes, list[int]]:
    data = b"".join(draw(st.lists(chunk, min_size=1, max_size=12)))
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=6)))
    return data, cuts


class Sink:
    """Records everything and closes after ``close_after`` operations (a client closed mid-read), if given."""

    def __init__(self, close_after: int | None) -> None:
        self.ops: list = []
        self.closed = False
        self.close_after = close_after

    def _got(self, op) -> None:
        self.ops.append(op)
        if self.close_after is not None and len(self.ops) >= self.close_after:
            self.closed = True

    def on_pub(self, subject, reply, hdr_len, data) -> None:
        assert type(subject) is str and type(reply) is str and type(hdr_len) is int and type(data) is bytes
        self._got(("pub", subject, reply, hdr_len, data))

    def on_op(self, op) -> None:
        self._got(op)


def run(accelerated: bool, data: bytes, cuts: list[int], mcl: int, maxp: int, close_after: int | None):
    p = Parser(max_control_line=mcl, max_payload=maxp, accelerated=False)
    if accelerated:  # set here rather than by the constructor: also under SKIFF_PURE_PYTHON=1
        p._scan = compiled().scan_pubs
    sink = Sink(close_after)
    last = 0
    for cut in cuts + [len(data)]:
        if sink.closed:
            break
        p.parse(data[last:cut], sink)
        last = cut
    return sink.ops, p.msgs, p.bytes, p._dead, bytes(p._buf)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream(), st.one_of(st.just(4096), st.integers(2, 30)), st.one_of(st.just(1024 * 1024), st.integers(0, 20)),
       st.one_of(st.none(), st.none(), st.integers(1, 8)))
def test_compiled_and_pure_parsers_agree(case, mcl, maxp, close_after):
    data, cuts = case
    pure = run(False, data, cuts, mcl, maxp, close_after)
    compiled = run(True, data, cuts, mcl, maxp, close_after)
    assert compiled == pure


def test_the_generator_reaches_both_paths():
    """The streams hold lines the fast path takes and lines it must leave to the general path, or the agreement
    above would say little."""
    counts = {"fast": 0, "general": 0}

    @SAMPLE
    @given(stream())
    def sample(drawn):
        ops = Parser(accelerated=False).feed(drawn[0])
        counts["fast"] += sum(1 for op in ops if type(op) is parser_mod.Pub)
        counts["general"] += sum(1 for op in ops if type(op) is ProtocolError)

    sample()
    assert counts["fast"] > 100 and counts["general"] > 30, counts


def test_the_extension_is_built_and_used():
    """The suite's interpreter has the compiled scanner (``make test`` builds it with the editable install; in a
    checkout: ``python setup.py build_ext --inplace``), and a Parser takes it unless SKIFF_PURE_PYTHON is set."""
    from skiff.protocol import accel

    _speedups = compiled()
    assert _speedups.__file__.startswith(os.path.join(ROOT, "protocol")), _speedups.__file__
    assert accel.PURE_FORCED is (os.environ.get("SKIFF_PURE_PYTHON", "") not in ("", "0"))
    assert parser_mod.ACCELERATED is not accel.PURE_FORCED
    assert (Parser()._scan is _speedups.scan_pubs) is not accel.PURE_FORCED
    assert (encoder.msg_parts is _speedups.msg_parts) is not accel.PURE_FORCED
    assert Parser(accelerated=False)._scan is None


@pytest.mark.parametrize("value,accelerated", [("1", False), ("0", True), ("", True)])
def test_skiff_pure_python_environment_variable(value, accelerated):
    """SKIFF_PURE_PYTHON=1 gives the pure path in a fresh interpreter (a server process reads it at start-up)."""
    env = dict(os.environ, SKIFF_PURE_PYTHON=value)
    code = ("from skiff.protocol.parser import ACCELERATED, Parser\n"
            "try:\n    Parser(accelerated=True); insisted = 'ok'\nexcept ImportError:\n    insisted = 'ImportError'\n"
            "from skiff.protocol import encoder\n"
            "print(ACCELERATED, Parser()._scan is not None, insisted, encoder.msg_parts is not encoder.pure_msg_parts)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    want = "True True ok True" if accelerated else "False False ImportError False"
    assert r.stdout.split() == want.split()


@pytest.mark.parametrize("line", [b"PUB a 5\r\nhello\r\n", b"PUB a r 5\r\nhello\r\n", b"HPUB a 2 5\r\nhello\r\n",
                                  b"HPUB a r 5 5\r\nhello\r\n", b"PUB \xff.b 000000000000000005\r\nhello\r\n",
                                  b"HPUB a\x0b 000000000000000000 5\r\nhello\r\n",
                                  # nats-py without a reply ("PUB <subject>  <size>", protocol/command.py pub_cmd),
                                  # and runs of spaces between fields: max_control_line counts them
                                  b"PUB a  5\r\nhello\r\n", b"HPUB a  2 5\r\nhello\r\n",
                                  b"PUB a   r  5\r\nhello\r\n", b"HPUB a  r   2  5\r\nhello\r\n"])
def test_the_scanner_takes_every_line_of_the_fast_path_form(line):
    """Agreement alone cannot see a scanner that takes too little (the general path would answer the same, more
    slowly): here it must take every message of the form up to the limits exactly, and leave them past them."""
    scan_pubs = compiled().scan_pubs
    arg_len = line.index(b"\r\n") - line.index(b" ") - 1
    data = line * 3
    p = Parser()  # holds the counts; the scanner is called directly
    sink = Sink(None)
    assert scan_pubs(p, data, 0, 5, arg_len, sink.on_pub, sink) == len(data)
    assert len(sink.ops) == 3 and (p.msgs, p.bytes) == (3, 15)
    assert scan_pubs(p, data, len(line), 5, arg_len, sink.on_pub, sink) == len(data)  # from a position
    assert scan_pubs(p, data, 0, 4, arg_len, sink.on_pub, sink) == 0  # over max_payload: the general path's -ERR
    assert scan_pubs(p, data, 0, 5, arg_len - 1, sink.on_pub, sink) == 0  # over max_control_line: the same
    assert scan_pubs(p, data[:-1], 2 * len(line), 5, arg_len, sink.on_pub, sink) == 2 * len(line)  # incomplete
    assert len(sink.ops) == 5 and (p.msgs, p.bytes) == (5, 25)


text = st.text(st.characters(blacklist_categories=("Cs",)) | st.sampled_from(["\udc80", "\udcff", "\ud800"]),
               max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(text | st.sampled_from(["foo", "foo.bar", "$JS.ACK.x"]), text | st.just(""),
                          st.integers(0, 70000) | st.just(0), st.integers(0, 2 ** 32 - 1)), min_size=1, max_size=20))
def test_msg_parts_agrees_with_the_pure_one(calls):
    """The same head and tail for any subject, reply (lone surrogates stand for bytes that were not UTF-8: the parser
    decodes with surrogateescape), header size and size; called repeatedly, so the caches are exercised too.  Sizes
    stay below 2**32: the pure one's tail cache keys (hdr_len << 32 | size) assume it, and a payload is at most
    max_payload, an int32 (server/conf/mapping.py: "max_payload value is too big", as nats-server says)."""
    msg_parts = compiled().msg_parts
    for args in calls + calls:
        try:
            want = encoder.pure_msg_parts(*args)
        except UnicodeEncodeError:  # a surrogate surrogateescape cannot write: both refuse
            with pytest.raises(UnicodeEncodeError):
                msg_parts(*args)
            continue
        assert msg_parts(*args) == want, args


def test_msg_parts_right_past_the_head_cache_bound():
    """The head cache is cleared when full (8,192 subjects): the answers stay right across the clears."""
    msg_parts = compiled().msg_parts
    for i in range(20000):
        assert msg_parts(f"s.{i}", "", 0, 1) == (b"MSG s.%d " % i, b" 1\r\n")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.binary(min_size=4, max_size=4), st.integers(0, 2 ** 40))
def test_unmask_agrees_with_the_pure_one(data, key, pos):
    """A WebSocket client frame's payload unmasked (protocol/websocket.py): the compiled XOR, eight bytes at a time
    with a byte tail, gives the pure big-int one's bytes for any length, key and mask offset (a frame's payload
    arrives in pieces, each starting where the previous one left the key)."""
    from skiff.protocol import websocket as wsp

    unmask = compiled().unmask
    want = wsp._unmask_py(data, key, pos)
    assert unmask(data, key, pos) == want
    assert unmask(want, key, pos) == data  # XOR twice is the identity
    assert unmask(data, key, pos + 1) == wsp._unmask_py(data, key, pos + 1)  # the next piece of the same frame


def test_unmask_refuses_what_the_pure_one_cannot_take():
    unmask = compiled().unmask
    with pytest.raises(TypeError):
        unmask(b"abc", b"123", 0)  # a mask key is 4 bytes
    with pytest.raises(TypeError):
        unmask("abc", b"1234", 0)


def test_websocket_reader_uses_the_compiled_unmask():
    from skiff.protocol import accel
    from skiff.protocol import websocket as wsp

    assert (wsp._unmask is compiled().unmask) is not accel.PURE_FORCED
