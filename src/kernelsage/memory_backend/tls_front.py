"""A TLS front for a PostgreSQL server built without TLS: the served memory's only network listener.

pgserver's PostgreSQL is built without OpenSSL (`ssl = on` and `hostssl` are refused by the server), so
`kernelsage memory serve` keeps the server on its Unix socket and puts this front on the address the user
named. It speaks the start of PostgreSQL's protocol itself: a client's SSLRequest is answered 'S' and the
connection becomes TLS with the served certificate; a GSSENCRequest is answered 'N' (the client then asks for
TLS); a startup message without TLS is refused with the server's own kind of error. Once TLS is up, bytes go
both ways unchanged, so the password exchange (SCRAM) and everything after it is PostgreSQL's.
A CancelRequest is passed on as the server would take it (it carries no password, only the key the server
gave that session, and clients may send it without TLS).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

from kernelsage.errors import DatabaseError

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
NEGOTIATION_TIMEOUT_S = 10.0  # a client that connects and says nothing is dropped after this
MAX_CANCEL_LENGTH = 268  # protocol 3.2: 12 bytes of header and a key of up to 256 bytes
MAX_STARTUP_LENGTH = 10_000  # the server's own limit on a startup packet
CHUNK = 64 * 1024


def first_request(header: bytes) -> tuple[str, int]:
    """What a client's first 8 bytes (length, code) ask for, and the message's length: 'tls', 'gss',
    'cancel' or 'plain' (a startup message without TLS, or anything else)."""
    length, code = struct.unpack("!ii", header)
    if length == 8 and code == SSL_REQUEST:
        return "tls", length
    if length == 8 and code == GSSENC_REQUEST:
        return "gss", length
    if code == CANCEL_REQUEST and 16 <= length <= MAX_CANCEL_LENGTH:
        return "cancel", length
    return "plain", length


def tls_required(message: str) -> bytes:
    """A protocol ErrorResponse (FATAL, SQLSTATE 28000): how the client without TLS learns why it was refused."""
    fields = b"".join(tag + text.encode() + b"\0" for tag, text in
                      ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", "28000"), (b"M", message)))
    body = fields + b"\0"
    return b"E" + struct.pack("!i", len(body) + 4) + body


def server_context(certificate: Path, key: Path) -> ssl.SSLContext:
    """TLS 1.2 or later with the served certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certificate, key)
    context.set_alpn_protocols(["postgresql"])  # what libpq 17+ offers; older clients offer none
    return context


def listening_socket(address: str, port: int) -> socket.socket:
    """A TCP socket bound to `address` only; a one-line DatabaseError when the port is taken."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        return socket.create_server((address, port), family=family, backlog=128)
    except OSError as exc:
        raise DatabaseError(f"cannot listen on {address} port {port} ({exc.strerror or exc}): pass another "
                            "--port, or --listen an address of this host") from None


@dataclass
class TlsFront:
    """The front's listener and the thread of its event loop; `close()` stops both and every relay."""

    listener: socket.socket
    upstream: Path  # the server's Unix socket
    context: ssl.SSLContext
    refusal: str  # the message a client without TLS gets
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _thread: threading.Thread | None = None
    _clients: set[asyncio.Task[None]] = field(default_factory=set)

    def start(self) -> TlsFront:
        self.listener.setblocking(False)
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._accept(),),
                                        name="tls-front", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop accepting, end the open connections, and wait for the loop's thread."""
        if self._thread is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already ended
            self._loop.call_soon_threadsafe(self._cancel_all)
        self._thread.join(timeout=10)
        self._thread = None
        self.listener.close()
        if not self._loop.is_running():
            self._loop.close()

    def _cancel_all(self) -> None:
        for task in asyncio.all_tasks(self._loop):
            task.cancel()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    client, _ = await loop.sock_accept(self.listener)
                except OSError:  # out of file descriptors, say: the next client may fare better
                    await asyncio.sleep(0.1)
                    continue
                task = loop.create_task(self._serve(client))
                self._clients.add(task)
                task.add_done_callback(self._clients.discard)
        except asyncio.CancelledError:
            pass
        finally:
            for task in list(self._clients):
                task.cancel()
            await asyncio.gather(*self._clients, return_exceptions=True)

    async def _serve(self, client: socket.socket) -> None:
        """One client: the negotiation, then the relay to the server, until either side ends."""
        loop = asyncio.get_running_loop()
        try:
            kind, length = await asyncio.wait_for(self._negotiate(loop, client), NEGOTIATION_TIMEOUT_S)
            if kind == "cancel":
                await self._pass_cancel(loop, client, length)
            elif kind == "plain":
                await self._refuse(loop, client, length)
            else:
                await self._relay(loop, client)
                return  # the relay's transports own and closed the socket
        except (OSError, ssl.SSLError, asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        client.close()

    async def _negotiate(self, loop: asyncio.AbstractEventLoop, client: socket.socket) -> tuple[str, int]:
        """Read the client's requests until it asks for TLS (answered 'S') or sends something else."""
        while True:
            # exactly 8 bytes: anything a client sends after its SSLRequest must go through the TLS handshake
            kind, length = first_request(await _receive(loop, client, 8))
            if kind == "gss":
                await loop.sock_sendall(client, b"N")
                continue
            if kind == "tls":
                await loop.sock_sendall(client, b"S")
            return kind, length

    async def _refuse(self, loop: asyncio.AbstractEventLoop, client: socket.socket, length: int) -> None:
        """Read the rest of the startup message first: a socket closed with unread input sends a reset,
        which may reach the client before it has read the error."""
        if 8 < length <= MAX_STARTUP_LENGTH:
            await asyncio.wait_for(_receive(loop, client, length - 8), NEGOTIATION_TIMEOUT_S)
        await loop.sock_sendall(client, tls_required(self.refusal))

    async def _pass_cancel(self, loop: asyncio.AbstractEventLoop, client: socket.socket, length: int) -> None:
        rest = await _receive(loop, client, length - 8)
        header = struct.pack("!ii", length, CANCEL_REQUEST)
        _, writer = await asyncio.open_unix_connection(str(self.upstream))
        writer.write(header + rest)
        await writer.drain()
        writer.close()

    async def _relay(self, loop: asyncio.AbstractEventLoop, client: socket.socket) -> None:
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        transport, _ = await loop.connect_accepted_socket(lambda: protocol, client, ssl=self.context,
                                                          ssl_handshake_timeout=NEGOTIATION_TIMEOUT_S)
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        try:
            server_reader, server_writer = await asyncio.open_unix_connection(str(self.upstream))
        except OSError:
            writer.write(tls_required("the memory server behind this address is not running"))
            writer.close()
            return
        pumps = [loop.create_task(_pump(reader, server_writer)), loop.create_task(_pump(server_reader, writer))]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            for side in (server_writer, writer):
                side.close()


async def _receive(loop: asyncio.AbstractEventLoop, client: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = await loop.sock_recv(client, count - len(data))
        if not chunk:
            raise asyncio.IncompleteReadError(data, count)
        data += chunk
    return data


async def _pump(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ssl.SSLError, ConnectionError):
        while chunk := await source.read(CHUNK):
            target.write(chunk)
            await target.drain()
