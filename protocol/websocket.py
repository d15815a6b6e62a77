"""WebSocket framing for NATS clients, sans-IO, as nats-server's websocket.go reads and writes it (RFC 6455).

Theory of operation
-------------------
The NATS protocol runs inside WebSocket data frames with no alignment: one frame may hold several NATS operations
or part of one.  :class:`FrameReader` takes bytes from the socket in any split and returns events in order:
``(DATA, bytes)`` for the unmasked (and inflated) payload to feed the NATS parser, ``(PING, payload)`` to answer
with a pong, ``(CLOSE, status, body)`` when the client closes.  A frame nats-server refuses raises
:class:`WSProtocolError` with nats-server's own words (``wsReadLoop``, ``wsHandleControlFrame``): the connection
answers with a close frame of status 1002 and that text, then closes.

The rules are nats-server's, which are not exactly a generic RFC 6455 library's (the reason wsproto's decoder is
not used here): text frames are data like binary ones and are not checked for UTF-8; an empty close payload is
answered by an empty close; an invalid UTF-8 close body is answered with 1007; clients that sent
``Nats-No-Masking: true`` send unmasked frames; RSV1 is accepted only when permessage-deflate was negotiated and
only on a message's first frame.

Writing (:func:`frame`): the server always sends binary frames, unmasked, in one frame per write.  With compression
negotiated (``server_no_context_takeover``: a fresh deflate stream per message) payloads of at least 64 bytes
(wsCompressThreshold) are deflated and the trailing ``00 00 ff ff`` removed (RFC 7692 7.2.1).
"""
from __future__ import annotations

import base64
import hashlib
import struct
import zlib

from skiff.protocol.accel import speedups

DATA, PING, CLOSE = 0, 1, 2

# Opcodes (RFC 6455 5.2)
OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10

# Close status codes nats-server sends (websocket.go wsCloseStatus*)
NORMAL_CLOSURE = 1000
GOING_AWAY = 1001
PROTOCOL_ERROR = 1002
NO_STATUS_RECEIVED = 1005
INVALID_PAYLOAD_DATA = 1007
POLICY_VIOLATION = 1008
MESSAGE_TOO_BIG = 1009
INTERNAL_SRV_ERROR = 1011
TLS_HANDSHAKE = 1015

MAX_CONTROL_PAYLOAD = 125  # wsMaxControlPayloadSize
COMPRESS_THRESHOLD = 64  # wsCompressThreshold
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_DEFLATE_TAIL = b"\x00\x00\xff\xff"


class WSProtocolError(Exception):
    """A frame nats-server refuses: answered with close status 1002 and ``str(self)``, then the connection
    closes."""


class WSMaxPayload(Exception):
    """A compressed message bigger than nats-server accepts (wsDecompressAndParse: ErrMaxPayload)."""


def max_message_size(max_payload: int) -> int:
    """wsMaxMessageSize: the compressed bytes of one message may be 8 max_payloads, at most 64 MB."""
    return min((max_payload if max_payload > 0 else 1 << 20) * 8, 64 * 1024 * 1024)


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()


def valid_close_status(code: int) -> bool:
    """websocket.go wsIsValidCloseStatus."""
    if code in (NO_STATUS_RECEIVED, 1004, 1006, TLS_HANDSHAKE):
        return False
    if code < 1000 or code >= 5000:
        return False
    return not 1016 <= code <= 2999


def close_payload(status: int, body: str) -> bytes:
    """wsCreateCloseMessage: 2-byte status then the text, cut to fit a control frame with a trailing '...'."""
    raw = body.encode()
    if len(raw) > MAX_CONTROL_PAYLOAD - 2:
        raw = raw[: MAX_CONTROL_PAYLOAD - 5] + b"..."
    return struct.pack("!H", status) + raw


def _header(opcode: int, n: int, rsv1: bool = False) -> bytes:
    b0 = 0x80 | opcode | (0x40 if rsv1 else 0)
    if n <= 125:
        return bytes((b0, n))
    if n < 65536:
        return struct.pack("!BBH", b0, 126, n)
    return struct.pack("!BBQ", b0, 127, n)


