"""nginx on 127.0.0.1 for tests and benchmarks: one server block of the caller's, in a
folder of its own (config, logs, temporary files, pid), stopped at the end. A WebDAV
store (PUT, GET) is one such server: the kernels' store, or ccache's remote storage."""

import getpass
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kbisect.infra.temporal_server import listening


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _conf(folder: Path, server: str) -> str:
    temp = "\n".join(
        f"    {kind}_temp_path {folder}/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""
user {getpass.getuser()};
worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {folder}/access.log;
{temp}
    server {{
{server}
    }}
}}
"""


@contextmanager
def nginx(folder: Path, server: Callable[[int], str]) -> Iterator[int]:
    """nginx serving `server(port)` (the lines inside its server block): the port."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = folder / "nginx.conf"
    conf.write_text(_conf(folder, server(port)))
    proc = subprocess.Popen(
        ["nginx", "-p", str(folder), "-c", str(conf), "-e", str(folder / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not listening("127.0.0.1", port):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (
                    (folder / "error.log").read_text()[-1000:]
                    if (folder / "error.log").exists()
                    else ""
                )
                raise RuntimeError(f"nginx did not start: {log}")
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(20)


def methods(folder: Path) -> set[str]:
    """The HTTP methods nginx's access log saw."""
    return {
        line.split('"')[1].split()[0]
        for line in (folder / "access.log").read_text().splitlines()
        if line.count('"') >= 2 and line.split('"')[1]
    }


@contextmanager
def webdav(folder: Path, name: str = "kernels") -> Iterator[str]:
    """A WebDAV store (PUT, GET) on 127.0.0.1: its URL (served from folder/root/NAME)."""
    (folder / "root" / name).mkdir(parents=True, exist_ok=True)

    def server(port: int) -> str:
        return f"""
        listen 127.0.0.1:{port};
        root {folder}/root;
        client_max_body_size 0;
        location /{name}/ {{
            dav_methods PUT DELETE MKCOL COPY MOVE;
            create_full_put_path on;
        }}"""

    with nginx(folder, server) as port:
        yield f"http://127.0.0.1:{port}/{name}"
