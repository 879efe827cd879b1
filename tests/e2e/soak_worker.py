"""A test-only worker for the soak run (tests/e2e/test_soak.py): the real workflow, and
the fake build and boot activities of tests/workflows/fakes.py, in a process of its own
that the test can SIGKILL. Each job's scenario comes from its repo string, so every
process, a restarted one included, knows every job's truth without sharing memory:
    soak-<i>: 32 commits, culprit c<3 + 7i mod 28>, odd jobs noisy (5% a sample).
Run: python -m tests.e2e.soak_worker ADDRESS ROLE QUEUE   (ROLE: control, build or vm)
"""

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor

from temporalio.client import Client
from temporalio.worker import Worker

from benchmarks.dags import linear
from kbisect.workers.decisions import decide
from kbisect.workflows.bisect_workflow import BisectWorkflow, sandbox_runner
from tests.workflows import fakes
from tests.workflows.fakes import Scenario

BOOT_SECONDS = 0.3  # a fake boot's length: long enough to be cut by a SIGKILL


def truth(repo: str) -> str:
    i = int(repo.removeprefix("soak-"))
    return f"c{3 + (7 * i) % 28}"


class FromRepo(dict[str, Scenario]):
    """fakes.SCENARIOS for this process: a job's scenario, made from its repo string."""

    def __missing__(self, repo: str) -> Scenario:
        i = int(repo.removeprefix("soak-"))
        self[repo] = Scenario(
            graph=linear(32),
            culprit=truth(repo),
            noise=0.05 if i % 2 else 0.0,
            test_delay=BOOT_SECONDS,
        )
        return self[repo]


async def main(address: str, role: str, queue: str) -> None:
    fakes.SCENARIOS = FromRepo()
    client = await Client.connect(address)
    # by the queue each activity runs on (contract.ACTIVITY_QUEUE)
    build = [fakes.validate_job, fakes.build_kernel, fakes.prepare_verify, fakes.classify_commits]
    vm = [fakes.run_test, fakes.trace_testcase]
    activities = {"build": build, "vm": vm, "control": [decide]}.get(role, [])
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[BisectWorkflow] if role == "control" else [],
        activities=activities,
        workflow_runner=sandbox_runner(),
        max_concurrent_activities=4,
        activity_executor=ThreadPoolExecutor(2),
        no_remote_activities=role == "control",  # decide is a local activity
    )
    print(f"soak worker {role} on {queue}", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
