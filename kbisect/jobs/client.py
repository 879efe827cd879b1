"""The one way to the bisection service (Temporal), for every front door.

The CLI, the chat bot and the GitLab webhook submit, watch and report jobs through a
`JobClient` built from the settings: connect, start, progress, describe, result, cancel,
mark, resume, list, and whether any worker serves the job's task queues. Every failure is
a KbisectError: UserError for a bad job id or a refused request, InfraError for the host.
"""

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from temporalio.api.enums.v1 import PendingActivityState, TaskQueueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ChildWorkflowError
from temporalio.service import RPCError, RPCStatusCode

from kbisect.contract import (
    ACTIVITY_QUEUE,
    BACKPORT_WORKFLOW,
    EXPLAIN_WORKFLOW,
    INVESTIGATION_WORKFLOW,
    SA_CULPRIT_NAME,
    SA_STATUS_NAME,
    SA_SUMMARY_NAME,
    SA_TESTCASE_NAME,
    SEARCH_ATTRIBUTE_NAMES,
    SERIES_SCHEDULE_PREFIX,
    SERIES_WORKFLOW,
    SWEEP_WORKFLOW,
    WORKFLOW,
    QueueKind,
    Verdict,
    fit_summary,
)
from kbisect.errors import InfraError, UserError
from kbisect.jobs import connection, static_card
from kbisect.settings import Queues, Settings
from kbisect.summaries import Request, summary
from kbisect.testcases import kinds
from kbisect.workflows.backport_types import BackportProgress, BackportRequest, BackportResult
from kbisect.workflows.bisect_types import BisectRequest, BisectResult, MarkRequest, Progress
from kbisect.workflows.explain_types import ExplainProgress, ExplainRequest, ExplainResult
from kbisect.workflows.investigation_types import (
    SUMMARY_HEAD,
    InvestigationProgress,
    InvestigationRequest,
    InvestigationResult,
)
from kbisect.workflows.search_attributes import SA_SUMMARY
from kbisect.workflows.sweep_types import SweepProgress, SweepRequest, SweepResult

# Set once a Temporal client exists: its runtime threads outlive asyncio.run and abort
# the interpreter's finalization ("PyGILState_Release ... must be current"), so such a
# process leaves with os._exit after flushing (kbisect.main).
used = False

# An idle worker polls again at least once a minute; one not seen for longer than this
# is gone (the server itself forgets pollers after 5 minutes). A worker whose slots are
# all busy does not poll: a started activity of the job, or of any running job, counts
# for its queue.
POLLER_WINDOW = 300.0
BUSY_LOOK_JOBS = 50  # running jobs asked whether a worker runs their activity
# A worker started a moment ago may not poll yet (imports, connecting).
WORKER_GRACE = 30.0
QUERY_TIMEOUT = timedelta(seconds=10)  # a query or update that no workflow worker answers
T = TypeVar("T")
J = TypeVar("J", BisectRequest, SweepRequest)


@dataclass(frozen=True)
class JobSummary:
    """One line of `kbisect status`."""

    id: str
    state: str  # Temporal's view: running, completed, failed, canceled, terminated...
    status: str  # kbisect's: bisecting, blocked, found... ("" without search attributes)
    testcase: str
    culprit: str
    started: datetime
    kind: str = ""  # bisect, sweep, explain or backport (its workflow's)
    error: str = ""  # a failed job's cause, in the activity's own words (failure_text)

    def to_json(self) -> dict[str, str]:
        return {
            "id": self.id,
            "kind": self.kind,
            "state": self.state,
            "status": self.status,
            "testcase": self.testcase,
            "culprit": self.culprit,
            "started": self.started.isoformat(),
            "error": self.error,
        }


JOB_KINDS = {
    INVESTIGATION_WORKFLOW: "inv",
    WORKFLOW: "bisect",
    SWEEP_WORKFLOW: "sweep",
    EXPLAIN_WORKFLOW: "explain",
    BACKPORT_WORKFLOW: "backport",
}
ANY_JOB = tuple(JOB_KINDS)
# Each workflow as a refusal names it: "sweep-… is a sweep, not a bisection"
KIND_NAMES = {
    INVESTIGATION_WORKFLOW: "an investigation",
    WORKFLOW: "a bisection",
    SWEEP_WORKFLOW: "a sweep",
    EXPLAIN_WORKFLOW: "an explain job",
    BACKPORT_WORKFLOW: "a backport job",
    SERIES_WORKFLOW: "a series watch's tick",
}


