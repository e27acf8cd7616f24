"""The loopback TLS front's process (see bench.common.TlsFront): prints its https base URL,
then relays until terminated.

Run: python -m bench.tls_front UPSTREAM_URL CERT KEY
"""

from __future__ import annotations

import contextlib
import select
import signal
import socket
import ssl
import sys
import threading
from pathlib import Path


class Relay:
    """Relays https://127.0.0.1:<port> to the plain-http fake, one thread per connection."""

    def __init__(self, upstream_url: str, cert: Path, key: Path) -> None:
        host, port = upstream_url.removeprefix("http://").rstrip("/").split(":")
        self._upstream = (host, int(port))
        self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ctx.load_cert_chain(cert, key)
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"https://127.0.0.1:{self._sock.getsockname()[1]}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                raw, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        """One thread per connection, relaying both ways with select: an SSL socket must
        not be read and written from two threads at once (that garbles the stream)."""
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle delay
        try:
            client = self._ctx.wrap_socket(raw, server_side=True)
            upstream = socket.create_connection(self._upstream)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                ready = [client] if client.pending() else \
                    select.select([client, upstream], [], [], 120)[0]
                if not ready:
                    return
                for src in ready:
                    data = src.recv(65536)
                    if not data:
                        return
                    (upstream if src is client else client).sendall(data)
        except (OSError, ssl.SSLError):
            pass
        finally:
            for s in (client, upstream):
                with contextlib.suppress(OSError):
                    s.close()

    def close(self) -> None:
        self._closed = True
        self._sock.close()


def main() -> None:
    upstream, cert, key = sys.argv[1:4]
    relay = Relay(upstream, Path(cert), Path(key))
    print(relay.base_url, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    relay.close()


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    main()
