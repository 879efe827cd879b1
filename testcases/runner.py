"""Run a testcase on a built kernel: guest image, disks with a device profile, boot, score."""

import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kbisect.backends import Machine
from kbisect.builders import kconfig
from kbisect.errors import BootError, CannotTestError, TestcaseFailedError, UserError
from kbisect.infra import guest_modules as modules
from kbisect.infra import host_lock, host_userland
from kbisect.infra.initramfs import build_image
from kbisect.infra.qemu import CONSOLE_CAP, PROFILES, kernel_cannot_test, read_tail
from kbisect.model import Artifact, BuildSpec, DeviceProfile, Disk, GuestRun, Outcome, Score
from kbisect.testcases import pass_fail, scoring, userland_way
from kbisect.testcases.manifest import Manifest
from kbisect.testcases.userland_way import Way
from kbisect.words import plural


@dataclass(frozen=True)
class TestcaseRun:
    __test__ = False

    run: GuestRun
    score: Score
    profile: str
    repetitions: int
    run_modules: tuple[str, ...] = ()  # modules the guest loaded first, in order
    userland: str = ""  # how it reached the host userland: 9p, squashfs ("": initramfs)
    bad: str = ""  # a pass/fail testcase's bad boot: the outcome (fails, panic, hang)
    excerpt: str = ""  # and the console lines that show it


# A testcase's disks are NVMe namespaces: a kernel on a user's config needs the driver,
# whether or not the testcase's fragment says so (one that does keeps its config as it was).
NVME = re.compile(r"^CONFIG_BLK_DEV_NVME=y\s*$", re.M)


def build_spec(manifest: Manifest, config: str = "") -> BuildSpec:
    """What to build for this testcase: tinyconfig and fragments (the block stack for one
    with disks), or (`config`, the text of a user's config) that config trimmed to the
    modules the testcase needs."""
    frags = [kconfig.host_userland_config()] if manifest.userland == "host" else []
    if manifest.disks and not config:
        frags.append(kconfig.block_config())
    elif manifest.disks and not NVME.search(manifest.config_fragment):
        frags.append("CONFIG_BLK_DEV_NVME=y\n")
    if manifest.config_fragment:
        frags.append(manifest.config_fragment)
    if config:
        return BuildSpec(tuple(frags), base_config=config, modules=tuple(needed_modules(manifest)))
    return BuildSpec(fragments=tuple(frags))


# What the guest itself needs of a kernel with loadable modules: the NVMe driver for the
# disks; for the host userland, what its way needs (testcases.userland_way). Built-in
# ones are skipped.
DISK_MODULES = ("nvme",)


def needed_modules(manifest: Manifest, way: Way = Way.NINE_P) -> list[str]:
    base = list(DISK_MODULES) if manifest.disks else []
    if manifest.userland == "host":
        base += userland_way.modules_for(way)
    return list(dict.fromkeys([*base, *manifest.modules]))


def guest_params(manifest: Manifest, runs: int) -> dict[str, str]:
    """What a boot's script is given: the manifest's params, the repetitions it runs (the
    warm-up ones included) and how many disks to wait for."""
    return {**manifest.params, "KB_REPETITIONS": str(runs), "KB_NDISKS": str(len(manifest.disks))}


@dataclass(frozen=True)
class GuestParts:
    """What a guest of this testcase needs of this kernel and this host."""

    modules: dict[str, bytes]  # module files the guest loads, in order
    userland: str = ""  # the host userland's way ("" for an initramfs-only testcase)
    image: str = ""  # the host userland's image, when that is the way


