"""QEMU started directly from an argv list; outcomes read from a dedicated result channel.

The guest writes framed "KBISECT <json>" lines to its second serial port (a file here),
the console goes to another file. SUCCESS and TESTCASE_FAILED come from the channel's
"done" record, PANIC from QEMU exiting without one (panic=-1 with -no-reboot), HANG
from our hard timeout.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kbisect import settings
from kbisect.errors import InfraError
from kbisect.model import Artifact, DeviceProfile, Disk, GuestImage, GuestRun, Outcome

QEMU = "qemu-system-x86_64"
RECORD_PREFIX = "KBISECT "
PROBE_TIMEOUT = 25.0
PANIC_MARKERS = ("Kernel panic", "BUG: kernel NULL pointer", "kernel BUG at")

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


def nvme_args(disk: Disk, image: Path) -> list[str]:
    drive = f"if=none,id={disk.name},file={_opt_path(image)},format=raw,cache=none,aio=threads"
    if disk.profile.iops:
        drive += f",throttling.iops-total={disk.profile.iops}"
    if disk.profile.bps:
        drive += f",throttling.bps-total={disk.profile.bps}"
    return ["-drive", drive, "-device", f"nvme,serial={disk.serial},drive={disk.name}"]


def parse_records(text: str) -> list[dict[str, object]]:
    records = []
    for line in text.splitlines():
        line = line.strip("\r")
        if line.startswith(RECORD_PREFIX):
            try:
                rec = json.loads(line[len(RECORD_PREFIX) :])
            except json.JSONDecodeError:
                continue  # a torn line, e.g. the guest died mid-write
            if isinstance(rec, dict):
                records.append(rec)
    return records


def classify_run(
    records: list[dict[str, object]], console: str, exited: bool
) -> tuple[Outcome, str]:
    """Pure: the outcome from what came back. `exited` is False when we had to kill QEMU."""
    done = [r for r in records if r.get("event") == "done"]
    if done:
        status = done[-1].get("status")
        if status == 0:
            return Outcome.SUCCESS, ""
        return Outcome.TESTCASE_FAILED, f"testcase exited with status {status}"
    panic = next(
        (line for line in console.splitlines() if any(m in line for m in PANIC_MARKERS)), ""
    )
    if panic:
        return Outcome.PANIC, panic.strip()
    if not exited:
        booted = any(r.get("event") == "booted" for r in records)
        return Outcome.HANG, "guest hung" + (" during the testcase" if booted else " before init")
    return Outcome.PANIC, "guest stopped without a result"


class QemuMachine:
    name = "qemu"

    def __init__(self, memory_mib: int = 1024, cpus: int = 2, accel: str | None = None) -> None:
        self.memory_mib = memory_mib
        self.cpus = cpus
        self._accel = accel or os.environ.get("KBISECT_ACCEL")

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
        run_dir = (
            settings.cache_dir()
            / "runs"
            / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        )
        run_dir.mkdir(parents=True)
        return self._run_in(run_dir, accel, artifact, guest, disks, timeout, cmdline, progress)

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
        console, channel = run_dir / "console.log", run_dir / "results.log"
        argv = base_args(self.memory_mib, self.cpus) + accel_args(accel)
        argv += kernel_args(
            artifact.kernel,
            guest.initramfs,
            f"console=ttyS0 panic=-1 oops=panic rdinit=/init {cmdline}".strip(),
        )
        argv += serial_args(console, channel)
        images = []
        for disk in disks:
            image = run_dir / f"{disk.name}.img"
            with open(image, "wb") as fh:
                fh.truncate(disk.size_mib * 1024 * 1024)  # sparse
            images.append(image)
            argv += nvme_args(disk, image)
        (run_dir / "qemu.argv").write_text("\n".join(argv) + "\n")
        start = time.monotonic()
        with open(run_dir / "qemu.stderr", "wb") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
            exited = True
            try:
                while proc.poll() is None:
                    if time.monotonic() - start > timeout:
                        exited = False
                        proc.kill()
                        break
                    time.sleep(0.5)
                    progress(f"guest running {time.monotonic() - start:.0f}s")
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
        seconds = time.monotonic() - start
        for image in images:
            image.unlink(missing_ok=True)
        console_text = console.read_text(errors="replace") if console.exists() else ""
        records = parse_records(channel.read_text(errors="replace")) if channel.exists() else []
        if exited and proc.returncode not in (0,) and not records and not console_text:
            stderr = (run_dir / "qemu.stderr").read_text(errors="replace").strip()
            raise InfraError(f"QEMU failed to start: {stderr.splitlines()[-1:] or proc.returncode}")
        outcome, detail = classify_run(records, console_text, exited)
        return GuestRun(
            outcome=outcome,
            records=records,
            console=str(console),
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
        cache.write_text(json.dumps({"boot_id": boot_id, "accel": accel}))
        return accel
