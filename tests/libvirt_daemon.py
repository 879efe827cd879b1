"""A libvirt daemon for the tests that need one: the one that answers at the URI, else (as
root, with libvirt installed by infra/install.sh) virtlogd and libvirtd started for them:
root's is the system daemon, which without systemd (a container) nobody starts."""

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kbisect.errors import InfraError
from kbisect.infra.libvirt_machine import LibvirtConnection
from kbisect.infra.processes import stop


def answers(uri: str) -> bool:
    try:
        LibvirtConnection(uri).close()
    except InfraError:
        return False
    return True


@contextmanager
def libvirt_daemon(uri: str, logs: Path) -> Iterator[bool]:
    """True while a daemon answers at `uri` (started here if need be, stopped after);
    False when none can be had here (not root, or no libvirtd)."""
    if answers(uri):
        yield True
        return
    if os.geteuid() != 0 or not shutil.which("libvirtd"):
        yield False
        return
    procs = []
    for daemon in ("virtlogd", "libvirtd"):
        with open(logs / f"{daemon}.log", "wb") as log:
            procs.append(subprocess.Popen([daemon], stdout=log, stderr=log))
    try:
        deadline = time.monotonic() + 30
        while not answers(uri):
            assert time.monotonic() < deadline, f"libvirtd did not answer: see {logs}"
            assert all(p.poll() is None for p in procs), f"a daemon exited: see {logs}"
            time.sleep(0.3)
        yield True
    finally:
        for p in reversed(procs):
            stop(p)
