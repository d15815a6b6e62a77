"""Malformed client input: one table of (input bytes -> exactly what nats-server answers, and whether it closes).

Every row was read off nats-server 2.15.1.  Each row runs on a fresh connection that has already done
`CONNECT {"verbose":false,"pedantic":false[,"headers":true]}` and a PING/PONG, so only the row's bytes are judged.

Outcomes:
  CLOSED   the server writes `reply` (possibly nothing) and closes the connection.
  OPEN     the server writes `reply` and keeps going: a PING sent after the row gets a PONG right after `reply`.
  WAITING  the row leaves the parser in the middle of an operation (payload or line not complete): the server
           writes `reply` and keeps the connection open, waiting for more bytes.

What the rows show (parser.go / client.go):
  - An unknown first letter or a wrong letter inside an op name -> `-ERR 'Unknown Protocol Operation'` + close.
  - A known op whose arguments do not parse (count, sizes, hdr > total, HPUB without headers negotiated)
    -> close without any -ERR.
  - Declared size > max_payload -> `-ERR 'Maximum Payload Violation'` + close.
  - Control line arguments longer than max_control_line (4096) -> `-ERR 'maximum control line exceeded'` + close;
    the count covers the bytes after the op name and its separators, without the line ending; a line that is still
    incomplete is checked against the same limit at the end of each read.
  - Payload not followed by exactly CRLF -> `-ERR 'Unknown Protocol Operation'` + close.
  - Subjects, sids and payloads are bytes: NULs and non-ASCII are accepted there.
"""
from __future__ import annotations

import pytest

UNKNOWN = b"-ERR 'Unknown Protocol Operation'\r\n"
MAX_PAYLOAD = b"-ERR 'Maximum Payload Violation'\r\n"
MAX_CONTROL = b"-ERR 'maximum control line exceeded'\r\n"
INVALID_SUBJECT = b"-ERR 'Invalid Subject'\r\n"

CLOSED, OPEN, WAITING = "closed", "open", "waiting"
H = "headers"  # the row's connection negotiated headers

A4094 = b"a" * 4094

