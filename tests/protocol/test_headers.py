"""protocol/headers.py: the one-scan key list agrees with the per-key lookup (nats-server getHeader semantics)."""
from __future__ import annotations

import itertools
import random

import pytest

from skiff.protocol import headers

KEYS = ["Nats-Msg-Id", "Nats-Expected-Stream", "Nats-TTL", "Nats-Expected-Last-Subject-Sequence",
        "Nats-Expected-Last-Subject-Sequence-Subject", "Nats-Rollup", "Nats-Incr", "X", "Msg-Id"]

CASES = [
    (b"", []),
    (b"NATS/1.0\r\n\r\n", []),
    (b"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n", [b"Nats-Msg-Id"]),
    # a key is what stands between a line's start and its first colon
    (b"NATS/1.0\r\nNats-Msg-Id : a\r\nX:1\r\n\r\n", [b"Nats-Msg-Id ", b"X"]),
    # a key inside another key or a value is no key; a line without a colon has none
    (b"NATS/1.0\r\nX-Nats-Msg-Id: a\r\nFoo: Nats-Msg-Id: b\r\nbare line\r\n\r\n", [b"X-Nats-Msg-Id", b"Foo"]),
    # the status line is never a key, repeats are listed, a lone CR or LF does not start a line
    (b"NATS/1.0 503 Nats-Msg-Id:\r\nA: 1\r\nA: 2\r\nB: x\ny: z\rC: w\r\n\r\n", [b"A", b"A", b"B"]),
    # the last line needs no CRLF; an empty key is no key
    (b"NATS/1.0\r\n: v\r\nNats-TTL:5", [b"Nats-TTL"]),
]


@pytest.mark.parametrize("hdr,expected", CASES)
def test_keys_lists_the_keys_at_line_starts(hdr, expected):
    assert headers.keys(hdr) == expected


@pytest.mark.parametrize("hdr,_", CASES)
def test_a_key_is_listed_exactly_when_get_finds_it(hdr, _):
    listed = headers.keys(hdr)
    for key in KEYS + [k.decode() for k in listed]:
        assert (key.encode() in listed) == (headers.get(hdr, key) is not None), (hdr, key)


def test_keys_agrees_with_get_on_random_blocks():
    """Blocks built from the characters that matter (CR, LF, colon, blanks) around known keys."""
    rnd = random.Random(13)
    pieces = [b"\r\n", b"\r", b"\n", b":", b" ", b"\t", b"a", b"Nats-Msg-Id", b"Nats-TTL", b"X", b"Nats-"]
    for _ in range(3000):
        hdr = b"NATS/1.0" + b"".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 14)))
        listed = headers.keys(hdr)
        for key in itertools.chain(("Nats-Msg-Id", "Nats-TTL", "X", "a", "Nats-", "Nats-Msg-IdX"),
                                   (k.decode() for k in listed)):
            assert (key.encode() in listed) == (headers.get(hdr, key) is not None), (hdr, key)


def test_get_reads_the_first_value_with_blanks_trimmed():
    hdr = b"NATS/1.0\r\nNats-Msg-Id: \t a b \t\r\nNats-Msg-Id: second\r\n\r\n"
    assert headers.get(hdr, "Nats-Msg-Id") == "a b"
    assert headers.get_exact(hdr, "Nats-Msg-Id") == "\t a b \t"
    assert headers.get(hdr, "Nats-TTL") is None
