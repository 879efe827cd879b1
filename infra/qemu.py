"""QEMU started directly from an argv list; outcomes read from a dedicated result channel.

The guest writes framed "KBISECT <json>" lines to its second serial port (a file here),
the console goes to another file. SUCCESS, TESTCASE_FAILED and CANNOT_TEST come from the
channel's "done" record (CANNOT_TEST also from a "harness-failed" one), PANIC from a
panic on the console or QEMU exiting 0 without a record (panic=-1 with -no-reboot), HANG
from our hard timeout. QEMU killed by a signal, stopped by one (it exits 0 then, as after
a power off, but says so on stderr) or exiting with an error, with no panic seen, is the
host's failure: InfraError.
"""

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from kbisect import settings
from kbisect.errors import InfraError
from kbisect.evidence import RUNS
from kbisect.infra import atomic_write, host_lock, net_peer, printable
from kbisect.infra.procs import die_with_parent, kill_group
from kbisect.model import Artifact, DeviceProfile, Disk, GuestImage, GuestRun, Outcome

QEMU = "qemu-system-x86_64"
RECORD_PREFIX = "KBISECT "
PROBE_TIMEOUT = 25.0
# `git bisect run`'s codes for a testcase script: 125 cannot test, 128 and above a fault of
# the harness (a script killed by a signal); other non-zero statuses are a failed testcase.
CANNOT_TEST_STATUS = 125
HARNESS_FAULT_STATUS = 128
PANIC_MARKERS = ("Kernel panic", "BUG: kernel NULL pointer", "kernel BUG at")
# What is read back of a run, at most: the end of the console says why a guest stopped,
# the start of the result channel holds its records.
CONSOLE_CAP = 4 << 20
RESULTS_CAP = 8 << 20
# A guest whose console or result channel grows past this is stopped as flooding it (the
# seed's testcase writes under 100 KiB), so no guest fills the host's disk; what is kept
# of its console is then its first MiB and its last CONSOLE_CAP bytes.
FLOOD_BYTES = 64 << 20
FLOOD_HEAD = 1 << 20
DETAIL_CAP = 300  # characters of a guest string (guest_text) or stderr line in a detail
# QEMU catches SIGINT, SIGHUP and SIGTERM (a host shutdown, a kill), prints this and
# exits 0, as when the guest powers off: the line tells a stop from outside from the
# guest's own.
SIGNAL_STOP = re.compile(r"terminating on signal \d+[^\n]*")

PROFILES = {
    "fast": DeviceProfile("fast"),
    # An EBS gp2-like volume: 3,000 IOPS and 128 MiB/s, the device of the seed's report.
    "ebs-gp2": DeviceProfile("ebs-gp2", iops=3000, bps=128 * 1024 * 1024),
}


def _opt_path(path: Path) -> str:
    """QEMU splits options at commas: refuse paths that would be split."""
    text = str(path)
    if "," in text:
        raise InfraError(f"path {text!r} has a comma, which QEMU options cannot carry")
    return text


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def base_args(memory_mib: int, cpus: int) -> list[str]:
    return [
        QEMU,
        "-machine",
        "q35",
        "-m",
        str(memory_mib),
        "-smp",
        str(cpus),
        "-nodefaults",
        "-display",
        "none",
        "-no-reboot",
    ]


def accel_args(accel: str) -> list[str]:
    if accel == "kvm":
        return ["-accel", "kvm", "-cpu", "host"]
    return ["-accel", "tcg,thread=multi", "-cpu", "max"]


def kernel_args(kernel: str, initramfs: str, cmdline: str) -> list[str]:
    return ["-kernel", kernel, "-initrd", initramfs, "-append", cmdline]


def serial_args(console: Path, channel: Path) -> list[str]:
    # ttyS0: the console; ttyS1: the result channel.
    return [
        "-chardev",
        f"file,id=console,path={_opt_path(console)}",
        "-serial",
        "chardev:console",
        "-chardev",
        f"file,id=results,path={_opt_path(channel)}",
        "-serial",
        "chardev:results",
    ]


HOST_ROOT_TAG = "kbhost"
USERLAND_SERIAL = "kbuserland"  # the userland image's virtio disk, as the guest finds it


