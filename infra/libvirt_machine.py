"""A second Machine: the same guest as QemuMachine's, run as a transient libvirt domain.

For hosts whose VMs libvirt manages, or to see kbisect's guests in `virsh list`. The
domain XML comes from infra.libvirt_xml; the outcome from the same result channel and
console as direct QEMU (qemu.collect). There is no QEMU exit status under libvirt: the
domain's lifecycle events say how it stopped and who asked. A guest that powered off,
rebooted or panicked (panic=-1 reboots, and on_reboot destroys the domain) stopped by
itself; QEMU failing, crashing or stopped by a signal, and a domain destroyed from
outside kbisect (virsh destroy, a host shutdown), are the host's failure (InfraError).

Each domain is named after its worker (kbisect-SCOPE-PID-START-RUN), and started to be
destroyed when the worker's connection closes; a run first removes the domains of this
host's workers that are gone (a libvirt daemon restarted under them keeps them running).
"""

import hashlib
import logging
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from kbisect.errors import InfraError, UserError
from kbisect.infra import qemu
from kbisect.infra.libvirt_xml import DomainSpec, domain_xml
from kbisect.infra.processes import boot_id, start_time
from kbisect.model import Artifact, Disk, GuestImage, GuestRun

log = logging.getLogger(__name__)
DEFAULT_URI = "qemu:///session"
POLL = 0.5  # seconds between looks at a running domain
EVENT_GRACE = 5.0  # how long a vanished domain's stop event may lag behind
START_HELP = (
    "install libvirt (apt-get install libvirt-daemon-system libvirt-clients) and start its "
    "daemon: as root without systemd run 'libvirtd -d' (and 'virtlogd -d'); with systemd, "
    "'systemctl start libvirtd'"
)

# How a domain stopped, from its lifecycle event (VIR_DOMAIN_EVENT_STOPPED_*).
STOPPED_SHUTDOWN, STOPPED_DESTROYED, STOPPED_CRASHED, STOPPED_FAILED = 0, 1, 2, 5
STOP_WORDS = {
    STOPPED_SHUTDOWN: "shut down",
    STOPPED_DESTROYED: "destroyed",
    STOPPED_CRASHED: "crashed",
    3: "migrated",
    4: "saved",
    STOPPED_FAILED: "failed",
    6: "restored from a snapshot",
}
# Who asked a domain to shut down (VIR_DOMAIN_EVENT_SHUTDOWN_*): the guest (a power off,
# or a reboot on_reboot=destroy ends), or the host (QEMU got a signal: a host shutdown,
# a kill). Measured with libvirt 9.0: both then stop as "shut down". UNSAID: libvirt
# gave no word; NO_SHUTDOWN: there was no shutdown event.
SHUTDOWN_UNSAID, SHUTDOWN_GUEST, SHUTDOWN_HOST, NO_SHUTDOWN = 0, 1, 2, -1
# A domain's name holds its worker: the scope (host boot, pid namespace, user), the pid
# and the pid's start time, so a reused pid is not taken for the worker.
OWNED_NAME = re.compile(r"^kbisect-([0-9a-f]{8})-(\d+)-(\d+)-")


class Hypervisor(Protocol):
    """What a run needs of a libvirt connection (a fake in tests)."""

    def version(self) -> int: ...
    def privileged(self) -> bool: ...
    def start(self, name: str, xml: str) -> None: ...
    def wait(
        self,
        name: str,
        timeout: float,
        progress: Callable[[str], None],
        flooding: Callable[[], bool] = ...,
    ) -> tuple[int, int] | None: ...
    def destroy(self, name: str) -> None: ...
    def domains(self) -> list[str]: ...
    def remove(self, name: str) -> None: ...
    def close(self) -> None: ...


def _libvirt() -> Any:
    """The binding, imported when a libvirt machine is used, so the rest works without."""
    try:
        import libvirt
    except ImportError:
        raise InfraError(
            "the libvirt Python binding is missing: pip install 'kbisect[libvirt]' "
            "(libvirt-python; building it needs libvirt-dev, pkg-config and gcc), "
            "or run infra/install.sh"
        ) from None
    return libvirt


_loop_lock = threading.Lock()
_loop_started = False


def _event_loop(lv: Any) -> None:
    """libvirt delivers lifecycle events through an event loop the client runs: one
    daemon thread per process, registered before the first connection opens."""
    global _loop_started
    with _loop_lock:
        if _loop_started:
            return
        lv.virEventRegisterDefaultImpl()

        def run() -> None:
            while True:
                lv.virEventRunDefaultImpl()

        threading.Thread(target=run, name="libvirt-events", daemon=True).start()
        _loop_started = True


