"""The data source's options, parsed once from Spark's option map into frozen dataclasses.  Pure: no Spark.

Option names follow Spark's Kafka source where there is a counterpart (``startingOffsets``, ``endingOffsets``,
``minPartitions``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``); Spark hands them over case-insensitively, so the
lookups here lower-case the keys.

An option this source does not know is an error naming it and its close matches (``filterSubject`` is not silently
ignored: it would read the whole stream), and so is an option that means nothing for the query at hand
(``endingOffsets`` on a streaming query, ``writeId`` on a read).  Spark adds ``checkpointLocation`` and
``queryName`` to a streaming sink's options itself; those are accepted there.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Mapping

from .offsets import EARLIEST, LATEST, OffsetError, parse_offset_spec

__all__ = ["ConnectOptions", "ReadOptions", "WriteOptions", "check_option_names", "ALL_OPTIONS"]

DEFAULT_SERVERS = "nats://127.0.0.1:4222"

CONNECT_OPTIONS = ("servers", "user", "password", "token", "credsFile", "nkeySeedFile", "tlsCaFile", "tlsCertFile",
                   "tlsKeyFile", "tlsHandshakeFirst", "domain", "timeout")
READ_OPTIONS = CONNECT_OPTIONS + ("stream", "startingOffsets", "startingTimestamp", "endingOffsets", "filterSubjects",
                                  "minPartitions", "maxSeqsPerPartition", "failOnDataLoss", "readMethod", "fetchBatch")
STREAM_READ_OPTIONS = tuple(o for o in READ_OPTIONS if o != "endingOffsets") + ("maxOffsetsPerTrigger",)
WRITE_OPTIONS = CONNECT_OPTIONS + ("stream", "subject", "writeId", "maxInFlight")
STREAM_WRITE_OPTIONS = WRITE_OPTIONS + ("checkpointLocation", "queryName")  # the last two are added by Spark
ALL_OPTIONS = tuple(dict.fromkeys(READ_OPTIONS + STREAM_READ_OPTIONS + STREAM_WRITE_OPTIONS))
_KIND_OPTIONS = {"any": ALL_OPTIONS, "read": READ_OPTIONS, "stream": STREAM_READ_OPTIONS, "write": WRITE_OPTIONS,
                 "stream-write": STREAM_WRITE_OPTIONS}
_KIND_NAMES = {"read": "a batch read", "stream": "a streaming read", "write": "a batch write",
               "stream-write": "a streaming write"}


def check_option_names(options: Mapping[str, str], kind: str = "any") -> None:
    """Raise ValueError for an option that is unknown (with close matches) or means nothing for ``kind``."""
    allowed = {o.lower(): o for o in _KIND_OPTIONS[kind]}
    known = {o.lower(): o for o in ALL_OPTIONS}
    for key in options:
        low = str(key).lower()
        if low in allowed:
            continue
        if low in known:
            if low == "endingoffsets" and kind == "stream":
                raise ValueError("option endingOffsets is for batch queries only: a streaming query reads until "
                                 "it is stopped (use Trigger.AvailableNow to stop at the end of the stream)")
            raise ValueError(f"option {known[low]} does not apply to {_KIND_NAMES[kind]}; it takes: "
                             f"{', '.join(_KIND_OPTIONS[kind])}")
        if low == "path":
            raise ValueError("the jetstream source takes no path: name the stream with option 'stream'")
        close = difflib.get_close_matches(low, list(known), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(known[c]) for c in close)}?" if close else ""
        raise ValueError(f"unknown option {key!r} for the jetstream source{hint} (options: {', '.join(ALL_OPTIONS)})")


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
    if v is None or str(v).strip() == "":
        return default
    try:
        x = float(str(v).strip())
    except ValueError:
        raise ValueError(f"option {key} must be a number of seconds, not {v!r}") from None
    if not x > 0 or x == float("inf"):
        raise ValueError(f"option {key} must be a positive number of seconds, got {v!r}")
    return x


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
    # files, read where the connection is made (the driver and every executor must have them at this path)
    creds_file: str | None = None
    nkey_seed_file: str | None = None
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_handshake_first: bool = False

    @classmethod
    def parse(cls, o: dict) -> "ConnectOptions":
        opts = cls(
            servers=o.get("servers", DEFAULT_SERVERS),
            user=o.get("user"),
            password=o.get("password"),
            token=o.get("token"),
            domain=o.get("domain") or None,
            timeout=_float(o, "timeout", 10.0),
            creds_file=o.get("credsfile") or None,
            nkey_seed_file=o.get("nkeyseedfile") or None,
            tls_ca_file=o.get("tlscafile") or None,
            tls_cert_file=o.get("tlscertfile") or None,
            tls_key_file=o.get("tlskeyfile") or None,
            tls_handshake_first=_bool(o, "tlsHandshakeFirst", False),
        )
        # one way to authenticate: the server would pick one of several and silently ignore the others
        ways = [name for name, on in (("user/password", opts.user is not None or opts.password is not None),
                                      ("token", opts.token is not None), ("credsFile", opts.creds_file),
                                      ("nkeySeedFile", opts.nkey_seed_file)) if on]
        if len(ways) > 1:
            raise ValueError(f"options {' and '.join(ways)} are two ways to authenticate: give one")
        if bool(opts.tls_cert_file) != bool(opts.tls_key_file):
            raise ValueError("options tlsCertFile and tlsKeyFile go together: the client certificate and its key")
        if opts.tls_handshake_first and not opts.wants_tls:
            raise ValueError("option tlsHandshakeFirst needs TLS: a tls:// server URL or the tlsCaFile / "
                             "tlsCertFile options")
        return opts

    @property
    def wants_tls(self) -> bool:
        return bool(self.tls_ca_file or self.tls_cert_file or "tls://" in self.servers.lower())

    def ssl_context(self):
        """The TLS context of the tls* options (None when none is set: a ``tls://`` URL then uses the system's)."""
        if not (self.tls_ca_file or self.tls_cert_file):
            return None
        import ssl

        try:
            ctx = ssl.create_default_context(cafile=self.tls_ca_file)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"option tlsCaFile: cannot load {self.tls_ca_file}: {e}") from None
        if self.tls_cert_file:
            try:
                ctx.load_cert_chain(self.tls_cert_file, self.tls_key_file)
            except (OSError, ssl.SSLError) as e:
                raise ValueError(f"options tlsCertFile/tlsKeyFile: cannot load {self.tls_cert_file} and "
                                 f"{self.tls_key_file}: {e}") from None
        return ctx


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
    starting_timestamp: int | None = None  # ms since the epoch: start at the first message stored at/after it

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool = False) -> "ReadOptions":
        check_option_names(options, "stream" if streaming else "read")
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
        starting = parse_offset_spec(o.get("startingoffsets", start_default), "startingOffsets")
        starting_timestamp = _starting_timestamp(o)
        if starting == LATEST and not streaming and starting_timestamp is None:
            # Kafka source: "starting offset can't be latest for batch queries" - it would always read nothing
            raise OffsetError("startingOffsets=latest is for streaming queries only: a batch query starting at "
                              "the end of the stream reads nothing")
        return cls(
            connect=ConnectOptions.parse(o),
            stream=stream,
            starting=starting,
            ending=ending,
            filter_subjects=filters,
            min_partitions=_int(o, "minPartitions", 1, 1),
            max_seqs_per_partition=_int(o, "maxSeqsPerPartition", 100_000, 1),
            max_offsets_per_trigger=_int(o, "maxOffsetsPerTrigger", None, 1),
            fail_on_data_loss=_bool(o, "failOnDataLoss", True),
            read_method=method,
            fetch_batch=_int(o, "fetchBatch", 2000, 1),
            starting_timestamp=starting_timestamp,
        )


