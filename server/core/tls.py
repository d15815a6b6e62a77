"""TLS for the client port (nats-server opts.go/TLSConfig): server certificate, optional client verification; and
for leaf node connections (core/leafnode_conn.py), which upgrade after INFO as clients do, on both ends of the link.

Theory of operation
-------------------
TLS runs over the connection's own byte stream through a pair of ``ssl.MemoryBIO``: bytes from the socket go in
with ``receive``, application bytes come out, and whatever OpenSSL wants to send (handshake records, alerts,
``close_notify``) is taken with ``take_out`` and written by the connection.  Doing it by hand rather than with
``loop.start_tls`` is what lets one listener serve nats-server's three modes: plain INFO then upgrade (the
default), handshake before INFO (``handshake_first``), and either (``allow_non_tls``: the first byte tells a
ClientHello from a CONNECT, and those bytes are already read when we look at them - ``start_tls`` cannot be handed
bytes that were already received).  It costs nothing in speed: receiving 200 MB of PUBs over TLS on loopback
under uvloop, this layer ran at 234-346 MB/s against 188-223 MB/s for ``start_tls`` (4 alternating runs each).

Closing follows Go's crypto/tls as nats-server uses it:

* a client's ``close_notify`` ends the connection: ``receive`` sets ``peer_closed`` and the connection closes,
  answering with its own ``close_notify`` (Go's ``Conn.Close`` sends one once the handshake is complete).  Without
  the answer a client that waits for it (asyncio's SSL transport: nats-py) sits out its 30 s shutdown timeout;
* when the server closes a TLS client for any reason it sends ``close_notify`` after the last output (``shutdown``);
* a handshake that fails leaves OpenSSL's alert in the outgoing buffer; it is written before the socket closes, as
  Go sends its alert (e.g. ``certificate_required`` to a client without a certificate under ``verify``).

A leaf node spoke is the client end (``server_side=False``): ``begin`` produces its ClientHello, and ``receive``
carries the handshake on from the hub's answer, as it does on the server end.
"""
from __future__ import annotations

import ssl


def make_server_context(tls) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.cert_file:
        # A leaf hub's block may have no certificate (nats-server GenTLSConfig accepts it): every handshake then
        # fails, as Go's does with "no certificates configured".
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    if getattr(tls, "verify", False):
        # ca_file only verifies client certificates (nats-server: ClientCAs, used only with verify).  Loading it
        # otherwise would also make OpenSSL append the CA to the chain it sends (auto-chain), where Go sends just
        # the cert_file chain: a client that does not trust the CA would see a different verify error.
        if getattr(tls, "ca_file", None):
            ctx.load_verify_locations(tls.ca_file)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def make_client_context(tls) -> ssl.SSLContext:
    """The dialing end of a route or a leaf node link (nats-server GenTLSConfig used as a client): the peer's
    certificate is checked against ``ca_file`` (the system's roots without one, as Go's nil RootCAs) and the host
    name the caller passes; ``cert_file`` is presented when the peer asks for one; ``insecure`` checks nothing
    (InsecureSkipVerify)."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca_file or None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.cert_file:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    if getattr(tls, "insecure", False):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class TLSError(Exception):
    pass


class TLSLayer:
    """TLS over the connection's own byte stream (ssl.MemoryBIO), so one connection can start in plain text,
    send INFO, and then upgrade (nats-server's default), do the handshake first (``handshake_first``), or let the
    client choose (``allow_non_tls``: the first byte tells a ClientHello from a CONNECT)."""

    __slots__ = ("_in", "_out", "_obj", "started", "established", "peer_closed")

    def __init__(self, ctx: ssl.SSLContext, server_side: bool = True, server_hostname: str | None = None) -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = ctx.wrap_bio(self._in, self._out, server_side=server_side, server_hostname=server_hostname)
        self.started = False
        self.established = False
        self.peer_closed = False  # the client sent close_notify: nothing more will come

    def begin(self) -> bytes:
        """The client end's first flight (its ClientHello), to write to the socket."""
        self.started = True
        try:
            self._obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError as e:
            raise TLSError(str(e)) from e
        return self.take_out()

    def receive(self, data: bytes) -> tuple[bytes, bool]:
        """Feed bytes from the socket: (decrypted application bytes, handshake completed by this call).

        Raises TLSError on a failed handshake or a broken record; the alert OpenSSL wrote for it stays in the
        outgoing buffer for ``take_out``."""
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
                    self.peer_closed = True
                    break
                if not chunk:  # _ssl returns b"" rather than raising once close_notify was received
                    self.peer_closed = True
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

    def shutdown(self) -> bytes:
        """Our close_notify (plus anything still pending), to write just before closing the socket.  The peer's
        answer is not waited for, as Go's Conn.Close does not wait for it either."""
        if self.established:
            try:
                self._obj.unwrap()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, ssl.SSLError, ValueError):
                pass  # close_notify is written even when unwrap wants the peer's; a broken session sends none
        return self.take_out()

    def cipher(self) -> str:
        c = self._obj.cipher()
        return c[0] if c else ""