def frame(payload: bytes, compress: bool = False) -> bytes:
    """One binary frame holding ``payload`` (server to client: never masked)."""
    if compress and len(payload) >= COMPRESS_THRESHOLD:
        c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
        data = c.compress(payload) + c.flush(zlib.Z_SYNC_FLUSH)
        if data.endswith(_DEFLATE_TAIL):
            data = data[:-4]
        return _header(OP_BINARY, len(data), True) + data
    return _header(OP_BINARY, len(payload)) + payload


def binary_header(n: int) -> bytes:
    """The header of an uncompressed binary frame of ``n`` payload bytes: ``frame(payload)`` is this + payload."""
    return _header(OP_BINARY, n)


def control(opcode: int, payload: bytes = b"") -> bytes:
    return _header(opcode, len(payload)) + payload


def _unmask_py(data: bytes, key: bytes, pos: int) -> bytes:
    """XOR ``data`` with the 4-byte mask starting at mask offset ``pos`` (one big-int XOR: no per-byte loop)."""
    n = len(data)
    if not n:
        return data
    k = key[pos % 4:] + key[: pos % 4]
    mask = (k * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(mask, "little")).to_bytes(n, "little")


# The compiled one when the accelerator is there (protocol/accel.py; SKIFF_PURE_PYTHON=1: the pure one above).
_unmask = speedups.unmask if speedups is not None else _unmask_py


