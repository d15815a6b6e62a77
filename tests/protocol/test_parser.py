"""The sans-IO parser: every operation, every input split at every byte, and malformed input (nats-server parser.go).

Every test runs twice: on the compiled PUB/HPUB scanner (protocol/_speedups.c) and on the pure-Python fast path."""
import pytest

from skiff.protocol import parser as parser_mod
from skiff.protocol.parser import (
    ERR_MAX_CONTROL_LINE,
    ERR_MAX_PAYLOAD,
    ERR_UNKNOWN_OP,
    OK,
    PING,
    PONG,
    Connect,
    Err,
    Info,
    Parser,
    ProtocolError,
    Pub,
    Sub,
    Unsub,
    split_args,
)



@pytest.fixture(autouse=True, params=["compiled", "pure"])
def implementation(request, monkeypatch):
    """The fast path every Parser() of the test takes.  "compiled" fails where the extension was not built (and
    ignores SKIFF_PURE_PYTHON): the suite must not quietly test one implementation only."""
    if request.param == "pure":
        monkeypatch.setattr(parser_mod, "scan_pubs", None)
    else:
        from tests.protocol.test_speedups import compiled

        monkeypatch.setattr(parser_mod, "scan_pubs", compiled().scan_pubs)
    return request.param


# (input, expected operations): one table, run whole and split at every byte.
CASES = [
    (b"PING\r\n", [PING]),
    (b"PONG\r\n", [PONG]),
    (b"ping\r\npong\r\n", [PING, PONG]),
    (b"PING\n", [PING]),  # bare LF is tolerated
    (b"PINGgarbage\r\n", [PING]),  # nats-server ignores bytes after PING up to the newline
    (b"+OK\r\n", [OK]),
    (b'CONNECT {"verbose":false}\r\n', [Connect(b'{"verbose":false}')]),
    (b"CONNECT\t{}\r\n", [Connect(b"{}")]),
    (b"INFO {}\r\n", [Info(b"{}")]),
    (b"PUB foo 5\r\nhello\r\n", [Pub("foo", "", 0, b"hello")]),
    (b"pub foo 0\r\n\r\n", [Pub("foo", "", 0, b"")]),
    (b"PUB foo bar 2\r\nhi\r\n", [Pub("foo", "bar", 0, b"hi")]),
    (b"PUB  foo\t\tbar   2\r\nhi\r\n", [Pub("foo", "bar", 0, b"hi")]),
    (b"PUB foo 4\r\n\r\n\r\n\r\n", [Pub("foo", "", 0, b"\r\n\r\n")]),
    (b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", [Pub("foo", "", 12, b"NATS/1.0\r\n\r\nhi")]),
    (b"HPUB foo r 12 12\r\nNATS/1.0\r\n\r\n\r\n", [Pub("foo", "r", 12, b"NATS/1.0\r\n\r\n")]),
    # nats-py without a reply: two spaces where the reply would be (nats/protocol/command.py pub_cmd, hpub_cmd)
    (b"PUB foo  2\r\nhi\r\n", [Pub("foo", "", 0, b"hi")]),
    (b"HPUB foo  12 14\r\nNATS/1.0\r\n\r\nhi\r\n", [Pub("foo", "", 12, b"NATS/1.0\r\n\r\nhi")]),
    (b"SUB foo 1\r\n", [Sub("foo", "", "1")]),
    (b"SUB foo.* q 22\r\n", [Sub("foo.*", "q", "22")]),
    (b"UNSUB 1\r\n", [Unsub("1", 0)]),
    (b"UNSUB 1 10\r\n", [Unsub("1", 10)]),
    (b"UNSUB 1 x\r\n", [Unsub("1", 0)]),  # a max that does not parse: unsubscribe now
    (b'CONNECT{"a":1}\r\n', [Connect(b'{"a":1}')]),  # no separator needed after CONNECT
    (b"CONNECT\r\n", [Connect(b"\r")]),  # the CR is the argument's first byte, so it is kept (and is bad JSON)
    (
        b"SUB a 1\r\nPUB a 1\r\nx\r\nPING\r\nUNSUB 1\r\n",
        [Sub("a", "", "1"), Pub("a", "", 0, b"x"), PING, Unsub("1", 0)],
    ),
    (b"PUB \xc3\xa9t\xc3\xa9 1\r\nx\r\n", [Pub("\u00e9t\u00e9", "", 0, b"x")]),
    # Argument framing and splitting as nats-server does it in one read (parser.go *_ARG, client.go splitArg);
    # every row was read off nats-server 2.15.1 (tests/wire/test_parser_differential.py compares live).
    (b"SUB foo\r1\r\n", [Sub("foo", "", "1")]),  # SUB/UNSUB split on CR too
    (b"SUB foo\rq\r1\r\n", [Sub("foo", "q", "1")]),
    (b"UNSUB 1\r5\r\n", [Unsub("1", 5)]),
    (b"SUB foo 1\rx\n", [Sub("foo", "", "1")]),  # a CR drops the byte before the LF, whatever it is
    (b"SUB \nfoo 1\n", [Sub("foo", "", "1")]),  # an LF as first argument byte: the line runs on
    (b"SUB\t\t\nfoo 1\r\n", [Sub("foo", "", "1")]),
    (b"PUB \nfoo 1\r\nx\r\n", [Pub("\nfoo", "", 0, b"x")]),
    (b"PUB foo\r 5\r\nhello\r\n", [Pub("foo\r", "", 0, b"hello")]),  # PUB splits on space and tab only
    (b"PUB \rfoo 1\r\nx\r\n", [Pub("\rfoo", "", 0, b"x")]),
    (b"PUB foo\x0bbar 1\r\nx\r\n", [Pub("foo\x0bbar", "", 0, b"x")]),
    (b"PUB foo\x0cbar r\x1f 1\r\nx\r\n", [Pub("foo\x0cbar", "r\x1f", 0, b"x")]),
    (b"PUB foo bar\t2\r\nhi\r\n", [Pub("foo", "bar", 0, b"hi")]),
    (b"HPUB foo\r 0 1\r\nx\r\n", [Pub("foo\r", "", 0, b"x")]),
    (b"CONNECT\n{}\r\n", [Connect(b"\n{}")]),
    (b"CONNECT {}\rx\n", [Connect(b"{}\r")]),
    # The fast path takes PUB and HPUB, with and without reply, when the payload is in the same read.
    (b"HPUB foo _INBOX.a.1 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPUB foo r 1\r\nx\r\n",
     [Pub("foo", "_INBOX.a.1", 12, b"NATS/1.0\r\n\r\nhi"), Pub("foo", "r", 0, b"x")]),
    (b"HPUB foo 1 2 3\r\nabc\r\n", [Pub("foo", "1", 2, b"abc")]),  # four fields: the second is the reply
    (b"HPUB foo 3 3\r\nabc\r\n", [Pub("foo", "", 3, b"abc")]),
    (b"HPUB foo  3 3\r\nabc\r\n", [Pub("foo", "", 3, b"abc")]),  # a doubled space is no reply
    (b"HPUB foo\tr 3 3\r\nabc\r\n", [Pub("foo", "r", 3, b"abc")]),
    (b"hpub foo 0 0\r\n\r\n", [Pub("foo", "", 0, b"")]),
    (b"PUB foo 007\r\n1234567\r\n", [Pub("foo", "", 0, b"1234567")]),
]


@pytest.mark.parametrize("data,expected", CASES)
def test_whole(data, expected):
    assert Parser().feed(data) == expected


@pytest.mark.parametrize("data,expected", CASES)
def test_split_at_every_byte(data, expected):
    for i in range(len(data) + 1):
        p = Parser()
        assert p.feed(data[:i]) + p.feed(data[i:]) == expected, i


@pytest.mark.parametrize("data,expected", CASES)
def test_byte_at_a_time(data, expected):
    p = Parser()
    ops = []
    for b in data:
        ops += p.feed(bytes([b]))
    assert ops == expected


# (input, -ERR text ("" = closed silently)): nats-server's answers to malformed input.
MALFORMED = [
    (b"XPUB foo 1\r\n", ERR_UNKNOWN_OP),
    (b"MSG foo 1 1\r\nx\r\n", ERR_UNKNOWN_OP),  # clients may not send MSG
    (b"\r\n", ERR_UNKNOWN_OP),  # an empty line
    (b"PUB\r\n", ERR_UNKNOWN_OP),  # op word must be followed by a space or tab
    (b"PUBX foo 1\r\n", ERR_UNKNOWN_OP),
    (b"PUB foo 2\r\nhi\n", ERR_UNKNOWN_OP),  # payload must end with CRLF
    (b"PUB foo 2\r\nhix\r\n", ERR_UNKNOWN_OP),
    (b"PUB foo\r\n", ""),  # wrong argument count: closed without -ERR
    (b"PUB foo bar baz 1\r\n", ""),
    (b"PUB foo -1\r\n", ""),
    (b"PUB foo abc\r\n", ""),
    (b"PUB foo 99999999999999999999\r\n", ""),
    (b"HPUB foo 10 5\r\n", ""),  # header larger than total
    (b"HPUB foo 5\r\n", ""),
    (b"SUB foo\r\n", ""),
    (b"SUB a b c d\r\n", ""),
    (b"UNSUB\r\n", ERR_UNKNOWN_OP),
    (b"UNSUB 1 2 3\r\n", ""),
    (b"PUB foo 2000000\r\n", ERR_MAX_PAYLOAD),
    (b"PUB " + b"a" * 5000 + b" 1\r\n", ERR_MAX_CONTROL_LINE),
    (b"PUB " + b"a" * 5000, ERR_MAX_CONTROL_LINE),  # caught before the line is complete
    # Only space and tab separate PUB arguments (bytes.split() would also split on \x0b, \x0c, \x1c-\x1f).
    (b"PUB foo\x0b5\r\nhello\r\n", ""),
    (b"PUB foo\x0c5\r\nhello\r\n", ""),
    (b"PUB foo\x1c5\r\nhello\r\n", ""),
    (b"PUB foo 5\rx\nhello\r\n", ""),  # the dropped byte is the x: size "5\r"
    (b"PUB foo 1\r \nx\r\n", ""),
    (b"PUB \r\n", ""),
    (b"SUB \r\n", ""),
    (b"HPUB foo 0\x0b1\r\nx\r\n", ""),
    # The same with the payload in the buffer, where the fast path sees them first.
    (b"HPUB foo 10 5\r\nhello\r\n", ""),
    (b"HPUB foo r 10 5\r\nhello\r\n", ""),
    (b"HPUB foo 2 2\r\nhix\r\n", ERR_UNKNOWN_OP),
    (b"HPUB foo 1 2 3 4\r\nabcd\r\n", ""),
    (b"PUB foo 1234567890123456789\r\nx\r\n", ""),
]


@pytest.mark.parametrize("data,err", MALFORMED)
def test_malformed(data, err):
    ops = Parser().feed(data)
    assert ops and type(ops[-1]) is ProtocolError, ops
    assert ops[-1].err == err


@pytest.mark.parametrize("data,err", MALFORMED)
def test_malformed_split_at_every_byte(data, err):
    """The same answer however the input is split (the fast path and the general path agree)."""
    def answer(ops):  # the -ERR text, not the detail (which says where the parser noticed)
        return [op.err if type(op) is ProtocolError else op for op in ops]

    whole = answer(Parser().feed(data))
    for i in range(len(data) + 1):
        p = Parser()
        assert answer(p.feed(data[:i]) + p.feed(data[i:])) == whole, i


@pytest.mark.parametrize("line", [b"PUB foo 5", b"PUB foo r 5", b"HPUB foo 0 5", b"HPUB foo r 0 5"])
def test_fast_path_limits(line):
    """max_control_line (on the argument) and max_payload hold on the fast path as on the general one: the answer
    for a whole read is the one for a byte at a time (which never takes the fast path)."""
    arg_len = len(line.split(b" ", 1)[1])
    for mcl in (arg_len - 1, arg_len, arg_len + 1):
        for maxp in (4, 5):
            data = line + b"\r\nhello\r\n"

            def run(chunks):
                p = Parser(max_control_line=mcl, max_payload=maxp)  # the -ERR text, not where it was noticed
                return [op._replace(detail="") if type(op) is ProtocolError else op for c in chunks for op in p.feed(c)]

            whole = run([data])
            assert whole == run([bytes([b]) for b in data]), (mcl, maxp)
            if mcl < arg_len:  # checked first, as nats-server reads the line before the size
                assert whole[-1].err == ERR_MAX_CONTROL_LINE
            elif maxp < 5:
                assert whole[-1].err == ERR_MAX_PAYLOAD
            else:
                assert type(whole[-1]) is Pub


def test_unknown_op_detected_before_newline():
    # nats-server fails on the first byte that cannot continue an op name.
    assert Parser().feed(b"XY")[-1].err == ERR_UNKNOWN_OP
    assert Parser().feed(b"PU") == []


def test_nothing_after_an_error():
    p = Parser()
    assert p.feed(b"XX\r\n")[-1].err == ERR_UNKNOWN_OP
    assert p.feed(b"PING\r\n") == []


def test_client_err_is_last_op():
    p = Parser()
    assert p.feed(b"-ERR 'boom'\r\nPING\r\n") == [Err(b"'boom'")]


def test_ping_garbage_is_not_buffered():
    p = Parser()
    assert p.feed(b"PING" + b"x" * 100000) == []
    assert p._buf == b""
    assert p.feed(b"\r\nPONG\r\n") == [PING, PONG]


def test_large_payload_in_many_reads():
    payload = bytes(range(256)) * 4000
    data = b"PUB big %d\r\n" % len(payload) + payload + b"\r\n"
    p = Parser(max_payload=len(payload))
    ops = []
    for i in range(0, len(data), 1000):
        ops += p.feed(data[i : i + 1000])
    assert ops == [Pub("big", "", 0, payload)]


def test_counts_messages_and_payload_bytes():
    p = Parser()
    p.feed(b"PUB a 2\r\nhi\r\nHPUB a r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\nPUB a 1\r\n")
    assert (p.msgs, p.bytes) == (2, 16)
    p.feed(b"x\r\nPUB b 3\r\nabc\r\n")
    assert (p.msgs, p.bytes) == (4, 20)


class _Sink:
    """A connection-like sink: CONNECT sets a lower max_payload and a new on_pub, as ClientConnection._connect may
    (_register applies the account's max_payload, _update_pub_path picks the PUB path)."""

    def __init__(self, parser):
        self.parser, self.closed, self.ops = parser, False, []
        self.on_pub = self.before

    def before(self, *pub):
        self.ops.append(("before", pub[0]))

    def after(self, *pub):
        self.ops.append(("after", pub[0]))

    def on_op(self, op):
        self.ops.append(type(op).__name__)
        if type(op) is Connect:
            self.parser.max_payload = 3
            self.on_pub = self.after
        elif type(op) is ProtocolError:
            self.closed = True


def test_connect_takes_effect_for_the_rest_of_the_read():
    """A PUB after a CONNECT in the same read goes to the sink's new on_pub, under the new max_payload (nats-server
    checks each PUB against c.mpay, set while processing CONNECT)."""
    data = b"PUB a 1\r\nx\r\nCONNECT {}\r\nPUB b 1\r\nx\r\nHPUB c 0 3\r\nabc\r\nPUB d 4\r\nabcd\r\nPUB e 1\r\nx\r\n"
    p = Parser()
    sink = _Sink(p)
    p.parse(data, sink)
    assert sink.ops == [("before", "a"), "Connect", ("after", "b"), ("after", "c"), "ProtocolError"]
    assert (p.msgs, p.bytes) == (3, 5)


def test_closed_sink_stops_the_parser():
    class Closing:
        closed = False

        def __init__(self):
            self.got = []

        def on_pub(self, subject, reply, hdr_len, data):
            self.got.append(subject)
            self.closed = subject == "b"

        def on_op(self, op):
            self.got.append(op)

    sink = Closing()
    p = Parser()
    p.parse(b"PUB a 1\r\nx\r\nPUB b 1\r\nx\r\nPUB c 1\r\nx\r\n", sink)
    assert sink.got == ["a", "b"] and (p.msgs, p.bytes) == (2, 2)


def test_on_pub_exception_keeps_the_counts():
    """An exception from the sink propagates (the connection's caller logs it) and the messages handed over so far,
    that one included, are counted, as the pure path's finally does."""
    class Boom:
        closed = False

        def on_pub(self, subject, reply, hdr_len, data):
            if subject == "b":
                raise RuntimeError("boom")

        def on_op(self, op):
            pass

    p = Parser()
    with pytest.raises(RuntimeError):
        p.parse(b"PUB a 1\r\nx\r\nPUB b 2\r\nxy\r\nPUB c 1\r\nx\r\n", Boom())
    assert (p.msgs, p.bytes) == (2, 3)


@pytest.mark.parametrize(
    "arg,crlf,expected",
    [
        (b"foo bar 5", False, [b"foo", b"bar", b"5"]),
        (b"  foo\t\tbar  ", False, [b"foo", b"bar"]),
        (b"foo\rbar\x0b\x0c 5", False, [b"foo\rbar\x0b\x0c", b"5"]),
        (b"foo\rbar\n5", True, [b"foo", b"bar", b"5"]),
        (b"a\x0bb \x0cc\x1c", True, [b"a\x0bb", b"\x0cc\x1c"]),
        (b"", True, []),
        (b"\r\n\t ", True, []),
    ],
)
def test_split_args(arg, crlf, expected):
    assert split_args(arg, crlf) == expected