class LibvirtConnection:
    """A connection with lifecycle events: each domain's stop reason as it stops."""

    def __init__(self, uri: str) -> None:
        lv = _libvirt()
        _event_loop(lv)
        lv.registerErrorHandler(lambda _ctx, _err: None, None)  # errors are raised, not printed
        self._lv = lv
        self.uri = uri
        try:
            self._conn = lv.open(uri)
        except lv.libvirtError as e:
            raise InfraError(
                f"cannot connect to libvirt at {uri}: {_message(e)}; {START_HELP}"
            ) from None
        self._stopped: dict[str, int] = {}
        self._asked: dict[str, int] = {}  # who asked each domain to shut down
        self._changed = threading.Condition()
        self._callbacks = [
            self._conn.domainEventRegisterAny(
                None, lv.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._on_lifecycle, None
            ),
            # Older libvirt ends an on_reboot=destroy guest's reboot without a shutdown.
            self._conn.domainEventRegisterAny(
                None, lv.VIR_DOMAIN_EVENT_ID_REBOOT, self._on_reboot, None
            ),
        ]

    def _on_lifecycle(self, _conn: Any, dom: Any, event: int, detail: int, _opaque: Any) -> None:
        with self._changed:
            if event == self._lv.VIR_DOMAIN_EVENT_SHUTDOWN:
                self._asked[dom.name()] = detail
            elif event == self._lv.VIR_DOMAIN_EVENT_STOPPED:
                self._stopped[dom.name()] = detail
                self._changed.notify_all()

    def _on_reboot(self, _conn: Any, dom: Any, _opaque: Any) -> None:
        with self._changed:
            self._asked[dom.name()] = SHUTDOWN_GUEST

    def version(self) -> int:
        return int(self._conn.getLibVersion())

    def privileged(self) -> bool:
        """A system daemon (it runs QEMU as its own user unless told otherwise). Root's
        qemu:///session is the system daemon too."""
        parts = urlsplit(self.uri)
        return parts.path == "/system" or (not parts.hostname and os.geteuid() == 0)

    def start(self, name: str, xml: str) -> None:
        try:
            # Destroyed by libvirt when this connection closes: a killed worker leaves none.
            self._conn.createXML(xml, self._lv.VIR_DOMAIN_START_AUTODESTROY)
        except self._lv.libvirtError as e:
            raise InfraError(f"libvirt could not start domain {name}: {_message(e)}") from None

    def wait(
        self,
        name: str,
        timeout: float,
        progress: Callable[[str], None],
        flooding: Callable[[], bool] = lambda: False,
    ) -> tuple[int, int] | None:
        """The stop reason and who asked for it (SHUTDOWN_*, NO_SHUTDOWN) once the domain
        stops; None when `timeout` passes first, or the guest floods its console."""
        began = time.monotonic()
        vanished = 0.0
        while True:
            # No libvirt call under the lock: the event thread takes it to deliver.
            with self._changed:
                if name not in self._stopped:
                    self._changed.wait(POLL)
                if name in self._stopped:
                    return self._stopped.pop(name), self._asked.pop(name, NO_SHUTDOWN)
            now = time.monotonic()
            if now - began > timeout or flooding():
                return None
            progress(f"guest running {now - began:.0f}s")
            if not vanished and not self._exists(name):
                vanished = now
            if vanished and now - vanished > EVENT_GRACE:
                with self._changed:  # gone, and libvirt never said how
                    return -1, self._asked.pop(name, NO_SHUTDOWN)

    def _exists(self, name: str) -> bool:
        try:
            self._conn.lookupByName(name)
            return True
        except self._lv.libvirtError as e:
            if e.get_error_code() == self._lv.VIR_ERR_NO_DOMAIN:
                return False
            raise InfraError(f"libvirt at {self.uri} stopped answering: {_message(e)}") from None

    def destroy(self, name: str) -> None:
        """Destroy the domain if it is still there (a transient domain is then gone)."""
        try:
            self._conn.lookupByName(name).destroy()
        except self._lv.libvirtError as e:
            if e.get_error_code() not in (
                self._lv.VIR_ERR_NO_DOMAIN,
                self._lv.VIR_ERR_OPERATION_INVALID,  # it stopped meanwhile
            ):
                raise InfraError(f"libvirt could not destroy {name}: {_message(e)}") from None

    def domains(self) -> list[str]:
        """The names of kbisect's domains, running or defined."""
        try:
            names = [d.name() for d in self._conn.listAllDomains(0)]
        except self._lv.libvirtError as e:
            raise InfraError(f"libvirt at {self.uri} cannot list domains: {_message(e)}") from None
        return [n for n in names if n.startswith("kbisect-")]

    def remove(self, name: str) -> None:
        """Destroy the domain if it runs, undefine it if it is defined."""
        self.destroy(name)
        try:
            self._conn.lookupByName(name).undefine()
        except self._lv.libvirtError as e:
            if e.get_error_code() not in (
                self._lv.VIR_ERR_NO_DOMAIN,
                self._lv.VIR_ERR_OPERATION_INVALID,  # transient: gone with its destroy
            ):
                raise InfraError(f"libvirt could not undefine {name}: {_message(e)}") from None

    def close(self) -> None:
        try:
            for callback in self._callbacks:
                self._conn.domainEventDeregisterAny(callback)
            self._conn.close()
        except self._lv.libvirtError:
            pass  # the daemon went away: nothing left to release


