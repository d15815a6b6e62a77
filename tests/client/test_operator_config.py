"""Operator-mode configuration errors: the same file fails ``-t`` on both servers with nats-server's message
(opts.go processConfigFileLine, jwt.go validateTrustedOperators)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import jwt_helpers as jh
from tests.harness import ROOT, nats_server_binary

OP, SYS, A = jh.new_key("O"), jh.new_key("A"), jh.new_key("A")
OP_JWT = jh.operator_jwt(OP, system_account=SYS.public)
OP_NO_SYS = jh.operator_jwt(OP)
ACC = jh.account_jwt(A, OP)
PRELOAD = f"resolver: MEMORY\nresolver_preload {{ {A.public}: {ACC} }}"

CASES = [
    (f"operator: {OP_JWT}\n{PRELOAD}\naccounts {{ X {{ users: [{{user: x, password: x}}] }} }}",
     "operators do not allow Accounts to be configured directly"),
    (f"operator: {OP_JWT}\n{PRELOAD}\nauthorization {{ users: [{{user: x, password: x}}] }}",
     "operators do not allow users to be configured directly"),
    # Without "resolver" nats-server builds a URL resolver from the operator's (empty) account_server_url and fails
    # fetching the system account; Skiff says why, in validateTrustedOperators' words.
    (f"operator: {OP_JWT}", ("operators require an account resolver to be configured",
                             'could not fetch <"/accounts/">')),
    (f"operator: {OP_JWT}\n{PRELOAD}\ntrusted_keys: [{jh.new_key('O').public}]",
     "conflicting options for 'TrustedKeys' and 'TrustedOperators'"),
    (f"operator: {OP_JWT}\n{PRELOAD}\nsystem_account: {A.public}",
     "system_account in config and operator JWT must be identical"),
    (f'operator: {OP_NO_SYS}\nresolver {{ type: full, dir: "DIR" }}',
     "using nats based account resolver - the system account needs to be specified in configuration or the "
     "operator jwt"),
    ("trusted_keys: [OABC]", 'trust key "OABC" required to be a valid public operator nkey'),
    (f"operator: {OP_JWT}\nresolver: MEMORY\nresolver_preload {{ {A.public}: notajwt }}", "invalid account JWT"),
    ("operator: /nonexistent/op.jwt", "error parsing operator JWT: open /nonexistent/op.jwt: no such file or directory"),
    (f'operator: {OP_JWT}\nresolver {{ type: full, dir: "DIR", ttl: "1m" }}', "FULL does not accept ttl"),
    (f'operator: {OP_JWT}\nresolver {{ type: full, dir: "DIR", hard_delete: true }}',
     "hard_delete has no effect without delete"),
    (f"operator: {OP_JWT}\nresolver: NOPE", "error parsing account resolver"),
]


def _check(cmd: list[str], path: str, start: bool = False) -> subprocess.CompletedProcess:
    """``-t``, or (``start``) a real start on a free port: nats-server checks operators (validateOptions) only when
    it starts, Skiff already when it reads the file."""
    args = ["-a", "127.0.0.1", "-p", "-1"] if start else ["-t"]
    return subprocess.run([*cmd, "-c", path, *args], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


@pytest.mark.parametrize("text,message", CASES, ids=[str(m)[:40] for _, m in CASES])
def test_operator_config_errors_match_nats_server(text, message, tmp_path):
    f = tmp_path / "op.conf"
    f.write_text("port: 4222\n" + text.replace("DIR", str(tmp_path / "jwt")) + "\n")
    theirs = _check([nats_server_binary()], str(f), start=True)
    ours = _check([sys.executable, "-m", "skiff.server"], str(f), start=True)
    ours_msg, theirs_msg = message if isinstance(message, tuple) else (message, message)
    assert theirs.returncode != 0 and theirs_msg in theirs.stderr, theirs.stderr
    assert ours.returncode != 0 and ours_msg in ours.stderr, ours.stderr


def test_valid_operator_config_passes_both(tmp_path):
    f = tmp_path / "op.conf"
    f.write_text(f"port: 4222\noperator: {OP_JWT}\n{PRELOAD}\n")
    assert _check([nats_server_binary()], str(f)).returncode == 0
    ours = _check([sys.executable, "-m", "skiff.server"], str(f))
    assert ours.returncode == 0, ours.stderr
