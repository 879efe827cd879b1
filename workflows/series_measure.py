"""A series of kernels built, then booted in rounds until each pair is decided: the sweep's
measuring, which a backport's before-and-after shares.

Workflow code: the boots go one guest at a time, so that no build or other guest shares
a timed boot's host; the order of each round is random (decide.sweep says why).
"""

import asyncio
import random

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from kbisect.contract import BuildResult, TestStatus
    from kbisect.decide.sweep import Sweep
    from kbisect.workflows.activity_calls import JobActivities, testcase_job
    from kbisect.workflows.sweep_types import SweepBoot, SweepJob, is_cannot_test

Builds = dict[tuple[str, str], BuildResult]  # by (testcase, commit)


async def build_series(calls: JobActivities, sweep: Sweep, job: SweepJob) -> Builds:
    """Each kernel once per testcase (a testcase's config fragment makes its own kernel),
    all before the first boot; a kernel that does not build is given up on."""
    wanted = sorted({(tc.name, c) for tc in job.testcases for c in job.kernels})
    done = await asyncio.gather(*(calls.build(c, name) for name, c in wanted))
    builds = dict(zip(wanted, done, strict=True))
    for t, tc in enumerate(job.testcases):
        for k, commit in enumerate(job.kernels):
            b = builds[tc.name, commit]
            if not b.ok or b.artifact is None:
                sweep.give_up(t, k, f"does not build: {b.error} (log: {b.log})")
    return builds


async def measure_series(
    calls: JobActivities, sweep: Sweep, job: SweepJob, builds: Builds, boots: list[SweepBoot]
) -> None:
    """Rounds of boots until the sweep wants no more; each boot appended to `boots`."""
    rng = random.Random(workflow.random().getrandbits(64))
    while order := sweep.round(rng):
        for t, k in order:  # one guest at a time: a timed boot has the host to itself
            boots.append(await _boot(calls, sweep, job, builds, t, k))


async def _boot(
    calls: JobActivities, sweep: Sweep, job: SweepJob, builds: Builds, t: int, k: int
) -> SweepBoot:
    tc, commit = job.testcases[t], job.kernels[k]
    art = builds[tc.name, commit].artifact
    assert art is not None
    test = await calls.test(testcase_job(tc), commit, art, tc.repetitions)
    boot = SweepBoot(testcase=tc.name, kernel=k, value=None, host=test.host, userland=test.userland)
    if test.status == TestStatus.OK and (samples := test.samples_of(tc.metric)):
        boot.samples, boot.value = samples, sum(samples) / len(samples)
        sweep.boot(t, k, samples, test.host)
    elif is_cannot_test(test.error):
        # the kernel lacks what the testcase needs (the activity's CannotTestError): no
        # other boot of it would test, so that cell is given up at once; the rest go on
        boot.error = test.error
        sweep.give_up(t, k, test.error)
    else:
        boot.error = test.error or test.status
        sweep.failed(t, k, boot.error)
    return boot
