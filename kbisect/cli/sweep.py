"""`kbisect sweep`: a series of kernels measured side by side, and what changed between
neighbours; `--bisect` then bisects each change."""

import argparse
import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from kbisect.builders import kernel_list
from kbisect.cli import output
from kbisect.cli.jobs import POLL_SECONDS, _no_start, _with_client
from kbisect.cli.output import note, out
from kbisect.contract import (
    DEFAULT_MIN_EFFECT,
    DEFAULT_SWEEP_BOOTS,
    SweepProgress,
    SweepRequest,
    SweepResult,
)
from kbisect.errors import InfraError, UserError
from kbisect.infra.git import Git
from kbisect.jobs.client import WORKER_GRACE, JobClient
from kbisect.jobs.request import JobOptions, repository
from kbisect.reports import sweep_report
from kbisect.settings import Settings

Show = Callable[[SweepProgress], None]


def sweep_request(args: argparse.Namespace, settings: Settings) -> SweepRequest:
    """The series (revisions of a tree, resolved here, or prebuilt kernels as a kernel
    list) and the testcases, checked before a service or a job starts."""
    from kbisect.testcases import manifest as manifests
    from kbisect.testcases.tuning import check_tuning

    if args.kernels and (args.repo or args.tree or args.revs):
        raise UserError("--kernels is the whole series: drop --repo/--tree and the revisions")
    if not args.kernels and not args.revs:
        raise UserError("give the series: --repo DIR REV REV... or --kernels K1,K2,...")
    if args.kernels:
        specs = [spec for spec, _ in kernel_list.parse(args.kernels)]
        made = kernel_list.make(specs, settings)
        repo, commits, names = made.repo, made.commits, [kernel_list.subject(s) for s in specs]
    else:
        opts = JobOptions(good=[], bad="", testcase="", repo=args.repo, tree=args.tree)
        repo = repository(opts, settings)
        git = Git(repo)
        git.check_repo()
        commits, names = [git.resolve(r) for r in args.revs], list(args.revs)
        if len(commits) < 2:
            raise UserError("a sweep needs two kernels or more, oldest first")
    if args.boots < 3:
        raise UserError(f"--boots {args.boots}: give 3 or more (the gate's first look)")
    min_effect = DEFAULT_MIN_EFFECT if args.min_effect is None else args.min_effect / 100
    for name in args.testcase:
        check_tuning(manifests.load(name), args.metric, min_effect, args.boots, False)
    return SweepRequest(
        repo=str(repo),
        kernels=commits,
        names=names,
        testcases=list(args.testcase),
        metric=args.metric,
        profile=args.profile,
        boots=args.boots,
        min_effect=min_effect,
    )


def cmd_sweep(args: argparse.Namespace, settings: Settings) -> int:
    req = sweep_request(args, settings)

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        await client.require_workers(client.needs(), grace=WORKER_GRACE)
        job_id = await client.start_sweep(req)
        note(f"job {job_id}")
        note(f"Web UI: {client.job_url(job_id)}")
        if args.detach:
            out(job_id)
            return 0
        return await follow_sweep(client, job_id, args)

    return _with_client(settings, args, go)


async def follow_sweep(client: JobClient, job_id: str, args: argparse.Namespace) -> int:
    """Boots as they end (a bar on a terminal, a line each when piped), then the pairs."""
    try:
        if await client.running(job_id):
            await client.require_workers(await client.job_queues(job_id), job_id, WORKER_GRACE)
            if output.interactive():
                await _bar(client, job_id)
            else:
                await _poll(client, job_id, _lines())
    except (KeyboardInterrupt, asyncio.CancelledError):
        note(f"stopped watching; the sweep goes on: kbisect watch {job_id}")
        return 130
    except InfraError as exc:
        raise InfraError(f"{exc} (job {job_id} waits for it)") from exc
    result = await client.sweep_result(job_id)
    show_result(result, job_id, args)
    return 0


