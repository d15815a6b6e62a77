"""A tiny raw-TCP client for byte-exact protocol tests: connect, read INFO, send bytes, expect bytes.

Theory of operation: one blocking socket with a receive buffer.  Every read has a deadline (``timeout``), so a
test can never hang: ``read_until`` collects bytes until a pattern (bytes or compiled regex) appears and returns
everything up to and including it, leaving the rest buffered; ``expect`` asserts that the next bytes are exactly
the given ones; ``expect_nothing`` asserts that nothing arrives within a short window; ``assert_closed`` reads until
the peer closes (EOF or reset) and returns what came before the close.  Nothing is answered automatically: a server
PING stays in the buffer for the test to see, which is what byte-exact tests want (tests stay well under the
server's first PING, ~2 s after CONNECT).
"""
from __future__ import annotations

import json
import re
import socket
import time

CRLF = b"\r\n"
DEFAULT_TIMEOUT = 2.0


class Closed(Exception):
    """The peer closed the connection while we still expected bytes."""


class RawClient:
    def __init__(self, host: str = "127.0.0.1", port: int = 4222, timeout: float = DEFAULT_TIMEOUT):
        self.host, self.port, self.timeout = host, port, timeout
        self.sock: socket.socket | None = None
        self.buf = b""
        self.eof = False
        self.info: dict = {}
        self.info_line = b""

    # -- connection ---------------------------------------------------------------------------------------------

    def connect(self, read_info: bool = True, rcvbuf: int | None = None) -> "RawClient":
        """Open the socket and (by default) read the INFO line.  ``rcvbuf`` shrinks the kernel receive buffer
        before connecting, so a client that stops reading backs the server up quickly (slow-consumer tests)."""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(self.timeout)
        self.sock.connect((self.host, self.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if read_info:
            self.info_line = self.read_line()
            assert self.info_line.startswith(b"INFO "), self.info_line
            self.info = json.loads(self.info_line[5:-2])
        return self

    def handshake(self, **connect_fields) -> "RawClient":
        """Connect, read INFO, send CONNECT (verbose off unless asked) and PING, read PONG: ready to use.

        The PONG is followed by the server's second INFO (connect_info); it is consumed too.
        """
        fields = {"verbose": False, "pedantic": False, **connect_fields}
        self.connect()
        self.send(b"CONNECT " + json.dumps(fields).encode() + b"\r\nPING\r\n")
        if fields.get("verbose"):
            self.expect(b"+OK\r\n")
        self.expect(b"PONG\r\n")
        if fields.get("protocol", 0) >= 1:
            line = self.read_line()
            assert line.startswith(b"INFO "), line
        return self

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- sending ------------------------------------------------------------------------------------------------

    def send(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    # -- receiving ----------------------------------------------------------------------------------------------

    def _fill(self, deadline: float) -> bool:
        """Read once more into the buffer; False on deadline, raises Closed on EOF/reset."""
        if self.eof:
            raise Closed(self.buf)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return False
        except ConnectionError:
            chunk = b""
        if not chunk:
            self.eof = True
            raise Closed(self.buf)
        self.buf += chunk
        return True

    def read_until(self, pattern: bytes | re.Pattern, timeout: float | None = None) -> bytes:
        """Everything up to and including the first match of ``pattern``; the rest stays buffered."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            if isinstance(pattern, bytes):
                i = self.buf.find(pattern)
                end = i + len(pattern) if i >= 0 else -1
            else:
                m = pattern.search(self.buf)
                end = m.end() if m else -1
            if end >= 0:
                out, self.buf = self.buf[:end], self.buf[end:]
                return out
            if not self._fill(deadline):
                raise AssertionError(f"timed out waiting for {pattern!r}; got {self.buf!r}")

    def read_line(self, timeout: float | None = None) -> bytes:
        return self.read_until(CRLF, timeout)

    def read_exactly(self, n: int, timeout: float | None = None) -> bytes:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while len(self.buf) < n:
            if not self._fill(deadline):
                raise AssertionError(f"timed out waiting for {n} bytes; got {self.buf!r}")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def expect(self, expected: bytes, timeout: float | None = None) -> None:
        """The next bytes on the wire are exactly ``expected``."""
        try:
            got = self.read_exactly(len(expected), timeout)
        except Closed as e:
            raise AssertionError(f"connection closed; expected {expected!r}, got {e.args[0]!r}") from None
        assert got == expected, f"expected {expected!r}, got {got + self.buf!r}"

    def read_msg(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        """One MSG/HMSG frame: (control line incl. CRLF, payload incl. trailing CRLF)."""
        line = self.read_line(timeout)
        parts = line.split()
        assert parts[0] in (b"MSG", b"HMSG"), line
        size = int(parts[-1])
        return line, self.read_exactly(size + 2, timeout)

    def drain(self, timeout: float = 0.1) -> bytes:
        """Whatever arrives within ``timeout`` (closing is not an error here)."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
        except Closed:
            pass
        out, self.buf = self.buf, b""
        return out

    def expect_nothing(self, timeout: float = 0.1) -> None:
        """Nothing arrives within ``timeout`` and the connection stays open."""
        got = self.drain(timeout)
        assert got == b"", f"expected nothing, got {got!r}"
        assert not self.eof, "connection was closed"

    def assert_closed(self, timeout: float | None = None) -> bytes:
        """The server closes the connection within ``timeout``; returns the bytes it sent before closing."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        try:
            while True:
                if not self._fill(deadline):
                    raise AssertionError(f"connection still open after {timeout or self.timeout}s; got {self.buf!r}")
        except Closed:
            pass
        out, self.buf = self.buf, b""
        return out

    def is_open(self, timeout: float = 0.1) -> bool:
        """PING round trip: True if PONG comes back within ``timeout`` (bytes before the PONG are consumed)."""
        try:
            self.send(b"PING\r\n")
            self.read_until(b"PONG\r\n", timeout)
            return True
        except (Closed, OSError, AssertionError):
            return False


def connect(server, **kw) -> RawClient:
    """A RawClient connected to a tests.harness.ServerProcess (INFO read, nothing sent)."""
    return RawClient("127.0.0.1", server.port, **kw).connect()


def handshake(server, **connect_fields) -> RawClient:
    """A RawClient connected to ``server`` with CONNECT sent and a PING/PONG done (verbose off)."""
    return RawClient("127.0.0.1", server.port).handshake(**connect_fields)
