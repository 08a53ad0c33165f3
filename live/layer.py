"""The embedded default's channel layer: wake-ups between the processes of one
machine over Unix sockets, with nothing written anywhere.

Each process that has websockets (daphne) listens on a socket of its own,
`<directory>/<pid>.sock`, from a thread of its own (the hub). A group_send from
any process (a worker's turn, a web request's share) writes the message to
every socket in the directory and to this process's own websockets; each hub
hands what it reads to its process's groups, held in memory as channels'
InMemoryChannelLayer holds them.

What that buys over a layer in the database: a push costs a write to a socket,
not two row writes and a poll every 50 ms by every web process. What it gives
up, nothing the portal relies on: a message sent while no web process listens
is lost (the consumer reads the event log when a page connects, and wake-ups
are only wake-ups, realtime says so), and `send` to one channel reaches the
channels of this process only (the portal sends to groups).

A worker restarted simply writes again; a web process restarted listens on a
new socket; a socket left by one that was killed refuses connections, and
the first sender to find it so removes it.
"""

import asyncio
import atexit
import contextlib
import errno
import json
import logging
import os
import socket
import socketserver
import struct
import threading
import time
import weakref
from pathlib import Path

from channels.layers import InMemoryChannelLayer

logger = logging.getLogger(__name__)

# A message's frame: its length, then [group, message] as JSON.
_LENGTH = struct.Struct("!I")
# Wake-ups are small and streamed text comes a tenth of a second at a time
# (RUN_LIVE_SECONDS); a frame beyond this is refused by its sender and
# dropped by a hub.
MAX_FRAME = 1 << 20
# A hub reads at once: a socket that takes longer belongs to a process that
# is stopped or stuck, and its message is dropped rather than holding the
# sender; so are its messages for the next RESTING_SECONDS.
SEND_TIMEOUT = 1.0
RESTING_SECONDS = 10.0
# channels walks every channel and group of the process on each receive and
# group_send: with fifty pages open, that walk was a tenth of the web
# process's CPU. A message expires after a minute; looking once a second is
# soon enough.
CLEAN_INTERVAL = 1.0
# Longer socket paths (in bytes) do not fit in a sockaddr_un on every system (104 on macOS).
MAX_PATH = 100
# Linux's pids have at most 7 digits (pid_max is at most 4194304).
LONGEST_PID = 9_999_999


def socket_path(directory: Path, *, pid: int) -> str:
    """Where the process `pid` listens."""
    return str(Path(directory) / f"{pid}.sock")


def socket_path_refused(directory: Path, *, pid: int = LONGEST_PID) -> str | None:
    """Why a process could not listen in `directory`, or None if it can."""
    path = socket_path(directory, pid=pid)
    length = len(os.fsencode(path))
    if length > MAX_PATH:
        return (
            f"The live updates' socket path {path} is {length} bytes, beyond {MAX_PATH}: "
            "set ARTIFACTFLOW_DATA_DIR to a shorter directory"
        )
    return None


class LocalSocketLayer(InMemoryChannelLayer):
    """InMemoryChannelLayer whose group_send reaches every process listening
    in `directory`. Configured in settings.CHANNEL_LAYERS on SQLite."""

    def __init__(self, directory, capacity=100, **kwargs):
        super().__init__(capacity=capacity, **kwargs)
        self.directory = Path(directory)
        # socket path -> connected socket, kept from message to message.
        self._links: dict[str, socket.socket] = {}
        # socket path -> until when it is skipped, having timed out.
        self._resting: dict[str, float] = {}
        self._links_lock = threading.Lock()
        self._cleaned_at = -CLEAN_INTERVAL

    def _clean_expired(self):
        now = time.monotonic()
        if now - self._cleaned_at >= CLEAN_INTERVAL:
            self._cleaned_at = now
            super()._clean_expired()

    async def new_channel(self, prefix="specific."):
        _hub_attach(self)
        return await super().new_channel(prefix)

    async def group_add(self, group, channel):
        _hub_attach(self)
        await super().group_add(group, channel)

    async def group_send(self, group, message):
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        frame = json.dumps([group, message], ensure_ascii=False, separators=(",", ":")).encode()
        if len(frame) > MAX_FRAME:
            logger.warning("Dropped a %s-byte message for %s: beyond the layer's %s", len(frame), group, MAX_FRAME)
            return
        hub = _hubs.get(self.directory)
        if hub is not None:
            hub.deliver(group, message)
        # Blocking writes in the event loop: a hub reads its socket at once, so
        # a write returns at once, and one that does not is cut at SEND_TIMEOUT.
        self._hubs_write(_LENGTH.pack(len(frame)) + frame, own=hub.path if hub is not None else None)

    def _hubs_write(self, data: bytes, *, own: str | None) -> None:
        try:
            paths = [entry.path for entry in os.scandir(self.directory) if entry.name.endswith(".sock")]
        except FileNotFoundError:
            return
        now = time.monotonic()
        with self._links_lock:
            for path in paths:
                if path != own and self._resting.get(path, 0.0) <= now:
                    self._hub_write(path, data)

    def _hub_write(self, path: str, data: bytes) -> None:
        link = self._links.pop(path, None)
        if link is None or not self._link_write(path, link, data):
            # None kept, or the one kept leads to a hub that has gone since (EPIPE).
            link = self._connect(path)
            if link is not None:
                self._link_write(path, link, data)

    def _link_write(self, path: str, link: socket.socket, data: bytes) -> bool:
        """Writes `data` and keeps the link; False if the link is broken."""
        try:
            link.sendall(data)
        except TimeoutError:
            link.close()
            logger.warning(
                "The process listening on %s did not read a message: its messages are dropped for %s s",
                path,
                RESTING_SECONDS,
            )
            self._resting[path] = time.monotonic() + RESTING_SECONDS
            return True
        except OSError:
            link.close()
            return False
        self._links[path] = link
        return True

    def _connect(self, path: str) -> socket.socket | None:
        link = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        link.settimeout(SEND_TIMEOUT)
        try:
            link.connect(path)
        except OSError as error:
            link.close()
            if error.errno == errno.ECONNREFUSED:
                # Nothing listens: its process ended without removing it.
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            elif error.errno != errno.ENOENT:
                logger.warning("Could not reach the process listening on %s: %s", path, error)
            return None
        return link

    async def close(self):
        with self._links_lock:
            for link in self._links.values():
                link.close()
            self._links.clear()


