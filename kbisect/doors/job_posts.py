"""A job's story for a door's thread: its phases, each finished step, the outcome and the
report's summary, each post under a key that is the same however often it is computed.
A door keeps the keys it has posted, so a restarted bot (or a redelivered webhook) goes on
where it stopped and never posts a line twice.

An investigation is followed stage by stage, in its stages' order: a post "NAME: job ID"
(key `stage:NAME`), then that stage job followed as one of its kind is, its keys under
`NAME:` (`bisect:step:3`, `explain:outcome`), and at the end the investigation's own
outcome (key `outcome`)."""

import asyncio
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import TypeVar

from kbisect.contract import (
    BACKPORT_WORKFLOW,
    EXPLAIN_WORKFLOW,
    INVESTIGATION_WORKFLOW,
    SWEEP_WORKFLOW,
    WORKFLOW,
)
from kbisect.doors.actions import kind_of, last_stages, off_loop
from kbisect.errors import InfraError, KbisectError, UserError
from kbisect.jobs.client import JobClient
from kbisect.reports import sweep_report
from kbisect.reports.backport_report import boot_line as backport_boot_line
from kbisect.reports.backport_report import outcome_lines as backport_outcome
from kbisect.reports.explain_report import outcome_lines as explain_outcome
from kbisect.reports.job_report import markdown
from kbisect.reports.lines import one_line, outcome_lines, step_line
from kbisect.reports.sru_note import sru_note
from kbisect.workflows.backport_types import BackportWord
from kbisect.workflows.bisect_types import BisectResult, Progress
from kbisect.workflows.investigation_types import Stage, StageState

PHASES = ("validating", "calibrating", "bisecting", "verifying")
POLL_SECONDS = 3.0


@dataclass(frozen=True)
class Post:
    # unique within a job: "phase:bisecting", "step:3", "outcome", "summary"; a stage's
    # of an investigation: "stage:bisect", "bisect:step:3", "bisect:summary"
    key: str
    text: str

    @property
    def is_summary(self) -> bool:
        """The report's summary (a bisection's, or a stage bisection's of an investigation)."""
        return self.key.rsplit(":", 1)[-1] == "summary"


def progress_posts(p: Progress) -> list[Post]:
    posts = [Post(f"step:{i}", step_line(i, s, p.metric)) for i, s in enumerate(p.steps, 1)]
    if p.status in PHASES:
        text = f"{p.status}: {p.message}" if p.message else p.status
        posts.insert(0, Post(f"phase:{p.status}", one_line(text)))
    return posts


def summary(result: BisectResult, job_id: str) -> str:
    """The report down to its table of tested commits (the whole is `report JOB`)."""
    text = markdown(result, job_id)
    return text.split("\n## Tested commits", 1)[0].rstrip()


def result_posts(result: BisectResult, job_id: str) -> list[Post]:
    steps = [
        Post(f"step:{i}", step_line(i, s, result.metric)) for i, s in enumerate(result.steps, 1)
    ]
    return [
        *steps,
        Post("outcome", "\n".join(outcome_lines(result))),
        Post("summary", summary(result, job_id)),
    ]


Send = Callable[[Post], Awaitable[None]]
PostNew = Callable[[list[Post]], Awaitable[None]]


def _poster(posted: Collection[str], send: Send) -> Callable[[list[Post]], Awaitable[None]]:
    seen = set(posted)

    async def post_new(posts: list[Post]) -> None:
        for post in posts:
            if post.key not in seen:
                await send(post)
                seen.add(post.key)

    return post_new


async def _until_ended(
    client: JobClient,
    job_id: str,
    now: Callable[[], Awaitable[list[Post]]],
    post_new: Callable[[list[Post]], Awaitable[None]],
    poll: float | None,
) -> None:
    """What the running job says (`now`), posted as it comes, until it ends."""
    while await client.running(job_id):
        try:
            await post_new(await now())
        except InfraError:  # no workflow worker answered this time: the next look
            pass
        await asyncio.sleep(POLL_SECONDS if poll is None else poll)


