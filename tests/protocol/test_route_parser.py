"""The route and leaf-node parser (protocol/route.py ``RouteParser``): the message forms, and the compiled scanner
(protocol/_speedups.c ``scan_rmsgs``) against the pure path.

The scanner takes every consecutive complete RMSG/LMSG/HMSG of a read and leaves everything else, every error
included, to the general Python path; so both parsers must hand the same messages and operations to the sink, in
the same order, for any input split at any points, stop at the same place when the sink pauses the parser (the
INFO that starts compression), and end in the same state.  Hypothesis draws byte streams of message lines near the
edges of the fast path's form (separators, sizes, line ends, reply and queue forms, argument counts) mixed with
other operations and stray bytes, for the three kinds of parser: a route (lines name their account), a route
dedicated to one account and a leaf connection (lines without the account).
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skiff.protocol import route as route_mod
from skiff.protocol.route import RouteParser

from .test_speedups import SAMPLE, compiled

KINDS = ("route", "bound", "leaf")


def make(kind: str, accelerated: bool, max_payload: int = 64 * 1024 * 1024) -> RouteParser:
    p = RouteParser(max_payload, leaf=kind == "leaf", accelerated=False)
    if accelerated:  # set here rather than by the constructor: also under SKIFF_PURE_PYTHON=1
        p._scan = compiled().scan_rmsgs
    if kind == "bound":
        p.bind_account("ACC")
    return p


class Sink:
    """What the parser reports; pauses the parser at an INFO (as a link starting compression does) and at a message
    whose payload is ``pause`` (so that a pause inside the scanner's run is seen too)."""

    def __init__(self, parser: RouteParser) -> None:
        self.parser = parser
        self.ops: list = []

    def on_rmsg(self, account, subject, reply, queues, hdr_len, data) -> None:
        assert type(account) is str and type(subject) is str and type(reply) is str
        assert type(queues) is tuple and all(type(q) is str for q in queues)
        assert type(hdr_len) is int and type(data) is bytes
        self.ops.append(("msg", account, subject, reply, queues, hdr_len, data))
        if data == b"pause":
            self.parser.pause()

    def on_route_op(self, op) -> None:
        self.ops.append((type(op).__name__, tuple(op)))
        if type(op).__name__ == "Info":
            self.parser.pause()


def run(kind: str, accelerated: bool, data: bytes, cuts: list[int], max_payload: int = 64 * 1024 * 1024):
    p = make(kind, accelerated, max_payload)
    sink = Sink(p)
    last = 0
    for cut in cuts + [len(data)]:
        p.parse(data[last:cut], sink)
        last = cut
        while p.paused:  # what a link then decompresses; here it is fed back as it is
            rest = p.resume()
            sink.ops.append(("resumed", rest))
            p.parse(rest, sink)
    return sink.ops, p.dead, bytes(p._buf), p._msg


# ----------------------------------------------------------------------------------------- the forms, by table
# (line, the message it is for a route parser: account, subject, reply, queues, hdr_len)
FORMS = [
    (b"RMSG $G foo 5\r\nhello\r\n", ("$G", "foo", "", (), 0)),
    (b"RMSG $G foo rep 5\r\nhello\r\n", ("$G", "foo", "rep", (), 0)),
    (b"RMSG $G foo + rep q1 5\r\nhello\r\n", ("$G", "foo", "rep", ("q1",), 0)),
    (b"RMSG $G foo + rep q1 q2 5\r\nhello\r\n", ("$G", "foo", "rep", ("q1", "q2"), 0)),
    (b"RMSG $G foo | q1 5\r\nhello\r\n", ("$G", "foo", "", ("q1",), 0)),
    (b"RMSG $G foo | q1 q2 q3 5\r\nhello\r\n", ("$G", "foo", "", ("q1", "q2", "q3"), 0)),
    (b"HMSG $G foo 2 5\r\nhello\r\n", ("$G", "foo", "", (), 2)),
    (b"HMSG $G foo rep 5 5\r\nhello\r\n", ("$G", "foo", "rep", (), 5)),
    (b"HMSG $G foo + rep q1 0 5\r\nhello\r\n", ("$G", "foo", "rep", ("q1",), 0)),
    (b"HMSG $G foo | q1 q2 2 5\r\nhello\r\n", ("$G", "foo", "", ("q1", "q2"), 2)),
    (b"RMSG ACC \xc3\xa9.\xff 000000000000000005\r\nhello\r\n", ("ACC", "\u00e9.\udcff", "", (), 0)),
    (b"RMSG $G  foo\trep \x0b5\r\r\nhello\r\n", ("$G", "foo", "rep", (), 0)),  # any whitespace, as split() reads it
]


@pytest.mark.parametrize("accelerated", [False, True], ids=["pure", "compiled"])
@pytest.mark.parametrize("line,want", FORMS)
def test_message_forms(line, want, accelerated):
    ops, dead, rest, pending = run("route", accelerated, line * 2, [])
    assert ops == [("msg", *want, b"hello")] * 2 and not dead and rest == b"" and pending is None


@pytest.mark.parametrize("accelerated", [False, True], ids=["pure", "compiled"])
def test_lines_without_the_account(accelerated):
    """A leaf connection's lines and a dedicated route's carry no account: the parser names it."""
    data = b"LMSG foo + rep q 5\r\nhello\r\nHMSG foo 2 5\r\nhello\r\nLS+ foo q 2\r\nLS- foo\r\n"
    ops, dead, _, _ = run("leaf", accelerated, data, [])
    assert ops == [("msg", "", "foo", "rep", ("q",), 0, b"hello"), ("msg", "", "foo", "", (), 2, b"hello"),
                   ("RSub", ("", "foo", "q", 2)), ("RUnsub", ("", "foo", ""))] and not dead
    data = b"RMSG foo rep 5\r\nhello\r\nRS+ foo\r\n"
    ops, dead, _, _ = run("bound", accelerated, data, [])
    assert ops == [("msg", "ACC", "foo", "rep", (), 0, b"hello"), ("RSub", ("ACC", "foo", "", 0))] and not dead
    # an RMSG on a leaf connection is an unknown operation
    ops, dead, _, _ = run("leaf", accelerated, b"RMSG $G foo 5\r\nhello\r\n", [])
    assert ops[-1][0] == "ProtocolError" and dead


@pytest.mark.parametrize("accelerated", [False, True], ids=["pure", "compiled"])
def test_a_long_queue_list(accelerated):
    """More queue groups than the compiled scanner takes in one line (32 arguments): the general path's message."""
    queues = tuple(f"q{i}" for i in range(40))
    line = b"RMSG $G foo + rep " + " ".join(queues).encode() + b" 5\r\nhello\r\n"
    ops, dead, _, _ = run("route", accelerated, line * 2, [])
    assert ops == [("msg", "$G", "foo", "rep", queues, 0, b"hello")] * 2 and not dead


BAD = [
    b"RMSG $G foo\r\nhello\r\n",  # no size
    b"RMSG $G foo x 5 5\r\nhello\r\n",  # a bad reply indicator
    b"RMSG $G foo + rep 5\r\nhello\r\n",  # "+" with a reply and no queue
    b"HMSG $G foo 6 5\r\nhello\r\n",  # header size over the size
    b"RMSG $G foo -5\r\nhello\r\n",
    b"RMSG $G foo 5\r\nhelloXY",  # payload not followed by CRLF
]


@pytest.mark.parametrize("accelerated", [False, True], ids=["pure", "compiled"])
@pytest.mark.parametrize("line", BAD)
def test_bad_message_lines_close_the_route(line, accelerated):
    ops, dead, _, _ = run("route", accelerated, b"RMSG $G a 1\r\nx\r\n" + line, [])
    assert ops[0] == ("msg", "$G", "a", "", (), 0, b"x")
    assert ops[-1][0] == "ProtocolError" and dead and len(ops) == 2


@pytest.mark.parametrize("accelerated", [False, True], ids=["pure", "compiled"])
def test_max_payload(accelerated):
    ops, dead, _, _ = run("route", accelerated, b"RMSG $G a 4\r\nxxxx\r\nRMSG $G a 5\r\nhello\r\n", [], 4)
    assert ops == [("msg", "$G", "a", "", (), 0, b"xxxx"),
                   ("ProtocolError", (route_mod.ERR_MAX_PAYLOAD, "RMSG payload over max_payload"))] and dead


# ------------------------------------------------------------------------------------------ compiled vs pure
SUBJECTS = [b"a", b"foo.bar", b"x" * 40, b"\xc3\xa9t\xc3\xa9", b"\xff\xfe", b"a\x00b", b"1", b"+", b"|", b"$G"]
REPLIES = [b"r", b"_INBOX.abc.1", b"12", b"\xf0\x9f\x98\x80", b"+", b"|"]
QUEUES = [b"q", b"q2", b"\xff", b"workers.x"]
SEPS = [b"\t", b"  ", b"\r", b"\n", b" \t", b"\x0b", b"\x0c", b"\x00"]  # each instead of one space
EOLS = [b"\n", b"\r\r\n", b" \r\n", b"\rx\n", b"\r", b"\n\r"]  # instead of CRLF after the line
PAYLOADS = [b"", b"x", b"hello", b"a b\r\nc", b"\x00\xff" * 3, b"RMSG $G a 1\r\nx\r\n", b"pause"]
TAILS = [b"\n", b"x\r\n", b"\r", b""]  # instead of CRLF after the payload
OTHER = [b"PING\r\n", b"PONG\r\n", b"RS+ $G a\r\n", b"RS+ $G a q 3\r\n", b"RS- $G a\r\n", b"LS+ a\r\n", b"LS- a q\r\n",
         b"+OK\r\n", b"INFO {}\r\n", b"CONNECT {}\r\n", b"-ERR 'x'\r\n", b"rmsg $G a 1\r\nx\r\n",
         b"Hmsg $G a 0 1\r\nx\r\n", b"RMS", b"HMS", b"R", b"H", b"XYZ\r\n", b"LMSG a 1\r\nx\r\n", b"RMSG\r\n",
         b"RMSG \r\n"]


def size_variants(n: int) -> list[bytes]:
    return [b"%d" % (n + 1), b"%d" % max(n - 1, 0), b"0%d" % n, b"%018d" % n, b"%019d" % n, b"-%d" % n, b"+%d" % n,
            b"%dx" % n, b"", b"9" * 18, b"9" * 19, b"\xd9"]


@st.composite
def message(draw) -> bytes:
    """A message in the fast path's form for some parser kind, or (one time in two) with one thing changed."""
    hmsg = draw(st.booleans())
    payload = draw(st.sampled_from(PAYLOADS))
    hdr = draw(st.sampled_from([b"", b"NATS/1.0\r\n\r\n"])) if hmsg else b""
    data = hdr + payload
    fields = [b"$G"] if draw(st.booleans()) else []  # a line with or without its account
    fields.append(draw(st.sampled_from(SUBJECTS)))
    form = draw(st.sampled_from(["none", "reply", "+", "|"]))
    if form == "reply":
        fields.append(draw(st.sampled_from(REPLIES)))
    elif form != "none":
        if form == "+":
            fields += [b"+", draw(st.sampled_from(REPLIES))]
        else:
            fields.append(b"|")
        fields += draw(st.lists(st.sampled_from(QUEUES), min_size=1, max_size=3))
    fields += ([b"%d" % len(hdr)] if hmsg else []) + [b"%d" % len(data)]
    seps = [b" "] * len(fields)
    word = b"HMSG" if hmsg else draw(st.sampled_from([b"RMSG", b"LMSG"]))
    eol, tail = b"\r\n", b"\r\n"
    change = draw(st.sampled_from(["none"] * 7 + ["sep", "eol", "tail", "size", "hdr", "fields", "case"]))
    if change == "sep":
        seps[draw(st.integers(0, len(seps) - 1))] = draw(st.sampled_from(SEPS + [b"\r\n"]))
    elif change == "eol":
        eol = draw(st.sampled_from(EOLS))
    elif change == "tail":
        tail = draw(st.sampled_from(TAILS))
    elif change == "size":
        fields[-1] = draw(st.sampled_from(size_variants(len(data))))
    elif change == "hdr" and hmsg:
        fields[-2] = draw(st.sampled_from(size_variants(len(hdr)) + [b"%d" % (len(data) + 1)]))
    elif change == "fields":
        if draw(st.booleans()):
            fields.insert(draw(st.integers(0, len(fields))), draw(st.sampled_from(REPLIES + [b"+", b"|"])))
        else:
            del fields[draw(st.integers(0, len(fields) - 1))]
        seps = [b" "] * len(fields)
    elif change == "case":
        word = draw(st.sampled_from([word.lower(), word.capitalize()]))
    return word + b"".join(sep + f for sep, f in zip(seps, fields)) + eol + data + tail


chunk = st.one_of(message(), message(), message(), st.sampled_from(OTHER), st.binary(max_size=4))


@st.composite
def stream(draw) -> tuple[bytes, list[int]]:
    data = b"".join(draw(st.lists(chunk, min_size=1, max_size=12)))
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=6)))
    return data, cuts


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream(), st.sampled_from(KINDS), st.one_of(st.just(64 * 1024 * 1024), st.integers(0, 20)))
def test_compiled_and_pure_route_parsers_agree(case, kind, max_payload):
    data, cuts = case
    assert run(kind, True, data, cuts, max_payload) == run(kind, False, data, cuts, max_payload)


