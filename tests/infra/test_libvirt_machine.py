"""LibvirtMachine's outcomes and clean-up, against a fake libvirt connection."""

import socket
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from kbisect.errors import InfraError, UserError
from kbisect.infra import libvirt_machine as lm
from kbisect.infra.machines import make_machine
from kbisect.infra.qemu import PROFILES, QemuMachine
from kbisect.model import Artifact, Disk, GuestImage, GuestRun, Outcome
from kbisect.settings import Settings

ARTIFACT = Artifact("c0ffee", "t", "h", "/nonexistent/bzImage", "/c", "/l")
GUEST = GuestImage("/nonexistent/initramfs", ())
DONE = 'KBISECT {"event":"booted"}\nKBISECT {"event":"done","status":%d}\n'

# What the fake guest does: write to its console and channel, say how it stopped and
# who asked (None: it runs on).
Guest = Callable[[Path, Path], tuple[int, int] | None]


class FakeHypervisor:
    def __init__(self, guest: Guest, version: int = 9_000_000, privileged: bool = True) -> None:
        self.guest = guest
        self._version = version
        self._privileged = privileged
        self.xml = ""
        self.running: set[str] = set()
        self.defined: set[str] = set()  # persistent domains, running or not
        self.destroyed: list[str] = []
        self.closed = False
        self.start_error = ""

    def version(self) -> int:
        return self._version

    def privileged(self) -> bool:
        return self._privileged

    def start(self, name: str, xml: str) -> None:
        if self.start_error:
            raise InfraError(f"libvirt could not start domain {name}: {self.start_error}")
        self.xml = xml
        self.running.add(name)

    def wait(
        self,
        name: str,
        timeout: float,
        progress: Callable[[str], None],
        flooding: Callable[[], bool] = lambda: False,
    ) -> tuple[int, int] | None:
        serials = [
            s.find("source").get("path") for s in ET.fromstring(self.xml).findall("devices/serial")
        ]  # type: ignore[union-attr]
        reason = self.guest(Path(str(serials[0])), Path(str(serials[1])))
        if flooding():  # the real one polls it while the domain runs: stopped, as a timeout
            return None
        if reason is not None:
            self.running.discard(name)
        return reason

    def destroy(self, name: str) -> None:
        if name in self.running:
            self.running.discard(name)
            self.destroyed.append(name)

    def domains(self) -> list[str]:
        return sorted(self.running | self.defined)

    def remove(self, name: str) -> None:
        self.destroy(name)
        self.defined.discard(name)

    def close(self) -> None:
        self.closed = True


def _run(tmp_path: Path, hv: FakeHypervisor, disks: list[Disk] | None = None) -> GuestRun:
    machine = lm.LibvirtMachine(accel="tcg", connect=lambda _uri: hv)
    return machine._run_in(hv, tmp_path, "tcg", ARTIFACT, GUEST, disks or [], 5, "", print)


def _guest(
    console: str = "",
    channel: str = "",
    reason: int | None = 0,
    asked: int = lm.NO_SHUTDOWN,
    log: str = "",
) -> Guest:
    def run(console_path: Path, channel_path: Path) -> tuple[int, int] | None:
        console_path.write_text(console)
        channel_path.write_text(channel)
        (console_path.parent / "qemu.stderr").write_text(log)  # QEMU's log, as kept
        return None if reason is None else (reason, asked)

    return run


def test_success_and_failure_come_from_the_result_channel(tmp_path: Path) -> None:
    ok = FakeHypervisor(_guest(channel=DONE % 0))
    assert _run(tmp_path, ok).outcome is Outcome.SUCCESS
    failed = FakeHypervisor(_guest(channel=DONE % 3))
    run = _run(tmp_path, failed)
    assert run.outcome is Outcome.TESTCASE_FAILED and "status 3" in run.detail
    assert (tmp_path / "domain.xml").read_text() == failed.xml


