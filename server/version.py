"""What Skiff reports about itself.

``VERSION`` is the nats-server version whose client-visible features Skiff implements: clients gate features on the
INFO ``version`` (nats.py uses named-consumer subjects only from 2.9; 2.11 brings priority groups and pause, 2.12
the `prioritized` policy), so it must be a real 2.x.y.  ``API_LEVEL`` is the JetStream API level of that release
(ADR-44: 2.12.0-2.12.4 report level 2).
"""
import platform

SKIFF_VERSION = "0.1.0"
VERSION = "2.12.0"
API_LEVEL = 2
PROTO = 1
GO_FIELD = f"python{platform.python_version()} (skiff {SKIFF_VERSION})"
