"""PUB/HPUB/SUB/UNSUB/MSG/HMSG framing, byte for byte, and the routing rules around them.

Covers: MSG and HMSG layout, reply subjects, header stripping for subscribers without header support, queue groups,
UNSUB with max, wildcards and their edge cases, echo, no-responders, PING/PONG, lower-case ops, tabs, bare LF,
`Invalid Subject`, duplicate sids, operations split across TCP segments.
Ref: jetstream-notes.md 1.4-1.7; nats-server parser.go, client.go (processSub, processUnsub, deliverMsg), sublist.go.
"""
from __future__ import annotations

import collections
import time

import pytest

PONG = b"PONG\r\n"


def flush(c) -> bytes:
    """PING and read everything up to the PONG: all output caused by earlier ops (minus the PONG)."""
    c.send(b"PING\r\n")
    return c.read_until(PONG)[: -len(PONG)]


def split_frames(data: bytes) -> list[tuple[bytes, bytes]]:
    """Split a stream of MSG/HMSG frames into (control line, payload) pairs; asserts nothing else is there."""
    frames = []
    while data:
        i = data.index(b"\r\n")
        line, rest = data[:i], data[i + 2:]
        size = int(line.split()[-1])
        assert rest[size:size + 2] == b"\r\n", data
        frames.append((line, rest[:size]))
        data = rest[size + 2:]
    return frames


# -- framing --------------------------------------------------------------------------------------------------------