@dataclass(frozen=True)
class WriteOptions:
    connect: ConnectOptions
    stream: str | None = None  # when set, every PubAck must come from this stream
    subject: str | None = None  # for rows without a subject column (or a null subject)
    write_id: str | None = None  # stable prefix of generated Nats-Msg-Id values (batch writes)
    max_in_flight: int = 2048

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool = False) -> "WriteOptions":
        check_option_names(options, "stream-write" if streaming else "write")
        o = _lower(options)
        return cls(
            connect=ConnectOptions.parse(o),
            stream=o.get("stream") or None,
            subject=o.get("subject") or None,
            write_id=o.get("writeid") or None,
            max_in_flight=_int(o, "maxInFlight", 2048, 1),
        )


def _starting_timestamp(o: dict) -> int | None:
    """``startingTimestamp``: milliseconds since the epoch, as Spark's Kafka source takes it.  It names the start
    by itself, so a ``startingOffsets`` beside it is refused rather than silently overridden."""
    ms = _int(o, "startingTimestamp", None, 0)
    if ms is not None and "startingoffsets" in o:
        raise ValueError("options startingOffsets and startingTimestamp both name where to start: give one")
    return ms


def validate(options: Mapping[str, str]) -> None:
    """Check what can be checked before knowing whether the query reads or writes, batch or streaming: option
    names and the value of every option present.  Called from ``DataSource.schema()``, so a bad option fails
    ``load()`` itself with a clear message (Spark's Kafka source checks its options there too)."""
    check_option_names(options, "any")
    o = _lower(options)
    ConnectOptions.parse(o)
    for key in ("startingOffsets", "endingOffsets"):
        if key.lower() in o:
            parse_offset_spec(o[key.lower()], key, allow_earliest=key == "startingOffsets")
    _starting_timestamp(o)
    for key in ("minPartitions", "maxSeqsPerPartition", "maxOffsetsPerTrigger", "fetchBatch", "maxInFlight"):
        _int(o, key, None, 1)
    _bool(o, "failOnDataLoss", True)
    method = o.get("readmethod", "consumer").lower()
    if method not in ("consumer", "direct"):
        raise ValueError(f"option readMethod must be 'consumer' or 'direct', not {method!r}")
