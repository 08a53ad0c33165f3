"""Serves the test provider on a listening socket its test opened and passed
down (file descriptor in argv[1]): a request sent before the server is up
waits in the socket's backlog, so the test needs no polling."""

import socket
import sys

import django
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402 (after setup)

listening = socket.socket(fileno=int(sys.argv[1]))
server = ThreadedWSGIServer(listening.getsockname(), WSGIRequestHandler, bind_and_activate=False)
server.socket.close()
server.socket = listening
host, port = listening.getsockname()[:2]
server.server_name, server.server_port = host, port
server.setup_environ()
server.set_app(get_wsgi_application())
server.serve_forever()