def host_userland_args(guest: GuestImage) -> list[str]:
    """The host's userland for a guest that runs on it: its image on a read-only virtio
    disk, or the host's root over 9p; nothing for an initramfs-only guest."""
    if not guest.host_root:
        return []
    if not guest.userland_image:
        return host_root_args()
    drive = f"if=none,id={USERLAND_SERIAL},file={_opt_path(Path(guest.userland_image))}"
    return [
        "-drive",
        f"{drive},format=raw,readonly=on",
        "-device",
        f"virtio-blk-pci,drive={USERLAND_SERIAL},serial={USERLAND_SERIAL}",
    ]


def host_root_args() -> list[str]:
    """The host's / read-only over virtio-9p (QEMU 7.2 needs no daemon for it); remap
    keeps inode numbers unique across the host filesystems under /."""
    return [
        "-fsdev",
        f"local,id={HOST_ROOT_TAG},path=/,security_model=none,readonly=on,multidevs=remap",
        "-device",
        f"virtio-9p-pci,fsdev={HOST_ROOT_TAG},mount_tag={HOST_ROOT_TAG}",
    ]


def nvme_args(disk: Disk, image: Path) -> list[str]:
    drive = f"if=none,id={disk.name},file={_opt_path(image)},format=raw,cache=none,aio=threads"
    if disk.profile.iops:
        drive += f",throttling.iops-total={disk.profile.iops}"
    if disk.profile.bps:
        drive += f",throttling.bps-total={disk.profile.bps}"
    return ["-drive", drive, "-device", f"nvme,serial={disk.serial},drive={disk.name}"]


def guest_cmdline(extra: str) -> str:
    """The kernel command line every machine boots with: the console on ttyS0, and a
    panic or oops stops the guest at once (with -no-reboot, the VM ends)."""
    return f"console=ttyS0 panic=-1 oops=panic rdinit=/init {extra}".strip()


def new_run_dir() -> Path:
    """A fresh folder for one run's console, result channel and disk images."""
    run_dir = (
        settings.cache_dir() / RUNS / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
    )
    run_dir.mkdir(parents=True)
    return run_dir


def disk_image(run_dir: Path, disk: Disk) -> Path:
    """Where a run's disk image is: its run dir, by the disk's name."""
    return run_dir / f"{disk.name}.img"


def make_images(run_dir: Path, disks: list[Disk]) -> tuple[list[Path], list[Path]]:
    """Sparse disk images in the run dir: (every image, those to remove after the run)."""
    images, scratch = [], []
    for disk in disks:
        image = disk_image(run_dir, disk)
        with open(image, "wb") as fh:
            fh.truncate(disk.size_mib * 1024 * 1024)
        images.append(image)
        if not disk.keep:
            scratch.append(image)
    return images, scratch


def guest_text(text: object, cap: int = DETAIL_CAP) -> str:
    """What a guest wrote, as one printable line of at most `cap` characters: the guest
    is untrusted and its words reach chat and GitLab notes."""
    return printable.one_line(text, cap)


def _guest_value(value: object) -> object:
    """A record's value with every string in it, keys too, made guest_text."""
    if isinstance(value, str):
        return guest_text(value)
    if isinstance(value, dict):
        return {guest_text(k): _guest_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_guest_value(v) for v in value]
    return value


def parse_records(text: str) -> list[dict[str, object]]:
    records = []
    for line in text.splitlines():
        line = line.strip("\r")
        if line.startswith(RECORD_PREFIX):
            try:
                rec = _guest_value(json.loads(line[len(RECORD_PREFIX) :]))
            except (ValueError, RecursionError):
                # a torn line (the guest died mid-write), a number of more digits than
                # Python converts, or a record nested too deep
                continue
            if isinstance(rec, dict):
                records.append(rec)
    return records


def read_tail(path: Path, cap: int) -> tuple[str, bool]:
    """At most the last `cap` bytes; True when some were left out. A torn first line is
    kept: on a console flooded without newlines, it holds the panic."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - cap))
            data = fh.read(cap)
    except FileNotFoundError:
        return "", False
    return data.decode(errors="replace"), size > cap


def read_head(path: Path, cap: int) -> tuple[str, bool]:
    """At most the first `cap` bytes, up to a line end; True when some were left out."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(cap + 1)
    except FileNotFoundError:
        return "", False
    if len(data) <= cap:
        return data.decode(errors="replace"), False
    return data[: data.rfind(b"\n", 0, cap) + 1].decode(errors="replace"), True


