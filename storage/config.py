"""Limits and tuning a stream store enforces (a slice of the stream config, nats-server ``StreamConfig``).

The store enforces limits itself, as nats-server's stores do: ``store_msg`` applies discard-new checks and then
evicts for ``max_msgs`` / ``max_bytes`` / ``max_msgs_per_subject``; ``expire(now)`` applies ``max_age`` and
per-message TTLs.  The server builds a ``StoreConfig`` from its stream config with ``from_stream_config`` and
passes a new one to ``update_config`` when the stream is updated.

Limits use nats-server's conventions: ``-1`` (or any value <= 0) means unlimited; durations are nanoseconds.
"""
from __future__ import annotations

from typing import Any

from skiff.protocol.record import Fields

NANOS = 1_000_000_000
DEFAULT_SYNC_INTERVAL = 120 * NANOS  # nats-server defaultSyncInterval (2m)
DEFAULT_BLOCK_SIZE = 4 * 1024 * 1024  # nats-server defaultMediumBlockSize; 1M x 128B msgs -> ~45 blocks


class StoreConfig(Fields):
    """A plain slotted class (``protocol.record.Fields``): a dataclass's ``__init__`` (then ``__post_init__``),
    equality and ``repr``, without the code ``dataclass()`` generates at import."""

    __slots__ = _fields = (
        "name", "subjects", "max_msgs", "max_bytes", "max_age", "max_msgs_per_subject", "max_msg_size", "discard",
        "discard_new_per_subject", "allow_msg_ttl", "subject_delete_marker_ttl", "first_seq", "block_size",
        "sync_interval", "sync_always",
    )

    def __init__(
        self,
        name: str = "",
        subjects: tuple[str, ...] = (),
        max_msgs: int = -1,
        max_bytes: int = -1,
        max_age: int = 0,  # ns, 0 = none
        max_msgs_per_subject: int = -1,
        max_msg_size: int = -1,  # len(hdr) + len(data)
        discard: str = "old",  # "old" | "new"
        discard_new_per_subject: bool = False,
        allow_msg_ttl: bool = False,
        subject_delete_marker_ttl: int = 0,  # ns; when set, expire() reports whether a removal emptied its subject
        first_seq: int = 0,  # initial sequence of a new stream (stream config ``first_seq``)
        # File store only.
        block_size: int = DEFAULT_BLOCK_SIZE,
        sync_interval: int = DEFAULT_SYNC_INTERVAL,  # ns; the server runs store.sync() in a thread this often
        sync_always: bool = False,  # nats-server ``sync_interval: always``: fsync before PubAck (group commit)
    ) -> None:
        self.name = name
        self.subjects = subjects
        self.max_msgs = max_msgs
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.max_msgs_per_subject = max_msgs_per_subject
        self.max_msg_size = max_msg_size
        self.discard = discard
        self.discard_new_per_subject = discard_new_per_subject
        self.allow_msg_ttl = allow_msg_ttl
        self.subject_delete_marker_ttl = subject_delete_marker_ttl
        self.first_seq = first_seq
        self.block_size = block_size
        self.sync_interval = sync_interval
        self.sync_always = sync_always
        self.__post_init__()

    def __post_init__(self) -> None:
        for name in ("max_msgs", "max_bytes", "max_msgs_per_subject", "max_msg_size"):
            if getattr(self, name) <= 0:
                setattr(self, name, -1)
        self.discard = (self.discard or "old").lower()
        if self.discard not in ("old", "new"):
            raise ValueError(f"discard must be 'old' or 'new', not {self.discard!r}")
        self.subjects = tuple(self.subjects or ())
        if self.max_age < 0:
            self.max_age = 0
        if self.block_size < 4096:
            self.block_size = 4096

    @property
    def discard_new(self) -> bool:
        return self.discard == "new"

    @classmethod
    def from_stream_config(cls, cfg: Any, **overrides: Any) -> "StoreConfig":
        """Pick the fields a store needs from a stream config (pydantic model, dataclass or dict).

        Unknown fields are ignored; ``max_msgs_per_subject`` is also accepted as ``max_msgs_per``.
        """
        if hasattr(cfg, "model_dump"):
            src = cfg.model_dump()
        elif isinstance(cfg, dict):
            src = dict(cfg)
        else:
            src = {k: getattr(cfg, k) for k in dir(cfg) if not k.startswith("_")}
        if "max_msgs_per" in src and "max_msgs_per_subject" not in src:
            src["max_msgs_per_subject"] = src["max_msgs_per"]
        names = set(cls._fields)
        kw = {k: v for k, v in src.items() if k in names and v is not None}
        if hasattr(kw.get("discard"), "value"):
            kw["discard"] = kw["discard"].value
        kw.update(overrides)
        return cls(**kw)