def test_pub_msg_framing(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 7\r\nPUB " + s + b" 5\r\nhello\r\n")
    c.expect(b"MSG " + s + b" 7 5\r\nhello\r\n")


def test_pub_with_reply(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" reply.to.me 3\r\nabc\r\n")
    c.expect(b"MSG " + s + b" 1 reply.to.me 3\r\nabc\r\n")


def test_empty_payload(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" 0\r\n\r\n")
    c.expect(b"MSG " + s + b" 1 0\r\n\r\n")


def test_binary_payload_with_crlf_inside(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    payload = b"a\r\nb\r\n\x00\xff\r\nPING\r\n"
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" %d\r\n" % len(payload) + payload + b"\r\n")
    c.expect(b"MSG " + s + b" 1 %d\r\n" % len(payload) + payload + b"\r\n")
    c.expect_nothing()  # the PING inside the payload was data, not an op


def test_sid_is_any_token(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" my-sid.X 1\r\n")  # three args: subject, queue, sid
    c.send(b"SUB " + s + b" abc\r\nPUB " + s + b" 1\r\nx\r\n")
    frames = split_frames(flush(c))
    assert sorted(f[0] for f in frames) == sorted([b"MSG " + s + b" 1 1", b"MSG " + s + b" abc 1"])


def test_ops_split_at_every_byte(shared_server, raw, subj):
    c = raw.handshake(shared_server, headers=True)
    s = subj.encode()
    hdr = b"NATS/1.0\r\nK: v\r\n\r\n"
    stream = (b"SUB " + s + b" 1\r\nPUB " + s + b" r 3\r\nabc\r\nHPUB " + s + b" %d %d\r\n" % (len(hdr), len(hdr) + 2)
              + hdr + b"xy\r\nPING\r\n")
    for b in stream:
        c.send(bytes([b]))
        time.sleep(0.0005)
    c.expect(b"MSG " + s + b" 1 r 3\r\nabc\r\nHMSG " + s + b" 1 %d %d\r\n" % (len(hdr), len(hdr) + 2) + hdr
             + b"xy\r\n" + PONG)


def test_many_ops_in_one_segment(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\n" + b"".join(b"PUB " + s + b" %d\r\n%d\r\n" % (len(str(i)), i) for i in range(200)))
    got = flush(c)
    assert got == b"".join(b"MSG " + s + b" 1 %d\r\n%d\r\n" % (len(str(i)), i) for i in range(200))


# -- headers --------------------------------------------------------------------------------------------------------

HDR = b"NATS/1.0\r\nA: bc\r\nA: de\r\n\r\n"


def test_hpub_hmsg_framing(shared_server, raw, subj):
    c = raw.handshake(shared_server, headers=True)
    s = subj.encode()
    n = len(HDR)
    c.send(b"SUB " + s + b" 1\r\nHPUB " + s + b" %d %d\r\n" % (n, n + 2) + HDR + b"hi\r\n")
    c.expect(b"HMSG " + s + b" 1 %d %d\r\n" % (n, n + 2) + HDR + b"hi\r\n")
    c.send(b"HPUB " + s + b" rep %d %d\r\n" % (n, n) + HDR + b"\r\n")
    c.expect(b"HMSG " + s + b" 1 rep %d %d\r\n" % (n, n) + HDR + b"\r\n")


def test_headers_stripped_for_subscriber_without_header_support(shared_server, raw, subj):
    s = subj.encode()
    plain = raw.handshake(shared_server)  # CONNECT without "headers"
    plain.send(b"SUB " + s + b" 1\r\n")
    flush(plain)
    pub = raw.handshake(shared_server, headers=True)
    n = len(HDR)
    pub.send(b"HPUB " + s + b" rep %d %d\r\n" % (n, n + 2) + HDR + b"hi\r\nHPUB " + s + b" %d %d\r\n" % (n, n) + HDR
             + b"\r\n")
    flush(pub)
    plain.expect(b"MSG " + s + b" 1 rep 2\r\nhi\r\nMSG " + s + b" 1 0\r\n\r\n")


def test_plain_pub_reaches_header_subscriber_as_msg(shared_server, raw, subj):
    c = raw.handshake(shared_server, headers=True)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" 1\r\nz\r\n")
    c.expect(b"MSG " + s + b" 1 1\r\nz\r\n")


def test_hpub_with_zero_header_length_is_a_plain_msg(shared_server, raw, subj):
    c = raw.handshake(shared_server, headers=True)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\nHPUB " + s + b" 0 2\r\nhi\r\n")
    c.expect(b"MSG " + s + b" 1 2\r\nhi\r\n")


def test_header_block_is_not_validated(shared_server, raw, subj):
    # The server passes header bytes through as given, even when they are not a NATS/1.0 block.
    c = raw.handshake(shared_server, headers=True)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\nHPUB " + s + b" 3 5\r\nabcde\r\n")
    c.expect(b"HMSG " + s + b" 1 3 5\r\nabcde\r\n")


# -- no responders --------------------------------------------------------------------------------------------------

def test_no_responders_exact_bytes(shared_server, raw, subj):
    c = raw.handshake(shared_server, headers=True, no_responders=True)
    s = subj.encode()
    target = s + b".nobody.here"
    c.send(b"SUB _INBOX." + s + b" 9\r\nPUB " + target + b" _INBOX." + s + b" 2\r\nhi\r\n")
    n = 32 + len(target)
    expected = (b"HMSG _INBOX." + s + b" 9 %d %d\r\nNATS/1.0 503\r\nNats-Subject: " % (n, n) + target
                + b"\r\n\r\n\r\n")
    assert len(b"NATS/1.0 503\r\nNats-Subject: " + target + b"\r\n\r\n") == n
    c.expect(expected)
    # Same for HPUB.
    c.send(b"HPUB " + target + b" _INBOX." + s + b" 12 14\r\nNATS/1.0\r\n\r\nhi\r\n")
    c.expect(expected)


def test_no_responders_needs_own_sub_on_reply(shared_server, raw, subj):
    c = raw.handshake(shared_server, headers=True, no_responders=True)
    s = subj.encode()
    c.send(b"PUB " + s + b".nobody _INBOX." + s + b" 2\r\nhi\r\n")
    assert flush(c) == b""


def test_no_responders_only_when_asked(shared_server, raw, subj):
    c = raw.handshake(shared_server, headers=True)  # no_responders not set
    s = subj.encode()
    c.send(b"SUB _INBOX." + s + b" 9\r\nPUB " + s + b".nobody _INBOX." + s + b" 2\r\nhi\r\n")
    assert flush(c) == b""


def test_no_responders_not_sent_when_someone_listens(shared_server, raw, subj):
    s = subj.encode()
    responder = raw.handshake(shared_server)
    responder.send(b"SUB " + s + b".svc q 1\r\n")
    flush(responder)
    c = raw.handshake(shared_server, headers=True, no_responders=True)
    c.send(b"SUB _INBOX." + s + b" 9\r\nPUB " + s + b".svc _INBOX." + s + b" 2\r\nhi\r\n")
    assert flush(c) == b""
    responder.expect(b"MSG " + s + b".svc 1 _INBOX." + s + b" 2\r\nhi\r\n")


# -- queue groups ---------------------------------------------------------------------------------------------------

def test_queue_groups_one_member_each_and_plain_subs_all(shared_server, raw, subj):
    s = subj.encode()
    n = 100
    a = raw.handshake(shared_server)
    b = raw.handshake(shared_server)
    # Group g1 spans two connections; g2 has two members on one connection; two plain subs; a queue sub on a
    # wildcard in group g1 too.
    a.send(b"SUB " + s + b" g1 1\r\nSUB " + s + b" g2 2\r\nSUB " + s + b" 3\r\nSUB " + s + b".* g1 4\r\n")
    b.send(b"SUB " + s + b" g1 11\r\nSUB " + s + b" g2 12\r\nSUB " + s + b" 13\r\nSUB > g1 14\r\n")
    flush(a), flush(b)
    pub = raw.handshake(shared_server)
    pub.send(b"".join(b"PUB " + s + b" %d\r\n%d\r\n" % (len(str(i)), i) for i in range(n)))
    flush(pub)
    time.sleep(0.05)
    frames = split_frames(flush(a)) + split_frames(flush(b))
    by_sid = collections.defaultdict(list)
    for line, payload in frames:
        parts = line.split()
        assert parts[0] == b"MSG"
        if parts[1] != s:
            # "SUB > g1 14" on a shared server also sees other tests' traffic (e.g. push-consumer heartbeats).
            assert parts[2] == b"14"
            continue
        by_sid[parts[2]].append(int(payload))
    assert sorted(by_sid[b"3"]) == list(range(n))
    assert sorted(by_sid[b"13"]) == list(range(n))
    assert sorted(by_sid[b"2"] + by_sid[b"12"]) == list(range(n))
    assert sorted(by_sid[b"1"] + by_sid[b"11"] + by_sid[b"14"]) == list(range(n))
    assert by_sid[b"4"] == []  # s.* does not match s
    # Members are picked at random: with 100 messages every member gets some.
    for sid in (b"1", b"11", b"14", b"2", b"12"):
        assert by_sid[sid], sid
    # Plain subs see messages in publish order.
    assert by_sid[b"3"] == list(range(n))


def test_queue_group_names_are_not_validated(shared_server, raw, subj):
    c = raw.handshake(shared_server, verbose=True)
    s = subj.encode()
    for i, q in enumerate([b">", b"*", b"q.*", b"q..x"]):
        c.send(b"SUB " + s + b" " + q + b" %d\r\n" % i)
        c.expect(b"+OK\r\n")


# -- UNSUB ----------------------------------------------------------------------------------------------------------

def test_unsub(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" 1\r\na\r\nUNSUB 1\r\nPUB " + s + b" 1\r\nb\r\n")
    assert flush(c) == b"MSG " + s + b" 1 1\r\na\r\n"


def test_unsub_unknown_sid_is_ignored(shared_server, raw):
    c = raw.handshake(shared_server)
    c.send(b"UNSUB nope\r\nUNSUB nope 5\r\n")
    assert flush(c) == b""


def test_unsub_max_auto_unsubscribes(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\nUNSUB 1 2\r\n" + (b"PUB " + s + b" 1\r\nx\r\n") * 4)
    assert flush(c) == (b"MSG " + s + b" 1 1\r\nx\r\n") * 2
    # The sid is free again: a new SUB with it works.
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" 1\r\ny\r\n")
    assert flush(c) == b"MSG " + s + b" 1 1\r\ny\r\n"


def test_unsub_max_not_above_delivered_removes_now(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\n" + (b"PUB " + s + b" 1\r\nx\r\n") * 3 + b"UNSUB 1 2\r\n"
           + (b"PUB " + s + b" 1\r\ny\r\n") * 2)
    assert flush(c) == (b"MSG " + s + b" 1 1\r\nx\r\n") * 3


def test_unsub_max_can_be_raised(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\nUNSUB 1 2\r\nPUB " + s + b" 1\r\na\r\nUNSUB 1 3\r\n"
           + b"".join(b"PUB " + s + b" 1\r\n" + x + b"\r\n" for x in (b"b", b"c", b"d")))
    assert flush(c) == b"".join(b"MSG " + s + b" 1 1\r\n" + x + b"\r\n" for x in (b"a", b"b", b"c"))


@pytest.mark.parametrize("max_arg", [b"0", b"-1", b"abc"])
def test_unsub_max_zero_or_garbage_removes_now(shared_server, raw, subj, max_arg):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\nUNSUB 1 " + max_arg + b"\r\nPUB " + s + b" 1\r\nx\r\n")
    assert flush(c) == b""


def test_unsub_max_on_queue_sub(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" q 1\r\nUNSUB 1 1\r\n" + (b"PUB " + s + b" 1\r\nx\r\n") * 3)
    assert flush(c) == b"MSG " + s + b" 1 1\r\nx\r\n"


def test_duplicate_sid_is_ignored(shared_server, raw, subj):
    # A second SUB with a sid already in use changes nothing: the first subscription stays, the second is dropped.
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b".a 1\r\nSUB " + s + b".b 1\r\nPUB " + s + b".a 1\r\nx\r\nPUB " + s + b".b 1\r\ny\r\n")
    assert flush(c) == b"MSG " + s + b".a 1 1\r\nx\r\n"
    c.send(b"SUB " + s + b".a 1\r\nPUB " + s + b".a 1\r\nz\r\n")  # same subject again: still one copy
    assert flush(c) == b"MSG " + s + b".a 1 1\r\nz\r\n"