def test_a_panic_ends_the_domain_and_is_a_panic(tmp_path: Path) -> None:
    # panic=-1 reboots; on_reboot=destroy: libvirt 9.0 says the guest asked to shut
    # down, then "shut down" (measured); older ones report a reboot, then "destroyed".
    hv = FakeHypervisor(_guest(console="Kernel panic - not syncing: lab", reason=1))
    run = _run(tmp_path, hv)
    assert run.outcome is Outcome.PANIC and "lab" in run.detail
    booted = 'KBISECT {"event":"booted"}\n'
    # libvirt signals QEMU to end the domain: that line in QEMU's log is not the host's.
    log = "qemu-system-x86_64: terminating on signal 15 from pid 9 (libvirtd)\n"
    for reason in (lm.STOPPED_SHUTDOWN, lm.STOPPED_DESTROYED):
        quiet = FakeHypervisor(
            _guest(channel=booted, reason=reason, asked=lm.SHUTDOWN_GUEST, log=log)
        )
        assert _run(tmp_path, quiet).outcome is Outcome.PANIC
    unsaid = FakeHypervisor(_guest(channel=booted, reason=lm.STOPPED_SHUTDOWN))
    assert _run(tmp_path, unsaid).outcome is Outcome.PANIC


def test_a_timeout_destroys_the_domain_and_is_a_hang(tmp_path: Path) -> None:
    hv = FakeHypervisor(_guest(channel='KBISECT {"event":"booted"}\n', reason=None))
    run = _run(tmp_path, hv)
    assert run.outcome is Outcome.HANG and "during the testcase" in run.detail
    assert hv.destroyed and not hv.running


def test_a_guest_that_floods_its_console_is_destroyed_as_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lm.qemu, "FLOOD_BYTES", 1 << 20)
    flood = "WARNING: storm\n" * (100_000)  # 1.5 MiB, and the domain still running
    hv = FakeHypervisor(_guest(console=flood, channel='KBISECT {"event":"booted"}\n', reason=1))
    run = _run(tmp_path, hv)
    assert run.outcome is Outcome.HANG and "floods its console" in run.detail, run.detail
    assert hv.destroyed and not hv.running


def test_qemu_failing_under_libvirt_is_the_hosts_fault(tmp_path: Path) -> None:
    hv = FakeHypervisor(_guest(console="Linux version 6.1", reason=lm.STOPPED_FAILED))
    with pytest.raises(InfraError, match="failed without a result") as err:
        _run(tmp_path, hv)
    assert str(tmp_path) in str(err.value)
    # ...but a verdict the guest left stands.
    done = FakeHypervisor(_guest(channel=DONE % 0, reason=lm.STOPPED_CRASHED))
    assert _run(tmp_path, done).outcome is Outcome.SUCCESS


def test_a_domain_that_does_not_start_names_libvirt_and_the_run_dir(tmp_path: Path) -> None:
    hv = FakeHypervisor(_guest())
    hv.start_error = "unsupported configuration: nvme"
    with pytest.raises(InfraError, match="nvme") as err:
        _run(tmp_path, hv, [Disk("origin", 8, PROFILES["fast"])])
    assert str(tmp_path) in str(err.value)
    assert not (tmp_path / "origin.img").exists()


def test_images_are_removed_unless_kept(tmp_path: Path) -> None:
    hv = FakeHypervisor(_guest(channel=DONE % 0), version=11_005_000)
    disks = [Disk("origin", 8, PROFILES["ebs-gp2"]), Disk("out", 8, PROFILES["fast"], keep=True)]
    _run(tmp_path, hv, disks)
    assert not (tmp_path / "origin.img").exists() and (tmp_path / "out.img").exists()
    assert 'bus="nvme"' in hv.xml and "<total_iops_sec>3000<" in hv.xml


def test_a_system_daemon_runs_qemu_as_us_without_relabelling(tmp_path: Path) -> None:
    system = FakeHypervisor(_guest(channel=DONE % 0), privileged=True)
    _run(tmp_path, system)
    label = ET.fromstring(system.xml).find("seclabel")
    assert label is not None and label.get("relabel") == "no"
    session = FakeHypervisor(_guest(channel=DONE % 0), privileged=False)
    _run(tmp_path, session)
    assert ET.fromstring(session.xml).find("seclabel") is None


def test_run_connects_first_and_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    hv = FakeHypervisor(_guest(channel=DONE % 0))
    run = lm.LibvirtMachine(accel="tcg", connect=lambda _uri: hv).run(ARTIFACT, GUEST, [], 5)
    assert run.outcome is Outcome.SUCCESS and hv.closed
    assert Path(run.console).parent.parent == cache / "runs"

    def refuse(uri: str) -> lm.Hypervisor:
        raise InfraError(f"cannot connect to libvirt at {uri}")

    with pytest.raises(InfraError, match="qemu:///session"):
        lm.LibvirtMachine(connect=refuse).run(ARTIFACT, GUEST, [], 5)
    assert not list((cache / "runs").iterdir())[1:]  # no run dir for the refused run