def _message(error: Any) -> str:
    """One line: QEMU's error is often the last of several lines (warnings first)."""
    lines = [ln.strip() for ln in str(error.get_error_message() or error).splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return "no message"
    if len(lines) == 1:
        return lines[0][: qemu.DETAIL_CAP]
    return f"{lines[0][:120]} ... {lines[-1][: qemu.DETAIL_CAP]}"


def host_notes(kvm: Path = Path("/dev/kvm")) -> list[str]:
    """What makes libvirt slow on this host. Measured here: with /dev/kvm 0600 root (no
    udev), libvirt 9.0 finds the KVM it probed unusable for its QEMU user and probes QEMU
    again at every capability lookup, about 50 s per domain start."""
    try:
        st = kvm.stat()
    except OSError:
        return []
    if (st.st_mode & 0o060 == 0o060 and st.st_gid != 0) or st.st_mode & 0o006 == 0o006:
        return []
    return [
        f"{kvm} is mode {st.st_mode & 0o777:o}, group {st.st_gid}: libvirt will probe QEMU "
        f"again at every domain start (about 50 s each); give it udev's 'chgrp kvm {kvm}; "
        f"chmod 0660 {kvm}'"
    ]


def domain_log(name: str, privileged: bool) -> Path:
    """Where libvirt writes QEMU's stderr for a domain."""
    if privileged:
        return Path("/var/log/libvirt/qemu") / f"{name}.log"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "libvirt" / "qemu" / "log" / f"{name}.log"


def _keep_log(name: str, privileged: bool, run_dir: Path) -> None:
    """QEMU's stderr into the run dir as qemu.stderr (where the QEMU machine keeps it),
    and no per-run file left behind in libvirt's log folder."""
    log = domain_log(name, privileged)
    try:
        shutil.copyfile(log, run_dir / "qemu.stderr")
        log.unlink()
    except OSError:
        pass  # a system daemon's log we may not read: the run dir says the rest


def _failure(reason: int, asked: int, name: str) -> str:
    """'' when the guest stopped by itself; else why the host is to blame."""
    if asked == SHUTDOWN_GUEST:
        # Power off, or a reboot that on_reboot=destroy ended (panic=-1 reboots).
        return ""
    if asked == SHUTDOWN_HOST:
        return f"libvirt domain {name} was shut down by the host (QEMU got a signal)"
    if reason == STOPPED_SHUTDOWN:
        return ""  # a libvirt that does not say who asked: the guest, as before
    if reason == STOPPED_DESTROYED:
        # kbisect destroys its domains only once it stopped waiting for them.
        return f"libvirt domain {name} was destroyed outside kbisect (virsh destroy?)"
    return f"libvirt domain {name} {STOP_WORDS.get(reason, 'vanished without a stop event')}"


def _scope() -> str:
    """This host boot, pid namespace and user: where a domain name's pid means a process
    we can look at."""
    boot = boot_id()
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    return hashlib.sha256(f"{boot} {pidns} {os.getuid()}".encode()).hexdigest()[:8]


def _started(pid: int) -> str:
    """The process's start time as a domain name holds it, '' when it is gone."""
    started = start_time(pid)
    return "" if started is None else str(started)


def owner_prefix() -> str:
    """The start of this process's domain names."""
    pid = os.getpid()
    return f"kbisect-{_scope()}-{pid}-{_started(pid)}-"


def orphaned(name: str, scope: str, started: Callable[[int], str] = _started) -> bool:
    """True for a domain of a worker in this scope that is gone. Another scope's (another
    host, container or user) and an unnamed one's are not ours to judge."""
    m = OWNED_NAME.match(name)
    if not m or m.group(1) != scope:
        return False
    return started(int(m.group(2))) != m.group(3)


def sweep(hv: Hypervisor, scope: str, started: Callable[[int], str] = _started) -> list[str]:
    """Remove the domains whose worker is gone; the names removed. libvirt destroys a
    domain when its worker's connection closes, but not after the daemon restarted."""
    gone = [n for n in hv.domains() if orphaned(n, scope, started)]
    for name in gone:
        log.warning("removing libvirt domain %s: the worker that started it is gone", name)
        hv.remove(name)
    return gone


class LibvirtMachine:
    name = "libvirt"

    def __init__(
        self,
        uri: str = DEFAULT_URI,
        memory_mib: int = 1024,
        cpus: int = 2,
        accel: str | None = None,
        pin: tuple[int, ...] = (),
        connect: Callable[[str], Hypervisor] = LibvirtConnection,
    ) -> None:
        self.uri = uri
        self.memory_mib = memory_mib
        self.cpus = cpus
        self.pin = pin  # host CPUs reserved for guests (`worker --measure-cpus`); () = any
        self.host = urlsplit(uri).hostname or socket.gethostname()  # qemu+ssh://HOST/system
        self._accel = accel  # Settings.accel (KBISECT_ACCEL), checked there; None: probe
        self._connect = connect

    def run(
        self,
        artifact: Artifact,
        guest: GuestImage,
        disks: list[Disk],
        timeout: float,
        cmdline: str = "",
        progress: Callable[[str], None] = lambda _: None,
    ) -> GuestRun:
        if guest.peer:
            raise UserError(
                "this testcase runs a client on the host beside its guest (iperf3), which the "
                "libvirt machine does not: run it on a worker with KBISECT_MACHINE=qemu"
            )
        hv = self._connect(self.uri)  # a missing daemon fails here, before anything is made
        try:
            sweep(hv, _scope())
            # The direct-QEMU probe boot decides KVM or TCG once per host boot, for both.
            accel = self._accel or qemu.QemuMachine().probe_accel(artifact, guest)
            return self._run_in(
                hv, qemu.new_run_dir(), accel, artifact, guest, disks, timeout, cmdline, progress
            )
        finally:
            hv.close()

    def _spec(
        self,
        hv: Hypervisor,
        run_dir: Path,
        accel: str,
        artifact: Artifact,
        guest: GuestImage,
        images: list[tuple[Disk, Path]],
        cmdline: str,
    ) -> DomainSpec:
        return DomainSpec(
            name=owner_prefix() + run_dir.name,
            kernel=artifact.kernel,
            initrd=guest.initramfs,
            cmdline=cmdline,
            accel=accel,
            memory_mib=self.memory_mib,
            cpus=self.cpus,
            run_dir=run_dir,
            disks=tuple(images),
            host_root=guest.host_root,
            userland_image=guest.userland_image,
            pin=self.pin,
            owner=(os.getuid(), os.getgid()) if hv.privileged() else None,
            libvirt_version=hv.version(),
        )

    def _run_in(
        self,
        hv: Hypervisor,
        run_dir: Path,
        accel: str,
        artifact: Artifact,
        guest: GuestImage,
        disks: list[Disk],
        timeout: float,
        cmdline: str,
        progress: Callable[[str], None],
    ) -> GuestRun:
        images, scratch = qemu.make_images(run_dir, disks)
        spec = self._spec(
            hv, run_dir, accel, artifact, guest, list(zip(disks, images, strict=True)), cmdline
        )
        xml = domain_xml(spec)
        (run_dir / "domain.xml").write_text(xml)
        began = time.monotonic()
        try:
            try:
                hv.start(spec.name, xml)
            except InfraError as e:
                raise InfraError(f"{e} (run dir {run_dir})") from None
            reason = hv.wait(spec.name, timeout, progress, lambda: qemu.flooding(run_dir))
        finally:
            hv.destroy(spec.name)  # on timeout, on error, on Ctrl-C: no domain left running
            seconds = time.monotonic() - began
            _keep_log(spec.name, hv.privileged(), run_dir)
            for image in scratch:
                image.unlink(missing_ok=True)
        exited = reason is not None
        failed = _failure(*reason, spec.name) if reason is not None else ""
        # libvirt ends every domain by signalling QEMU, so QEMU's own line says nothing.
        outcome, detail, records = qemu.collect(run_dir, exited, failed=failed, signal_line=False)
        return GuestRun(
            outcome=outcome,
            records=records,
            console=str(run_dir / "console.log"),
            seconds=round(seconds, 2),
            accel=accel,
            detail=detail,
        )
