"""Random control lines sent to Skiff and nats-server side by side: both must answer the same bytes.

Each case is a short run of PUB/HPUB/SUB/UNSUB/CONNECT/PING/PONG lines built with whitespace variants where the
protocol has separators (space, tab, doubled separators, and the bytes that are *not* separators but look like
them: CR, LF, VT, FF), odd line endings (LF alone, CR CR LF, a byte between CR and LF), op names in mixed case,
payload sizes that are sometimes off by one, and now and then one stray byte inserted anywhere.  Every case runs on
a fresh connection to each server (a CONNECT with headers, a catch-all ``SUB > zz``), then a PING; what comes back
until the PONG or the close is compared byte for byte, with the outcome (answered the PING / closed / still
waiting for more input).

A fixed seed keeps a failure reproducible (the assertion prints the case); the run is bounded in time and in
cases.  Needs both servers, so it runs once, with ``--target=both`` (the default).
"""
from __future__ import annotations

import random
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.harness import ServerProcess

SEED = 20260317
CASES = 400
TIME_BUDGET = 60.0  # seconds; stop early (and say so) rather than run long on a loaded machine
CATCH_ALL = b"SUB > zz\r\n"
PRELUDE = b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n' + CATCH_ALL

# Separators: mostly a plain space, but also what nats-server does and does not treat as one.
SEPS = [b" "] * 8 + [b"\t", b"  ", b" \t", b"\r", b"\x0b", b"\x0c", b"\n", b" \r", b"\r ", b"\x1f"]
EOLS = [b"\r\n"] * 8 + [b"\n", b"\r\r\n", b" \r\n", b"\t\r\n", b"\rx\n", b"\r \n", b"\x0b\r\n"]
SUBJECTS = [b"fz.a", b"fz.b", b"fz.a.b", b"fz", b"fz..a", b"fz.\xc3\xa9", b"fz.a\x0bb", b"fz.a\x0cb"]
SUB_SUBJECTS = SUBJECTS + [b"fz.*", b"fz.>", b"*.a", b">", b"fz.>.a", b"fz.*x"]
REPLIES = [b"r.1", b"_INBOX.x", b"fz.a"]
SIDS = [b"1", b"2", b"10", b"s"]
STRAY = b" \t\r\n\x0b\x0c\x00x5"


def _word(rng: random.Random, word: bytes) -> bytes:
    r = rng.random()
    if r < 0.8:
        return word
    if r < 0.9:
        return word.lower()
    return bytes(c ^ 0x20 if 65 <= c <= 90 and rng.random() < 0.5 else c for c in word)


def _sep(rng: random.Random) -> bytes:
    return rng.choice(SEPS)


def _size(rng: random.Random, n: int) -> bytes:
    r = rng.random()
    if r < 0.85:
        return b"%d" % n
    if r < 0.93:
        return b"%d" % (n + rng.choice((-1, 1)))
    # No leading zeros: nats-server copies the publisher's size digits into MSG/HMSG ("018" stays "018") where
    # Skiff writes the number - a deliberate difference outside the parser (docs/parity.md).
    return rng.choice([b"+%d" % n, b"-%d" % n, b"x", b""])


def _payload(rng: random.Random) -> bytes:
    return rng.choice([b"", b"hi", b"hello", b"a b\r\nc", b"\x00\xff"])


def _op(rng: random.Random) -> bytes:
    kind = rng.choice(["PUB"] * 4 + ["HPUB"] * 2 + ["SUB"] * 3 + ["UNSUB", "PING", "PONG"])
    if kind == "PUB":
        data = _payload(rng)
        args = [rng.choice(SUBJECTS)] + ([rng.choice(REPLIES)] if rng.random() < 0.3 else []) + [_size(rng, len(data))]
        return _word(rng, b"PUB") + _sep(rng) + b"".join(a + _sep(rng) for a in args[:-1]) + args[-1] + rng.choice(
            EOLS) + data + b"\r\n"
    if kind == "HPUB":
        hdr = rng.choice([b"NATS/1.0\r\n\r\n", b"NATS/1.0\r\nA: b\r\n\r\n"])
        data = hdr + _payload(rng)
        args = [rng.choice(SUBJECTS)] + ([rng.choice(REPLIES)] if rng.random() < 0.3 else [])
        args += [_size(rng, len(hdr)), _size(rng, len(data))]
        return _word(rng, b"HPUB") + _sep(rng) + b"".join(a + _sep(rng) for a in args[:-1]) + args[-1] + rng.choice(
            EOLS) + data + b"\r\n"
    if kind == "SUB":
        args = [rng.choice(SUB_SUBJECTS)] + ([b"q"] if rng.random() < 0.25 else []) + [rng.choice(SIDS)]
        return _word(rng, b"SUB") + _sep(rng) + _sep(rng).join(args) + rng.choice(EOLS)
    if kind == "UNSUB":
        args = [rng.choice(SIDS)] + ([rng.choice([b"1", b"2", b"x"])] if rng.random() < 0.4 else [])
        return _word(rng, b"UNSUB") + _sep(rng) + _sep(rng).join(args) + rng.choice(EOLS)
    return _word(rng, kind.encode()) + rng.choice([b"", b"", b" x", b"\t"]) + rng.choice(EOLS)


def _connect(rng: random.Random) -> bytes:
    body = rng.choice([b'{"verbose":false,"headers":true}', b'{"headers":true,"echo":true}', b'{"headers":true}'])
    return _word(rng, b"CONNECT") + rng.choice([b" ", b"", b"\t", b"  ", b"\n", b"\r"]) + body + rng.choice(EOLS)


