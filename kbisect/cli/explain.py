"""`kbisect explain`: why a bisection's culprit changed the metric (or a pair given by hand):
the culprit and its parent booted in turn under statistics and a CPU profile, and what
moved beyond its noise."""

import argparse
import functools
import uuid
from pathlib import Path

from kbisect.cli.job_service import (
    PROFILE_HELP,
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
from kbisect.cli.output import note, out
from kbisect.cli.output_files import checked_output, writing
from kbisect.contract import (
    EXPLAIN_ALIGNMENT,
    EXPLAIN_BOOTS_EXACT,
    EXPLAIN_BOOTS_TIMING,
    EXPLAIN_MAX_BOOTS,
    strict_json,
)
from kbisect.errors import UserError
from kbisect.jobs import explain_job
from kbisect.jobs.client import JobClient
from kbisect.reports import explain_report
from kbisect.settings import Settings
from kbisect.workflows.explain_types import ExplainProgress, ExplainRequest, ExplainResult


def _by_hand(args: argparse.Namespace) -> ExplainRequest:
    """A pair given by hand, resolved here: a clear error before any service."""
    from kbisect.infra.git import Git
    from kbisect.testcases import manifest as manifests

    if not args.repo or not args.culprit or not args.testcase:
        raise UserError(
            "give a bisection's job id, or --repo DIR --culprit REV --testcase NAME "
            "(and --parent REV: the culprit's first parent by default)"
        )
    git = Git(Path(args.repo).resolve())
    git.check_repo()
    culprit = git.resolve(args.culprit)
    parent = git.resolve(args.parent or f"{culprit}^")
    manifests.load(args.testcase)  # a missing or malformed testcase says so now
    return ExplainRequest(
        repo=str(git.repo), parent=parent, culprit=culprit, testcase=args.testcase,
        metric=args.metric, profile=args.profile, boots=args.boots or 0,
        alignment=args.alignment,
    )  # fmt: skip


def cmd_explain(args: argparse.Namespace, settings: Settings) -> int:
    checked_output(args.flame, "--flame")
    if args.boots is not None and not 2 <= args.boots <= EXPLAIN_MAX_BOOTS:
        raise UserError(f"--boots {args.boots}: give 2 to {EXPLAIN_MAX_BOOTS} boots of each side")
    if args.job and (args.culprit or args.parent):
        raise UserError("give a job id, or --culprit (and --parent), not both")
    if args.job is None:
        hand = _by_hand(args)

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        if args.job is None:
            explain_id, req = f"explain-{uuid.uuid4().hex[:8]}", hand
        else:
            explain_id = explain_job.explain_id(args.job)
            if await ran_before(client, explain_id, args):
                if not args.alignment or not await explain_job.lacks_alignment(client, args.job):
                    return await start_stage(client, explain_id, args, None, follow_explain)
                note("it had no alignment check: explaining again with one")
            req = await explain_job.request_for(
                client, args.job, args.metric, args.profile, args.boots or 0, args.alignment
            )
        start = functools.partial(client.start_explain, req, explain_id)
        return await start_stage(client, explain_id, args, start, follow_explain)

    return with_client(settings, args, go)


async def follow_explain(client: JobClient, explain_id: str, args: argparse.Namespace) -> int:
    """Boots as they end (a bar on a terminal, a line each when piped), then the answer."""
    if not await until_done(
        client, explain_id, "explain job",
        lambda: stage_bar(client, explain_id, client.explain_progress, _state),
        lambda: poll_stage(client, explain_id, client.explain_progress, stage_lines(_boots)),
    ):  # fmt: skip
        return 130
    result = await client.explain_result(explain_id)
    show_result(result, explain_id, args)
    return 0


def show_result(result: ExplainResult, explain_id: str, args: argparse.Namespace) -> None:
    """The answer on stdout; `--flame` (explain's own option: watch, report and bisect have
    none) draws the flame graph too."""
    if getattr(args, "flame", None):
        with writing(Path(args.flame), "--flame"):
            note(f"flame graph: {explain_report.write_flame(result, Path(args.flame))}")
    if args.json:
        out(strict_json(explain_report.to_json(result, explain_id), indent=2))
        return
    for line in explain_report.outcome_lines(result):
        out(line)


def _boots(p: ExplainProgress) -> list[str]:
    return p.boots


def _state(p: ExplainProgress) -> tuple[str, int, int]:
    return (f"{p.status}: {p.boots[-1]}" if p.boots else p.status), len(p.boots), p.planned


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    e = sub.add_parser(
        "explain",
        help="why a culprit changed the metric: its statistics and CPU profile against its "
        "parent's",
    )
    job_or_by_hand(e, "the pair")
    e.add_argument("--culprit", metavar="REV", help="by hand: the commit to explain")
    e.add_argument(
        "--parent", metavar="REV", help="by hand: what to compare it with (its first parent)"
    )
    e.add_argument("--testcase", help="by hand: the testcase ('kbisect testcases')")
    e.add_argument("--metric", help="the metric whose change to explain (the job's)")
    e.add_argument("--profile", help=PROFILE_HELP)
    e.add_argument(
        "--boots",
        type=int,
        help=f"explain boots of each side, 2 to {EXPLAIN_MAX_BOOTS} ({EXPLAIN_BOOTS_TIMING} for "
        f"a timing, {EXPLAIN_BOOTS_EXACT} for a counter); more find smaller changes",
    )
    e.add_argument(
        "--again", action="store_true", help="boot anew though the job was explained before"
    )
    e.add_argument(
        "--alignment",
        action="store_true",
        help=f"also rebuild the pair with {EXPLAIN_ALIGNMENT}-byte aligned functions and "
        "measure again: does the change remain, or was it code layout?",
    )
    e.add_argument(
        "--flame", metavar="SVG", help="also write a differential flame graph of the CPU samples"
    )
    job_output_options(e)
    e.set_defaults(func=cmd_explain)
