"""Regenerate this example's keys, JWTs and .creds files (run from the repository root):

    .venv/bin/python conf/operator-imports/generate.py

TEST KEYS: everything here is a public example made for Skiff's documentation and tests; never trust these
credentials with anything.  The operator and account seeds are not kept (nobody can sign new accounts or users
for this operator); the user seeds are in the .creds files, as nsc writes them.

It does what these nsc commands do, through tests/jwt_helpers.py (Ed25519 keys from PyNaCl encoded as nkeys by
the ``nkeys`` package, JWTs in nats-io/jwt v2's format):

    nsc add operator --name skiff-imports
    nsc add account SHOP
    nsc add export --account SHOP --service --subject "prices.*" --name prices
    nsc add export --account SHOP --subject "orders.>" --name orders
    nsc add account BILLING
    nsc add import --account BILLING --src-account <SHOP> --service --remote-subject "prices.*" \
        --local-subject "price.*"
    nsc add import --account BILLING --src-account <SHOP> --remote-subject "orders.>" \
        --local-subject "shop.orders.>"
    nsc add user --account SHOP shop && nsc add user --account BILLING billing
    nsc generate config --mem-resolver        # operator.conf's resolver_preload
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from tests import jwt_helpers as jh  # noqa: E402


def main() -> None:
    op, shop, billing = jh.new_key("O"), jh.new_key("A"), jh.new_key("A")
    operator = jh.operator_jwt(op, name="skiff-imports")
    accounts = {
        "SHOP": (shop.public, jh.account_jwt(shop, op, name="SHOP", exports=[
            {"name": "prices", "type": "service", "subject": "prices.*"},
            {"name": "orders", "type": "stream", "subject": "orders.>"}])),
        "BILLING": (billing.public, jh.account_jwt(billing, op, name="BILLING", imports=[
            {"name": "prices", "type": "service", "account": shop.public, "subject": "prices.*",
             "local_subject": "price.*"},
            {"name": "orders", "type": "stream", "account": shop.public, "subject": "orders.>",
             "local_subject": "shop.orders.>"}])),
    }
    with open(os.path.join(HERE, "operator.jwt"), "w") as f:
        f.write(operator + "\n")
    os.makedirs(os.path.join(HERE, "creds"), exist_ok=True)
    for name, acc in (("shop", shop), ("billing", billing)):
        u = jh.new_key("U")
        jh.write_creds(os.path.join(HERE, "creds", f"{name}.creds"), jh.user_jwt(u, acc, name=name), u)
    preload = "\n".join(f"  # {n}\n  {k}: {v}" for n, (k, v) in accounts.items())
    with open(os.path.join(HERE, "operator.conf"), "w") as f:
        f.write(f"""# Operator mode with an export and an import: account SHOP exports the service prices.* and the stream
# orders.>, account BILLING imports them as price.* and shop.orders.>.  TEST KEYS made by generate.py (see
# README.md): a public example, never use them for anything real.  Paths are relative to the directory the
# server starts in (as for nats-server): start it from the repository root.
#
#   .venv/bin/python -m skiff.server -c conf/operator-imports/operator.conf
listen: 127.0.0.1:4222

operator: conf/operator-imports/operator.jwt
resolver: MEMORY
resolver_preload {{
{preload}
}}
""")


if __name__ == "__main__":
    main()