class FrameReader:
    """Incremental frame parser for one connection (nats-server wsReadLoop)."""

    __slots__ = ("mask", "compress", "max_payload", "_zsize", "_buf", "_rem", "_in_frame", "_key", "_kpos", "_final_frame",
                 "_msg_done", "_compressed", "_zbuf", "closed")

    def __init__(self, mask: bool = True, compress: bool = False, max_payload: int = 1 << 20) -> None:
        self.mask = mask  # clients must mask, unless they asked for Nats-No-Masking
        self.compress = compress  # permessage-deflate negotiated
        self.max_payload = max_payload  # limit of one inflated message (the client's max_payload)
        self._zsize = 0
        self._buf = b""
        self._in_frame = False  # inside a data frame's payload
        self._rem = 0  # payload bytes of the current data frame still to come
        self._key = b""
        self._kpos = 0
        self._final_frame = False  # the current data frame ends its message
        self._msg_done = True  # r.ff: the previous message's final frame was received
        self._compressed = False  # the current message is deflated
        self._zbuf: list[bytes] = []
        self.closed = False  # a close frame was received: nothing more is read

    def feed(self, data: bytes) -> list[tuple]:
        if self.closed:
            return []
        buf = self._buf + data if self._buf else data
        self._buf = b""
        events: list[tuple] = []
        pos, end = 0, len(buf)
        while pos < end:
            if self._in_frame:
                n = min(self._rem, end - pos)
                chunk = buf[pos:pos + n]
                pos += n
                self._rem -= n
                if self.mask:
                    chunk = _unmask(chunk, self._key, self._kpos)
                    self._kpos += n
                last = self._rem == 0
                if self._compressed:
                    self._zsize += len(chunk)
                    if self._zsize + 4 > max_message_size(self.max_payload):
                        raise WSMaxPayload()
                    self._zbuf.append(chunk)
                    if last and self._final_frame:
                        events.append((DATA, self._inflate()))
                elif chunk:
                    events.append((DATA, chunk))
                if last:
                    self._in_frame = False
                continue
            hdr = self._parse_header(buf, pos, end)
            if hdr is None:
                self._buf = buf[pos:]
                break
            pos, opcode, length = hdr
            if opcode >= OP_CLOSE:
                if end - pos < length:
                    self._buf = buf[pos - self._header_len(length):]  # re-read the whole control frame later
                    break
                payload = buf[pos:pos + length]
                pos += length
                if self.mask:
                    payload = _unmask(payload, self._key, 0)
                ev = self._control(opcode, payload)
                if ev is not None:
                    events.append(ev)
                    if ev[0] == CLOSE:
                        self.closed = True
                        break
                continue
            self._in_frame = True
            self._rem = length
            self._kpos = 0
            if length == 0:
                self._in_frame = False
                if self._compressed and self._final_frame:
                    events.append((DATA, self._inflate()))
        return events

    def _header_len(self, length: int) -> int:
        n = 2 + (4 if self.mask else 0)
        return n + (2 if 125 < length < 65536 else 8 if length >= 65536 else 0)

    def _parse_header(self, buf: bytes, pos: int, end: int):
        """(position after the header, opcode, payload length), or None when the header is incomplete.  Control
        frames are only checked here; their payload is read by the caller."""
        if end - pos < 2:
            return None
        b0, b1 = buf[pos], buf[pos + 1]
        opcode = b0 & 0x0F
        final = bool(b0 & 0x80)
        compressed = bool(b0 & 0x40)
        if b0 & 0x30:
            raise WSProtocolError("RSV2 and RSV3 must be clear")
        if compressed and not self.compress:
            raise WSProtocolError("compressed frame received without negotiated permessage-deflate")
        if self.mask and not b1 & 0x80:
            raise WSProtocolError("mask bit missing")
        length = b1 & 0x7F
        if opcode in (OP_CLOSE, OP_PING, OP_PONG):
            if length > MAX_CONTROL_PAYLOAD:
                raise WSProtocolError(
                    f"control frame length bigger than maximum allowed of {MAX_CONTROL_PAYLOAD} bytes")
            if not final:
                raise WSProtocolError("control frame does not have final bit set")
            if compressed:
                raise WSProtocolError("control frame must not be compressed")
        elif opcode in (OP_TEXT, OP_BINARY):
            if not self._msg_done:
                raise WSProtocolError("new message started before final frame for previous message was received")
        elif opcode == OP_CONTINUATION:
            if self._msg_done or compressed:
                raise WSProtocolError("invalid continuation frame")
        else:
            raise WSProtocolError(f"unknown opcode {opcode}")
        p = pos + 2
        if length == 126:
            if end - p < 2:
                return None
            length = struct.unpack_from("!H", buf, p)[0]
            p += 2
        elif length == 127:
            if end - p < 8:
                return None
            length = struct.unpack_from("!Q", buf, p)[0]
            if length & (1 << 63):
                raise WSProtocolError("invalid 64-bit payload length")
            p += 8
        if self.mask:
            if end - p < 4:
                return None
            self._key = buf[p:p + 4]
            p += 4
        if opcode < OP_CLOSE:  # the header is complete: only now does the message state change
            self._msg_done = final
            self._final_frame = final
            if opcode != OP_CONTINUATION:
                self._compressed = compressed
        return p, opcode, length

    def _control(self, opcode: int, payload: bytes):
        if opcode == OP_PING:
            return (PING, payload)
        if opcode == OP_PONG:
            return None
        # close (wsHandleControlFrame): echo the status (and body) back; nothing when there was no status
        if len(payload) == 1:
            raise WSProtocolError("close frame payload cannot be 1 byte")
        status, body = NO_STATUS_RECEIVED, ""
        if len(payload) >= 2:
            status = struct.unpack_from("!H", payload)[0]
            if not valid_close_status(status):
                raise WSProtocolError(f"invalid close status code {status}")
            if len(payload) > 2:
                try:
                    body = payload[2:].decode()
                except UnicodeDecodeError:
                    status, body = INVALID_PAYLOAD_DATA, "invalid utf8 body in close frame"
        return (CLOSE, status, body)

    def _inflate(self) -> bytes:
        data = b"".join(self._zbuf) + _DEFLATE_TAIL
        self._zbuf = []
        self._zsize = 0
        self._compressed = False
        d = zlib.decompressobj(-15)  # client_no_context_takeover: every message is a fresh deflate stream
        try:
            out = d.decompress(data, self.max_payload + 1)
        except zlib.error as e:
            raise WSProtocolError(str(e)) from None
        if len(out) > self.max_payload:  # an inflated message may not exceed max_payload (no deflate bombs)
            raise WSMaxPayload()
        return out