def new_job_id(workflow: str, *parts: str) -> str:
    """A new job's id: its kind's word, `parts`, a random tag ("sweep-1a2b3c4d")."""
    return "-".join([JOB_KINDS[workflow], *parts, uuid.uuid4().hex[:8]])


def kind_name(workflow_type: str) -> str:
    return KIND_NAMES.get(workflow_type, f"a workflow of type {workflow_type}")


def _wanted_names(wanted: Sequence[str]) -> str:
    """'a bisection', 'a bisection or a backport job'; every kind: 'a job of kbisect's'."""
    if set(wanted) == set(ANY_JOB):
        return "a job of kbisect's"
    return " or ".join(kind_name(w) for w in wanted)


def _where_ids_are(wanted: Sequence[str]) -> str:
    if len(wanted) == 1:  # a bisection's or a sweep's id is new_job_id's
        word = JOB_KINDS[wanted[0]]
        return (
            f"give the id 'kbisect {word}' printed as 'job {word}-…' ('kbisect status' lists them)"
        )
    return "give a job's id, as 'kbisect status' lists them"


def check_kind(job_id: str, workflow_type: str, wanted: Sequence[str], then: str = "") -> None:
    """UserError unless the job is of a kind the command takes: what the id is, what the
    command takes, then `then` (default: where such an id is found). An id of another
    kind's result or progress would not decode, or would decode as nonsense."""
    if workflow_type not in wanted:
        raise UserError(
            f"{job_id} is {kind_name(workflow_type)}, not {_wanted_names(wanted)}: "
            + (then or _where_ids_are(wanted))
        )


def queue_kind(activity: str) -> QueueKind | None:
    """The kind of worker that runs this activity (None: not one of kbisect's)."""
    return ACTIVITY_QUEUE.get(activity)


@dataclass(frozen=True)
class QueueNeed:
    """A task queue a job needs served, and by which kind of worker."""

    name: str
    kind: QueueKind

    @property
    def task_type(self) -> "TaskQueueType.ValueType":
        if self.kind == QueueKind.WORKFLOW:
            return TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW
        return TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY


def check_job_id(job_id: str) -> str:
    """A job id as Temporal takes it: not empty, printable, no spaces, not huge."""
    if not job_id:
        raise UserError("give a job id, as 'kbisect status' lists them")
    if len(job_id) > 1000 or any(c.isspace() or not c.isprintable() for c in job_id):
        raise UserError(f"{job_id[:80]!r} is not a job id: see 'kbisect status' for the jobs")
    return job_id


def no_worker_message(queue: str, address: str) -> str:
    return (
        f"no worker polls task queue {queue} on {address}: start one with 'kbisect worker' "
        "or 'kbisect up'"
    )


def failure_text(err: BaseException | None) -> str:
    """Why a job failed, in its own words: the deepest message of the failure chain (an
    activity's "kernel ... has no 9pnet_virtio ...", not Temporal's "Activity task
    failed" around it)."""
    while isinstance(err, (ActivityError, ChildWorkflowError)) and err.cause is not None:
        err = err.cause
    return getattr(err, "message", None) or str(err)


async def failure_of(handle: WorkflowHandle[Any, Any]) -> str:
    """Why an ended job failed, from its history ("" if it did not fail)."""
    try:
        await handle.result(follow_runs=False)
    except WorkflowFailureError as exc:
        return failure_text(exc.cause)
    return ""