def test_resub_same_sid_while_auto_unsub_pending(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\nUNSUB 1 1\r\nSUB " + s + b" 1\r\n" + (b"PUB " + s + b" 1\r\nx\r\n") * 2)
    assert flush(c) == b"MSG " + s + b" 1 1\r\nx\r\n"


# -- wildcards ------------------------------------------------------------------------------------------------------

WILDCARD_CASES = [
    # (subscription, published subject, matches?)
    ("{s}.*", "{s}", False),
    ("{s}.*", "{s}.a", True),
    ("{s}.*", "{s}.a.b", False),
    ("{s}.>", "{s}", False),
    ("{s}.>", "{s}.a", True),
    ("{s}.>", "{s}.a.b.c", True),
    ("{s}.*.c", "{s}.a.c", True),
    ("{s}.*.c", "{s}.a.b", False),
    ("{s}.*.>", "{s}.a", False),
    ("{s}.*.>", "{s}.a.b", True),
    ("*.{t}", "x.{t}", True),
    ("{s}.a*", "{s}.a*", True),   # '*' inside a token is a literal character
    ("{s}.a*", "{s}.ab", False),
    ("{s}.*a", "{s}.ba", False),
    ("{s}.a>", "{s}.a>", True),
    ("{s}.a>", "{s}.a.b", False),
    ("{s}.**", "{s}.**", True),
    ("{s}.**", "{s}.x", False),
    ("{s}.a", "{s}.A", False),    # case-sensitive
]


@pytest.mark.parametrize("sub,pub,matches", WILDCARD_CASES)
def test_wildcards(shared_server, raw, subj, sub, pub, matches):
    s = subj
    t = subj.replace(".", "_")
    sub, pub = sub.format(s=s, t=t).encode(), pub.format(s=s, t=t).encode()
    c = raw.handshake(shared_server)
    c.send(b"SUB " + sub + b" 1\r\nPUB " + pub + b" 1\r\nx\r\n")
    assert flush(c) == (b"MSG " + pub + b" 1 1\r\nx\r\n" if matches else b"")


def test_full_wildcard_matches_single_token(server, raw):
    c = raw.handshake(server)
    c.send(b"SUB > 1\r\nSUB * 2\r\nPUB foo 1\r\nx\r\nPUB foo.bar 1\r\ny\r\n")
    frames = split_frames(flush(c))
    assert sorted(frames) == sorted([(b"MSG foo 1 1", b"x"), (b"MSG foo 2 1", b"x"), (b"MSG foo.bar 1 1", b"y")])


def test_overlapping_subs_on_one_connection_each_get_a_copy(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b".a 1\r\nSUB " + s + b".* 2\r\nSUB " + s + b".> 3\r\nPUB " + s + b".a 1\r\nx\r\n")
    frames = split_frames(flush(c))
    assert sorted(f[0] for f in frames) == [b"MSG " + s + b".a %d 1" % i for i in (1, 2, 3)]


def test_non_ascii_subjects_are_routed(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    for i, tok in enumerate([b"f\xc3\xa9", b"\xff", b"a\x7fb", b"a\x00b"]):
        c.send(b"SUB " + s + b"." + tok + b" %d\r\nPUB " % i + s + b"." + tok + b" 1\r\nx\r\n")
        assert flush(c) == b"MSG " + s + b"." + tok + b" %d 1\r\nx\r\n" % i


# -- invalid SUB subjects -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [b"foo..bar", b"foo.>.bar", b".foo", b"foo.", b">.foo", b"..", b"."])
def test_invalid_sub_subject_keeps_connection_open(shared_server, raw, bad):
    c = raw.handshake(shared_server)
    c.send(b"SUB " + bad + b" 1\r\n")
    c.expect(b"-ERR 'Invalid Subject'\r\n")
    assert c.is_open()
    # Nothing was subscribed: sid 1 is free.
    c.send(b"SUB ok.x 1\r\nPUB ok.x 1\r\nx\r\n")
    assert flush(c) == b"MSG ok.x 1 1\r\nx\r\n"


def test_invalid_sub_subject_verbose_no_ok(shared_server, raw):
    c = raw.handshake(shared_server, verbose=True)
    c.send(b"SUB foo..bar 1\r\n")
    c.expect(b"-ERR 'Invalid Subject'\r\n")
    c.send(b"PING\r\n")
    c.expect(PONG)


@pytest.mark.parametrize("good", [b"foo*", b"*foo", b"foo.**", b"foo.>>", b"*", b">", b"foo.*.>", b"\xff"])
def test_valid_sub_subjects(server, raw, good):
    # a fresh server: on the shared one, ``*`` and ``>`` match the deliver subjects of push consumers other tests
    # left behind, which then start delivering to this connection before its +OK
    c = raw.handshake(server, verbose=True)
    c.send(b"SUB " + good + b" 1\r\n")
    c.expect(b"+OK\r\n")


# -- echo -----------------------------------------------------------------------------------------------------------

def test_echo_off(shared_server, raw, subj):
    s = subj.encode()
    c = raw.handshake(shared_server, echo=False)
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" 1\r\na\r\n")
    assert flush(c) == b""
    other = raw.handshake(shared_server)
    other.send(b"PUB " + s + b" 1\r\nb\r\n")
    flush(other)
    assert flush(c) == b"MSG " + s + b" 1 1\r\nb\r\n"


def test_echo_on_by_default(shared_server, raw, subj):
    s = subj.encode()
    c = raw.handshake(shared_server)
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" 1\r\na\r\n")
    assert flush(c) == b"MSG " + s + b" 1 1\r\na\r\n"


