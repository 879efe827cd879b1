"""An explain boot: the testcase, scored as usual, between two reads of the guest's system
statistics and under perf, on a kernel built with the diagnostics fragment.

The guest runs on the host's root filesystem whatever the testcase's own userland is:
perf comes from there (the initramfs has no room for it and its 28 libraries), and so
does everything else the script calls. The statistics and the samples travel as a tar on
an extra disk, as a traced boot's do; the host folds the samples and takes the deltas.
What the guest left is the kernel under test's: each file is read bounded, and what is
left out or cannot be read is one line of the boot's notes (the answer says them).
"""

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kbisect.backends import Machine
from kbisect.builders import kconfig
from kbisect.contract import EXPLAIN_STATS_FILE_BYTES, TestStatus
from kbisect.errors import TestcaseFailedError
from kbisect.infra.initramfs import BOOT_EXPLAIN, build_image
from kbisect.model import Artifact, BuildSpec, Score, Stats, stats_by_source
from kbisect.testcases import cpu_profile, proc_stats, scoring
from kbisect.testcases.manifest import Manifest
from kbisect.testcases.runner import build_spec, guest_parts
from kbisect.testcases.runner import profile as device_profile
from kbisect.testcases.trace_run import boot_leaving_tar
from kbisect.workflows.explain_types import ExplainBootResult

EXPLAIN_TOOLS = ("perf",)  # what an explain boot runs from the host userland itself

EXPLAIN_DISK = "kbexplain"  # the guest's kb_explain_run writes to KB_DISK_kbexplain
FOLDED = "stacks.folded"  # the boot's samples, folded, in its explain folder


@dataclass
class ExplainBoot:
    """One explain boot: its score, each statistic's delta over the testcase (iostat's
    figures, perf stat's counters and the profile's shares among them), its folded CPU
    samples, and what of the guest's was left out, a line each."""

    score: Score
    stats: Stats
    stacks: Counter[str]
    folder: str
    console: str
    notes: list[str] = field(default_factory=list)

    def result(self, commit: str, metric: str, host: str) -> ExplainBootResult:
        """The boot as its activity returns it: `metric`'s samples (the primary's when the
        testcase has no such metric), and what was read, as bounded as it was read."""
        m = self.score.metrics.get(metric) or self.score.primary_metric
        return ExplainBootResult(
            commit=commit, status=TestStatus.OK, samples=list(m.samples),
            stats=stats_by_source(self.stats), stacks=dict(self.stacks), folder=self.folder,
            host=host, notes=self.notes,
        )  # fmt: skip


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
        peer=guest.peer_options,
    )
    progress(f"explain boot of {artifact.commit[:12]} (statistics and a profile)")
    run, folder = boot_leaving_tar(
        guest, artifact, machine, image, prof, EXPLAIN_DISK, runs + 1, progress,
        "explain boot", "explain",
    )  # fmt: skip
    return read_boot(scoring.score(manifest, run.records, runs=runs), folder, run.console)


def read_boot(score: Score, folder: Path, console: str) -> ExplainBoot:
    """What the guest left in `folder`, read bounded: the statistics, the folded samples
    and their shares, and the notes of what was left out. TestcaseFailedError: it left no
    statistics."""
    said: list[str] = []
    stats, stacks = read_stats(folder, said), read_stacks(folder, said)
    stats.update(cpu_profile.shares(stacks, said))
    return ExplainBoot(score, stats, stacks, str(folder), console, list(dict.fromkeys(said)))


def _text(path: Path, said: list[str]) -> str | None:
    """A file the guest left, if any; None (said) past EXPLAIN_STATS_FILE_BYTES."""
    if not path.is_file():
        return None
    with open(path, "rb") as f:
        data = f.read(EXPLAIN_STATS_FILE_BYTES + 1)
    if len(data) > EXPLAIN_STATS_FILE_BYTES:
        said.append(f"{path.name}: cannot read it: over {EXPLAIN_STATS_FILE_BYTES:,} bytes")
        return None
    return data.decode(errors="replace")


def _files(folder: Path, said: list[str]) -> dict[str, str]:
    return {s: t for s in proc_stats.SOURCES if (t := _text(folder / s, said)) is not None}


def _seconds(folder: Path, said: list[str]) -> float:
    """The seconds between the two reads; 0 (no per-second figures) when an uptime does
    not read."""
    try:
        before, after = (
            proc_stats.uptime(_text(folder / side / "uptime", said) or "")
            for side in ("before", "after")
        )
    except proc_stats.Unreadable as exc:
        said.append(f"uptime: cannot read it: {exc}: no per-second figures")
        return 0.0
    return after - before


def read_stats(folder: Path, said: list[str]) -> Stats:
    """The statistics' deltas over the testcase, and perf stat's counters; what is left
    out, and each file that does not read, said in `said` (the rest counts)."""
    before, after = folder / "before", folder / "after"
    if not (before / "uptime").exists() or not (after / "uptime").exists():
        raise TestcaseFailedError(f"the explain boot left no statistics in {folder}")
    seconds = _seconds(folder, said)
    stats = proc_stats.delta(
        proc_stats.parse(_files(before, said), said),
        proc_stats.parse(_files(after, said), said),
        seconds,
    )
    perf = _text(folder / "perf-stat.csv", said)
    if perf is not None:
        stats.update(proc_stats.read_source("perf-stat", perf, proc_stats.perf_stat, said))
    return proc_stats.bounded(stats, said)


def read_stacks(folder: Path, said: list[str]) -> Counter[str]:
    """The boot's folded CPU samples (none where the guest had no perf), bounded as
    cpu_profile.fold bounds them. The samples are folded once: the folded stacks replace
    perf's text (16 MB for sched-pipe's 40,000 samples, a few hundred kB folded)."""
    script, folded = folder / "perf.script", folder / FOLDED
    if script.is_file():
        stacks = cpu_profile.fold(cpu_profile.script_lines(script, said), said)
        folded.write_text(cpu_profile.folded_text(stacks))
        script.unlink()
        return stacks
    if folded.is_file():
        return cpu_profile.read_folded(cpu_profile.script_lines(folded, said))
    return Counter()