def show_result(result: SweepResult, job_id: str, args: argparse.Namespace) -> None:
    if getattr(args, "plot", None):
        from kbisect.reports.sweep_plot import plot_sweep

        note(f"plot: {plot_sweep(result, Path(args.plot))}")
    if args.json:
        out(json.dumps(sweep_report.to_json(result, job_id), indent=2))
    elif getattr(args, "markdown", False):
        out(sweep_report.markdown(result))
    else:
        for pair in result.pairs:
            out(sweep_report.pair_line(result, pair))
        out(sweep_report.summary_line(result))


def _lines() -> Show:
    said: dict[str, int | str] = {"status": "", "boots": 0}

    def show(p: SweepProgress) -> None:
        status = f"{p.status}: {p.message}" if p.message else p.status
        if status != said["status"]:
            said["status"] = status
            note(status)
        seen = int(said["boots"])
        for n, b in enumerate(p.boots[seen:], start=seen + 1):
            name = p.names[b.kernel] if b.kernel < len(p.names) else p.kernels[b.kernel]
            what = f"{b.value:.6g}" if b.value is not None else f"failed: {b.error}"
            note(f"boot {n}: {name} {b.testcase} {what}" + (f" on {b.host}" if b.host else ""))
        said["boots"] = len(p.boots)

    return show


async def _bar(client: JobClient, job_id: str) -> None:
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with RichProgress(*columns, TimeElapsedColumn(), console=output.stderr_console()) as bar:
        task = bar.add_task("validating", total=None)

        def show(p: SweepProgress) -> None:
            last = p.boots[-1] if p.boots else None
            text = p.status if last is None else f"{p.status}: last {p.names[last.kernel]}"
            bar.update(task, description=text[:60], completed=len(p.boots), total=p.planned or None)

        await _poll(client, job_id, show)


async def _poll(client: JobClient, job_id: str, show: Show) -> None:
    while await client.running(job_id):
        try:
            show(await client.sweep_progress(job_id))
        except InfraError:
            pass  # no workflow worker answered this time: nothing new
        await asyncio.sleep(POLL_SECONDS)


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    s = sub.add_parser(
        "sweep",
        help="measure a series of kernels side by side and say what changed between neighbours",
    )
    where = s.add_mutually_exclusive_group()
    where.add_argument("--repo", help="the kernel git repository the revisions are in (a path)")
    where.add_argument("--tree", help="a named tree instead of a path ('kbisect tree add')")
    s.add_argument("revs", nargs="*", metavar="REV", help="the series' revisions, oldest first")
    s.add_argument(
        "--kernels",
        metavar="K1,K2,...",
        help="the series as prebuilt kernels, oldest first: Debian linux-image-* package "
        "names, .deb files or vmlinuz files",
    )
    s.add_argument(
        "--testcase",
        action="append",
        required=True,
        help="a testcase name ('kbisect testcases'); repeat for several",
    )
    s.add_argument(
        "--metric",
        help="the metric each pair is judged on (default: each testcase's primary)",
    )
    s.add_argument(
        "--boots",
        type=int,
        default=DEFAULT_SWEEP_BOOTS,
        help=f"boots of each kernel and testcase at most ({DEFAULT_SWEEP_BOOTS}); fewer "
        "when every pair is decided sooner",
    )
    s.add_argument(
        "--min-effect",
        type=float,
        metavar="PCT",
        help="changes smaller than this percentage count as the same "
        f"({DEFAULT_MIN_EFFECT * 100:g}%%)",
    )
    s.add_argument("--profile", help="device profile: fast or ebs-gp2 (default: the testcase's)")
    s.add_argument("--plot", metavar="PNG", help="also write each metric across the series here")
    s.add_argument("--markdown", action="store_true", help="the pairs as a markdown table")
    s.add_argument("--json", action="store_true", help="the result as JSON on stdout")
    s.add_argument("--detach", action="store_true", help="print the job id and return")
    _no_start(s)
    s.set_defaults(func=cmd_sweep)
