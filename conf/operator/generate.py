"""Regenerate this example's keys, JWTs and .creds files (run from the repository root):

    .venv/bin/python conf/operator/generate.py

It does what these nsc commands do, with the same libraries nsc's Go code uses the equivalent of (nkeys + Ed25519
through PyNaCl), through tests/jwt_helpers.py:

    nsc add operator --generate-signing-key --sys --name skiff-example
    nsc add account APP && nsc edit account APP --js-mem-storage -1 --js-disk-storage -1 --js-streams -1 \
        --js-consumer -1
    nsc add user --account APP app
    nsc add user --account SYS sys
    nsc generate config --mem-resolver        # operator.conf's resolver_preload

The seeds of the operator and account keys are not kept: to change an account, run this again (every key is new).
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from tests import jwt_helpers as jh  # noqa: E402


def main() -> None:
    op, op_sk = jh.new_key("O"), jh.new_key("O")
    sys_acc, app = jh.new_key("A"), jh.new_key("A")
    operator = jh.operator_jwt(op, name="skiff-example", system_account=sys_acc.public, signing_keys=[op_sk.public])
    accounts = {
        sys_acc.public: jh.account_jwt(sys_acc, op_sk, name="SYS"),
        app.public: jh.account_jwt(app, op_sk, name="APP", jetstream={
            "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}),
    }
    with open(os.path.join(HERE, "operator.jwt"), "w") as f:
        f.write(operator + "\n")
    os.makedirs(os.path.join(HERE, "creds"), exist_ok=True)
    for name, acc in (("app", app), ("sys", sys_acc)):
        u = jh.new_key("U")
        jh.write_creds(os.path.join(HERE, "creds", f"{name}.creds"), jh.user_jwt(u, acc, name=name), u)
    preload = "\n".join(f"  # {n}\n  {k}: {v}" for (k, v), n in zip(accounts.items(), ("SYS", "APP")))
    with open(os.path.join(HERE, "operator.conf"), "w") as f:
        f.write(f"""# Operator mode (decentralised JWT authentication) with the memory resolver.
# Keys, JWTs and .creds files were made by conf/operator/generate.py; see README.md.  Paths are relative to the
# directory the server starts in (as for nats-server): start it from the repository root.
#
#   .venv/bin/python -m skiff.server -c conf/operator/operator.conf
#   nats --creds conf/operator/creds/app.creds pub hello world
listen: 127.0.0.1:4222
jetstream: enabled

operator: conf/operator/operator.jwt
# The operator JWT names SYS as its system account; nats-server and Skiff take it from there.
resolver: MEMORY
resolver_preload {{
{preload}
}}
""")


if __name__ == "__main__":
    main()
