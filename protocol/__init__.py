"""Skiff's protocol layer: bytes <-> operations, with no I/O, no asyncio and no clock.

Modules: `parser` (client -> server operations), `encoder` (server -> client frames), `headers` (NATS/1.0 header
blocks, ADR-4), `subjects` (subject validation and wildcard matching), `errors` (the JetStream API error table),
`jsapi` (JetStream wire models).
"""