def _exit_text(returncode: int) -> str:
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        return f"was killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"was killed by signal {-returncode}"


_KERNEL_LINE = re.compile(r"^\[\s*\d+\.\d+\]")
EXITED = "kbisect: testcase exited with "  # guest_init.sh's line after the script


def last_words(console: str) -> str:
    """The testcase's last line of output before init's "testcase exited" line, kernel
    messages skipped: why it failed, in its own words ("echo: I/O error")."""
    lines = console.splitlines()
    end = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith(EXITED)), 0)
    for line in reversed(lines[:end]):
        said = guest_text(line)
        if said and not _KERNEL_LINE.match(line):
            return said
    return ""


def _panic_line(console: str) -> str:
    """The first panic message on the console, from its marker on (the line may carry
    megabytes of noise before it)."""
    for line in console.splitlines():
        at = min((i for i in (line.find(m) for m in PANIC_MARKERS) if i >= 0), default=-1)
        if at >= 0:
            return guest_text(line[at:])
    return ""


def kernel_cannot_test(records: list[dict[str, object]]) -> bool:
    """The run says this kernel cannot run the testcase, as any boot of it would: the
    script's `git bisect run` 125, or the guest's own set-up failing (a module that does not
    load). A harness fault (128 and above, a killed script) is not: another boot may not."""
    done = _last(records, "done")
    harness = _last(records, "harness-failed")
    return harness is not None or (done is not None and done.get("status") == CANNOT_TEST_STATUS)


def _last(records: list[dict[str, object]], event: str) -> dict[str, object] | None:
    """The last record of this event on the result channel (None: it sent none)."""
    return next((r for r in reversed(records) if r.get("event") == event), None)


def classify_run(
    records: list[dict[str, object]],
    console: str,
    exited: bool,
    *,
    returncode: int = 0,
    stderr: str = "",
    run_dir: str = "",
    failed: str = "",
    signal_line: bool = True,
    flooded: bool = False,
) -> tuple[Outcome, str]:
    """Pure: the outcome from what came back. `exited` is False when we had to kill QEMU.

    InfraError when QEMU itself died (a signal such as the OOM killer's, or an error
    exit) or a signal stopped it, and the guest left no verdict: the host failed, not
    the kernel. `failed` says so where there is no exit code (libvirt's reason for
    stopping a domain); `signal_line` False ignores QEMU's "terminating on signal" line
    (libvirt signals QEMU itself to end a domain the guest rebooted).
    """
    harness = _last(records, "harness-failed")
    if harness is not None:
        reason = guest_text(harness.get("reason"))  # its own words: a module that does not load
        return Outcome.CANNOT_TEST, f"the guest could not run the testcase: {reason}"
    done = _last(records, "done")
    if done is not None:
        status = done.get("status")
        if status == 0:
            return Outcome.SUCCESS, ""
        words = last_words(console)
        said = f": {words}" if words else ""
        if status == CANNOT_TEST_STATUS:
            return (
                Outcome.CANNOT_TEST,
                f"testcase exited with status {status} (git bisect's skip){said}",
            )
        if not isinstance(status, int) or not 0 < status < HARNESS_FAULT_STATUS:
            fault = f"testcase exited with status {guest_text(status)} (a harness fault)"
            return Outcome.CANNOT_TEST, fault
        return Outcome.TESTCASE_FAILED, f"testcase exited with status {status}{said}"
    panic = _panic_line(console)
    if panic:
        return Outcome.PANIC, panic
    if flooded:  # stopped as a hang is: bad for a pass/fail testcase, else a skip
        return Outcome.HANG, (
            f"guest floods its console or result channel (over {_mib(FLOOD_BYTES)}): stopped"
        )
    if not exited:
        booted = any(r.get("event") == "booted" for r in records)
        return Outcome.HANG, "guest hung" + (" during the testcase" if booted else " before init")
    stopped = SIGNAL_STOP.search(stderr) if signal_line and returncode == 0 else None
    if stopped:
        failed = failed or f"QEMU stopped: {stopped.group().strip()[:DETAIL_CAP]}"
    if failed or returncode != 0:
        last = next((ln.strip() for ln in reversed(stderr.splitlines()) if ln.strip()), "")
        when = "without a result" if console.strip() or records else "before the guest started"
        raise InfraError(
            f"{failed or 'QEMU ' + _exit_text(returncode)} {when} "
            f"(qemu.stderr: {last[:DETAIL_CAP] or 'empty'}; run dir {run_dir})"
        )
    # panic=-1 with -no-reboot: a guest that stops on its own makes QEMU exit 0.
    return Outcome.PANIC, "guest stopped without a result"


