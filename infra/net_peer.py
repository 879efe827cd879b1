"""The host's side of a network testcase (testcases.net_throughput): QEMU's user-mode
network with one loopback port forwarded in to the guest's iperf3 server, and the host's
iperf3 client, run into it again and again while the guest runs (the guest serves one
test a repetition; a client that finds no server yet fails at once and tries again).

restrict=on: the guest can open no connection of its own, to the host or beyond; only
the forwarded port reaches it.
"""

import socket
import subprocess
import threading
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from kbisect.infra.procs import die_with_parent, kill_group

GUEST_ADDRESS = "10.0.2.15"  # QEMU's user-mode network gives the guest this address
GUEST_PORT = 5201  # iperf3's own: the guest's server listens there
PEER_LOG = "peer.log"  # in the run's folder, beside the console
LOG_CAP = 1 << 20  # the clients' output kept, at most (a guest that never serves loops)
RETRY_PAUSE = 1.0  # seconds between a failed client and the next
OVERRUN = 20  # seconds a client may run past its test (-t) before it is killed


def free_port() -> int:
    """A loopback port free for both TCP and UDP now (iperf3's data over UDP uses the
    control connection's port number)."""
    while True:
        with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def netdev_args(port: int) -> list[str]:
    """The guest's one network device: user-mode, restricted, `port` forwarded to it."""
    guest = f"{GUEST_ADDRESS}:{GUEST_PORT}"
    fwd = f"127.0.0.1:{port}-{guest}"
    return [
        "-netdev",
        f"user,id=kbnet,restrict=on,hostfwd=tcp:{fwd},hostfwd=udp:{fwd}",
        "-device",
        "virtio-net-pci,netdev=kbnet",
    ]


def client_argv(port: int, options: tuple[str, ...]) -> list[str]:
    return ["iperf3", "-c", "127.0.0.1", "-p", str(port), *options]


def _test_seconds(options: tuple[str, ...]) -> float:
    """The -t of the client's options (net_throughput.peer_options always gives one)."""
    return float(options[options.index("-t") + 1]) if "-t" in options else 10.0


class Peer:
    """The client loop, in a thread, from `with Peer(...)` until its end (QEMU gone)."""

    def __init__(self, run_dir: Path, port: int, options: tuple[str, ...]) -> None:
        self.argv = client_argv(port, options)
        self.limit = _test_seconds(options) + OVERRUN
        self.log_path = run_dir / PEER_LOG
        self.stopping = threading.Event()
        self.client: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()  # over `client`, between the loop and stop
        self.thread = threading.Thread(target=self._loop, name="kbisect-net-peer", daemon=True)

    def __enter__(self) -> "Peer":
        self.thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stopping.set()
        with self.lock:
            if self.client is not None:
                kill_group(self.client)
        self.thread.join()

    def _loop(self) -> None:
        with open(self.log_path, "ab") as log:
            while not self.stopping.is_set():
                ok = self._one(log)
                if not ok:
                    self.stopping.wait(RETRY_PAUSE)

    def _one(self, log: BinaryIO) -> bool:
        """One client run; True if it ran a test to its end."""
        sink: BinaryIO | int = log if log.tell() < LOG_CAP else subprocess.DEVNULL
        with self.lock:
            if self.stopping.is_set():
                return False
            try:
                self.client = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    process_group=0,
                    preexec_fn=die_with_parent,
                )
            except OSError as exc:  # no iperf3: the guest's server says none came
                log.write(f"kbisect: cannot start iperf3: {exc.strerror}\n".encode())
                self.stopping.set()
                return False
        client = self.client
        try:
            code = client.wait(timeout=self.limit)
        except subprocess.TimeoutExpired:
            kill_group(client)
            code = client.wait()
        log.flush()
        return code == 0
