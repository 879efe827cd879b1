"""Talking to the bisection service: where it is, starting jobs, reading their state."""

import uuid

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.service import RPCError

from kbisect.contract import BisectRequest, MarkRequest, Progress
from kbisect.errors import InfraError, UserError
from kbisect.settings import Endpoint

WORKFLOW = "BisectWorkflow"
SEARCH_ATTRIBUTES = ("KbisectTestcase", "KbisectStatus", "KbisectCulprit")


# Set once a Temporal client exists: its runtime threads outlive asyncio.run and abort
# the interpreter's finalization ("PyGILState_Release ... must be current"), so such a
# process leaves with os._exit after flushing (kbisect.cli.main).
used = False


async def connect(endpoint: Endpoint) -> Client:
    global used
    used = True
    try:
        return await Client.connect(endpoint.address, namespace=endpoint.namespace)
    except RuntimeError as exc:
        raise InfraError(
            f"no Temporal server at {endpoint.address}: start one with 'kbisect up' "
            "(or set KBISECT_TEMPORAL_ADDRESS)"
        ) from exc


async def has_search_attributes(client: Client, namespace: str) -> bool:
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

    try:
        resp = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
    except RPCError:
        return False
    return all(name in resp.custom_attributes for name in SEARCH_ATTRIBUTES)


async def start_job(
    client: Client, endpoint: Endpoint, req: BisectRequest, control_queue: str
) -> str:
    req.search_attributes = await has_search_attributes(client, endpoint.namespace)
    job_id = f"bisect-{req.testcase}-{uuid.uuid4().hex[:8]}"
    await client.start_workflow(WORKFLOW, req, id=job_id, task_queue=control_queue)
    return job_id


def handle(client: Client, job_id: str) -> WorkflowHandle[object, object]:
    return client.get_workflow_handle(job_id)


async def describe(client: Client, job_id: str) -> WorkflowExecutionDescription:
    """The server's view of a job (no worker needed); a clear error for an unknown id."""
    try:
        return await handle(client, job_id).describe()
    except RPCError as exc:
        if "not found" in str(exc).lower():
            raise UserError(f"no job {job_id!r}: see 'kbisect status' for the jobs") from exc
        raise InfraError(f"cannot read job {job_id}: {exc}") from exc


async def progress(client: Client, job_id: str) -> Progress:
    try:
        result: Progress = await handle(client, job_id).query("progress", result_type=Progress)
        return result
    except RPCError as exc:
        if "not found" in str(exc).lower():
            raise UserError(f"no job {job_id!r}: see 'kbisect status' for the jobs") from exc
        raise InfraError(f"cannot read job {job_id}: {exc}") from exc


async def _update(client: Client, job_id: str, name: str, what: str, *args: object) -> str:
    try:
        answer: str = await handle(client, job_id).execute_update(
            name, args=list(args), result_type=str
        )
        return answer
    except Exception as exc:  # the update validator's refusal, or the job is gone
        cause = getattr(exc, "cause", None) or exc
        raise UserError(f"cannot {what} {job_id}: {getattr(cause, 'message', cause)}") from exc


async def mark(client: Client, job_id: str, commit: str, verdict: str) -> str:
    request = MarkRequest(commit=commit, verdict=verdict)
    return await _update(client, job_id, "mark", f"mark {commit[:12]} in", request)


async def resume(client: Client, job_id: str) -> str:
    """Tell a job blocked on a host problem (full disk, missing tool) that it is fixed."""
    status = (await describe(client, job_id)).status
    if status != WorkflowExecutionStatus.RUNNING:
        word = status.name.lower() if status else "unknown"
        raise UserError(f"job {job_id} has ended ({word}): nothing to resume")
    return await _update(client, job_id, "resume", "resume")
