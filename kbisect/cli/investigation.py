"""Following an investigation (`kbisect bisect`, `kbisect watch INV`): each stage job in
turn, shown as its own command shows it, then the chain's end. Ctrl-C stops the watching,
not the chain: it runs in the service, and `kbisect watch` picks it up where it is."""

import argparse
import asyncio

from kbisect.cli.job_service import POLL_SECONDS, follow_result
from kbisect.cli.output import note, out
from kbisect.contract import (
    BACKPORT_WORKFLOW,
    EXPLAIN_WORKFLOW,
    SWEEP_WORKFLOW,
    WORKFLOW,
    strict_json,
)
from kbisect.errors import InfraError, UserError
from kbisect.jobs.client import JobClient
from kbisect.reports import investigation_report, sweep_report
from kbisect.reports.investigation_report import Answers
from kbisect.reports.job_report import to_json
from kbisect.workflows.investigation_types import NO_CHANGE, Stage, StageName

STOPPED = 130  # a follower's code when Ctrl-C stopped the watching


async def _follow_stage(client: JobClient, stage: Stage, args: argparse.Namespace) -> int:
    if stage.kind == WORKFLOW:
        return (await follow_result(client, stage.job, False))[0]
    if stage.kind == SWEEP_WORKFLOW:
        from kbisect.cli.sweep import follow_sweep

        return (await follow_sweep(client, stage.job, args))[0]
    if stage.kind == EXPLAIN_WORKFLOW:
        from kbisect.cli.explain import follow_explain

        return await follow_explain(client, stage.job, args)
    if stage.kind == BACKPORT_WORKFLOW:
        from kbisect.cli.backport import follow_backport

        return await follow_backport(client, stage.job, args)
    return 0


async def _stages(client: JobClient, job_id: str) -> tuple[bool, list[Stage]]:
    """Whether the investigation runs, and its stages so far."""
    if await client.running(job_id):
        try:
            return True, (await client.investigation_progress(job_id)).stages
        except InfraError:  # no workflow worker answered: one that polls must be there
            await client.require_workers(await client.job_queues(job_id), job_id)
            return True, []
    try:
        return False, (await client.investigation_result(job_id)).stages
    except UserError:  # it failed or was cancelled: its last stage says why, if any
        return False, []


async def follow_investigation(client: JobClient, job_id: str, args: argparse.Namespace) -> int:
    """Each stage as it starts, followed to its answer; then how the chain ended. With
    --json: the stages' lines on stderr, and at the end the bisection's answer as JSON (as
    `kbisect report BISECTION --json`) with the whole chain under "investigation"."""
    followed: set[str] = set()
    try:
        while True:
            running, stages = await _stages(client, job_id)
            new = [s for s in stages if s.job and s.job not in followed]
            for stage in new:
                if await client.status_of(stage.job) is None:
                    break  # listed a moment before its job starts: the next look
                followed.add(stage.job)
                note(f"{stage.name}: job {stage.job}")
                if args.json:
                    continue
                try:
                    if await _follow_stage(client, stage, args) == STOPPED:
                        note(f"the investigation goes on too: kbisect watch {job_id}")
                        return STOPPED
                except UserError as err:
                    if stage.kind == WORKFLOW:  # the chain ends with it, said once below
                        break  # (once the investigation has seen it fail too)
                    note(str(err))  # explain or backport: the chain goes on
            if not running:
                break
            await asyncio.sleep(POLL_SECONDS)
    except (KeyboardInterrupt, asyncio.CancelledError):
        note(f"stopped watching; the investigation goes on: kbisect watch {job_id}")
        return STOPPED
    return await _ended(client, job_id, args)


async def _ended(client: JobClient, job_id: str, args: argparse.Namespace) -> int:
    result = await client.investigation_result(job_id)  # a failed one: its one line
    if args.json:  # the bisection's answer as a bare bisection gives it, and the chain's
        whole = investigation_report.to_json(job_id, Answers(result))  # each stage's line
        shown: dict[str, object] = {}
        if result.bisection:
            shown = to_json(await client.result(result.bisection))
        elif (swept := result.stage(StageName.SWEEP)) is not None:  # sweep --bisect
            shown = sweep_report.to_json(await client.sweep_result(swept.job), swept.job)
        out(strict_json({**shown, "investigation": whole}, indent=2))
    elif result.status == "refused":
        note(f"stopped before bisecting: {result.message}")
    if not args.json:
        check, backport = result.stage(StageName.CHECK), result.stage(StageName.BACKPORT)
        if check is not None and backport is None and result.culprit:
            note(f"next: kbisect backport {result.bisection} --target DISTRO (or bisect --target)")
        note(f"the whole answer: kbisect report {job_id}")
    return 0 if result.status in ("found", "ambiguous", NO_CHANGE) else 1