async def follow(
    client: JobClient,
    job_id: str,
    posted: Collection[str],
    send: Send,
    poll: float | None = None,
) -> BisectResult | None:
    """Post what is new until the job ends, then its outcome; `send` records each key. A
    backport or explain job is followed as one (its result is no bisection's: None); an
    investigation stage by stage (its last bisection's result, if it has one)."""
    post_new = _poster(posted, send)
    kind = await kind_of(client, job_id)
    if kind == INVESTIGATION_WORKFLOW:
        return await _follow_investigation(client, job_id, post_new, poll)
    return await _follow_job(client, job_id, kind, post_new, poll)


async def _follow_job(
    client: JobClient, job_id: str, kind: str, post_new: PostNew, poll: float | None
) -> BisectResult | None:
    if kind == BACKPORT_WORKFLOW:
        await _follow_backport(client, job_id, post_new, poll)
        return None
    if kind == EXPLAIN_WORKFLOW:
        await _follow_explain(client, job_id, post_new, poll)
        return None
    if kind == SWEEP_WORKFLOW:
        await _follow_sweep(client, job_id, post_new, poll)
        return None

    async def now() -> list[Post]:
        return progress_posts(await client.progress(job_id))

    await _until_ended(client, job_id, now, post_new, poll)
    try:
        result = await client.result(job_id)
    except KbisectError as exc:  # failed, cancelled or terminated
        await post_new([Post("outcome", f"{job_id} ended without a result: {exc}")])
        return None
    await post_new(await off_loop(result_posts, result, job_id))  # the report runs git
    return result


def _under(name: str, post_new: PostNew) -> PostNew:
    """A stage job's posts, their keys under the stage's name."""

    async def prefixed(posts: list[Post]) -> None:
        await post_new([Post(f"{name}:{p.key}", p.text) for p in posts])

    return prefixed


async def _stages(client: JobClient, job_id: str) -> tuple[bool, list[Stage]]:
    """Whether the investigation runs, and its stages so far (an ended one's from its
    result; a failed or cancelled one's from its last progress, if a worker says)."""
    if await client.running(job_id):
        return True, (await client.investigation_progress(job_id)).stages
    try:
        return False, (await client.investigation_result(job_id)).stages
    except UserError:
        return False, await last_stages(client, job_id)


async def _started(client: JobClient, investigation: str, stage: Stage, poll: float) -> bool:
    """Whether the stage job is there to follow: the investigation names a stage a moment
    before the server has its job; one that never came (or is gone) is not followed."""
    while await client.status_of(stage.job) is None:
        if not await client.running(investigation):
            return await client.status_of(stage.job) is not None
        await asyncio.sleep(poll)
    return True


async def _follow_investigation(
    client: JobClient, job_id: str, post_new: PostNew, poll: float | None
) -> BisectResult | None:
    """Each stage as the investigation starts it, in order: its post, then its job
    followed to its answer; then how the investigation ended. Its last bisection's
    result, for the door's plot (None: no bisection gave one)."""
    wait = POLL_SECONDS if poll is None else poll
    followed: set[str] = set()
    last: BisectResult | None = None
    while True:
        try:
            running, stages = await _stages(client, job_id)
        except InfraError:  # no workflow worker answered this time: the next look
            await asyncio.sleep(wait)
            continue
        new = [s for s in stages if s.name not in followed]
        for stage in new:
            if not stage.job:  # a stage that failed before its job (no backport change)
                if stage.state == StageState.RUNNING:
                    break
                await post_new([Post(f"stage:{stage.name}", one_line(_no_job(stage)))])
                followed.add(stage.name)
                continue
            followed.add(stage.name)
            await post_new([Post(f"stage:{stage.name}", f"{stage.name}: job {stage.job}")])
            if not await _started(client, job_id, stage, wait):
                continue
            got = await _follow_job(
                client, stage.job, stage.kind, _under(stage.name, post_new), poll
            )
            if stage.kind == WORKFLOW and got is not None:
                last = got
        if not running:
            break
        if not new:
            await asyncio.sleep(wait)
    await post_new([await _investigation_outcome(client, job_id)])
    return last


