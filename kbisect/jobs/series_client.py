"""Series watches as Temporal Schedules: make, list, trigger and remove them, and read what
their ticks found (the doors post the alerts from here).

A watch is the Schedule `kbisect-series-NAME`; its action starts a SeriesTickWorkflow
with the watch, skipping a tick while the last one runs. Its ticks are the workflows the
Schedule started (TemporalScheduledById), newest first.
"""

import dataclasses
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio.client import (
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.service import RPCError, RPCStatusCode

from kbisect.contract import (
    SERIES_SCHEDULE_PREFIX,
    SERIES_WORKFLOW,
    SeriesAlert,
    SeriesTick,
    SeriesWatch,
)
from kbisect.errors import InfraError, UserError
from kbisect.jobs.client import JobClient, _state

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
TICK_PREFIX = "series-"  # a tick's id: this, the watch's name, and the time it started
ALERT_POLL_SECONDS = 30.0  # how often a door looks for a watch's new alerts


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise UserError(
            f"invalid watch name {name!r}: use lower-case letters, digits, '.', '_' and '-' "
            "(e.g. cloud-kernels)"
        )
    return name


def schedule_id(name: str) -> str:
    return SERIES_SCHEDULE_PREFIX + check_name(name)


@dataclass
class WatchSummary:
    watch: SeriesWatch
    every: timedelta | None
    next_run: datetime | None
    last_tick: str  # its id ("" before the first)
    paused: bool

    def to_json(self) -> dict[str, object]:
        return {
            **dataclasses.asdict(self.watch),
            "every_minutes": self.every.total_seconds() / 60 if self.every else None,
            "next_run": self.next_run.isoformat() if self.next_run else None,
            "last_tick": self.last_tick,
            "paused": self.paused,
        }


@dataclass
class Tick:
    id: str
    state: str  # running, completed, failed...
    started: datetime | None
    result: SeriesTick | None  # a completed tick's
    error: str = ""


async def create(jobs: JobClient, watch: SeriesWatch, every: timedelta) -> str:
    """The watch's Schedule, with a first look now (it takes the newest kernel as the
    baseline); its id."""
    sid = schedule_id(watch.name)
    watch = dataclasses.replace(
        watch,
        build_queue=jobs.queues.build,
        vm_queue=jobs.queues.vm,
        search_attributes=await jobs.has_search_attributes(),
    )
    action = ScheduleActionStartWorkflow(
        SERIES_WORKFLOW,
        watch,
        id=TICK_PREFIX + watch.name,
        task_queue=jobs.queues.control,
    )
    schedule = Schedule(
        action=action,
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )
    try:
        await jobs.temporal.create_schedule(sid, schedule, trigger_immediately=True)
    except ScheduleAlreadyRunningError as exc:
        raise UserError(
            f"a watch named {watch.name} exists: 'kbisect series remove {watch.name}' first"
        ) from exc
    except RPCError as exc:
        raise InfraError(f"cannot make the watch on {jobs.endpoint.address}: {exc}") from exc
    return sid


def _handle(jobs: JobClient, name: str) -> ScheduleHandle:
    return jobs.temporal.get_schedule_handle(schedule_id(name))


def _missing(name: str, exc: RPCError) -> UserError | InfraError:
    if exc.status == RPCStatusCode.NOT_FOUND:
        return UserError(f"no watch named {name}: 'kbisect series list' lists them")
    return InfraError(f"cannot reach the watch {name}: {exc}")


async def describe(jobs: JobClient, name: str) -> WatchSummary:
    try:
        desc = await _handle(jobs, name).describe()
    except RPCError as exc:
        raise _missing(name, exc) from exc
    action = desc.schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    [watch] = await jobs.temporal.data_converter.decode(list(action.args), [SeriesWatch])
    intervals = desc.schedule.spec.intervals
    recent = desc.info.recent_actions
    started = recent[-1].action if recent else None
    last = started.workflow_id if isinstance(started, ScheduleActionExecutionStartWorkflow) else ""
    return WatchSummary(
        watch=watch,
        every=intervals[0].every if intervals else None,
        next_run=desc.info.next_action_times[0] if desc.info.next_action_times else None,
        last_tick=last,
        paused=bool(desc.schedule.state.paused),
    )


async def watches(jobs: JobClient) -> list[WatchSummary]:
    found = []
    try:
        async for entry in await jobs.temporal.list_schedules():
            if entry.id.startswith(SERIES_SCHEDULE_PREFIX):
                found.append(await describe(jobs, entry.id.removeprefix(SERIES_SCHEDULE_PREFIX)))
    except RPCError as exc:
        raise InfraError(f"cannot list watches on {jobs.endpoint.address}: {exc}") from exc
    return sorted(found, key=lambda w: w.watch.name)


async def trigger(jobs: JobClient, name: str) -> None:
    """A look now (skipped while a tick runs)."""
    try:
        await _handle(jobs, name).trigger(overlap=ScheduleOverlapPolicy.SKIP)
    except RPCError as exc:
        raise _missing(name, exc) from exc


async def remove(jobs: JobClient, name: str) -> None:
    """The Schedule goes; what the build host kept stays (a new watch of the name goes
    on from it)."""
    try:
        await _handle(jobs, name).delete()
    except RPCError as exc:
        raise _missing(name, exc) from exc


async def ticks(jobs: JobClient, name: str, limit: int = 20) -> list[Tick]:
    """The watch's ticks the server still has, newest first, with completed ones' results."""
    query = f"TemporalScheduledById = '{schedule_id(name)}'"
    found = []
    try:
        async for wf in jobs.temporal.list_workflows(query, limit=limit):
            tick = Tick(wf.id, _state(wf.status), wf.start_time, None)
            handle = jobs.temporal.get_workflow_handle(
                wf.id, run_id=wf.run_id, result_type=SeriesTick
            )
            if wf.status == WorkflowExecutionStatus.COMPLETED:
                tick.result = await handle.result()
            elif wf.status != WorkflowExecutionStatus.RUNNING:
                tick.error = await _why(handle)
            found.append(tick)
    except RPCError as exc:
        raise InfraError(f"cannot list the ticks of {name}: {exc}") from exc
    return found


async def alerts(jobs: JobClient, name: str) -> list[SeriesAlert]:
    """The alerts of the watch's ticks the server still has, oldest first (the doors post
    those whose keys they have not posted)."""
    found = reversed(await ticks(jobs, name))
    return [a for t in found for a in (t.result.alerts if t.result else [])]


async def _why(handle: WorkflowHandle[object, SeriesTick]) -> str:
    """A failed tick's reason: the innermost failure's message (a sweep's, a look's)."""
    try:
        await handle.result()
    except WorkflowFailureError as exc:
        cause: BaseException | None = exc.cause
        while getattr(cause, "cause", None) is not None:
            cause = cause.cause  # type: ignore[union-attr]
        return str(getattr(cause, "message", None) or cause)
    return ""