def test_make_machine_by_name() -> None:
    settings = Settings(cache=Path("/c"), data=Path("/d"), libvirt_uri="qemu:///system")
    assert isinstance(make_machine("qemu", settings), QemuMachine)
    machine = make_machine("libvirt", settings, pin=(1,))
    assert isinstance(machine, lm.LibvirtMachine) and machine.uri == "qemu:///system"
    assert machine.pin == (1,) and machine.name == "libvirt"
    with pytest.raises(UserError, match="qemu, libvirt"):
        make_machine("xen", settings)


def test_settings_read_the_machine_and_uri() -> None:
    s = Settings.from_env({"KBISECT_MACHINE": "libvirt", "KBISECT_LIBVIRT_URI": "qemu:///system"})
    assert (s.machine, s.libvirt_uri) == ("libvirt", "qemu:///system")
    assert Settings.from_env({}).machine == "qemu"
    with pytest.raises(UserError, match="KBISECT_MACHINE"):
        Settings.from_env({"KBISECT_MACHINE": "xen"})


def test_a_kvm_device_only_root_may_open_is_noted(tmp_path: Path) -> None:
    kvm = tmp_path / "kvm"
    kvm.touch()
    kvm.chmod(0o600)
    assert "chmod 0660" in lm.host_notes(kvm)[0]
    kvm.chmod(0o666)
    assert lm.host_notes(kvm) == []
    assert lm.host_notes(tmp_path / "missing") == []


def test_a_domain_destroyed_from_outside_is_the_hosts_fault(tmp_path: Path) -> None:
    # `virsh destroy`, or a host shutdown: kbisect destroys only after its wait ends.
    hv = FakeHypervisor(_guest(console="Linux version 6.1", reason=lm.STOPPED_DESTROYED))
    with pytest.raises(InfraError, match="destroyed"):
        _run(tmp_path, hv)


def test_a_domain_whose_qemu_got_a_signal_is_the_hosts_fault(tmp_path: Path) -> None:
    # A SIGTERM to QEMU (a host shutdown): libvirt 9.0 says the host asked, then "shut
    # down", as after a guest's power off (measured).
    hv = FakeHypervisor(
        _guest(console="Linux version 6.1", reason=lm.STOPPED_SHUTDOWN, asked=lm.SHUTDOWN_HOST)
    )
    with pytest.raises(InfraError, match="shut down by the host") as err:
        _run(tmp_path, hv)
    assert str(tmp_path) in str(err.value)
    # ...but a verdict the guest left stands.
    done = FakeHypervisor(
        _guest(channel=DONE % 0, reason=lm.STOPPED_SHUTDOWN, asked=lm.SHUTDOWN_HOST)
    )
    assert _run(tmp_path, done).outcome is Outcome.SUCCESS


def test_a_run_removes_the_domains_of_gone_workers_only(tmp_path: Path, cache: Path) -> None:
    scope = lm._scope()
    gone = f"kbisect-{scope}-99999999-12345-20260101-000000-aaaaaaaa"  # no such pid
    reused = f"kbisect-{scope}-1-999999999999-20260101-000000-bbbbbbbb"  # pid 1, not it
    kept = {
        lm.owner_prefix() + "20260101-000000-cccccccc",  # this worker's own
        f"kbisect-{scope}-1-{lm._started(1)}-20260101-000000-dddddddd",  # pid 1 lives
        "kbisect-00000000-99999999-1-x" if scope != "00000000" else "kbisect-11111111-9-1-x",
        "kbisect-20250101-120000-eeeeeeee",  # an older kbisect's: no owner in the name
        "webserver",
    }
    hv = FakeHypervisor(_guest(channel=DONE % 0))
    hv.running |= {gone, *kept}
    hv.defined |= {reused, "webserver"}
    run = lm.LibvirtMachine(accel="tcg", connect=lambda _uri: hv).run(ARTIFACT, GUEST, [], 5)
    assert run.outcome is Outcome.SUCCESS
    assert set(hv.domains()) == kept and gone in hv.destroyed
    started = ET.fromstring(hv.xml).findtext("name") or ""
    assert started.startswith(lm.owner_prefix()) and lm.OWNED_NAME.match(started)
    assert not lm.orphaned(started, scope)


def test_the_host_a_guest_runs_on_is_the_uri_s_or_this_machine() -> None:
    # A timing is judged against the references of the host that booted it.
    assert lm.LibvirtMachine("qemu+ssh://box7.lab/system").host == "box7.lab"
    assert lm.LibvirtMachine("qemu:///system").host == socket.gethostname()