def collect(
    run_dir: Path,
    exited: bool,
    *,
    returncode: int = 0,
    failed: str = "",
    signal_line: bool = True,
) -> tuple[Outcome, str, list[dict[str, object]]]:
    """Read what came back, capped: a guest that floods its console or its result
    channel must not make the worker read gigabytes (one stopped for it: `flooded`)."""
    flooded = flooding(run_dir)
    if flooded:
        trim_console(run_dir / "console.log")
        _trim_channel(run_dir / "results.log")
    console, console_cut = read_tail(run_dir / "console.log", CONSOLE_CAP)
    channel, channel_cut = read_head(run_dir / "results.log", RESULTS_CAP)
    stderr, _ = read_tail(run_dir / "qemu.stderr", DETAIL_CAP * 16)
    records = parse_records(channel)
    outcome, detail = classify_run(
        records,
        console,
        exited,
        returncode=returncode,
        stderr=stderr,
        run_dir=str(run_dir),
        failed=failed,
        signal_line=signal_line,
        flooded=flooded,
    )
    notes = [detail] if detail else []
    if console_cut:
        notes.append(f"console.log truncated: read its last {_mib(CONSOLE_CAP)}")
    if channel_cut:
        notes.append(f"results.log truncated: read its first {_mib(RESULTS_CAP)}")
    return outcome, "; ".join(notes), records


def flooding(run_dir: Path) -> bool:
    """Whether the guest has written more than FLOOD_BYTES to its console or channel."""
    for name in ("console.log", "results.log"):
        with contextlib.suppress(OSError):
            if (run_dir / name).stat().st_size > FLOOD_BYTES:
                return True
    return False


def trim_console(path: Path) -> None:
    """Keep a flooded console's first FLOOD_HEAD bytes (the boot, the first oops) and
    its last CONSOLE_CAP (how it ended), with a line that says what was cut."""
    head, _ = read_head(path, FLOOD_HEAD)
    tail, cut = read_tail(path, CONSOLE_CAP)
    if not cut:
        return
    marker = f"\n[kbisect: console flooded; {_mib(FLOOD_BYTES)}+ cut here, its end follows]\n"
    tmp = path.with_name(path.name + ".trim")
    tmp.write_text(head + marker + tail, errors="replace")
    os.replace(tmp, path)


def _trim_channel(path: Path) -> None:
    """A flooded result channel keeps what is read of it: its first RESULTS_CAP bytes."""
    with contextlib.suppress(OSError):
        if path.stat().st_size > RESULTS_CAP:
            os.truncate(path, RESULTS_CAP)


