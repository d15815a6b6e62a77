"""protocol/headers.py: the one-scan read of the Nats-* headers agrees with the per-key lookup (nats-server getHeader
semantics: get_exact)."""
from __future__ import annotations

import itertools
import random

import pytest

from skiff.protocol import headers

KEYS = ["Nats-Msg-Id", "Nats-Expected-Stream", "Nats-TTL", "Nats-Expected-Last-Subject-Sequence",
        "Nats-Expected-Last-Subject-Sequence-Subject", "Nats-Rollup", "Nats-Incr", "X", "Msg-Id"]

# (block, the Nats-* keys nats_values lists, with their raw values)
CASES = [
    (b"", {}),
    (b"NATS/1.0\r\n\r\n", {}),
    (b"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n", {b"Nats-Msg-Id": b"a"}),
    # a key is what stands between a line's start and its first colon; spaces before the value are skipped, tabs
    # and trailing blanks are kept (nats-server sliceHeader)
    (b"NATS/1.0\r\nNats-Msg-Id : a\r\nNats-TTL:  \t 1 \r\n\r\n", {b"Nats-Msg-Id ": b"a", b"Nats-TTL": b"\t 1 "}),
    # a key inside another key or a value is no key; a line without a colon has none; other keys are left out
    (b"NATS/1.0\r\nX-Nats-Msg-Id: a\r\nFoo: Nats-Msg-Id: b\r\nNats-Rollup\r\n\r\n", {}),
    # the status line is never a key, the first of repeats wins, a lone CR or LF belongs to the value
    (b"NATS/1.0 503 Nats-Msg-Id:\r\nNats-A: 1\r\nNats-A: 2\r\nNats-B: x\nNats-C: z\rNats-D: w\r\n\r\n",
     {b"Nats-A": b"1", b"Nats-B": b"x\nNats-C: z\rNats-D: w"}),
    # the last line needs no CRLF; an empty value is a value
    (b"NATS/1.0\r\nNats-Msg-Id:\r\nNats-TTL:5", {b"Nats-Msg-Id": b"", b"Nats-TTL": b"5"}),
]


@pytest.mark.parametrize("hdr,expected", CASES)
def test_nats_values_lists_the_nats_keys_at_line_starts(hdr, expected):
    assert headers.nats_values(hdr) == expected


def test_get_reads_the_first_value_with_blanks_trimmed():
    hdr = b"NATS/1.0\r\nNats-Msg-Id: \t a b \t\r\nNats-Msg-Id: second\r\n\r\n"
    assert headers.get(hdr, "Nats-Msg-Id") == "a b"
    assert headers.get_exact(hdr, "Nats-Msg-Id") == "\t a b \t"
    assert headers.get(hdr, "Nats-TTL") is None


@pytest.mark.parametrize("hdr,_", CASES + [
    (b"NATS/1.0\r\nNats-Msg-Id:\t  a b \t\r\nNats-Msg-Id: 2\r\nNats-TTL: 5\rx\ny \r\nNats-: e\r\n\r\n", None),
    (b"NATS/1.0\r\nX-Nats-Msg-Id: 1\r\nNats-Msg-Id : 2\r\nnats-msg-id: 3\r\nNats-Expected-Stream:\r\n\r\n", None),
])
def test_nats_values_read_what_get_reads(hdr, _):
    values = headers.nats_values(hdr)
    for key in KEYS + ["Nats-", "Nats-Msg-Id ", "Nats-Expected-Stream"] + [k.decode() for k in values]:
        raw = values.get(key.encode())
        got = headers.text(raw) if raw is not None else None
        expected = headers.get_exact(hdr, key) if key.startswith("Nats-") else None
        assert got == expected, (hdr, key)


def test_nats_values_agree_with_get_exact_on_random_blocks():
    rnd = random.Random(18)
    pieces = [b"\r\n", b"\r", b"\n", b":", b" ", b"\t", b"a", b"Nats-Msg-Id", b"Nats-TTL", b"Nats-", b"\xff", b"\r\n\r\n"]
    for _ in range(3000):
        hdr = b"NATS/1.0" + b"".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 16)))
        values = headers.nats_values(hdr)
        listed = [k.decode() for k in values if k.isascii()]  # get() takes a key as text
        for key in itertools.chain(("Nats-Msg-Id", "Nats-TTL", "Nats-", "Nats-a"), listed):
            raw = values.get(key.encode())
            assert (headers.text(raw) if raw is not None else None) == headers.get_exact(hdr, key), (hdr, key)


_ID, _ES = b"Nats-Msg-Id", b"Nats-Expected-Stream"


@pytest.mark.parametrize("hdr,expected", [
    (b"NATS/1.0\r\nNats-Msg-Id: w:0:1:abc\r\nNats-Expected-Stream: S\r\n\r\n", (b"w:0:1:abc", b"S")),
    (b"NATS/1.0\r\nNats-Expected-Stream: S\r\nNats-Msg-Id: a\r\n\r\n", (b"a", b"S")),
    (b"NATS/1.0\r\nNats-Msg-Id:  \t a \r\n\r\n", (b"\t a ", None)),  # spaces skipped, nothing trimmed
    (b"NATS/1.0\r\nNats-Expected-Stream:\r\n\r\n", (None, b"")),
    (b"NATS/1.0\r\nNats-Msg-Id: a\rb\nc\r\n\r\n", (b"a\rb\nc", None)),
    # anything else is left to nats_values
    (b"", None),
    (b"NATS/1.0\r\n\r\n", None),
    (b"NATS/1.0 503\r\nNats-Msg-Id: a\r\n\r\n", None),  # a status line
    (b"NATS/1.0\r\nNats-Msg-Id: a\r\nNats-Msg-Id: b\r\n\r\n", None),  # a repeated key
    (b"NATS/1.0\r\nNats-Msg-Id: a\r\nNats-TTL: 1s\r\n\r\n", None),
    (b"NATS/1.0\r\nNats-Msg-Id: a\r\nX: 1\r\n\r\n", None),
    (b"NATS/1.0\r\nNats-Msg-Id: Nats-Rollup: all\r\n\r\n", None),  # a key named in a value
    (b"NATS/1.0\r\nNats-Msg-Id : a\r\n\r\n", None),
    (b"NATS/1.0\r\nNats-Msg-Id: a\r\n", None),  # no end of block
    (b"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n\r\n", None),
    (b"NATS/1.0\r\nNats-Msg-Id: a\r\nNats-Expected-Stream: S\r\nNats-Expected-Stream: T\r\n\r\n", None),
])
def test_id_values_reads_the_two_keys_of_a_block_that_holds_only_them(hdr, expected):
    assert headers.id_values(hdr) == expected


def test_id_values_agree_with_nats_values_on_random_blocks():
    """Whenever id_values answers, nats_values lists exactly those keys with those values."""
    rnd = random.Random(13)
    pieces = [b"\r\n", b"\r", b"\n", b":", b" ", b"\t", b"a", b"Nats-Msg-Id:", b"Nats-Expected-Stream:", b"Nats-",
              b"\r\nNats-Msg-Id: ", b"\r\nNats-Expected-Stream: ", b"\xff", b"\r\n\r\n"]
    answered = 0
    for _ in range(20000):
        hdr = b"NATS/1.0\r\n" + b"".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 8))) + b"\r\n\r\n"
        ids = headers.id_values(hdr)
        if ids is None:
            continue
        answered += 1
        expected = {k: v for k, v in ((_ID, ids[0]), (_ES, ids[1])) if v is not None}
        assert headers.nats_values(hdr) == expected, hdr
    assert answered > 500  # the random blocks do reach the direct path