# -- PING/PONG, case, separators, line endings ----------------------------------------------------------------------

def test_ping_pong(shared_server, raw):
    c = raw.handshake(shared_server)
    c.send(b"PING\r\nPING\r\nPING\r\n")
    c.expect(PONG * 3)


def test_pong_from_client_is_accepted(shared_server, raw):
    c = raw.handshake(shared_server)
    c.send(b"PONG\r\n")
    c.expect_nothing()
    assert c.is_open()


@pytest.mark.parametrize("ping", [b"ping\r\n", b"PiNg\r\n", b"PING\n", b"PING x\r\n", b"PINGX\r\n"])
def test_ping_variants(shared_server, raw, ping):
    # The parser matches P-I-N-G and then waits for the LF: whatever sits between is ignored.
    c = raw.handshake(shared_server)
    c.send(ping)
    c.expect(PONG)


def test_lower_case_ops(shared_server, raw, subj):
    c = raw.handshake(shared_server, headers=True)
    s = subj.encode()
    c.send(b"sub " + s + b" 1\r\npub " + s + b" 1\r\nx\r\nhpub " + s + b" 12 13\r\nNATS/1.0\r\n\r\ny\r\nunsub 1\r\n"
           b"pub " + s + b" 1\r\nz\r\nping\r\n")
    c.expect(b"MSG " + s + b" 1 1\r\nx\r\nHMSG " + s + b" 1 12 13\r\nNATS/1.0\r\n\r\ny\r\n" + PONG)