def start(argv: list[str], log: BinaryIO) -> subprocess.Popen[bytes]:
    """QEMU in its own process group (a Ctrl-C meant for the worker is the worker's to
    handle), killed by the kernel when the worker dies (no orphan VM holding RAM)."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        process_group=0,
        preexec_fn=die_with_parent,
    )


def _wait(
    proc: subprocess.Popen[bytes],
    timeout: float,
    progress: Callable[[str], None],
    run_dir: Path,
) -> bool:
    """Wait for QEMU up to `timeout`; False when it had to be killed (the time is up, or
    the guest floods its console)."""
    start_time = time.monotonic()
    try:
        while proc.poll() is None:
            if time.monotonic() - start_time > timeout or flooding(run_dir):
                kill_group(proc)
                return False
            time.sleep(0.5)
            progress(f"guest running {time.monotonic() - start_time:.0f}s")
        return True
    finally:
        if proc.poll() is None:
            kill_group(proc)
        proc.wait()


class QemuMachine:
    name = "qemu"

    def __init__(
        self,
        memory_mib: int = 1024,
        cpus: int = 2,
        accel: str | None = None,
        pin: tuple[int, ...] = (),
    ) -> None:
        self.memory_mib = memory_mib
        self.cpus = cpus
        self.pin = pin  # host CPUs reserved for guests (`worker --measure-cpus`); () = any
        self.host = socket.gethostname()
        self._accel = accel  # Settings.accel (KBISECT_ACCEL), checked there; None: probe

    def run(
        self,
        artifact: Artifact,
        guest: GuestImage,
        disks: list[Disk],
        timeout: float,
        cmdline: str = "",
        progress: Callable[[str], None] = lambda _: None,
    ) -> GuestRun:
        if shutil.which(QEMU) is None:
            raise InfraError(f"{QEMU} is not installed: apt-get install qemu-system-x86")
        accel = self._accel or self.probe_accel(artifact, guest)
        return self._run_in(
            new_run_dir(), accel, artifact, guest, disks, timeout, cmdline, progress
        )

    def _argv(
        self, run_dir: Path, accel: str, artifact: Artifact, guest: GuestImage, cmdline: str
    ) -> list[str]:
        argv = host_lock.taskset(self.pin) + base_args(self.memory_mib, self.cpus)
        argv += accel_args(accel)
        argv += kernel_args(artifact.kernel, guest.initramfs, guest_cmdline(cmdline))
        argv += serial_args(run_dir / "console.log", run_dir / "results.log")
        return argv + host_userland_args(guest)

    def boot_argv(
        self,
        run_dir: Path,
        accel: str,
        artifact: Artifact,
        guest: GuestImage,
        disks: list[Disk],
        cmdline: str = "",
    ) -> list[str]:
        """A boot's whole argv, its disks' images in `run_dir` (make_images puts them
        there): the one command line `kbisect reproduce` renders for a script too."""
        argv = self._argv(run_dir, accel, artifact, guest, cmdline)
        for disk in disks:
            argv += nvme_args(disk, disk_image(run_dir, disk))
        return argv

    def _run_in(
        self,
        run_dir: Path,
        accel: str,
        artifact: Artifact,
        guest: GuestImage,
        disks: list[Disk],
        timeout: float,
        cmdline: str,
        progress: Callable[[str], None],
    ) -> GuestRun:
        argv = self.boot_argv(run_dir, accel, artifact, guest, disks, cmdline)
        peer = None
        if guest.peer:  # a network testcase: its device, and the host's client beside it
            port = net_peer.free_port()
            argv += net_peer.netdev_args(port)
            peer = net_peer.Peer(run_dir, port, guest.peer)
        _, scratch = make_images(run_dir, disks)
        (run_dir / "qemu.argv").write_text("\n".join(argv) + "\n")
        began = time.monotonic()
        try:
            with open(run_dir / "qemu.stderr", "wb") as err:
                proc = start(argv, err)
                with peer or contextlib.nullcontext():
                    exited = _wait(proc, timeout, progress, run_dir)
        finally:
            for image in scratch:
                image.unlink(missing_ok=True)
        seconds = time.monotonic() - began
        outcome, detail, records = collect(run_dir, exited, returncode=proc.returncode)
        return GuestRun(
            outcome=outcome,
            records=records,
            console=str(run_dir / "console.log"),
            seconds=round(seconds, 2),
            accel=accel,
            detail=detail,
        )

    def probe_accel(self, artifact: Artifact, guest: GuestImage) -> str:
        """KVM only where a real tiny boot succeeds; cached per host boot."""
        cache = settings.cache_dir() / "accel-probe.json"
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        if cache.exists():
            known = json.loads(cache.read_text())
            if known.get("boot_id") == boot_id:
                return str(known["accel"])
        accel = "tcg"
        if os.access("/dev/kvm", os.R_OK | os.W_OK):
            with tempfile.TemporaryDirectory(dir=settings.cache_dir()) as tmp:
                try:
                    run = self._run_in(
                        Path(tmp),
                        "kvm",
                        artifact,
                        guest,
                        [],
                        PROBE_TIMEOUT,
                        "kbisect.probe=1",
                        lambda _: None,
                    )
                    if run.outcome is Outcome.SUCCESS:
                        accel = "kvm"
                except InfraError:
                    pass  # seen here: QEMU aborts in kvm_buf_set_msrs; others hang
        atomic_write.write_bytes(cache, json.dumps({"boot_id": boot_id, "accel": accel}).encode())
        return accel
