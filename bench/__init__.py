"""Skiff and nats-server side by side: the same load, the same settings, medians and ratios.

Run ``python -m bench`` (or ``make bench``; ``--quick`` for a smoke run).  Modules: servers (start/stop both
servers, memory), build (compile the C load generators in c/), workloads (what is measured, targets), scale
(many connections / consumers, restart), commands (run a client with a hard timeout), run (the A/B loop),
report (table, JSON, Markdown).  See docs/benchmarks.md.
"""