class _Hub:
    """This process's socket: hands each message it reads to the layers of
    this process that have channels, each in its own event loop."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.path = socket_path(directory, pid=os.getpid())
        if refused := socket_path_refused(directory, pid=os.getpid()):
            raise OSError(errno.ENAMETOOLONG, refused)
        # layer -> the event loop its channels' queues belong to.
        self._layers: weakref.WeakKeyDictionary[LocalSocketLayer, object] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        # Only the portal's user may reach its processes' sockets.
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.chmod(0o700)
        # A file of this pid is a dead process's: pids are reused.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        hub = self

        class Reader(socketserver.StreamRequestHandler):
            def handle(self):
                hub.read(self.rfile)

        self._server = _Server(self.path, Reader)
        os.chmod(self.path, 0o600)
        threading.Thread(target=self._server.serve_forever, name="live-layer-hub", daemon=True).start()

    def attach(self, layer: LocalSocketLayer) -> None:
        with self._lock:
            self._layers[layer] = asyncio.get_running_loop()

    def read(self, stream) -> None:
        while header := stream.read(_LENGTH.size):
            if len(header) < _LENGTH.size:
                return
            (length,) = _LENGTH.unpack(header)
            if length > MAX_FRAME:
                logger.warning("Closed a connection that sent a %s-byte frame", length)
                return
            try:
                group, message = json.loads(stream.read(length))
            except ValueError:
                logger.warning("Closed a connection that sent a frame that is not a message")
                return
            self.deliver(group, message)

    def deliver(self, group: str, message: dict) -> None:
        with self._lock:
            layers = list(self._layers.items())
        for layer, loop in layers:
            # In the layer's own loop, by InMemoryChannelLayer's own group_send
            # (a copy for each channel, a full one skipped).
            delivery = InMemoryChannelLayer.group_send(layer, group, message)
            try:
                asyncio.run_coroutine_threadsafe(delivery, loop)
            except RuntimeError:
                # Its loop is closed (a test's, or a server's that stopped): it receives no more.
                delivery.close()
                with self._lock:
                    self._layers.pop(layer, None)

    def close(self) -> None:
        self._server.server_close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    # One thread per sending process, for as long as it stays connected.
    daemon_threads = True


# directory -> this process's hub listening in it.
_hubs: dict[Path, _Hub] = {}
_hubs_lock = threading.Lock()


def _hub_attach(layer: LocalSocketLayer) -> None:
    with _hubs_lock:
        hub = _hubs.get(layer.directory)
        if hub is None:
            hub = _hubs[layer.directory] = _Hub(layer.directory)
    hub.attach(layer)


@atexit.register
def _hubs_close() -> None:
    """A socket left behind would be removed by the next sender; removed here
    when the process ends as it should."""
    with _hubs_lock:
        hubs = list(_hubs.values())
        _hubs.clear()
    for hub in hubs:
        hub.close()


# A forked child (django-q2 forks its workers) has none of its parent's
# threads: the parent's hubs are the parent's to close.
os.register_at_fork(after_in_child=_hubs.clear)
