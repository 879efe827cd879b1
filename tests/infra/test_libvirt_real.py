"""LibvirtConnection against a real libvirt daemon, with guests that boot no kernel (the
firmware finds nothing to boot): how stops are told apart, and what a gone worker leaves.
Skipped where libvirt is not installed."""

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kbisect.infra import libvirt_machine as lm
from tests.libvirt_daemon import libvirt_daemon

URI = "qemu:///session"


MADE: list[str] = []  # the domains a test made, removed after it


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, server: None) -> Iterator[None]:
    pytest.importorskip("libvirt")
    with libvirt_daemon(URI, tmp_path_factory.mktemp("libvirtd")) as up:
        if not up:
            pytest.skip(f"libvirt at {URI} does not answer: see infra/install.sh")
        yield


@pytest.fixture
def conn(daemon: None) -> Iterator[lm.LibvirtConnection]:
    c = lm.LibvirtConnection(URI)
    try:
        yield c
    finally:
        while MADE:
            c.remove(MADE.pop())
        c.close()


def _xml(name: str, reboot: bool = False) -> str:
    """A domain with no kernel and no disk: the firmware waits, or with rebootTimeout 0
    resets the machine at once (the guest's own reboot)."""
    bios = "<bios rebootTimeout='0'/>" if reboot else ""
    return (
        f"<domain type='qemu'><name>{name}</name><memory unit='MiB'>64</memory>"
        f"<vcpu>1</vcpu><os><type arch='x86_64' machine='q35'>hvm</type>{bios}</os>"
        "<on_poweroff>destroy</on_poweroff><on_reboot>destroy</on_reboot>"
        "<on_crash>destroy</on_crash><devices><controller type='usb' model='none'/>"
        "<memballoon model='none'/></devices></domain>"
    )


def _name(prefix: str) -> str:
    name = f"{prefix}{time.monotonic_ns()}"
    MADE.append(name)
    return name


def _qemu_pid(name: str) -> int:
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"guest={name},".encode() in b"".join(argv) or f"guest={name}".encode() in argv:
            return int(proc.name)
    raise AssertionError(f"no QEMU process for {name}")


def _stop_soon(action: Callable[[], None]) -> None:
    threading.Timer(2.0, action).start()


def test_the_guests_own_reboot_is_not_the_hosts_fault(conn: lm.LibvirtConnection) -> None:
    name = _name(lm.owner_prefix())
    conn.start(name, _xml(name, reboot=True))
    stop = conn.wait(name, 60, lambda _: None)
    assert stop is not None and stop[1] == lm.SHUTDOWN_GUEST, stop
    assert lm._failure(*stop, name) == ""


def test_a_signal_to_qemu_or_a_destroy_from_outside_is_the_hosts(
    conn: lm.LibvirtConnection,
) -> None:
    signalled = _name(lm.owner_prefix())
    conn.start(signalled, _xml(signalled))
    _stop_soon(lambda: os.kill(_qemu_pid(signalled), signal.SIGTERM))
    stop = conn.wait(signalled, 60, lambda _: None)
    assert stop is not None and "by the host" in lm._failure(*stop, signalled), stop

    destroyed = _name(lm.owner_prefix())
    conn.start(destroyed, _xml(destroyed))
    other = lm.LibvirtConnection(URI)  # as `virsh destroy` would
    try:
        _stop_soon(lambda: other.destroy(destroyed))
        stop = conn.wait(destroyed, 60, lambda _: None)
    finally:
        other.close()
    # libvirt 9.0 reports the host asking for the stop, older ones a bare DESTROYED:
    # either way the host is named, never the guest.
    assert stop is not None, "no stop event"
    why = lm._failure(*stop, destroyed)
    assert "shut down by the host" in why or "destroyed outside kbisect" in why, (stop, why)


CHILD = """
import sys, time
from kbisect.infra import libvirt_machine as lm
from tests.libvirt_daemon import libvirt_daemon
c = lm.LibvirtConnection(sys.argv[1])
name = lm.owner_prefix() + "child"
c.start(name, sys.argv[2].replace("NAME", name))
print(name, flush=True)
time.sleep(120)
"""


def test_a_killed_workers_domain_does_not_outlive_it(conn: lm.LibvirtConnection) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, URI, _xml("NAME")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert child.stdout is not None
        name = child.stdout.readline().strip()
        MADE.append(name)
        assert name in conn.domains()
    finally:
        child.kill()  # as the OOM killer would
        child.wait()
    deadline = time.monotonic() + 20
    while name in conn.domains() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert name not in conn.domains(), "the domain outlived its killed worker"


def test_a_sweep_removes_a_gone_workers_domain_and_keeps_a_live_ones(
    conn: lm.LibvirtConnection,
) -> None:
    scope = lm._scope()
    gone = _name(f"kbisect-{scope}-99999999-1-")
    live = _name(lm.owner_prefix())
    lv = pytest.importorskip("libvirt")
    raw = lv.open(URI)  # started without autodestroy, as a restarted daemon keeps them
    try:
        for name in (gone, live):
            raw.createXML(_xml(name), 0)
        assert lm.sweep(conn, scope) == [gone]
        assert gone not in conn.domains() and live in conn.domains()
    finally:
        raw.close()
