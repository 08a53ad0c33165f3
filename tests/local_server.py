"""A real HTTP server on 127.0.0.1, in a thread of its own, for the services
tests stand up (a web site, an embeddings service): started, stopped, and
where it listens."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LocalServer:
    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, which answers for this server."""
        raise NotImplementedError

    def start(self):
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self._server.daemon_threads = True
        # Polled often, so that stop() does not wait half a second (tests.model_server).
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def origin(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"