# (id, options, input, reply, outcome)
CORPUS = [
    # -- unknown operations ------------------------------------------------------------------------------------------
    ("unknown-op", (), b"FOO\r\n", UNKNOWN, CLOSED),
    ("unknown-op-lower", (), b"foo bar\r\n", UNKNOWN, CLOSED),
    ("op-with-extra-letter", (), b"PUBX foo 2\r\nhi\r\n", UNKNOWN, CLOSED),
    ("pub-without-space", (), b"PUB\r\n", UNKNOWN, CLOSED),
    ("sub-without-space", (), b"SUB\r\n", UNKNOWN, CLOSED),
    ("unsub-without-space", (), b"UNSUB\r\n", UNKNOWN, CLOSED),
    ("truncated-op-name", (), b"PIN\r\n", UNKNOWN, CLOSED),
    ("truncated-connect", (), b"CONNEC\r\n", UNKNOWN, CLOSED),
    ("leading-space", (), b" PUB foo 2\r\nhi\r\n", UNKNOWN, CLOSED),
    ("empty-line-crlf", (), b"\r\n", UNKNOWN, CLOSED),
    ("empty-line-lf", (), b"\n", UNKNOWN, CLOSED),
    ("nul-line", (), b"\x00\r\n", UNKNOWN, CLOSED),
    ("nul-in-op-name", (), b"P\x00B foo 0\r\n\r\n", UNKNOWN, CLOSED),
    ("non-ascii-op", (), b"\xc3\xa9\r\n", UNKNOWN, CLOSED),
    ("route-op-rs", (), b"RS+ foo\r\n", UNKNOWN, CLOSED),
    ("leaf-op-ls", (), b"LS+ foo\r\n", UNKNOWN, CLOSED),
    ("account-op-a", (), b"A+ foo\r\n", UNKNOWN, CLOSED),
    ("server-op-msg", (), b"MSG foo 1 2\r\nhi\r\n", UNKNOWN, CLOSED),
    ("server-op-hmsg", (), b"HMSG foo 1 2 2\r\nhi\r\n", UNKNOWN, CLOSED),
    # -- bad PUB arguments: closed, no -ERR --------------------------------------------------------------------------
    ("pub-no-args", (), b"PUB \r\n", b"", CLOSED),
    ("pub-no-size", (), b"PUB foo\r\n", b"", CLOSED),
    ("pub-too-many-args", (), b"PUB foo bar baz 2\r\nhi\r\n", b"", CLOSED),
    ("pub-negative-size", (), b"PUB foo -1\r\n", b"", CLOSED),
    ("pub-garbage-size", (), b"PUB foo abc\r\n", b"", CLOSED),
    ("pub-plus-size", (), b"PUB foo +2\r\nhi\r\n", b"", CLOSED),
    ("pub-hex-size", (), b"PUB foo 0x2\r\nhi\r\n", b"", CLOSED),
    ("pub-decimal-size", (), b"PUB foo 2.0\r\nhi\r\n", b"", CLOSED),
    ("pub-huge-size", (), b"PUB foo 99999999999999999999\r\n", b"", CLOSED),
    ("pub-size-over-uint64", (), b"PUB foo 18446744073709551617\r\n", b"", CLOSED),
    # -- bad SUB / UNSUB arguments -----------------------------------------------------------------------------------
    ("sub-no-args", (), b"SUB \r\n", b"", CLOSED),
    ("sub-no-sid", (), b"SUB foo\r\n", b"", CLOSED),
    ("sub-too-many-args", (), b"SUB foo q 1 extra\r\n", b"", CLOSED),
    ("unsub-no-args", (), b"UNSUB \r\n", b"", CLOSED),
    ("unsub-too-many-args", (), b"UNSUB 1 2 3\r\n", b"", CLOSED),
    # -- HPUB ----------------------------------------------------------------------------------------------------------
    ("hpub-without-headers-negotiated", (), b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", b"", CLOSED),
    ("hpub-without-space", (H,), b"HPUB\r\n", UNKNOWN, CLOSED),
    ("hpub-hdr-gt-total", (H,), b"HPUB foo 14 12\r\n", b"", CLOSED),
    ("hpub-one-size", (H,), b"HPUB foo 14\r\n", b"", CLOSED),
    ("hpub-no-sizes", (H,), b"HPUB foo\r\n", b"", CLOSED),
    ("hpub-negative-hdr", (H,), b"HPUB foo -1 2\r\n", b"", CLOSED),
    ("hpub-negative-total", (H,), b"HPUB foo 0 -2\r\n", b"", CLOSED),
    ("hpub-garbage-sizes", (H,), b"HPUB foo a b\r\n", b"", CLOSED),
    ("hpub-too-many-args", (H,), b"HPUB foo r x 12 14\r\n", b"", CLOSED),
    ("hpub-huge-total", (H,), b"HPUB foo 1 99999999999999999999\r\n", b"", CLOSED),
    ("hpub-max-payload", (H,), b"HPUB foo 12 1048589\r\n", MAX_PAYLOAD, CLOSED),
    ("hpub-payload-no-crlf", (H,), b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhiX\r\n", UNKNOWN, CLOSED),
    ("hpub-ok", (H,), b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", b"", OPEN),
    ("hpub-hdr-eq-total", (H,), b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n", b"", OPEN),
    ("hpub-zero-hdr", (H,), b"HPUB foo 0 2\r\nhi\r\n", b"", OPEN),
    ("hpub-non-nats-header", (H,), b"HPUB foo 3 3\r\nabc\r\n", b"", OPEN),
    # -- max payload ---------------------------------------------------------------------------------------------------
    ("pub-max-payload-plus-one", (), b"PUB foo 1048577\r\n", MAX_PAYLOAD, CLOSED),
    ("pub-max-payload-exact-waits", (), b"PUB foo 1048576\r\n", b"", WAITING),
    # -- payload framing -----------------------------------------------------------------------------------------------
    ("payload-longer-than-size", (), b"PUB foo 2\r\nhiX\r\n", UNKNOWN, CLOSED),
    ("payload-shorter-than-size", (), b"PUB foo 4\r\nhi\r\nPING\r\n", UNKNOWN, CLOSED),
    ("payload-bare-lf", (), b"PUB foo 2\r\nhi\n", UNKNOWN, CLOSED),
    ("payload-cr-then-garbage", (), b"PUB foo 2\r\nhi\rX", UNKNOWN, CLOSED),
    ("payload-garbage-no-eol", (), b"PUB foo 2\r\nhiXY", UNKNOWN, CLOSED),
    ("empty-payload-garbage", (), b"PUB foo 0\r\nX", UNKNOWN, CLOSED),
    ("payload-incomplete-waits", (), b"PUB foo 2\r\nh", b"", WAITING),
    ("payload-cr-only-waits", (), b"PUB foo 2\r\nhi\r", b"", WAITING),
    ("control-line-incomplete-waits", (), b"PUB foo 2", b"", WAITING),
    ("payload-binary", (), b"PUB foo 4\r\n\x00\x01\r\n\r\n", b"", OPEN),
    # -- accepted oddities ---------------------------------------------------------------------------------------------
    ("pub-bare-lf-control-line", (), b"PUB foo 2\nhi\r\n", b"", OPEN),
    ("pub-trailing-space", (), b"PUB foo 2 \r\nhi\r\n", b"", OPEN),
    ("pub-double-space", (), b"PUB foo  2\r\nhi\r\n", b"", OPEN),
    ("pub-tabs", (), b"PUB\tfoo\t2\r\nhi\r\n", b"", OPEN),
    ("pub-leading-zeros", (), b"PUB foo 02\r\nhi\r\n", b"", OPEN),
    ("pub-non-ascii-subject", (), b"PUB f\xc3\xa9 2\r\nhi\r\n", b"", OPEN),
    ("pub-nul-subject", (), b"PUB f\x00o 2\r\nhi\r\n", b"", OPEN),
    ("pub-malformed-subject-not-pedantic", (), b"PUB foo..bar 2\r\nhi\r\n", b"", OPEN),
    ("sub-non-numeric-sid", (), b"SUB foo abc\r\n", b"", OPEN),
    ("sub-nul-subject", (), b"SUB f\x00o 1\r\n", b"", OPEN),
    ("sub-invalid-subject", (), b"SUB foo..bar 1\r\n", INVALID_SUBJECT, OPEN),
    ("sub-invalid-full-wildcard-position", (), b"SUB foo.>.bar 1\r\n", INVALID_SUBJECT, OPEN),
    ("unsub-garbage-max", (), b"UNSUB 1 abc\r\n", b"", OPEN),
    ("unsub-negative-max", (), b"UNSUB 1 -1\r\n", b"", OPEN),
    ("unsub-huge-max", (), b"UNSUB 1 99999999999999999999\r\n", b"", OPEN),
    ("unsub-unknown-sid", (), b"UNSUB abc\r\n", b"", OPEN),
    ("ping-with-junk", (), b"PING x\r\n", b"PONG\r\n", OPEN),
    ("ping-glued-junk", (), b"PINGX\r\n", b"PONG\r\n", OPEN),
    ("ping-very-long", (), b"PING" + b"a" * 10000 + b"\r\n", b"PONG\r\n", OPEN),
    ("pong", (), b"PONG\r\n", b"", OPEN),
    ("client-ok", (), b"+OK\r\n", b"", OPEN),
    ("client-info", (), b"INFO {}\r\n", b"", OPEN),
    ("client-err-closes", (), b"-ERR 'x'\r\n", b"", CLOSED),
    ("connect-again", (), b'CONNECT {"verbose":false}\r\n', b"", OPEN),
    ("connect-no-space", (), b'CONNECT{"verbose":true}\r\n', b"+OK\r\n", OPEN),
    ("connect-bad-json-later", (), b"CONNECT {bad\r\n", b"", CLOSED),
    # -- argument framing and splitting (parser.go *_ARG states, client.go processPub / splitArg) -----------------------
    # PUB/HPUB split on space and tab only; SUB/UNSUB also on CR and LF; a CR after the first argument byte drops
    # the byte before the LF; an LF as first argument byte makes the line run on to the next LF.
    ("pub-vt-not-a-separator", (), b"PUB foo\x0b5\r\nhello\r\n", b"", CLOSED),
    ("pub-ff-not-a-separator", (), b"PUB foo\x0c5\r\nhello\r\n", b"", CLOSED),
    ("hpub-vt-not-a-separator", (H,), b"HPUB foo 0\x0b5\r\nhello\r\n", b"", CLOSED),
    ("pub-cr-drops-last-byte", (), b"PUB foo 5\rx\nhello\r\n", b"", CLOSED),
    ("pub-cr-before-lf-space", (), b"PUB foo 1\r \nx\r\n", b"", CLOSED),
    ("pub-cr-in-subject", (), b"SUB crsx.> 1\r\nPUB crsx.a\r 1\r\nx\r\n", b"MSG crsx.a\r 1 1\r\nx\r\n", OPEN),
    ("pub-vt-in-subject", (), b"SUB vtsx.> 1\r\nPUB vtsx.a\x0bb 1\r\nx\r\n", b"MSG vtsx.a\x0bb 1 1\r\nx\r\n", OPEN),
    ("sub-cr-separates", (), b"SUB crsep\r1\r\nPUB crsep 2\r\nhi\r\n", b"MSG crsep 1 2\r\nhi\r\n", OPEN),
    ("sub-cr-drops-last-byte", (), b"SUB crdrop 1\rx\nPUB crdrop 1\r\nx\r\n", b"MSG crdrop 1 1\r\nx\r\n", OPEN),
    ("sub-lf-first-arg-byte", (), b"SUB \ncrlf 1\nPUB crlf 1\r\nx\r\n", b"MSG crlf 1 1\r\nx\r\n", OPEN),
    ("unsub-cr-separates", (), b"SUB crun 1\r\nUNSUB 1\r1\r\nPUB crun 1\r\na\r\nPUB crun 1\r\nb\r\n",
     b"MSG crun 1 1\r\na\r\n", OPEN),
    # Subject checks on the client path: SUB takes what Sublist.Insert takes, pedantic PUB what
    # IsValidLiteralSubject takes - neither looks at \f or \v (or, for PUB, at a CR the splitter kept).
    ("sub-ff-in-subject", (), b"SUB ffs.a\x0cb 1\r\nPUB ffs.a\x0cb 1\r\nx\r\n", b"MSG ffs.a\x0cb 1 1\r\nx\r\n", OPEN),
    ("sub-vt-in-subject", (), b"SUB vts.a\x0bb 1\r\n", b"", OPEN),
    ("pedantic-pub-vt-in-subject", ("pedantic",), b"PUB ped.a\x0bb 1\r\nx\r\n", b"", OPEN),
    ("pedantic-pub-cr-in-subject", ("pedantic",), b"PUB ped.a\rb 1\r\nx\r\n", b"", OPEN),
    ("pedantic-pub-empty-token", ("pedantic",), b"PUB ped..b 1\r\nx\r\n", b"-ERR 'Invalid Publish Subject'\r\n", OPEN),
    ("connect-lf-first-arg-byte", (), b'CONNECT\n{"verbose":true}\r\n', b"+OK\r\n", OPEN),
    ("connect-cr-drops-last-byte", (), b'CONNECT {"verbose":true}\rx\n', b"+OK\r\n", OPEN),
    # -- max control line ----------------------------------------------------------------------------------------------
    ("pub-args-4096", (), b"PUB " + A4094 + b" 0\r\n\r\n", b"", OPEN),
    ("pub-args-4097", (), b"PUB " + A4094 + b"a 0\r\n\r\n", MAX_CONTROL, CLOSED),
    ("pub-args-4096-lf", (), b"PUB " + A4094 + b" 0\n\r\n", b"", OPEN),
    ("pub-args-4096-separators-not-counted", (), b"PUB \t  " + A4094 + b" 0\r\n\r\n", b"", OPEN),
    ("sub-args-4096", (), b"SUB " + A4094 + b" 1\r\n", b"", OPEN),
    ("sub-args-4097", (), b"SUB " + A4094 + b"a 1\r\n", MAX_CONTROL, CLOSED),
    ("unsub-args-4097", (), b"UNSUB " + b"1" * 4097 + b"\r\n", MAX_CONTROL, CLOSED),
    ("hpub-args-4096", (H,), b"HPUB " + b"a" * 4092 + b" 0 0\r\n\r\n", b"", OPEN),
    ("hpub-args-4097", (H,), b"HPUB " + b"a" * 4093 + b" 0 0\r\n\r\n", MAX_CONTROL, CLOSED),
    ("connect-args-4096", (), b'CONNECT {"name":"' + b"a" * 4085 + b'"}\r\n', b"", OPEN),
    ("connect-args-4097", (), b'CONNECT {"name":"' + b"a" * 4086 + b'"}\r\n', MAX_CONTROL, CLOSED),
    ("incomplete-line-over-limit", (), b"PUB " + b"a" * 5000, MAX_CONTROL, CLOSED),
    ("incomplete-line-at-limit-waits", (), b"PUB " + b"a" * 4096, b"", WAITING),
]


@pytest.mark.parametrize("opts,data,reply,outcome", [r[1:] for r in CORPUS], ids=[r[0] for r in CORPUS])
def test_malformed(shared_server, raw, opts, data, reply, outcome):
    c = raw.handshake(shared_server, headers=H in opts, pedantic="pedantic" in opts)
    c.send(data)
    if outcome == CLOSED:
        assert c.assert_closed() == reply
    elif outcome == OPEN:
        c.send(b"PING\r\n")
        c.expect(reply + b"PONG\r\n")
    else:
        got = c.drain(0.15)
        assert got == reply
        assert not c.eof, "connection was closed"


def test_corpus_ids_unique():
    ids = [r[0] for r in CORPUS]
    assert len(ids) == len(set(ids))


def test_malformed_client_does_not_affect_others(shared_server, raw, subj):
    """Clients that get closed for bad input leave other connections and their subscriptions untouched."""
    s = subj.encode()
    good_sub = raw.handshake(shared_server)
    good_sub.send(b"SUB " + s + b" 1\r\nPING\r\n")
    good_sub.expect(b"PONG\r\n")
    good_pub = raw.handshake(shared_server)
    bad_inputs = [b"FOO\r\n", b"PUB " + s + b" 2\r\nhiX\r\n", b"PUB " + s + b" 1048577\r\n", b"SUB " + s + b"\r\n",
                  b"PUB " + s + b" 4\r\nhi\r\nPING\r\n", b"PUB " + b"a" * 5000, b"HPUB " + s + b" 2 2\r\nhi\r\n"]
    for i, bad in enumerate(bad_inputs):
        evil = raw.handshake(shared_server)
        # The bad client also subscribed to the same subject before misbehaving.
        evil.send(b"SUB " + s + b" 9\r\nPING\r\n")
        evil.expect(b"PONG\r\n")
        evil.send(bad)
        evil.assert_closed()
        good_pub.send(b"PUB " + s + b" 1\r\n%d\r\nPING\r\n" % i)
        good_pub.expect(b"PONG\r\n")
        good_sub.expect(b"MSG " + s + b" 1 1\r\n%d\r\n" % i)
    good_sub.send(b"PING\r\n")
    good_sub.expect(b"PONG\r\n")


def test_partial_message_from_one_client_does_not_block_others(shared_server, raw, subj):
    s = subj.encode()
    sub = raw.handshake(shared_server)
    sub.send(b"SUB " + s + b" 1\r\nPING\r\n")
    sub.expect(b"PONG\r\n")
    stuck = raw.handshake(shared_server)
    stuck.send(b"PUB " + s + b" 10\r\nabc")  # never finished
    other = raw.handshake(shared_server)
    other.send(b"PUB " + s + b" 2\r\nok\r\n")
    sub.expect(b"MSG " + s + b" 1 2\r\nok\r\n")
    # Finishing the stuck message later delivers it whole.
    stuck.send(b"defghij\r\n")
    sub.expect(b"MSG " + s + b" 1 10\r\nabcdefghij\r\n")