def test_the_generator_reaches_both_paths():
    """The streams hold messages the fast path takes (queue forms and HMSG among them) and lines it must leave to the
    general path, for each kind of parser, or the agreement above would say little.  (A stream ends at its first
    error, and a line is of the right form for one kind of parser out of three, hence the modest counts.)"""
    counts = {"plain": 0, "forms": 0, "errors": 0}

    @SAMPLE
    @given(stream())
    def sample(drawn):
        ops = [op for kind in KINDS for op in run(kind, False, drawn[0], [])[0]]
        counts["plain"] += sum(1 for op in ops if op[0] == "msg" and not op[4] and not op[5])
        counts["forms"] += sum(1 for op in ops if op[0] == "msg" and (op[4] or op[5]))
        counts["errors"] += sum(1 for op in ops if op[0] == "ProtocolError")

    sample()
    assert counts["plain"] > 50 and counts["forms"] > 30 and counts["errors"] > 30, counts


@pytest.mark.parametrize("line,want", FORMS)
def test_the_scanner_takes_every_message_of_the_fast_path_form(line, want):
    """Agreement alone cannot see a scanner that takes too little (the general path would answer the same, more
    slowly): here it must take every message of every form, up to max_payload exactly, and leave them past it."""
    scan_rmsgs = compiled().scan_rmsgs
    p = make("route", True)
    sink = Sink(p)
    data = line * 3
    assert scan_rmsgs(p._stop, data, 0, b"RMSG", None, 5, sink.on_rmsg) == len(data)
    assert scan_rmsgs(p._stop, data, len(line), b"RMSG", None, 5, sink.on_rmsg) == len(data)  # from a position
    assert len(sink.ops) == 5 and all(op == ("msg", *want, b"hello") for op in sink.ops)
    assert scan_rmsgs(p._stop, data, 0, b"RMSG", None, 4, sink.on_rmsg) == 0  # over max_payload: the general path's -ERR
    assert scan_rmsgs(p._stop, data[:-1], 0, b"RMSG", None, 5, sink.on_rmsg) == 2 * len(line)  # incomplete
    assert scan_rmsgs(p._stop, data, 0, b"LMSG", None, 5, sink.on_rmsg) == (len(data) if line[0] == 72 else 0)


def test_the_scanner_stops_when_the_parser_is_paused():
    scan_rmsgs = compiled().scan_rmsgs
    p = make("route", True)
    sink = Sink(p)
    data = b"RMSG $G a 1\r\nx\r\nRMSG $G a 5\r\npause\r\nRMSG $G a 1\r\ny\r\n"
    assert scan_rmsgs(p._stop, data, 0, b"RMSG", None, 100, sink.on_rmsg) == data.index(b"RMSG $G a 1\r\ny")
    assert p.paused and len(sink.ops) == 2


def test_the_route_parser_uses_the_compiled_scanner():
    from skiff.protocol import accel

    assert (RouteParser()._scan is compiled().scan_rmsgs) is not accel.PURE_FORCED
    assert RouteParser(accelerated=False)._scan is None
