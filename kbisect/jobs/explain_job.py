"""A bisection's explain job, for every door: its id, the request for its culprit, and what
has come of it. The CLI (`kbisect explain`) and the chat door (`explain JOB`) share it."""

from temporalio.client import WorkflowExecutionStatus

from kbisect.contract import EXPLAIN_SUFFIX
from kbisect.errors import UserError
from kbisect.jobs.client import JobClient
from kbisect.workflows.explain_types import ExplainRequest, ExplainResult
from kbisect.workflows.investigation_types import explain_id as explain_id  # its doors use it
from kbisect.workflows.investigation_types import explain_request


def is_explain(job_id: str) -> bool:
    """Whether the id is an explain job's, by its form (the server says for sure)."""
    return job_id.endswith(EXPLAIN_SUFFIX)


async def request_for(
    client: JobClient,
    job: str,
    metric: str | None = None,
    profile: str | None = None,
    boots: int = 0,
    alignment: bool = False,
) -> ExplainRequest:
    """The explain request for a finished bisection: its culprit against its first
    parent, on the job's testcase, metric, profile and config. UserError: the job named no
    commit, or bisected a pass/fail testcase."""
    result = await client.result(job)
    if result.culprit is None:
        raise UserError(
            f"job {job} named no culprit ({result.status}): there is nothing to explain"
        )
    if result.pass_fail:
        raise UserError(
            f"job {job} bisected a pass/fail testcase: its culprit's bad boot is in its "
            "report; explain compares a metric's scores"
        )
    req = await client.job_request(job)
    ask = explain_request(result, job, req)
    ask.metric, ask.profile = metric or ask.metric, profile or ask.profile
    ask.boots, ask.alignment = boots, alignment
    return ask


async def lacks_alignment(client: JobClient, job: str) -> bool:
    """Whether the bisection's explain job ended without an alignment check (one that
    still runs is followed as it is)."""
    if await client.status_of(explain_id(job)) != WorkflowExecutionStatus.COMPLETED:
        return False
    result: ExplainResult = await client.explain_result(explain_id(job))
    return result.alignment is None


async def why_of(client: JobClient, job: str) -> list[str] | None:
    """The Why lines of a bisection's explain job, if it ran to an answer."""
    if await client.status_of(explain_id(job)) != WorkflowExecutionStatus.COMPLETED:
        return None
    result: ExplainResult = await client.explain_result(explain_id(job))
    return result.why
