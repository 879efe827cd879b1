"""Series watches as Temporal Schedules: make, list, trigger and remove them, and read what
their ticks found (the doors post the alerts from here).

A watch is the Schedule `kbisect-series-NAME`; its action starts a SeriesTickWorkflow
with the watch; a tick that comes while the last one runs waits for it (one at most).
Its ticks are the workflows the Schedule started (TemporalScheduledById), newest first.
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
)
from temporalio.service import RPCError, RPCStatusCode

from kbisect.contract import SERIES_SCHEDULE_PREFIX, SERIES_SWEEP_SUFFIX, SERIES_WORKFLOW
from kbisect.errors import InfraError, UserError
from kbisect.jobs.client import JobClient, _state, failure_of
from kbisect.workflows.series_types import SeriesAlert, SeriesTick, SeriesWatch

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
TICK_PREFIX = "series-"  # a tick's id: this, the watch's name, and the time it started
ALERT_POLL_SECONDS = 30.0  # how often a door looks for a watch's new alerts (--alerts-every)
ALERT_POLL_LIMITS = (1.0, 3600.0)  # seconds: at most one look a second, at least one an hour


def alert_poll(text: str) -> float:
    """--alerts-every SECONDS, checked: a finite number within ALERT_POLL_LIMITS."""
    lo, hi = ALERT_POLL_LIMITS
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not lo <= seconds <= hi:  # NaN and infinities too
        raise UserError(f"--alerts-every {text!r}: give seconds from {lo:g} to {hi:g}")
    return seconds


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
    blocked: str = ""  # a running tick whose sweep waits on a host problem: the problem


@dataclass(frozen=True)
class Blocked:
    """A watch's tick whose sweep is blocked: an alert of its own (while it waits, the
    watch looks at nothing new), posted once by its key."""

    key: str
    watch: str
    sweep: str
    why: str

    def line(self) -> str:
        return (
            f"kbisect alert: the watch {self.watch} is blocked: {self.why} "
            f"(sweep {self.sweep}: fix the host, then 'kbisect resume {self.sweep}')"
        )


@dataclass
class News:
    """What a door has to post of a watch: its ticks' alerts and blocked ticks, oldest
    first, and where to read from next time (`since`, kept in the door's state file)."""

    alerts: list[SeriesAlert]
    blocked: list[Blocked]
    since: str  # an ISO time: the oldest tick not finished, else the newest tick


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
        # A tick that comes while the last one runs (a long sweep, or one blocked on the
        # host) waits for it, once: it looks at everything new since, so none is lost.
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.BUFFER_ONE),
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
    """A look now (after the tick that runs, if one does)."""
    try:
        await _handle(jobs, name).trigger(overlap=ScheduleOverlapPolicy.BUFFER_ONE)
    except RPCError as exc:
        raise _missing(name, exc) from exc


async def remove(jobs: JobClient, name: str) -> None:
    """The Schedule goes; what the build host kept stays (a new watch of the name goes
    on from it)."""
    try:
        await _handle(jobs, name).delete()
    except RPCError as exc:
        raise _missing(name, exc) from exc


async def ticks(jobs: JobClient, name: str, limit: int | None = 20, since: str = "") -> list[Tick]:
    """The watch's ticks the server still has (all, or `limit`; those started at `since`
    or later), newest first, with completed ones' results and running ones' blocks."""
    query = f"TemporalScheduledById = '{schedule_id(name)}'"
    if since:
        query += f" AND StartTime >= '{_iso(since)}'"
    found = []
    try:
        async for wf in jobs.temporal.list_workflows(query, limit=limit):
            tick = Tick(wf.id, _state(wf.status), wf.start_time, None)
            handle = jobs.temporal.get_workflow_handle(
                wf.id, run_id=wf.run_id, result_type=SeriesTick
            )
            if wf.status == WorkflowExecutionStatus.COMPLETED:
                tick.result = await handle.result()
            elif wf.status == WorkflowExecutionStatus.RUNNING:
                tick.blocked = await _blocked(jobs, wf.id)
            else:
                tick.error = await failure_of(handle)
            found.append(tick)
    except RPCError as exc:
        raise InfraError(f"cannot list the ticks of {name}: {exc}") from exc
    return found


async def news(jobs: JobClient, name: str, since: str) -> News:
    """Every tick's alerts and blocks from `since` on (however far back: a door that was
    down for days loses nothing the server still has), oldest first; and the next since."""
    found = list(reversed(await ticks(jobs, name, None, since)))
    unfinished = [t for t in found if t.state == "running" and t.started is not None]
    newest = [t for t in found if t.started is not None][-1:]
    mark = (unfinished or newest)[0].started if (unfinished or newest) else None
    return News(
        alerts=[a for t in found for a in (t.result.alerts if t.result else [])],
        blocked=[
            Blocked(f"{t.id}/blocked", name, t.id + SERIES_SWEEP_SUFFIX, t.blocked)
            for t in found
            if t.blocked
        ],
        since=mark.isoformat() if mark is not None else since,
    )


def _iso(text: str) -> str:
    """A time as the visibility query takes it (RFC 3339); UserError for no time at all
    (it comes from a door's state file, never from a chat)."""
    try:
        return datetime.fromisoformat(text).isoformat()
    except ValueError as exc:
        raise UserError(f"{text!r} is not a time: move the door's state file away") from exc


async def _blocked(jobs: JobClient, tick: str) -> str:
    """The host problem a running tick's sweep waits on ('' when it does not, or when it
    has no sweep yet)."""
    try:
        progress = await jobs.sweep_progress(tick + SERIES_SWEEP_SUFFIX)
    except (InfraError, UserError):
        return ""
    return progress.message if progress.status == "blocked" else ""
