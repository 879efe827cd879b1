"""An explain boot: the testcase, scored as usual, between two reads of the guest's system
statistics and under perf, on a kernel built with the diagnostics fragment.

The guest runs on the host's root filesystem whatever the testcase's own userland is:
perf comes from there (the initramfs has no room for it and its 28 libraries), and so
does everything else the script calls. The statistics and the samples travel as a tar on
an extra disk, as a traced boot's do; the host folds the samples and takes the deltas.
"""

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbisect.backends import Machine
from kbisect.builders import kconfig
from kbisect.errors import TestcaseFailedError
from kbisect.infra.initramfs import BOOT_EXPLAIN, build_image
from kbisect.infra.qemu import guest_text
from kbisect.model import Artifact, BuildSpec, Score, Stats
from kbisect.testcases import cpu_profile, proc_stats, scoring
from kbisect.testcases.manifest import Manifest
from kbisect.testcases.runner import build_spec, guest_parts
from kbisect.testcases.runner import profile as device_profile
from kbisect.testcases.trace_run import boot_leaving_tar

EXPLAIN_TOOLS = ("perf",)  # what an explain boot runs from the host userland itself

EXPLAIN_DISK = "kbexplain"  # the guest's kb_explain_run writes to KB_DISK_kbexplain
FOLDED = "stacks.folded"  # the boot's samples, folded, in its explain folder


@dataclass
class ExplainBoot:
    """One explain boot: its score, each statistic's delta over the testcase (iostat's
    figures and perf stat's counters among them), and its folded CPU samples."""

    score: Score
    stats: Stats
    stacks: Counter[str]
    folder: str
    console: str


def explain_manifest(manifest: Manifest) -> Manifest:
    """The testcase as an explain boot runs it: on the host's root filesystem."""
    return dataclasses.replace(manifest, userland="host")


def explain_spec(manifest: Manifest, config: str = "") -> BuildSpec:
    """The kernel an explain boot needs: the job's, with the diagnostics fragment (perf
    events, kallsyms, schedstats, and the host userland's 9p) merged last."""
    spec = build_spec(explain_manifest(manifest), config)
    return dataclasses.replace(spec, fragments=(*spec.fragments, kconfig.diagnostics_config()))


def explain_boot(
    manifest: Manifest,
    artifact: Artifact,
    machine: Machine,
    profile_name: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> ExplainBoot:
    """BootError: the kernel panicked or hung; TestcaseFailedError: the script failed, or
    the guest left no statistics."""
    guest = explain_manifest(manifest)
    prof = device_profile(profile_name or manifest.profile)
    runs = manifest.repetitions + manifest.warmup
    tools = [*guest.tools, *EXPLAIN_TOOLS]
    parts = guest_parts(guest, artifact, tools, progress, pin=machine.pin)
    image = build_image(
        guest.tools,
        guest.script,
        {
            **guest.params,
            "KB_REPETITIONS": str(runs),
            "KB_NDISKS": str(len(guest.disks) + 1),
            "KB_PERF_EVENTS": ":".join(proc_stats.PERF_EVENTS),
            "KB_PROC_FILES": ":".join(proc_stats.SOURCES),
        },
        host_root=True,
        extra=guest.files,
        mode=BOOT_EXPLAIN,
        modules=parts.modules,
        userland_image=parts.image,
    )
    progress(f"explain boot of {artifact.commit[:12]} (statistics and a profile)")
    run, folder = boot_leaving_tar(
        guest, artifact, machine, image, prof, EXPLAIN_DISK, runs + 1, progress,
        "explain boot", "explain",
    )  # fmt: skip
    return ExplainBoot(
        scoring.score(manifest, run.records),
        read_stats(folder),
        read_stacks(folder),
        str(folder),
        run.console,
    )


def _files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir() if p.name in proc_stats.SOURCES}


def read_stats(folder: Path) -> Stats:
    """The statistics' deltas over the testcase, and perf stat's counters."""
    before, after = folder / "before", folder / "after"
    if not (before / "uptime").exists() or not (after / "uptime").exists():
        raise TestcaseFailedError(f"the explain boot left no statistics in {folder}")
    seconds = float((after / "uptime").read_text()) - float((before / "uptime").read_text())
    stats = proc_stats.delta(
        proc_stats.parse(_files(before)), proc_stats.parse(_files(after)), seconds
    )
    perf = folder / "perf-stat.csv"
    if perf.exists():
        stats.update(proc_stats.perf_stat(perf.read_text()))
    return {(source, guest_text(name)): value for (source, name), value in stats.items()}


def read_stacks(folder: Path) -> Counter[str]:
    """The boot's folded CPU samples (none where the guest had no perf). The samples
    are folded once: the folded stacks replace perf's text (16 MB for sched-pipe's 40,000
    samples, a few hundred kB folded)."""
    script, folded = folder / "perf.script", folder / FOLDED
    if script.exists():
        stacks = _guest_frames(cpu_profile.fold(script.read_text(errors="replace")))
        folded.write_text(cpu_profile.folded_text(stacks))
        script.unlink()
        return stacks
    return _guest_frames(cpu_profile.read_folded(folded.read_text() if folded.exists() else ""))


def _guest_frames(stacks: Counter[str]) -> Counter[str]:
    """Each frame of each stack as guest_text: the guest wrote them, and the names reach
    the Why lines and the notes."""
    out: Counter[str] = Counter()
    for stack, count in stacks.items():
        out[";".join(guest_text(frame) for frame in stack.split(";"))] += count
    return out