def make_case(rng: random.Random) -> bytes:
    """The bytes sent after INFO, before the final PING.

    A case that tests CONNECT sends it as the connection's first line, followed by the catch-all SUB: a second
    CONNECT is not a parser matter, and nats-server 2.15.1 stops delivering to the subscriptions made before it
    while Skiff keeps delivering (a difference outside the parser, not yet looked into), which would swamp the
    comparison."""
    ops = [_op(rng) for _ in range(rng.randint(1, 4))]
    data = b"".join(ops)
    if rng.random() < 0.25:
        i = rng.randrange(len(data) + 1)
        data = data[:i] + bytes([rng.choice(STRAY)]) + data[i:]
    if rng.random() < 0.3:
        return _connect(rng) + CATCH_ALL + data
    return PRELUDE + data


def answer(port: int, data: bytes, wait: float = 0.5) -> tuple[str, bytes]:
    """Send the case and a PING; return (outcome, bytes after INFO up to the PONG or the close)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        info = b""
        while not info.endswith(b"\r\n"):
            chunk = s.recv(4096)
            assert chunk, "closed before INFO"
            info += chunk
        s.sendall(data + b"PING\r\n")
        out = b""
        deadline = time.monotonic() + wait
        while True:
            s.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                chunk = s.recv(65536)
            except (socket.timeout, TimeoutError):
                return "waiting", out
            except ConnectionError:
                return "closed", out
            if not chunk:
                return "closed", out
            out += chunk
            if out.endswith(b"PONG\r\n"):
                return "open", out
    finally:
        s.close()


def canonical(out: bytes) -> list[bytes]:
    """The answer as frames (a MSG/HMSG with its payload, or one line), with each run of deliveries of one message
    sorted: nats-server keeps a subject's subscriptions in a Go map, so two subscriptions of one connection on the
    same subject (``SUB > zz`` and ``SUB > 1``) get the message in no fixed order."""
    frames, pos = [], 0
    while pos < len(out):
        eol = out.find(b"\r\n", pos)
        if eol < 0:
            frames.append(out[pos:])
            break
        end = eol + 2
        if out.startswith((b"MSG ", b"HMSG "), pos):
            size = out[pos:eol].rsplit(b" ", 1)[-1]
            end = min(len(out), end + int(size) + 2) if size.isdigit() else end
        frames.append(out[pos:end])
        pos = end

    def key(frame: bytes):  # the delivered message, without the sid
        if not frame.startswith((b"MSG ", b"HMSG ")):
            return None
        line, _, rest = frame.partition(b"\r\n")
        f = line.split(b" ")
        return f[0], f[1], tuple(f[3:]), rest

    result: list[bytes] = []
    run: list[bytes] = []
    for frame in frames + [b""]:
        if run and (key(frame) is None or key(frame) != key(run[0])):
            result += sorted(run)
            run = []
        if key(frame) is not None:
            run.append(frame)
        elif frame:
            result.append(frame)
    return result


@pytest.fixture(scope="module", params=["compiled", "pure"])
def pair(request):
    """Skiff with its compiled PUB/HPUB scanner (protocol/_speedups.c) or with SKIFF_PURE_PYTHON=1, beside
    nats-server: both parsers must give nats-server's answers."""
    if request.config.getoption("--target") != "both":
        pytest.skip("a differential test needs both servers (--target=both)")
    servers = [ServerProcess(kind=k, jetstream=False) for k in ("skiff", "nats-server")]
    try:
        with pytest.MonkeyPatch.context() as mp:  # the server process's environment is this one's (server_env)
            mp.setenv("SKIFF_PURE_PYTHON", "1" if request.param == "pure" else "0")
            for s in servers:
                s.start()
        yield servers
    finally:
        for s in servers:
            s.cleanup()


def test_generator_covers_the_odd_bytes():
    """The corpus really contains what the test is about (a generator change must not quietly lose it)."""
    rng = random.Random(SEED)
    corpus = b"".join(make_case(rng) for _ in range(CASES))
    for needle in (b"PUB fz.a\x0b", b"SUB fz\r1", b"\rx\n", b"UNSUB\t", b"CONNECT\n", b"hpub", b"PUB\n"):
        assert needle in corpus, needle


def test_same_answers_as_nats_server(pair):
    skiff, nats = pair
    rng = random.Random(SEED)
    cases = [make_case(rng) for _ in range(CASES)]
    started = time.monotonic()
    done = 0
    mismatches = []
    with ThreadPoolExecutor(2) as pool:
        for data in cases:
            if time.monotonic() - started > TIME_BUDGET:
                break
            a, b = pool.map(lambda srv: answer(srv.port, data), (skiff, nats))
            if a[0] != b[0] or canonical(a[1]) != canonical(b[1]):
                mismatches.append(f"{data!r}\n    skiff:       {a}\n    nats-server: {b}")
            done += 1
    assert done >= min(CASES, 100), f"only {done} cases in {TIME_BUDGET}s"
    assert not mismatches, f"{len(mismatches)} of {done} cases differ:\n" + "\n".join(mismatches[:20])


def test_canonical_sorts_only_deliveries_of_one_message():
    out = b"MSG a 2 1\r\nx\r\nMSG a 1 1\r\nx\r\nPONG\r\nMSG b 1 2\r\nhi\r\nMSG a 1 1\r\nx\r\n-ERR 'x'\r\n"
    assert canonical(out) == [b"MSG a 1 1\r\nx\r\n", b"MSG a 2 1\r\nx\r\n", b"PONG\r\n", b"MSG b 1 2\r\nhi\r\n",
                              b"MSG a 1 1\r\nx\r\n", b"-ERR 'x'\r\n"]
    assert canonical(b"HMSG a\rb 2 r 6 8\r\nab\r\n\r\nhi\r\nPO") == [b"HMSG a\rb 2 r 6 8\r\nab\r\n\r\nhi\r\n", b"PO"]
