"""`kbisect backport JOB --target REV`: the change a bisection found, taken to the kernel
that ships: already there?, the prerequisites it needs, and the target measured without
and with it."""

import argparse
import functools

from kbisect.cli.job_service import (
    job_or_by_hand,
    job_output_options,
    poll_stage,
    ran_before,
    stage_bar,
    stage_lines,
    start_stage,
    until_done,
    with_client,
)
from kbisect.cli.output import out
from kbisect.contract import DEFAULT_SWEEP_BOOTS, MAX_BOOTS, strict_json
from kbisect.errors import UserError
from kbisect.jobs import backport_job
from kbisect.jobs.client import JobClient
from kbisect.reports import backport_report
from kbisect.reports.backport_report import boot_line
from kbisect.settings import Settings
from kbisect.workflows.backport_types import BackportProgress, BackportRequest, BackportResult


def cmd_backport(args: argparse.Namespace, settings: Settings) -> int:
    if args.boots is not None and not 1 <= args.boots <= MAX_BOOTS:
        raise UserError(f"--boots {args.boots}: give 1 to {MAX_BOOTS} boots of each kernel")

    if args.target is None and args.tree is None:
        raise UserError("give --target REV (a revision of the job's repository) or --tree NAME")
    if args.tree is not None and args.job is None:
        raise UserError("--tree is for a bisection's backport: give its job id")
    if (args.job is None) == (args.change is None):
        raise UserError(
            "give a bisection's job id, or --repo DIR --change REV --testcase NAME (an "
            "upstream commit to try on --target)"
        )
    hand = _by_hand(args) if args.job is None else None

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        if hand is not None:
            req = hand
            job_id = backport_job.backport_id(f"backport-{req.change[:12]}", req)
        else:
            req = await backport_job.request_for(
                client, args.job, args.target or "", args.boots, args.with_followups, args.tree
            )
            job_id = backport_job.backport_id(args.job, req)
        if await ran_before(client, job_id, args):
            return await start_stage(client, job_id, args, None, follow_backport)
        what = "revert" if req.revert else "backport"
        about = f": {what} {req.change[:12]} to {req.shown_target} ({req.target[:12]})"
        start = functools.partial(client.start_backport, req, job_id)
        return await start_stage(client, job_id, args, start, follow_backport, about)

    return with_client(settings, args, go)


def _by_hand(args: argparse.Namespace) -> BackportRequest:
    """An upstream commit and a target given by hand, resolved here: a clear error before
    any service."""
    from pathlib import Path

    from kbisect.infra.git import Git
    from kbisect.testcases import manifest as manifests

    if not args.repo or not args.testcase:
        raise UserError("--change needs --repo DIR and --testcase NAME too")
    git = Git(Path(args.repo).resolve())
    git.check_repo()
    change, target = git.resolve(args.change), git.resolve(args.target)
    manifests.load(args.testcase)  # a missing or malformed testcase says so now
    return BackportRequest(
        repo=str(git.repo), change=change, target=target, testcase=args.testcase,
        target_name=args.target, boots=args.boots or DEFAULT_SWEEP_BOOTS,
        with_followups=args.with_followups,
    )  # fmt: skip


async def follow_backport(client: JobClient, job_id: str, args: argparse.Namespace) -> int:
    """Progress as it comes (a bar on a terminal, a line an event when piped), then the
    answer on stdout."""
    if not await until_done(
        client, job_id, "backport job",
        lambda: stage_bar(client, job_id, client.backport_progress, _state),
        lambda: poll_stage(client, job_id, client.backport_progress, stage_lines(_boots)),
    ):  # fmt: skip
        return 130
    show_result(await client.backport_result(job_id), job_id, args.json)
    return 0


def show_result(result: BackportResult, job_id: str, as_json: bool) -> None:
    if as_json:
        out(strict_json(backport_report.to_json(result, job_id), indent=2))
        return
    for line in backport_report.outcome_lines(result):
        out(line)


def _boots(p: BackportProgress) -> list[str]:
    return [boot_line(p, n) for n in range(len(p.boots))]


def _state(p: BackportProgress) -> tuple[str, int, int]:
    text = boot_line(p, len(p.boots) - 1) if p.boots else p.status
    return text, len(p.boots), p.planned


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    b = sub.add_parser(
        "backport",
        help="take a bisection's fix to the kernel you ship: already there?, its "
        "prerequisites, and that kernel measured without and with it",
    )
    job_or_by_hand(b, "the change")
    b.add_argument(
        "--change", metavar="REV", help="by hand: the upstream commit to take to --target"
    )
    b.add_argument("--testcase", help="by hand: the testcase that shows it ('kbisect testcases')")
    b.add_argument(
        "--target",
        metavar="REV",
        help="the kernel that ships: a revision of the job's repository (a distro "
        "branch's tip, a tag), or of --tree",
    )
    b.add_argument(
        "--tree",
        metavar="NAME",
        help="the target is in this named tree ('kbisect tree add'; --target: a revision "
        "there, its branch head by default)",
    )
    b.add_argument(
        "--boots",
        type=int,
        help="boots of each kernel at most (the sweep's default); fewer when the pair "
        "decides sooner",
    )
    b.add_argument(
        "--with-followups",
        action="store_true",
        help="also take the commits whose Fixes: tag names the change or a prerequisite "
        "(listed either way)",
    )
    b.add_argument("--again", action="store_true", help="plan and boot anew though asked before")
    job_output_options(b)
    b.set_defaults(func=cmd_backport)
