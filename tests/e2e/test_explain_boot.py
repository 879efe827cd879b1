"""An explain boot for real: a lab kernel runs sched-pipe on the host's root filesystem
between two reads of its /proc statistics and under perf, and the host reads back the
deltas, perf stat's counters and the folded CPU samples (slow, TCG). The kernel is an
explain kernel (the diagnostics fragment): `kbisect explain`'s tests share its build."""

from collections import Counter
from pathlib import Path

import pytest

from kbisect.builders.kernel_build import KernelBuilder
from kbisect.infra.git import Git
from kbisect.infra.qemu import QemuMachine
from kbisect.settings import Settings
from kbisect.testcases import cpu_profile, manifest
from kbisect.testcases.explain_run import explain_boot, explain_manifest, explain_spec

pytestmark = pytest.mark.e2e


def test_an_explain_boot_reads_the_statistics_and_profile_of_a_context_switching_testcase(
    real_lab: tuple[Path, dict[str, object]],
) -> None:
    lab, _ = real_lab
    settings = Settings.from_env()
    sched_pipe = manifest.load("sched-pipe")
    assert explain_manifest(sched_pipe) == sched_pipe  # on the host userland already
    commit = Git(lab).commit_info("lab-good").hash
    artifact = KernelBuilder(settings.jobs).build(lab, commit, explain_spec(sched_pipe))
    boot = explain_boot(sched_pipe, artifact, QemuMachine(accel=settings.accel))
    usecs = boot.score.metrics["usecs_per_op"]
    assert len(usecs.samples) == sched_pipe.repetitions and 0 < usecs.value < 10_000
    # sched-pipe is a ping-pong of two tasks over a pipe: each op is context switches
    switches = boot.stats[("stat", "ctxt")]
    assert switches > 1000
    assert boot.stats[("perf-stat", "context-switches")] > 1000
    assert boot.stats[("perf-stat", "task-clock")] > 0
    assert boot.stats[("vmstat", "pgfault")] > 0
    assert boot.stats[("schedstat", "sched_count")] > 0  # the diagnostics fragment's
    assert sum(boot.stacks.values()) > 100
    # the guest's own kernel symbols name the pipe's read and write, which sched-pipe's
    # two tasks spend their time in (cpu-clock samples land where interrupts come back
    # on: the switch itself, run with them off, hardly shows). Of its own samples: on a
    # quiet host the guest idles 87% of the time between the tasks' wake-ups
    own = Counter({s: n for s, n in boot.stacks.items() if s.startswith("sched-pipe;")})
    assert sum(own.values()) > 50
    shares = cpu_profile.shares(own)
    assert shares[("profile", "pipe_read (total)")] > 10
    assert shares[("profile", "pipe_write (total)")] > 10
    folded = Path(boot.folder, "stacks.folded")  # kept for the flame graph, perf's text not
    assert folded.exists() and not Path(boot.folder, "perf.script").exists()
    assert cpu_profile.read_folded(folded.read_text().splitlines()) == boot.stacks
