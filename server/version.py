"""What Skiff reports about itself.

``VERSION`` is the nats-server version whose client-visible features Skiff implements: clients gate features on the
INFO ``version`` (nats.py uses named-consumer subjects only from 2.9; 2.11 brings priority groups and pause, 2.12
the `prioritized` policy), so it must be a real 2.x.y.  ``API_LEVEL`` is the JetStream API level of that release
(ADR-44 and jetstream_versioning.go: level 2 is 2.12, level 4 is 2.14 with AckFlowControl consumers, durable
sourcing, consumer reset and fast batch publish; level 5, 2.15, adds stream identities for sources).
"""
import sys

SKIFF_VERSION = "0.1.0"
VERSION = "2.15.1"
API_LEVEL = 5
PROTO = 1
# platform.python_version() is the first word of sys.version (platform parses it from there; importing platform
# costs ~4 ms of every start)
GO_FIELD = f"python{sys.version.split()[0]} (skiff {SKIFF_VERSION})"
