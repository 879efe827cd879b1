"""Bisections for the results pages' tests: the real workflow on the test's dev server,
with the fake activities of the workflow tests, started as the CLI starts them."""

import contextlib
import uuid
from collections.abc import AsyncIterator

from temporalio.testing import WorkflowEnvironment

from kbisect.jobs.client import JobClient
from kbisect.settings import Settings
from kbisect.workflows.bisect_workflow import BisectWorkflow
from tests.conftest import one_queue_env
from tests.workflows import fakes
from tests.workflows.fakes import Scenario


@contextlib.asynccontextmanager
async def serving(env: WorkflowEnvironment) -> AsyncIterator[JobClient]:
    """A worker of the real workflow with fake activities, and a JobClient on its queue."""
    queue = f"web-{uuid.uuid4().hex[:8]}"
    settings = Settings.from_env(one_queue_env(env, queue))
    async with fakes.fake_worker(env.client, queue, BisectWorkflow):
        yield JobClient(settings, env.client)


async def start(client: JobClient, scenario: Scenario) -> str:
    """A bisection of the scenario, started as `kbisect bisect` starts one."""
    return await client.start(fakes.request(scenario, client.queues.build), by="tester@web")