def test_mixed_case_ops(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SuB " + s + b" 1\r\nPuB " + s + b" 1\r\nx\r\nUnSuB 1\r\nPuB " + s + b" 1\r\ny\r\n")
    assert flush(c) == b"MSG " + s + b" 1 1\r\nx\r\n"


def test_tabs_and_repeated_spaces_as_separators(shared_server, raw, subj):
    c = raw.handshake(shared_server, headers=True)
    s = subj.encode()
    c.send(b"SUB\t" + s + b"\t \t1\r\nPUB\t" + s + b"  \trep\t1\r\nx\r\nHPUB \t" + s + b"\t12\t\t12\r\n"
           b"NATS/1.0\r\n\r\n\r\nUNSUB\t1\r\nPUB " + s + b" 1\r\ny\r\n")
    assert flush(c) == (b"MSG " + s + b" 1 rep 1\r\nx\r\nHMSG " + s + b" 1 12 12\r\nNATS/1.0\r\n\r\n\r\n")


def test_trailing_whitespace_in_args(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1 \t\r\nPUB " + s + b" 1  \r\nx\r\n")
    assert flush(c) == b"MSG " + s + b" 1 1\r\nx\r\n"


def test_bare_lf_control_lines(shared_server, raw, subj):
    # Control lines may end with LF alone; the payload must still be followed by CRLF.
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\nPUB " + s + b" 2\nhi\r\nUNSUB 1\nPUB " + s + b" 1\nx\r\nPING\n")
    c.expect(b"MSG " + s + b" 1 2\r\nhi\r\n" + PONG)


def test_leading_zeros_in_size(shared_server, raw, subj, target):
    # nats-server copies the size tokens of PUB/HPUB into MSG/HMSG verbatim (client.go keeps pa.szb / pa.hdb),
    # so leading zeros survive; a stripped header is re-counted.  Skiff writes sizes in canonical form: a
    # deliberate difference (docs/parity.md), the same bytes for every client that parses the sizes as numbers.
    s = subj.encode()
    plain = raw.handshake(shared_server)
    plain.send(b"SUB " + s + b" 2\r\n")
    flush(plain)
    c = raw.handshake(shared_server, headers=True)
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" 002\r\nhi\r\nHPUB " + s + b" 012 0014\r\nNATS/1.0\r\n\r\nhi\r\n")
    if target == "nats-server":
        assert flush(c) == b"MSG " + s + b" 1 002\r\nhi\r\nHMSG " + s + b" 1 012 0014\r\nNATS/1.0\r\n\r\nhi\r\n"
        assert flush(plain) == b"MSG " + s + b" 2 002\r\nhi\r\nMSG " + s + b" 2 2\r\nhi\r\n"
    else:
        assert flush(c) == b"MSG " + s + b" 1 2\r\nhi\r\nHMSG " + s + b" 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
        assert flush(plain) == b"MSG " + s + b" 2 2\r\nhi\r\nMSG " + s + b" 2 2\r\nhi\r\n"


def test_client_info_and_ok_are_ignored(shared_server, raw):
    c = raw.handshake(shared_server)
    c.send(b"INFO {}\r\n+OK\r\n")
    assert flush(c) == b""


def test_client_err_closes(shared_server, raw):
    # A client sending -ERR is closed by the server (client.go processErr), without a reply.
    c = raw.handshake(shared_server)
    c.send(b"-ERR 'oops'\r\n")
    assert c.assert_closed() == b""


def test_server_ops_from_client_are_unknown(shared_server, raw):
    for op in (b"MSG foo 1 2\r\nhi\r\n", b"HMSG foo 1 2 2\r\nhi\r\n"):
        c = raw.handshake(shared_server)
        c.send(op)
        assert c.assert_closed() == b"-ERR 'Unknown Protocol Operation'\r\n"


def test_messages_from_many_publishers_in_order_per_publisher(shared_server, raw, subj):
    s = subj.encode()
    sub = raw.handshake(shared_server)
    sub.send(b"SUB " + s + b".> 1\r\n")
    flush(sub)
    pubs = [raw.handshake(shared_server) for _ in range(3)]
    for k, p in enumerate(pubs):
        p.send(b"".join(b"PUB " + s + b".%d 3\r\n%03d\r\n" % (k, i) for i in range(50)))
    for p in pubs:
        flush(p)
    time.sleep(0.05)
    frames = split_frames(flush(sub))
    per = collections.defaultdict(list)
    for line, payload in frames:
        per[line.split()[1]].append(int(payload))
    assert {k: v for k, v in per.items()} == {s + b".%d" % k: list(range(50)) for k in range(3)}


def test_subject_with_many_tokens(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    long = (subj + "." + ".".join(f"t{i}" for i in range(100))).encode()
    c.send(b"SUB " + subj.encode() + b".> 1\r\nPUB " + long + b" 1\r\nx\r\n")
    assert flush(c) == b"MSG " + long + b" 1 1\r\nx\r\n"


def test_reply_subject_is_passed_verbatim(shared_server, raw, subj):
    # The reply subject is not validated: wildcards in it are passed through.
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" 1\r\nPUB " + s + b" a.*.> 1\r\nx\r\n")
    assert flush(c) == b"MSG " + s + b" 1 a.*.> 1\r\nx\r\n"



def test_random_chunking_of_a_long_stream(shared_server, raw, subj):
    # One connection, one sid per subject, so the server's output order is fixed; the input is cut into random
    # chunks (seeded) so every parser state meets a segment boundary somewhere.
    import random

    rng = random.Random(4222)
    c = raw.handshake(shared_server, headers=True)
    s = subj.encode()
    ops, expected = [b"SUB " + s + b".> 1\r\n"], []
    for i in range(300):
        subject = s + b".%d" % (i % 7)
        payload = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 100, 3000])))
        reply = rng.choice([b"", b"r.%d" % i])
        rp = reply + b" " if reply else b""
        if i % 3 == 0:
            hdr = b"NATS/1.0\r\nI: %d\r\n\r\n" % i
            n, t = len(hdr), len(hdr) + len(payload)
            ops.append(b"HPUB " + subject + b" " + rp + b"%d %d\r\n" % (n, t) + hdr + payload + b"\r\n")
            expected.append(b"HMSG " + subject + b" 1 " + rp + b"%d %d\r\n" % (n, t) + hdr + payload + b"\r\n")
        else:
            ops.append(b"PUB " + subject + b" " + rp + b"%d\r\n" % len(payload) + payload + b"\r\n")
            expected.append(b"MSG " + subject + b" 1 " + rp + b"%d\r\n" % len(payload) + payload + b"\r\n")
        if i % 50 == 0:
            ops.append(b"PING\r\n")
            expected.append(PONG)
    stream = b"".join(ops) + b"PING\r\n"
    pos = 0
    while pos < len(stream):
        n = rng.choice([1, 2, 3, 7, 64, 1000, 5000])
        c.send(stream[pos:pos + n])
        pos += n
    want = b"".join(expected) + PONG
    assert c.read_exactly(len(want), timeout=5) == want


def test_verbose_ok_for_hpub(shared_server, raw, subj):
    c = raw.handshake(shared_server, headers=True, verbose=True)
    s = subj.encode()
    c.send(b"HPUB " + s + b" 12 12\r\nNATS/1.0\r\n\r\n\r\n")
    c.expect(b"+OK\r\n")


def test_unsub_of_one_queue_member_leaves_the_other(shared_server, raw, subj):
    c = raw.handshake(shared_server)
    s = subj.encode()
    c.send(b"SUB " + s + b" q 1\r\nSUB " + s + b" q 2\r\nUNSUB 1\r\n" + (b"PUB " + s + b" 1\r\nx\r\n") * 20)
    assert flush(c) == (b"MSG " + s + b" 2 1\r\nx\r\n") * 20