class JobClient:
    """A connection to the service for one namespace, with kbisect's words."""

    def __init__(self, settings: Settings, client: Client) -> None:
        self.settings = settings
        self.endpoint = settings.endpoint
        self.queues = settings.queues
        self.temporal = client
        self.submitter = static_card.cli_user()  # a job's "submitted by" (a door says who)
        self._types: dict[str, str] = {}  # a job's workflow type, which never changes

    @classmethod
    async def connect(cls, settings: Settings) -> "JobClient":
        global used
        used = True
        return cls(settings, await connection.connect(settings.endpoint))

    # --- jobs -------------------------------------------------------------------------
    async def start(self, req: BisectRequest, by: str = "") -> str:
        """Start a job; its id. It runs on this client's queues (its settings'); `by`: who
        asked, for the job's details (default: this shell's user@host)."""
        req = dataclasses.replace(req, build_queue=self.queues.build, vm_queue=self.queues.vm)
        req.search_attributes = await self.has_search_attributes()
        return await self._start(WORKFLOW, req, new_job_id(WORKFLOW, kinds.slug(req.testcase)), by)

    async def start_investigation(self, req: InvestigationRequest, by: str = "") -> str:
        """Start an investigation (the chain of stages `kbisect bisect` asks for); its id.
        Each stage job runs on this client's queues."""
        sa = await self.has_search_attributes()

        def here(stage: J) -> J:  # a stage's request on this client's queues
            done = dataclasses.replace(
                stage, build_queue=self.queues.build, vm_queue=self.queues.vm
            )
            done.search_attributes = sa
            return done

        bisection = here(req.bisection) if req.bisection else None
        check, kernels, swept = req.check, req.kernels, req.sweep
        if check is not None:
            check = dataclasses.replace(check, sweep=here(check.sweep))
        if kernels is not None and kernels.between is not None:
            kernels = dataclasses.replace(kernels, between=here(kernels.between))
        if swept is not None:
            jobs = {name: here(job) for name, job in swept.bisections.items()}
            swept = dataclasses.replace(swept, sweep=here(swept.sweep), bisections=jobs)
        req = dataclasses.replace(
            req, bisection=bisection, check=check, kernels=kernels, sweep=swept,
            search_attributes=sa,
        )  # fmt: skip
        job_id = new_job_id(INVESTIGATION_WORKFLOW, kinds.slug(req.testcase))  # "a,b": "a-b"
        first: Request | None = bisection or (swept.sweep if swept else None)
        assert first is not None, "an investigation bisects, or sweeps first"
        stages = [w for w, on in (("cross-tree", check), ("kernels", kernels)) if on]
        stages += [w for w, on in (("explain", req.explain), ("backport", req.target)) if on]
        stages += ["bisect each change"] if swept else []
        shown = SUMMARY_HEAD + summary(first) + (f" (+{', '.join(stages)})" if stages else "")
        details = static_card.details(first, by or self.submitter)
        if req.target:
            details += f"\n- **backport to**: {req.target_name} ({req.target[:12]})"
        return await self._start(INVESTIGATION_WORKFLOW, req, job_id, by, (shown, details))

    async def start_sweep(self, req: SweepRequest, by: str = "") -> str:
        """Start a sweep; its id (as a job's: watch, cancel and resume take it)."""
        req = dataclasses.replace(req, build_queue=self.queues.build, vm_queue=self.queues.vm)
        req.search_attributes = await self.has_search_attributes()
        return await self._start(SWEEP_WORKFLOW, req, new_job_id(SWEEP_WORKFLOW), by)

    async def start_explain(self, req: ExplainRequest, job_id: str, by: str = "") -> str:
        """Start an explain job under this id (`explain_id`: one a bisection, again
        once the last one has ended)."""
        req = dataclasses.replace(req, build_queue=self.queues.build, vm_queue=self.queues.vm)
        return await self._start(EXPLAIN_WORKFLOW, req, job_id, by)

    async def start_backport(self, req: BackportRequest, job_id: str, by: str = "") -> str:
        """Start a backport job under this id (`backport_id`)."""
        req = dataclasses.replace(req, build_queue=self.queues.build, vm_queue=self.queues.vm)
        req.search_attributes = await self.has_search_attributes()
        return await self._start(BACKPORT_WORKFLOW, req, job_id, by)

    async def _start(
        self,
        workflow: str,
        req: Request | InvestigationRequest,
        job_id: str,
        by: str = "",
        card: tuple[str, str] | None = None,
    ) -> str:
        """Start the workflow; `card`: its summary and details (default: the request's)."""
        if card is None:
            assert not isinstance(req, InvestigationRequest)
            card = summary(req), static_card.details(req, by or self.submitter)
        line = fit_summary(card[0])
        shown = (
            TypedSearchAttributes([SearchAttributePair(SA_SUMMARY, line)])
            if SA_SUMMARY_NAME in await self._attribute_names()
            else TypedSearchAttributes.empty
        )
        try:
            await self.temporal.start_workflow(
                workflow,
                req,
                id=job_id,
                task_queue=self.queues.control,
                static_summary=line,
                static_details=card[1],
                search_attributes=shown,
            )
        except RPCError as exc:
            raise InfraError(f"cannot start a job on {self.endpoint.address}: {exc}") from exc
        return job_id

    def job_url(self, job_id: str) -> str:
        return self.endpoint.job_url(job_id)

    def _run(self, job_id: str, run_id: str) -> WorkflowHandle[object, object]:
        """One run of a job (an explain job's id is used again once it has ended)."""
        return self.temporal.get_workflow_handle(job_id, run_id=run_id)

    def _handle(self, job_id: str) -> WorkflowHandle[object, object]:
        return self.temporal.get_workflow_handle(check_job_id(job_id))

    def _not_found(self, job_id: str, exc: RPCError) -> UserError | InfraError:
        if exc.status == RPCStatusCode.NOT_FOUND or "not found" in str(exc).lower():
            return UserError(f"no job {job_id!r} on {self.endpoint.address}: see 'kbisect status'")
        if exc.status == RPCStatusCode.INVALID_ARGUMENT:
            return UserError(f"{job_id!r} is not a job id: {exc.message}")
        return InfraError(f"cannot read job {job_id}: {exc.message or exc}")

    async def describe(self, job_id: str) -> WorkflowExecutionDescription:
        """The server's view of a job (no worker needed); UserError for an unknown id."""
        try:
            return await self._handle(job_id).describe()
        except RPCError as exc:
            if await self._is_watch(job_id):
                name = job_id.removeprefix(SERIES_SCHEDULE_PREFIX)
                raise UserError(
                    f"{job_id} is a series watch, not a job: 'kbisect series show {name}' "
                    "shows it and its ticks"
                ) from exc
            raise self._not_found(job_id, exc) from exc

    async def _workflow_type(self, job_id: str) -> str:
        """The job's workflow type, asked of the server once (a watch polls its progress)."""
        if job_id not in self._types:
            self._types[job_id] = (await self.describe(job_id)).workflow_type
        return self._types[job_id]

    async def _is_watch(self, job_id: str) -> bool:
        """Whether the id is a series watch's: a Schedule's, which `series watch` prints."""
        if not job_id.startswith(SERIES_SCHEDULE_PREFIX):
            return False
        try:
            await self.temporal.get_schedule_handle(job_id).describe()
        except RPCError:
            return False
        return True

    async def status_of(self, job_id: str) -> WorkflowExecutionStatus | None:
        """The job's state on the server; None: there is no such job."""
        try:
            return (await self.describe(job_id)).status
        except UserError:
            return None

    async def running(self, job_id: str) -> bool:
        return (await self.describe(job_id)).status == WorkflowExecutionStatus.RUNNING

    async def progress(self, job_id: str) -> Progress:
        """The job's own view (a workflow worker answers); InfraError if none does."""
        return await self._query(job_id, Progress, WORKFLOW)

    async def sweep_progress(self, job_id: str) -> SweepProgress:
        return await self._query(job_id, SweepProgress, SWEEP_WORKFLOW)

    async def explain_progress(self, job_id: str) -> ExplainProgress:
        return await self._query(job_id, ExplainProgress, EXPLAIN_WORKFLOW)

    async def backport_progress(self, job_id: str) -> BackportProgress:
        return await self._query(job_id, BackportProgress, BACKPORT_WORKFLOW)

    async def investigation_progress(self, job_id: str) -> InvestigationProgress:
        return await self._query(job_id, InvestigationProgress, INVESTIGATION_WORKFLOW)

    async def _query(self, job_id: str, kind: type[T], workflow: str) -> T:
        # another kind's progress may decode (each has a status): it would be nonsense
        check_kind(job_id, await self._workflow_type(job_id), (workflow,))
        try:
            result: T = await self._handle(job_id).query(
                "progress", result_type=kind, rpc_timeout=QUERY_TIMEOUT
            )
            return result
        except RPCError as exc:
            raise self._not_found(job_id, exc) from exc
        except Exception as exc:  # a query the workflow failed to answer (not an RPCError)
            raise InfraError(f"cannot read the progress of {job_id}: {exc}") from exc

    async def result(self, job_id: str) -> BisectResult:
        """The result of a finished job; UserError if it runs still or has failed."""
        return await self._result(job_id, BisectResult, WORKFLOW)

    async def sweep_result(self, job_id: str) -> SweepResult:
        return await self._result(job_id, SweepResult, SWEEP_WORKFLOW)

    async def explain_result(self, job_id: str) -> ExplainResult:
        return await self._result(job_id, ExplainResult, EXPLAIN_WORKFLOW)

    async def backport_result(self, job_id: str) -> BackportResult:
        return await self._result(job_id, BackportResult, BACKPORT_WORKFLOW)

    async def investigation_result(self, job_id: str) -> InvestigationResult:
        return await self._result(job_id, InvestigationResult, INVESTIGATION_WORKFLOW)

    async def stage_running(self, job_id: str) -> str:
        """The job itself, or an investigation's running stage job (resume goes there)."""
        if await self._workflow_type(job_id) != INVESTIGATION_WORKFLOW:
            return job_id
        await self._live(job_id, ANY_JOB, "nothing to resume")
        stages = (await self.investigation_progress(job_id)).stages
        running = [s.job for s in stages if s.state == "running"]
        if not running:
            raise UserError(f"{job_id} runs no stage job now: nothing to resume")
        return running[-1]

    async def bisection_of(self, job_id: str) -> str:
        """The job itself, or an investigation's bisection (its last: the commits one), for
        a command that takes a bisection; UserError if it has none yet."""
        if await self._workflow_type(job_id) != INVESTIGATION_WORKFLOW:
            return job_id
        if await self.running(job_id):
            stages = (await self.investigation_progress(job_id)).stages
        else:
            stages = (await self.investigation_result(job_id)).stages
        jobs = [s.job for s in stages if s.kind == WORKFLOW]
        if not jobs:
            raise UserError(f"{job_id} has no bisection yet: 'kbisect watch {job_id}' follows it")
        return jobs[-1]

    async def _result(self, job_id: str, kind: type[T], workflow: str) -> T:
        desc = await self.describe(job_id)
        check_kind(job_id, desc.workflow_type, (workflow,))
        if desc.status == WorkflowExecutionStatus.RUNNING:
            raise UserError(
                f"job {job_id} is still running: follow it with 'kbisect watch {job_id}'"
            )
        handle = self.temporal.get_workflow_handle(job_id, result_type=kind)
        try:
            result: T = await handle.result()
            return result
        except WorkflowFailureError as exc:
            raise UserError(f"job {job_id} failed: {failure_text(exc.cause)}") from exc
        except RPCError as exc:
            raise self._not_found(job_id, exc) from exc

    async def cancel(self, job_id: str) -> None:
        desc = await self.describe(job_id)  # a clear error for an unknown id
        if desc.status != WorkflowExecutionStatus.RUNNING:
            raise UserError(f"job {job_id} has already ended ({_state(desc.status)})")
        try:
            await self._handle(job_id).cancel()
        except RPCError as exc:
            raise self._not_found(job_id, exc) from exc

    async def mark(self, job_id: str, commit: str, verdict: str) -> str:
        """Tell a running job that a commit (a full hash) is good, bad or skip."""
        if verdict not in tuple(Verdict):
            raise UserError(f"unknown verdict {verdict!r}: use good, bad or skip")
        desc = await self._live(job_id, (WORKFLOW,), "it takes no marks")
        needs = [n for n in await self.job_queues(job_id, desc) if n.kind == QueueKind.WORKFLOW]
        await self.require_workers(needs, job_id, grace=WORKER_GRACE)
        request = MarkRequest(commit=commit, verdict=verdict)
        return await self._update(job_id, "mark", f"mark {commit[:12]} in", request)

    async def resume(self, job_id: str) -> str:
        """Tell a job blocked on a host problem (full disk, missing tool) that it is fixed."""
        desc = await self._live(job_id, ANY_JOB, "nothing to resume")
        await self.require_workers(await self.job_queues(job_id, desc), job_id, WORKER_GRACE)
        return await self._update(job_id, "resume", "resume")

    async def _live(
        self, job_id: str, wanted: Sequence[str], otherwise: str
    ) -> WorkflowExecutionDescription:
        desc = await self.describe(job_id)
        check_kind(job_id, desc.workflow_type, wanted)
        if desc.status != WorkflowExecutionStatus.RUNNING:
            raise UserError(f"job {job_id} has ended ({_state(desc.status)}): {otherwise}")
        return desc

    async def _update(self, job_id: str, name: str, what: str, *args: object) -> str:
        try:
            answer: str = await self._handle(job_id).execute_update(
                name, args=list(args), result_type=str, rpc_timeout=QUERY_TIMEOUT
            )
            return answer
        except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
            raise InfraError(
                f"job {job_id} did not answer within {QUERY_TIMEOUT.seconds} s: "
                "is a worker running ('kbisect up' or 'kbisect worker')?"
            ) from exc
        except RPCError as exc:
            raise self._not_found(job_id, exc) from exc
        except Exception as exc:  # the update validator's refusal, or the job is gone
            cause = getattr(exc, "cause", None) or exc
            raise UserError(f"cannot {what} {job_id}: {getattr(cause, 'message', cause)}") from exc

    async def jobs(self, limit: int = 20, errors: bool = True) -> list[JobSummary]:
        """The newest jobs (bisections, sweeps, explain and backport jobs), newest first;
        `errors`: each failed job's cause too (its history read, a call to the server each)."""
        found = []
        try:
            kinds = " OR ".join(f'WorkflowType="{kind}"' for kind in JOB_KINDS)
            async for wf in self.temporal.list_workflows(kinds, limit=limit):
                sa = wf.search_attributes
                failed = errors and wf.status == WorkflowExecutionStatus.FAILED
                found.append(
                    JobSummary(
                        id=wf.id,
                        state=_state(wf.status),
                        status=_first(sa, SA_STATUS_NAME),
                        testcase=_first(sa, SA_TESTCASE_NAME),
                        culprit=_first(sa, SA_CULPRIT_NAME),
                        started=wf.start_time,
                        kind=JOB_KINDS.get(wf.workflow_type, ""),
                        error=await failure_of(self._run(wf.id, wf.run_id)) if failed else "",
                    )
                )
        except RPCError as exc:
            raise InfraError(f"cannot list jobs on {self.endpoint.address}: {exc}") from exc
        return found

    # --- the service itself -----------------------------------------------------------
    async def has_search_attributes(self) -> bool:
        """Whether the server has the attributes the workflows keep up to date."""
        names = await self._attribute_names()
        return all(name in names for name in SEARCH_ATTRIBUTE_NAMES)

    async def _attribute_names(self) -> set[str]:
        try:
            resp = await self.temporal.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=self.endpoint.namespace)
            )
        except RPCError:
            return set()
        return set(resp.custom_attributes)

    def needs(self, queues: Queues | None = None) -> list[QueueNeed]:
        """The queues a new job on these queues needs served."""
        q = queues or self.queues
        return [QueueNeed(q.name(kind), kind) for kind in QueueKind]

    async def bisection_request(self, job_id: str) -> BisectRequest:
        """What a bisection was started with; UserError for an id of another kind."""
        check_kind(job_id, (await self.describe(job_id)).workflow_type, (WORKFLOW,))
        req = await self.job_request(job_id)
        if req is None:
            raise UserError(f"cannot read what {job_id} was started with: an older kbisect's?")
        return req

    async def job_request(self, job_id: str) -> BisectRequest | None:
        """What the job was started with (from its history: no worker needed)."""
        if await self._workflow_type(job_id) == INVESTIGATION_WORKFLOW:
            inv = await self._started_with(job_id, InvestigationRequest)
            return inv.bisection if inv is not None else None
        return await self._started_with(job_id, BisectRequest)

    async def sweep_request(self, job_id: str) -> SweepRequest | None:
        """What a sweep was started with (from its history)."""
        return await self._started_with(job_id, SweepRequest)

    async def _started_with(self, job_id: str, kind: type[T]) -> T | None:
        """The job's input as a `kind`, from its history; None: it is no such input."""
        try:
            async for event in self._handle(job_id).fetch_history_events():
                attrs = event.workflow_execution_started_event_attributes
                if not event.HasField("workflow_execution_started_event_attributes"):
                    return None
                payloads = list(attrs.input.payloads)[:1]
                if not payloads:
                    return None
                (req,) = await self.temporal.data_converter.decode(payloads, [kind])
                return req if isinstance(req, kind) else None
        except RPCError as exc:
            raise self._not_found(job_id, exc) from exc
        except (ValueError, TypeError, RuntimeError):
            return None  # not that kind of job's input
        return None

    async def job_queues(
        self, job_id: str, desc: WorkflowExecutionDescription | None = None
    ) -> list[QueueNeed]:
        """The queues this job runs on: its workflow's, and its request's build and VM."""
        desc = desc or await self.describe(job_id)
        req = await self.job_request(job_id)
        return self.needs(
            Queues(
                control=desc.task_queue or self.queues.control,
                build=req.build_queue if req else self.queues.build,
                vm=req.vm_queue if req else self.queues.vm,
            )
        )

    async def unserved(
        self, needs: Iterable[QueueNeed], job_id: str | None = None
    ) -> list[QueueNeed]:
        """The queues no worker serves: none has polled lately, and (for a job) none runs
        one of its activities there."""
        busy: set[QueueKind | None] = set()
        if job_id is not None:
            busy = await self._busy_kinds(job_id)
        now = datetime.now(UTC)
        missing = []
        for need in needs:
            if need.kind in busy:
                continue
            try:
                resp = await self.temporal.workflow_service.describe_task_queue(
                    DescribeTaskQueueRequest(
                        namespace=self.endpoint.namespace,
                        task_queue=TaskQueue(name=need.name),
                        task_queue_type=need.task_type,
                    )
                )
            except RPCError as exc:
                raise InfraError(
                    f"cannot ask {self.endpoint.address} about task queue {need.name}: {exc}"
                ) from exc
            ages = [
                (now - p.last_access_time.ToDatetime(UTC)).total_seconds() for p in resp.pollers
            ]
            if not any(age <= POLLER_WINDOW for age in ages):
                missing.append(need)
        if missing and job_id is not None:
            # A worker whose every slot is taken does not poll: one busy with other jobs'
            # builds (a cold one takes minutes) serves this job's next, it is no absence.
            elsewhere = await self._busy_kinds_of_running_jobs()
            missing = [n for n in missing if n.kind not in elsewhere]
        return missing

    async def _busy_kinds(self, job_id: str) -> set[QueueKind | None]:
        """Queue kinds where a worker runs one of the job's activities right now (a dead
        worker's activity is given back within its heartbeat timeout)."""
        desc = await self.describe(job_id)
        started = PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        return {
            queue_kind(a.activity_type.name)
            for a in desc.raw_description.pending_activities
            if a.state == started
        }

    async def _busy_kinds_of_running_jobs(self) -> set[QueueKind | None]:
        """Queue kinds where a worker runs an activity of any running job (the newest
        BUSY_LOOK_JOBS of them)."""
        busy: set[QueueKind | None] = set()
        kinds = " OR ".join(f'WorkflowType="{kind}"' for kind in JOB_KINDS)
        query = f'ExecutionStatus="Running" AND ({kinds})'
        try:
            ids = [wf.id async for wf in self.temporal.list_workflows(query, limit=BUSY_LOOK_JOBS)]
        except RPCError:
            return busy  # no answer: the poller check stands
        for job in ids:
            try:
                busy |= await self._busy_kinds(job)
            except (InfraError, UserError):
                continue  # ended or gone meanwhile
        return busy

    async def require_workers(
        self, needs: list[QueueNeed], job_id: str | None = None, grace: float = 0.0
    ) -> None:
        """InfraError naming the first queue no worker serves, after waiting up to `grace`
        seconds for workers that are starting."""
        deadline = time.monotonic() + grace
        while True:
            missing = await self.unserved(needs, job_id)
            if not missing:
                return
            if time.monotonic() >= deadline:
                raise InfraError(no_worker_message(missing[0].name, self.endpoint.address))
            await asyncio.sleep(1.0)


def _state(status: WorkflowExecutionStatus | None) -> str:
    return status.name.lower() if status else "unknown"


def _first(attrs: object, key: str) -> str:
    values = attrs.get(key) if isinstance(attrs, dict) else None
    return str(values[0]) if values else ""
