"""A duet for real: the lab's culprit and its parent booted at one moment by the VM
activity, two TCG guests of one vCPU each pinned to a CPU of their own (slow)."""

import os
import re
import time
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from kbisect.builders.kernel_build import KernelBuilder
from kbisect.contract import TestRequest, TestStatus
from kbisect.infra.git import Git
from kbisect.infra.qemu import QemuMachine
from kbisect.settings import Settings
from kbisect.testcases import manifest as manifests
from kbisect.testcases.runner import build_spec
from kbisect.workers.activities import VmActivities
from kbisect.workflows.bisect_types import DuetRequest
from tests.e2e.service import SEED

pytestmark = pytest.mark.e2e


def test_a_duet_boots_the_culprit_beside_its_parent_each_on_its_own_cpu(
    real_lab: tuple[Path, dict[str, object]],
) -> None:
    lab, truth = real_lab
    cpus = sorted(os.sched_getaffinity(0))[:2]
    assert len(cpus) == 2, "a duet needs two CPUs"
    settings = Settings.from_env()
    spec = build_spec(manifests.load(SEED))
    git = Git(lab)
    tests = []
    for rev in (f"{truth['culprit']}~1", str(truth["culprit"])):
        commit = git.commit_info(rev).hash
        art = KernelBuilder(settings.jobs).build(lab, commit, spec, lambda _: None)
        tests.append(TestRequest(str(lab), commit, SEED, "fast", 1, art, "avg_read_sectors"))
    # The worker's --measure-cpus would keep a CPU for builds; none runs in this test.
    vm = VmActivities(settings, QemuMachine(cpus=1, accel=settings.accel, pin=tuple(cpus)))
    began = time.monotonic()
    parent, culprit = ActivityEnvironment().run(vm.run_duet, DuetRequest(tests)).results
    wall = time.monotonic() - began
    assert parent.status == culprit.status == TestStatus.OK, (parent.error, culprit.error)
    assert parent.values["avg_read_sectors"] >= 256 and culprit.values["avg_read_sectors"] <= 16
    assert parent.host == culprit.host
    pinned = [
        re.search(r"--cpu-list\n(\S+)\n", (Path(r.console).parent / "qemu.argv").read_text())
        for r in (parent, culprit)
    ]
    assert [m.group(1) if m else None for m in pinned] == [str(c) for c in cpus]
    # at one moment: the two guests' time overlapped (one after the other, the activity
    # would take their sum)
    assert wall < 0.8 * (parent.seconds + culprit.seconds), (wall, parent.seconds, culprit.seconds)
