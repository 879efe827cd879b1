"""A traced boot: the testcase once under blktrace, its traces and their summaries kept.

A boot of its own, after the scored ones: a script sets its disks up once a boot, and the
tracer slows I/O down, so these figures are never scored. blktrace, blkparse and btt run
from the host's root filesystem for a host-userland testcase, and from the initramfs
(with their libraries) for the others; the kernel needs CONFIG_BLK_DEV_IO_TRACE, which
host-userland kernels and the block stack of every testcase with disks have. The
guest writes a tar of the trace folder onto an extra disk; it is unpacked into the run
folder (`trace/`), where the binary traces stay for blkparse and btt by hand.
"""

import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kbisect.backends import Machine
from kbisect.errors import BootError, InfraError, TestcaseFailedError, UserError
from kbisect.infra import host_lock
from kbisect.infra.initramfs import BOOT_TRACE, build_image, find_tool
from kbisect.model import Artifact, DeviceProfile, Disk, GuestImage, GuestRun, Outcome
from kbisect.testcases import blocktrace
from kbisect.testcases.manifest import Manifest
from kbisect.testcases.runner import guest_parts, profile
from kbisect.testcases.scoring import sample

TRACE_DISK = "kbtrace"
TRACE_DISK_MIB = 512  # and an explain boot's disk (explain_run)
TRACE_TOOLS = ("blktrace", "blkparse", "btt")
MAX_TRACE_BYTES = TRACE_DISK_MIB << 20
# Files in a guest's tar at most: a trace leaves a few a disk (and blktrace's one a CPU),
# an explain boot a few dozen; a tar of a million empty files is no boot's.
MAX_TAR_MEMBERS = 10_000


@dataclass
class Diagnostics:
    folder: str  # the unpacked trace folder
    disks: list[blocktrace.DiskTrace] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)  # the traced run's, not scored
    console: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "folder": self.folder,
            "console": self.console,
            "metrics": self.metrics,
            "disks": {d.disk: d.to_json() for d in self.disks},
        }


def check_traceable(manifest: Manifest) -> None:
    """The testcase has disks and this host has the tracer: on the host userland the
    guest runs it from there, on the initramfs it goes into the image (trace_tools)."""
    if not manifest.disks:
        raise UserError(f"testcase {manifest.name} has no disks to trace")
    for tool in TRACE_TOOLS:
        find_tool(tool)  # InfraError naming the package: apt-get install blktrace


def trace_testcase(
    manifest: Manifest,
    artifact: Artifact,
    machine: Machine,
    profile_name: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> Diagnostics:
    check_traceable(manifest)
    prof = profile(profile_name or manifest.profile)
    host_root = manifest.userland == "host"
    tools = [*manifest.tools, *TRACE_TOOLS]
    parts = guest_parts(manifest, artifact, tools, progress, pin=machine.pin)
    image = build_image(
        manifest.tools if host_root else [*manifest.tools, *TRACE_TOOLS],
        manifest.script,
        {**manifest.params, "KB_REPETITIONS": "1", "KB_NDISKS": str(len(manifest.disks) + 1)},
        host_root=host_root,
        extra=manifest.files,
        mode=BOOT_TRACE,
        modules=parts.modules,
        userland_image=parts.image,
        peer=manifest.peer_options,
    )
    progress(f"tracing {artifact.commit[:12]} (blktrace, one repetition)")
    run, folder = boot_leaving_tar(
        manifest, artifact, machine, image, prof, TRACE_DISK, 2, progress, "traced run", "trace"
    )
    metrics = traced_metrics(manifest, run.records)
    return Diagnostics(str(folder), blocktrace.summarize(folder), metrics, run.console)


def traced_metrics(manifest: Manifest, records: list[dict[str, object]]) -> dict[str, float]:
    """The traced run's figures: the script's kb_metric under KB_TRACING, so only the
    metrics the testcase declares, each a finite number (a guest's names are not kept)."""
    return {
        name: value
        for r in records
        if r.get("event") == "traced-metric"
        and isinstance(name := r.get("name"), str)
        and name in manifest.metrics
        and (value := sample(r.get("value"))) is not None
    }


def boot_leaving_tar(
    manifest: Manifest,
    artifact: Artifact,
    machine: Machine,
    image: GuestImage,
    prof: DeviceProfile,
    disk: str,
    runs: int,
    progress: Callable[[str], None],
    boot: str,
    what: str,
) -> tuple[GuestRun, Path]:
    """A boot of `image` (time for `runs` repetitions) with the testcase's disks and one
    more, `disk`, onto which the guest writes a tar of what it leaves; the tar unpacked
    into the run's folder as `what`. BootError: it panicked or hung; TestcaseFailedError:
    the script failed, or left no readable tar."""
    disks = [Disk(d.name, d.size_mib, prof) for d in manifest.disks]
    disks.append(Disk(disk, TRACE_DISK_MIB, profile("fast"), keep=True))
    with host_lock.for_guest(manifest.exclusive, machine.pin, progress):
        run = machine.run(artifact, image, disks, manifest.timeout_for(runs), progress=progress)
    run_dir = Path(run.console).parent
    tar = run_dir / f"{disk}.img"
    try:
        if run.outcome in (Outcome.PANIC, Outcome.HANG):
            raise BootError(f"{run.outcome.value}: {run.detail}", console_path=run.console)
        if run.outcome in (Outcome.TESTCASE_FAILED, Outcome.CANNOT_TEST):
            raise TestcaseFailedError(f"{boot}: {run.detail}", console_path=run.console)
        folder = run_dir / what
        _unpack(tar, folder, run.console, boot, what)
    finally:
        tar.unlink(missing_ok=True)
    return run, folder


def _unpack(tar: Path, folder: Path, console: str, boot: str, what: str) -> None:
    """The guest's tar, read from the start of the disk image (zeros follow it); `boot`
    and `what` name the boot and what it left, for the error."""
    folder.mkdir(exist_ok=True)
    try:
        with tarfile.open(tar, "r:") as tf:
            members = _members(tf, boot, what, console)
            total = sum(m.size for m in members)
            if total > MAX_TRACE_BYTES:
                raise InfraError(f"{what} tar {tar} claims {total} bytes: not unpacked")
            # no links or paths out of the folder
            tf.extractall(folder, members, filter="data")
    except tarfile.TarError as exc:  # e.g. a kernel without blktrace support
        raise TestcaseFailedError(
            f"the {boot} left no readable tar of its {what} ({exc}): see the console",
            console_path=console,
        ) from exc


def _members(tf: tarfile.TarFile, boot: str, what: str, console: str) -> list[tarfile.TarInfo]:
    """The tar's members, read one at a time (getmembers() would read them all).
    TestcaseFailedError: more than MAX_TAR_MEMBERS."""
    members: list[tarfile.TarInfo] = []
    for member in tf:
        if len(members) == MAX_TAR_MEMBERS:
            raise TestcaseFailedError(
                f"the {boot} left a tar of its {what} of more than {MAX_TAR_MEMBERS:,} files:"
                " not unpacked",
                console_path=console,
            )
        members.append(member)
    return members
