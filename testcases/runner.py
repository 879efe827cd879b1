"""Run a testcase on a built kernel: guest image, disks with a device profile, boot, score."""

import re
from collections.abc import Callable
from dataclasses import dataclass

from kbisect.backends import Machine
from kbisect.builders import kconfig
from kbisect.errors import BootError, TestcaseFailedError, UserError
from kbisect.infra import host_lock
from kbisect.infra.initramfs import build_image
from kbisect.infra.qemu import PROFILES
from kbisect.model import Artifact, BuildSpec, DeviceProfile, Disk, GuestRun, Outcome, Score
from kbisect.testcases import scoring
from kbisect.testcases.manifest import Manifest
from kbisect.words import plural


@dataclass(frozen=True)
class TestcaseRun:
    __test__ = False

    run: GuestRun
    score: Score
    profile: str
    repetitions: int


# A testcase's disks are NVMe namespaces: its kernel needs the driver, whether or not its
# fragment says so (one that does keeps its config, and so its builds, as they were).
NVME = re.compile(r"^CONFIG_BLK_DEV_NVME=y\s*$", re.M)


def build_spec(manifest: Manifest) -> BuildSpec:
    frags = [kconfig.host_userland_config()] if manifest.userland == "host" else []
    if manifest.disks and not NVME.search(manifest.config_fragment):
        frags.append("CONFIG_BLK_DEV_NVME=y\n")
    if manifest.config_fragment:
        frags.append(manifest.config_fragment)
    return BuildSpec(fragments=tuple(frags))


def profile(name: str) -> DeviceProfile:
    if name not in PROFILES:
        raise UserError(f"unknown device profile {name!r}: use one of {', '.join(PROFILES)}")
    return PROFILES[name]


def run_testcase(
    manifest: Manifest,
    artifact: Artifact,
    machine: Machine,
    profile_name: str | None = None,
    repetitions: int | None = None,
    progress: Callable[[str], None] = lambda _: None,
    exact: bool = False,
) -> TestcaseRun:
    """Score of the testcase on this kernel. `exact`: the caller judges an exact metric
    (a count), so the boot runs no warm-up and need not have the host to itself.

    BootError: the kernel panicked or hung (the commit is skipped);
    TestcaseFailedError: it booted but the testcase script failed.
    """
    prof = profile(profile_name or manifest.profile)
    reps = repetitions or manifest.repetitions
    warmup = 0 if exact else manifest.warmup
    runs = reps + warmup  # the guest runs the warm-up ones first
    image = build_image(
        manifest.tools,
        manifest.script,
        {**manifest.params, "KB_REPETITIONS": str(runs), "KB_NDISKS": str(len(manifest.disks))},
        host_root=manifest.userland == "host",
        extra=manifest.files,
    )
    disks = [Disk(d.name, d.size_mib, prof) for d in manifest.disks]
    progress(f"booting {artifact.commit[:12]} ({prof.name}, {plural(reps, 'repetition')})")
    with host_lock.for_guest(manifest.exclusive and not exact, machine.pin, progress):
        run = machine.run(artifact, image, disks, manifest.timeout_for(runs), progress=progress)
    if run.outcome in (Outcome.PANIC, Outcome.HANG):
        raise BootError(f"{run.outcome.value}: {run.detail}", console_path=run.console)
    if run.outcome is Outcome.TESTCASE_FAILED:
        raise TestcaseFailedError(run.detail, console_path=run.console)
    return TestcaseRun(
        run=run,
        score=scoring.score(manifest, run.records, warmup),
        profile=prof.name,
        repetitions=reps,
    )
