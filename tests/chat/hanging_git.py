"""A git server that takes connections and never answers: a fetch from it hangs, as one from
a mirror that stopped answering does. It lets go (closes every connection, so the fetch
fails) when told, or `hold` seconds after its first connection, so a door that waits on
the fetch fails its test in seconds instead of hanging it."""

import socket
import threading
import time
from pathlib import Path

from kbisect.builders.trees import Trees
from kbisect.infra.git import Git
from kbisect.settings import Settings


class HangingGitServer:
    def __init__(self, hold: float = 5.0) -> None:
        self.hold = hold
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.02)
        self.port = int(self.sock.getsockname()[1])
        self.accepted: list[float] = []  # time.monotonic() of each connection
        self.stop = threading.Event()
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def url(self, userinfo: str = "") -> str:
        return f"http://{userinfo}127.0.0.1:{self.port}/linux.git"

    def holding(self) -> bool:
        """A fetch is connected and waiting for an answer."""
        return bool(self.accepted) and not self.closed.is_set()

    def release(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)

    def _serve(self) -> None:
        conns: list[socket.socket] = []
        try:
            while not self.stop.is_set():
                if self.accepted and time.monotonic() > self.accepted[0] + self.hold:
                    break
                try:
                    conn, _ = self.sock.accept()
                except TimeoutError:
                    continue
                conns.append(conn)
                self.accepted.append(time.monotonic())
        finally:
            self.closed.set()
            for conn in conns:
                conn.close()
            self.sock.close()


def hanging_tree(settings: Settings, name: str, upstream: Path, url: str) -> None:
    """A tree made from upstream whose remote is then `url` (so its next fetch goes there)."""
    tree = Trees(settings).add(name, str(upstream))
    Git(tree.path).run("config", "remote.origin.url", url)