def guest_parts(
    manifest: Manifest,
    artifact: Artifact,
    tools: list[str],
    progress: Callable[[str], None] = lambda _: None,
    held: bool = False,
    pin: Sequence[int] = (),
) -> GuestParts:
    """The modules and host userland for a boot; `tools`: what the guest runs from the
    host userland (the testcase's, and a boot's own, such as perf); `held`: the caller
    holds the host lock; `pin`: the CPUs reserved for guests (an image is made off them)."""
    mods = modules.scan(Path(artifact.modules)) if artifact.modules else None  # once a boot
    way = userland_way.choose(artifact, mods) if manifest.userland == "host" else None
    wanted = needed_modules(manifest, way or Way.NINE_P)
    files = modules.guest_files(mods, wanted, artifact.label) if mods is not None else {}
    if way is None:
        return GuestParts(files)
    image = str(host_userland.image(tools, progress, held, pin)) if way == Way.IMAGE else ""
    return GuestParts(files, way.value, image)


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
    signature: str = "",
    held: bool = False,
) -> TestcaseRun:
    """Score of the testcase on this kernel. `exact`: the caller judges an exact metric
    (a count), so the boot runs no warm-up and need not have the host to itself. A
    pass/fail testcase's score is `passed`, 1 or 0 (testcases.pass_fail); `signature`
    narrows its bad boots to those whose console shows it. `held`: the caller holds the
    host lock for this guest (a duet holds it for both of its guests).

    BootError: the kernel panicked or hung (the commit is skipped);
    CannotTestError: the kernel lacks what the testcase needs (no way to the host userland,
    a module it does not have or the guest could not load, or a scored testcase's script
    exited 125); TestcaseFailedError: it booted but the script failed (or, for a pass/fail
    testcase, could not test: pass_fail.judge).
    """
    prof = profile(profile_name or manifest.profile)
    reps = repetitions or manifest.repetitions
    warmup = 0 if exact else manifest.warmup
    runs = reps + warmup  # the guest runs the warm-up ones first
    parts = guest_parts(manifest, artifact, manifest.tools, progress, held, machine.pin)
    image = build_image(
        manifest.tools,
        manifest.script,
        guest_params(manifest, runs),
        host_root=manifest.userland == "host",
        extra=manifest.files,
        modules=parts.modules,
        userland_image=parts.image,
        peer=manifest.peer_options,
    )
    disks = [Disk(d.name, d.size_mib, prof) for d in manifest.disks]
    progress(f"booting {artifact.commit[:12]} ({prof.name}, {plural(reps, 'repetition')})")
    alone = manifest.exclusive and not exact
    with contextlib.nullcontext() if held else host_lock.for_guest(alone, machine.pin, progress):
        run = machine.run(artifact, image, disks, manifest.timeout_for(runs), progress=progress)
    if manifest.pass_fail:
        console, _ = read_tail(Path(run.console), CONSOLE_CAP)
        try:
            judged = pass_fail.judge(
                manifest, run.outcome, run.detail, console, signature or manifest.signature
            )
        except (BootError, TestcaseFailedError) as exc:
            exc.console_path = run.console
            raise
        return TestcaseRun(
            run=run,
            score=scoring.passed(manifest, run.records, warmup, good=not judged.bad, runs=runs),
            profile=prof.name,
            repetitions=reps,
            run_modules=image.modules,
            userland=parts.userland,
            bad=judged.bad,
            excerpt=judged.excerpt,
        )
    if run.outcome in (Outcome.PANIC, Outcome.HANG):
        raise BootError(f"{run.outcome.value}: {run.detail}", console_path=run.console)
    if run.outcome is Outcome.CANNOT_TEST and kernel_cannot_test(run.records):
        # every boot of this kernel would say the same: the job gives it up at once
        raise CannotTestError(run.detail, console_path=run.console)
    if run.outcome in (Outcome.TESTCASE_FAILED, Outcome.CANNOT_TEST):
        raise TestcaseFailedError(run.detail, console_path=run.console)
    return TestcaseRun(
        run=run,
        score=scoring.score(manifest, run.records, warmup, runs),
        profile=prof.name,
        repetitions=reps,
        run_modules=image.modules,
        userland=parts.userland,
    )
