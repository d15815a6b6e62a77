"""The reliability campaigns, run against Skiff and nats-server side by side (docs/reliability.md).

    python -m bench.lab <campaign> [--quick] [--seconds N] [--servers skiff,nats-server] [--json FILE]

Campaigns: crash-lab (kill -9 during publish / ack / delete / purge / create, file damage, full disk),
fuzz-api (malformed JetStream API requests, replies compared), fuzz-protocol (mutated protocol input with a
canary client), stall-probes (one client's heavy request against a canary), bypass-probes (permission
bypasses), churn-memory (RSS across connect/disconnect cycles), restart-time (restart after kill -9), all.
Every campaign is bounded by --seconds and prints one table: metric, Skiff, nats-server.
"""
