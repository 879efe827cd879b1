"""What every command that talks to jobs shares: a client to the service (starting the
local one when nothing answers), following a bisection to its end, and the options that
say how (--detach, --no-start, --json). The job commands (kbisect.cli.jobs), sweeps and
series watches import it; it imports none of them."""

import argparse
import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from temporalio.client import WorkflowExecutionStatus

from kbisect.cli import output
from kbisect.cli.output import EventLines, note, out, progress_view
from kbisect.contract import strict_json
from kbisect.errors import InfraError, KbisectError
from kbisect.jobs.client import WORKER_GRACE, JobClient
from kbisect.reports.job_report import to_json
from kbisect.reports.lines import outcome_lines
from kbisect.settings import Settings
from kbisect.workflows.bisect_types import BisectResult, Progress

POLL_SECONDS = 2.0  # how often a watch asks the server
# With nothing new for this long, a watch checks again that workers serve the job.
STALL_SECONDS = 120.0
Handler = Callable[[JobClient, argparse.Namespace], Coroutine[Any, Any, int]]
StageProgress = TypeVar("StageProgress")


class Staged(Protocol):
    status: str
    message: str


S = TypeVar("S", bound=Staged)
ENDED = ("done", "failed")


def stage_lines(events: Callable[[S], list[str]]) -> Callable[[S], None]:
    """A stage job's progress as plain lines on stderr: its status when it changes, and each
    new event (a boot) once; the last status after the events that led to it."""
    last, seen = "", 0

    def show(p: S) -> None:
        nonlocal last, seen
        status = f"{p.status}: {p.message}" if p.message else p.status
        new = events(p)[seen:]
        seen += len(new)
        changed, last = status != last, status
        ended = p.status in ENDED
        for line in [*([status] if changed and not ended else []), *new]:
            note(line)
        if changed and ended:
            note(status)

    return show


PROFILE_HELP = "device profile: fast or ebs-gp2 (default: the testcase's)"
STARTED_GRACE = 60.0  # a service just started needs a moment before its workers poll


def with_client(settings: Settings, args: argparse.Namespace, go: Handler) -> int:
    """Run `go` with a client. With a local address and no server there, the local service
    starts first (unless --no-start): the embedded default, so a job's commands work after
    a reboot or 'kbisect down', and its unfinished jobs go on."""
    started = False
    if not args.no_start:
        from kbisect.jobs.service import ensure_local_service

        log = ensure_local_service(settings, getattr(args, "parallel", 1))
        if log is not None:
            note(
                f"started the local kbisect service in the background (log {log}; "
                "stop it with 'kbisect down')"
            )
        started = log is not None
    if not started:
        from kbisect.jobs.service import stale_service

        if (stale := stale_service(settings)) is not None:
            note(
                f"warning: the local kbisect service (pid {stale.pid}) started before "
                "kbisect's code changed here, and a job it starts now may hang: once its "
                "jobs are done, 'kbisect down' (its unfinished jobs go on when it is back)"
            )

    async def run() -> int:
        client = await JobClient.connect(settings)
        if started:
            await client.require_workers(client.needs(), grace=STARTED_GRACE)
        return await go(client, args)

    return asyncio.run(run())


async def until_done(
    client: JobClient,
    job_id: str,
    what: str,
    terminal: Callable[[], Awaitable[None]],
    piped: Callable[[], Awaitable[None]],
) -> bool:
    """Show a job (`terminal` on a terminal, `piped` else) until it ends. False: Ctrl-C
    stopped the watching, not the job (said so). Stops with an error when no worker
    serves the job: at the start, and after a while without news."""
    try:
        if await client.running(job_id):
            await client.require_workers(await client.job_queues(job_id), job_id, WORKER_GRACE)
            await (terminal() if output.interactive() else piped())
    except (KeyboardInterrupt, asyncio.CancelledError):
        note(f"stopped watching; the {what} goes on: kbisect watch {job_id}")
        return False
    except InfraError as exc:
        raise InfraError(f"{exc} (job {job_id} waits for it)") from exc
    return True


async def follow_result(
    client: JobClient, job_id: str, as_json: bool
) -> tuple[int, BisectResult | None]:
    """Progress until the job ends, then its outcome (see until_done)."""
    events = EventLines()

    async def live() -> None:
        console = output.stderr_console()
        clock = output.BuildClock()
        with Live(console=console, refresh_per_second=2, transient=False) as view:
            await _poll(client, job_id, lambda p: view.update(progress_view(p, clock)))

    followed = []  # the job ran while watched (a job watched once ended has no news)

    async def lines() -> None:
        followed.append(True)
        await _poll(client, job_id, events.update)

    if not await until_done(client, job_id, "job", live, lines):
        return 130, None
    result = await client.result(job_id)
    if not output.interactive():  # what ended between two looks, or all of it
        if followed:
            with contextlib.suppress(KbisectError):  # its last boots (the verification's)
                events.update(await client.progress(job_id))
        events.finish(result.steps, result.metric)
        events.end(result.status, result.message)
    if as_json:
        out(strict_json(to_json(result), indent=2))
    else:
        for line in outcome_lines(result):
            out(line)
    return (0 if result.status in ("found", "ambiguous") else 1), result