def _no_job(stage: Stage) -> str:
    return f"{stage.name}: {stage.state}" + (f": {stage.line}" if stage.line else "")


async def _investigation_outcome(client: JobClient, job_id: str) -> Post:
    """How the investigation ended: its status and message (a refused check's reason), or
    why it has no result."""
    try:
        r = await client.investigation_result(job_id)
    except KbisectError as exc:  # failed, cancelled or terminated
        return Post("outcome", one_line(f"{job_id} ended without a result: {exc}"))
    if r.status == "refused":
        return Post("outcome", one_line(f"{job_id} stopped before bisecting: {r.message}"))
    return Post("outcome", one_line(f"{job_id} {r.status}: {r.message}"))


T = TypeVar("T")


async def _ended_result(
    fetch: Callable[[str], Awaitable[T]],
    job_id: str,
    post_new: Callable[[list[Post]], Awaitable[None]],
) -> T | None:
    """An ended stage job's result; None, said in its outcome post, when it has none."""
    try:
        return await fetch(job_id)
    except KbisectError as exc:
        await post_new([Post("outcome", f"{job_id} ended without a result: {exc}")])
        return None


async def _follow_explain(
    client: JobClient,
    job_id: str,
    post_new: Callable[[list[Post]], Awaitable[None]],
    poll: float | None,
) -> None:
    """An explain job's phases and boots, then its answer (the flame graph is the
    command's: 'explain JOB' again)."""

    async def now() -> list[Post]:
        p = await client.explain_progress(job_id)
        text = f"{p.status}: {p.message}" if p.message else p.status
        posts = [Post(f"phase:{p.status}", one_line(text))]
        return posts + [Post(f"boot:{n}", one_line(line)) for n, line in enumerate(p.boots)]

    await _until_ended(client, job_id, now, post_new, poll)
    result = await _ended_result(client.explain_result, job_id, post_new)
    if result is not None:
        await post_new([Post("outcome", "\n".join(explain_outcome(result)))])


async def _follow_backport(
    client: JobClient,
    job_id: str,
    post_new: Callable[[list[Post]], Awaitable[None]],
    poll: float | None,
) -> None:
    """A backport job's phases and boots, then its outcome and, verified, the SRU note
    with the target's before and after."""

    async def now() -> list[Post]:
        p = await client.backport_progress(job_id)
        posts = [Post(f"phase:{p.status}", one_line(f"{p.status}: {p.message}"))]
        return posts + [Post(f"boot:{n}", backport_boot_line(p, n)) for n in range(len(p.boots))]

    await _until_ended(client, job_id, now, post_new, poll)
    result = await _ended_result(client.backport_result, job_id, post_new)
    if result is None:
        return
    await post_new([Post("outcome", "\n".join(backport_outcome(result)))])
    if result.word == BackportWord.VERIFIED and result.job:  # the outcome stands without it
        try:
            bisection = await client.result(result.job)
            note = await off_loop(sru_note, bisection, result.job, backport=result)
        except KbisectError as exc:
            note = f"no SRU note: {exc}"
        await post_new([Post("sru", note)])


async def _follow_sweep(
    client: JobClient,
    job_id: str,
    post_new: Callable[[list[Post]], Awaitable[None]],
    poll: float | None,
) -> None:
    """A sweep's phases (an investigation's cross-tree check), then each pair's line and
    its summary."""

    async def now() -> list[Post]:
        p = await client.sweep_progress(job_id)
        text = f"{p.status}: {p.message}" if p.message else p.status
        return [Post(f"phase:{p.status}", one_line(text))]

    await _until_ended(client, job_id, now, post_new, poll)
    result = await _ended_result(client.sweep_result, job_id, post_new)
    if result is not None:
        lines = [sweep_report.pair_line(result, p) for p in result.pairs]
        lines.append(sweep_report.summary_line(result))
        await post_new([Post("outcome", "\n".join(lines))])
