"""Random configuration files: Skiff's parser accepts exactly what nats-server's accepts (bounded, fixed seed).

nats-server has no "parse only" mode, so a file counts as parsed when ``nats-server -t`` fails only after parsing
(unknown fields, wrong value types) or succeeds.  Known deliberate differences are skipped: ``[1, 2]`` (nats-server
cannot end a number with ``]``), an unknown size suffix such as ``1kbb`` and a key without a value inside a map
(nats-server silently misfiles them; Skiff reports an error).  See server/conf/parser.py.
"""
from __future__ import annotations

import random
import subprocess

import pytest

from skiff.server.conf import ConfigError, parse
from tests.harness import nats_server_binary

ATOMS = ["1", "-1", "42", "1k", "1KB", "2mib", "10ms", "1.5", "-0.5", "127.0.0.1:4222", "1.2.3", "true", "off",
         "Yes", "'sq str'", '"dq\\tstr"', '"\\x41"', "bare", "bare#x", "2016-05-04T18:53:41Z", "$V", "[]", "{}",
         '""', "nats://h:1", "a\\tb", "4222abc", "1Mx", "0x10", "1e5", "1.", ".5", "-", "'", '"', "(", "[a b]",
         "{a: 1}", "{a 1; b 2}", "$2a$11$abc", "12-3", "(\nblock\n)", "/", "x/y"]
SEPS = [": ", " = ", " ", ":", "=", " :\n ", "\n", "  \t"]
KEYS = ["k1", "'q k'", '"dq"', "include", "a.b", "k-2", "K3"]
ENDS = ["\n", "; ", ", ", " # c\n", " // c\n", "\r\n", "", " ", "}", " / "]
NOISE = "{}[]:=,;#/'\"\\$\n "


def _value(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth < 2 and r < 0.15:
        items = [_value(rng, depth + 1) + rng.choice([", ", ",", "\n", " "]) for _ in range(rng.randrange(4))]
        return "[" + rng.choice(["", " ", "\n"]).join(items) + "]"
    if depth < 2 and r < 0.3:
        return "{" + "".join(rng.choice(KEYS[1:]) + rng.choice(SEPS) + _value(rng, depth + 1)
                             + rng.choice(["\n", ", ", "; ", " "]) for _ in range(rng.randrange(3))) + "}"
    return rng.choice(ATOMS)


def _document(rng: random.Random) -> str:
    s = "V: 7\n" + "".join(rng.choice(KEYS) + rng.choice(SEPS) + _value(rng) + rng.choice(ENDS)
                           for _ in range(rng.randrange(1, 4)))
    if rng.random() < 0.25:
        i = rng.randrange(len(s) + 1)
        s = s[:i] + rng.choice(NOISE) + s[i:]
    return s


def _nats_server_parsed(path: str) -> tuple[bool, str]:
    p = subprocess.run([nats_server_binary(), "-c", path, "-t"], capture_output=True, text=True, timeout=30)
    err = p.stderr
    if p.returncode == 0:
        return True, err
    parse_failures = ("Parse error", "variable reference", "error parsing include", "config is invalid",
                      "error opening config", "integer '")
    return not any(f in err for f in parse_failures), err


@pytest.mark.parametrize("seed", range(6))
def test_random_files_parse_alike(seed, tmp_path):
    rng = random.Random(seed)
    (tmp_path / "inc.conf").write_text("zz: 1\n")
    mismatches = []
    for _ in range(40):
        text = _document(rng)
        f = tmp_path / "f.conf"
        f.write_text(text)
        theirs, err = _nats_server_parsed(str(f))
        try:
            parse(text, str(f))
            ours, our_err = True, ""
        except ConfigError as e:
            ours, our_err = False, str(e)
        deliberate = ("array value terminator" in err and ours) or ("has no value" in our_err)
        if theirs != ours and not deliberate and "kbb" not in text:
            mismatches.append((text, err))
    assert not mismatches, mismatches[:3]
