"""The data source's options, parsed once from Spark's option map into frozen dataclasses.  Pure: no Spark.

Option names follow Spark's Kafka source where there is a counterpart (``startingOffsets``, ``endingOffsets``,
``minPartitions``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``); Spark hands them over case-insensitively, so the
lookups here lower-case the keys.  Unknown options are ignored, like Spark's own sources do.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .offsets import EARLIEST, LATEST, parse_offset_spec

__all__ = ["ConnectOptions", "ReadOptions", "WriteOptions"]

DEFAULT_SERVERS = "nats://127.0.0.1:4222"


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): v for k, v in dict(options).items() if v is not None}


def _bool(o: dict, key: str, default: bool) -> bool:
    v = o.get(key.lower())
    if v is None:
        return default
    text = str(v).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"option {key} must be true or false, not {v!r}")


def _int(o: dict, key: str, default: int | None, minimum: int = 0) -> int | None:
    v = o.get(key.lower())
    if v is None or str(v).strip() == "":
        return default
    try:
        n = int(str(v).strip())
    except ValueError:
        raise ValueError(f"option {key} must be an integer, not {v!r}") from None
    if n < minimum:
        raise ValueError(f"option {key} must be >= {minimum}, got {n}")
    return n


def _float(o: dict, key: str, default: float) -> float:
    v = o.get(key.lower())
    return default if v is None else float(v)


def _list(o: dict, key: str) -> tuple[str, ...]:
    v = o.get(key.lower())
    if not v:
        return ()
    return tuple(s.strip() for s in str(v).split(",") if s.strip())


@dataclass(frozen=True)
class ConnectOptions:
    servers: str = DEFAULT_SERVERS
    user: str | None = None
    password: str | None = None
    token: str | None = None
    domain: str | None = None
    timeout: float = 10.0

    @classmethod
    def parse(cls, o: dict) -> "ConnectOptions":
        return cls(
            servers=o.get("servers", DEFAULT_SERVERS),
            user=o.get("user"),
            password=o.get("password"),
            token=o.get("token"),
            domain=o.get("domain") or None,
            timeout=_float(o, "timeout", 10.0),
        )


@dataclass(frozen=True)
class ReadOptions:
    connect: ConnectOptions
    stream: str
    starting: str | int = EARLIEST
    ending: str | int = LATEST
    filter_subjects: tuple[str, ...] = ()
    min_partitions: int = 1
    max_seqs_per_partition: int = 100_000
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    read_method: str = "consumer"
    fetch_batch: int = 2000

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool = False) -> "ReadOptions":
        o = _lower(options)
        stream = o.get("stream")
        if not stream:
            raise ValueError("option 'stream' is required")
        method = o.get("readmethod", "consumer").lower()
        if method not in ("consumer", "direct"):
            raise ValueError(f"option readMethod must be 'consumer' or 'direct', not {method!r}")
        filters = _list(o, "filterSubjects")
        if method == "direct" and len(filters) > 1:
            raise ValueError("readMethod=direct takes one filter subject at most")
        # Kafka: batch queries default to earliest..latest, streaming queries start at latest
        start_default = LATEST if streaming else EARLIEST
        ending = parse_offset_spec(o.get("endingoffsets", LATEST), "endingOffsets", allow_earliest=False)
        if streaming and "endingoffsets" in o:
            raise ValueError("endingOffsets is for batch queries only")
        return cls(
            connect=ConnectOptions.parse(o),
            stream=stream,
            starting=parse_offset_spec(o.get("startingoffsets", start_default), "startingOffsets"),
            ending=ending,
            filter_subjects=filters,
            min_partitions=_int(o, "minPartitions", 1, 1),
            max_seqs_per_partition=_int(o, "maxSeqsPerPartition", 100_000, 1),
            max_offsets_per_trigger=_int(o, "maxOffsetsPerTrigger", None, 1),
            fail_on_data_loss=_bool(o, "failOnDataLoss", True),
            read_method=method,
            fetch_batch=_int(o, "fetchBatch", 2000, 1),
        )


@dataclass(frozen=True)
class WriteOptions:
    connect: ConnectOptions
    stream: str | None = None  # when set, every PubAck must come from this stream
    subject: str | None = None  # for rows without a subject column (or a null subject)
    write_id: str | None = None  # stable prefix of generated Nats-Msg-Id values (batch writes)
    max_in_flight: int = 2048

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "WriteOptions":
        o = _lower(options)
        return cls(
            connect=ConnectOptions.parse(o),
            stream=o.get("stream") or None,
            subject=o.get("subject") or None,
            write_id=o.get("writeid") or None,
            max_in_flight=_int(o, "maxInFlight", 2048, 1),
        )
