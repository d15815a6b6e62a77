"""TLS for the client port (nats-server opts.go/TLSConfig): server certificate, optional client verification."""
from __future__ import annotations

import ssl


def make_server_context(tls) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(tls.cert_file, tls.key_file)
    if getattr(tls, "ca_file", None):
        ctx.load_verify_locations(tls.ca_file)
    if getattr(tls, "verify", False):
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class TLSError(Exception):
    pass


class TLSLayer:
    """TLS over the connection's own byte stream (ssl.MemoryBIO), so one connection can start in plain text,
    send INFO, and then upgrade (nats-server's default), do the handshake first (``handshake_first``), or let the
    client choose (``allow_non_tls``: the first byte tells a ClientHello from a CONNECT)."""

    __slots__ = ("_in", "_out", "_obj", "started", "established")

    def __init__(self, ctx: ssl.SSLContext) -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = ctx.wrap_bio(self._in, self._out, server_side=True)
        self.started = False
        self.established = False

    def receive(self, data: bytes) -> tuple[bytes, bool]:
        """Feed bytes from the socket: (decrypted application bytes, handshake completed by this call)."""
        self.started = True
        self._in.write(data)
        done = False
        try:
            if not self.established:
                try:
                    self._obj.do_handshake()
                except ssl.SSLWantReadError:
                    return b"", False
                self.established = done = True
            chunks = []
            while True:
                try:
                    chunk = self._obj.read(65536)
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks), done
        except ssl.SSLError as e:
            raise TLSError(str(e)) from e

    def wrap(self, data: bytes) -> bytes:
        self._obj.write(data)
        return self._out.read()

    def take_out(self) -> bytes:
        return self._out.read() if self._out.pending else b""

    def cipher(self) -> str:
        c = self._obj.cipher()
        return c[0] if c else ""
