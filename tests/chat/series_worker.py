"""A test-only worker for the series watch test (tests/chat/test_series_alerts.py): the
real SweepWorkflow and SeriesTickWorkflow, the real sweep validation and series
activities (git, the named tree, the kept file), and fake build and boot activities. A
boot reads its truth from the commit itself: a tree holding a file `slow` reads
8-sector requests (the seed's bug), any other 512; one holding `host-fails` fails as a
host does (the sweep blocks); one holding `broken` does not build. A process of its own,
so the test can stop it with the server and start it again.
Run: python -m tests.chat.series_worker ADDRESS QUEUE   (KBISECT_CACHE, _DATA from env)
"""

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from kbisect.builders.kernel_build import KernelBuilder
from kbisect.contract import BUILD, TEST, BuildRequest, BuildResult, TestRequest, TestResult
from kbisect.errors import InfraError
from kbisect.infra.git import Git
from kbisect.model import Artifact
from kbisect.settings import Settings
from kbisect.workers.activities import BuildActivities
from kbisect.workers.series_activities import SeriesActivities
from kbisect.workflows.bisect_workflow import sandbox_runner
from kbisect.workflows.series_workflow import SeriesTickWorkflow
from kbisect.workflows.sweep_workflow import SweepWorkflow


@activity.defn(name=BUILD)
def build(req: BuildRequest) -> BuildResult:
    if Git(Path(req.repo)).ok("cat-file", "-e", f"{req.commit}:broken"):
        return BuildResult(commit=req.commit, ok=False, error="x.c: error", log="/l")
    art = Artifact(req.commit, tree="t", config_hash="c", kernel="/k", config="/c", build_log="/l")
    return BuildResult(commit=req.commit, ok=True, artifact=art)


@activity.defn(name=TEST)
def boot(req: TestRequest) -> TestResult:
    if Git(Path(req.repo)).ok("cat-file", "-e", f"{req.commit}:host-fails"):
        raise InfraError("the VM host's disk is full")  # retried, then the sweep blocks
    slow = Git(Path(req.repo)).ok("cat-file", "-e", f"{req.commit}:slow")
    value = 8.0 if slow else 512.0
    return TestResult(req.commit, "ok", {req.metric: value}, [value] * 3, host="vm-a")


async def main(address: str, queue: str) -> None:
    settings = Settings.from_env()
    client = await Client.connect(address)
    series = SeriesActivities(settings)
    validate = BuildActivities(settings, KernelBuilder()).validate_sweep
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[SweepWorkflow, SeriesTickWorkflow],
        activities=[validate, series.series_plan, series.series_record, build, boot],
        workflow_runner=sandbox_runner(),
        activity_executor=ThreadPoolExecutor(4),
    )
    print(f"series worker on {queue}", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
