"""JetStream: streams, consumers and the `$JS.API` reached through internal subscriptions."""
from .engine import JetStream

__all__ = ["JetStream"]
