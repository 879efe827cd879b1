"""Jobs for the results pages' (and the doors') tests: the real workflows on the test's
dev server, with the fake activities of the workflow tests, started as the CLI starts them."""

import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator

from temporalio.testing import WorkflowEnvironment

from kbisect.jobs.client import JobClient
from kbisect.settings import Settings
from kbisect.workflows.backport_workflow import BackportWorkflow
from kbisect.workflows.bisect_workflow import BisectWorkflow
from kbisect.workflows.explain_workflow import ExplainWorkflow
from kbisect.workflows.investigation_types import CrossTreeCheck, InvestigationRequest
from kbisect.workflows.investigation_workflow import InvestigationWorkflow
from kbisect.workflows.sweep_types import SweepRequest
from kbisect.workflows.sweep_workflow import SweepWorkflow
from tests.conftest import one_queue_env
from tests.workflows import fakes
from tests.workflows.fakes import Scenario

# An investigation and every kind of stage job it starts
CHAIN = (InvestigationWorkflow, BisectWorkflow, SweepWorkflow, ExplainWorkflow, BackportWorkflow)


@contextlib.asynccontextmanager
async def serving(
    env: WorkflowEnvironment, *workflows: type, settings: dict[str, str] | None = None
) -> AsyncIterator[JobClient]:
    """A worker of the real workflows (default: the bisection's) with fake activities, and
    a JobClient on its queue (`settings`: more of its environment)."""
    queue = f"web-{uuid.uuid4().hex[:8]}"
    found = Settings.from_env({**one_queue_env(env, queue), **(settings or {})})
    async with fakes.fake_worker(env.client, queue, *(workflows or (BisectWorkflow,))):
        yield JobClient(found, env.client)


async def start(client: JobClient, scenario: Scenario) -> str:
    """A bisection of the scenario, started as `kbisect bisect` starts one."""
    return await client.start(fakes.request(scenario, client.queues.build), by="tester@web")


def investigation(
    scenario: Scenario, queue: str, distro: str = "c2", base: str = "c1", **kw: object
) -> InvestigationRequest:
    """An investigation of the scenario with a cross-tree check (its distro endpoint
    against the merge base), as `kbisect bisect --cross-tree` plans one."""
    bisection = fakes.request(scenario, queue)
    sweep = SweepRequest(
        bisection.repo, [distro, base], [bisection.testcase], boots=4, names=["distro", "base"]
    )
    check = CrossTreeCheck(sweep, distro, bisection.bad, base, "good")
    req = InvestigationRequest(bisection=dataclasses.replace(bisection, good=[base]), check=check)
    return dataclasses.replace(req, **kw)  # type: ignore[arg-type]