async def _poll(client: JobClient, job_id: str, show: Callable[[Progress], None]) -> None:
    last: Progress | None = None
    changed = time.monotonic()
    while await client.running(job_id):
        progress: Progress | None
        try:
            progress = await client.progress(job_id)
        except InfraError:
            progress = last  # no workflow worker answered: nothing new
        if progress is not None and progress != last:
            show(progress)
            last, changed = progress, time.monotonic()
        elif time.monotonic() - changed > STALL_SECONDS:
            await client.require_workers(await client.job_queues(job_id), job_id)
            changed = time.monotonic()
        await asyncio.sleep(POLL_SECONDS)


async def poll_stage(
    client: JobClient,
    job_id: str,
    look: Callable[[str], Awaitable[StageProgress]],
    show: Callable[[StageProgress], None],
) -> None:
    """A sweep's or an explain job's progress (`look`), until it ends and once after."""
    running = True
    while running:
        running = await client.running(job_id)
        try:
            show(await look(job_id))
        except InfraError:
            pass  # no workflow worker answered this time: nothing new
        if running:
            await asyncio.sleep(POLL_SECONDS)


async def stage_bar(
    client: JobClient,
    job_id: str,
    look: Callable[[str], Awaitable[StageProgress]],
    state: Callable[[StageProgress], tuple[str, int, int]],
) -> None:
    """poll_stage() as a bar on stderr; `state`: what it says, boots done and planned."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with RichProgress(*columns, TimeElapsedColumn(), console=output.stderr_console()) as bar:
        task = bar.add_task("validating", total=None)

        def show(p: StageProgress) -> None:
            text, done, planned = state(p)
            bar.update(task, description=text[:60], completed=done, total=planned or None)

        await poll_stage(client, job_id, look, show)


# A stage job that runs, or ran to an answer, is followed, not started again (a failed
# one is)
RAN = (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.COMPLETED)
Follow = Callable[[JobClient, str, argparse.Namespace], Awaitable[int]]


async def ran_before(client: JobClient, job_id: str, args: argparse.Namespace) -> bool:
    """Whether a stage job of this id runs or has an answer (and --again was not given)."""
    if args.again or await client.status_of(job_id) not in RAN:
        return False
    note(f"job {job_id} (asked before; --again runs it anew)")
    return True


async def start_stage(
    client: JobClient,
    job_id: str,
    args: argparse.Namespace,
    start: Callable[[], Awaitable[object]] | None,
    follow: Follow,
    about: str = "",
) -> int:
    """A stage job (explain, backport) started (`start`; None: it ran before), then, as
    `bisect` does, its id alone with --detach, else followed to its answer."""
    if start is not None:
        await client.require_workers(client.needs(), grace=WORKER_GRACE)
        await start()
        announce(client, job_id, about)
    if args.detach:
        out(job_id)
        return 0
    return await follow(client, job_id, args)


def announce(client: JobClient, job_id: str, about: str = "") -> None:
    """A started job's id and Web UI link, on stderr."""
    note(f"job {job_id}{about}")
    note(f"Web UI: {client.job_url(job_id)}")


async def started(client: JobClient, job_id: str, args: argparse.Namespace, follow: Follow) -> int:
    """A job just started: announced, then its id alone with --detach, else followed."""
    announce(client, job_id)
    if args.detach:
        out(job_id)
        return 0
    return await follow(client, job_id, args)


def job_or_by_hand(p: argparse.ArgumentParser, what: str) -> None:
    """A stage that follows a bisection takes its job id, or `what` and --repo by hand."""
    p.add_argument("job", nargs="?", help=f"a finished bisection's job id (or give {what} by hand)")
    p.add_argument("--repo", help="by hand: the kernel git repository (a path)")


def job_output_options(p: argparse.ArgumentParser) -> None:
    """What a command that starts a job takes: --detach, --no-start, --json."""
    p.add_argument("--detach", action="store_true", help="print the job id and return")
    no_start(p)
    p.add_argument("--json", action="store_true", help="the result as JSON on stdout")


def no_start(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-start",
        action="store_true",
        help="never start the local service (by default it starts in the background when "
        "the address is local and nothing answers there)",
    )
