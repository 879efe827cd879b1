"""`kbisect sweep`: a series of kernels measured side by side, and what changed between
neighbours; `--bisect` then bisects each change."""

import argparse
from collections.abc import Awaitable
from pathlib import Path

from kbisect.builders import kernel_list
from kbisect.builders.patched_commit import apply_patches, read_patches
from kbisect.cli.job_service import (
    PROFILE_HELP,
    job_output_options,
    poll_stage,
    stage_bar,
    stage_lines,
    started,
    until_done,
    with_client,
)
from kbisect.cli.output import note, out
from kbisect.cli.output_files import checked_output, writing
from kbisect.contract import (
    DEFAULT_MIN_EFFECT,
    DEFAULT_SWEEP_BOOTS,
    DEFAULT_SWEEP_MAX_BOOTS,
    strict_json,
)
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.jobs import sweep_bisect
from kbisect.jobs.client import WORKER_GRACE, JobClient
from kbisect.jobs.request import JobOptions, repository
from kbisect.jobs.sweep_bisect import Sources
from kbisect.reports import sweep_report
from kbisect.settings import Settings
from kbisect.workflows.investigation_types import InvestigationRequest
from kbisect.workflows.sweep_types import PairWord, SweepProgress, SweepRequest, SweepResult


def sweep_request(
    args: argparse.Namespace, settings: Settings
) -> tuple[SweepRequest, Sources | None]:
    """The series (revisions of a tree, resolved here, or prebuilt kernels as a kernel
    list) and the testcases, checked before a service or a job starts; and where each
    kernel's source is, for --bisect (None: prebuilt kernels without K=REV)."""
    if args.kernels and args.revs:
        raise UserError("--kernels is the whole series: drop the revisions")
    if args.kernels and args.patch:
        raise UserError("--patch applies to a revision's source: it does not go with --kernels")
    if not args.kernels and not args.revs:
        raise UserError("give the series: --repo DIR REV REV... or --kernels K1,K2,...")
    items = kernel_list.parse(args.kernels) if args.kernels else []
    from kbisect.testcases.tuning import check_sweep

    check_sweep(None, len(items) or len(args.revs))  # before any revision is resolved
    min_effect = checked_measure(args)
    opts = JobOptions(good=[], bad="", testcase="", repo=args.repo, tree=args.tree)
    sources = None
    if args.kernels:
        revs = [rev for _, rev in items if rev]
        if revs and (len(revs) != len(items) or not (args.repo or args.tree)):
            raise UserError("--kernels K=REV: map every kernel to its revision, and give --repo")
        if (args.repo or args.tree) and not revs:
            raise UserError("--repo with --kernels needs K=REV for each kernel (its revision)")
        if revs:
            source = repository(opts, settings)
            sources = Sources(str(source), [Git(source).resolve(r) for r in revs])
        made = kernel_list.make([spec for spec, _ in items], settings)
        repo, commits = made.repo, made.commits
        names = [kernel_list.subject(spec) for spec, _ in items]
    else:
        repo = repository(opts, settings)
        git = Git(repo)
        git.check_repo()
        commits, names = [git.resolve(r) for r in args.revs], list(args.revs)
        for n, files in patches_by_kernel(args.patch, len(commits)).items():
            patched = apply_patches(git, commits[n], read_patches(files, f"--patch {n + 1}="))
            commits[n] = patched.tip
            names[n] += " + " + ", ".join(p.source for p in patched.patches)
        sources = Sources(str(repo), commits)
    if args.bisect and sources is None:
        raise UserError(
            "--bisect over prebuilt kernels needs their source revisions: "
            "--kernels K1=REV1,K2=REV2,... and --repo"
        )
    req = SweepRequest(
        repo=str(repo),
        kernels=commits,
        names=names,
        testcases=list(args.testcase),
        metric=args.metric,
        profile=args.profile,
        boots=args.boots,
        min_effect=min_effect,
        trace=args.trace,
        max_boots=args.max_boots,
    )
    return req, sources


def patches_by_kernel(given: list[str], kernels: int) -> dict[int, list[str]]:
    """`--patch N=FILE` options as each kernel's (0-based) patch files, in order given."""
    found: dict[int, list[str]] = {}
    for text in given:
        n, sep, path = text.partition("=")
        if not (sep and n.isdecimal() and path):
            raise UserError(f"--patch {text}: give N=FILE, N a kernel of the series from 1")
        if not 1 <= int(n) <= kernels:
            raise UserError(f"--patch {text}: the series has {kernels} kernels, counted from 1")
        found.setdefault(int(n) - 1, []).append(path)
    return found


def checked_measure(args: argparse.Namespace) -> float:
    """The testcases, metric and budget checked (measure_options); the least effect as a
    fraction."""
    from kbisect.testcases import manifest as manifests
    from kbisect.testcases.tuning import check_boots, check_sweep, check_tuning

    check_boots(args.boots, "--boots")
    if args.max_boots is None:
        args.max_boots = max(args.boots, DEFAULT_SWEEP_MAX_BOOTS)
    check_boots(args.max_boots, "--max-boots")
    if args.max_boots < args.boots:
        raise UserError(f"--max-boots {args.max_boots} is under --boots {args.boots}: raise it")
    min_effect: float = DEFAULT_MIN_EFFECT if args.min_effect is None else args.min_effect / 100
    for name in args.testcase:
        manifest = manifests.load(name)
        check_sweep(manifest)
        check_tuning(manifest, args.metric, min_effect, args.boots, args.trace)
    return min_effect


def cmd_sweep(args: argparse.Namespace, settings: Settings) -> int:
    checked_output(args.plot, "--plot")  # before the sweep, not after it
    req, sources = sweep_request(args, settings)
    # --bisect: one investigation, the sweep then a bisection of each change, in the service
    chain = sweep_bisect.plan(req, sources, settings) if args.bisect and sources else None

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        await client.require_workers(client.needs(), grace=WORKER_GRACE)
        if chain is None:
            return await started(client, await client.start_sweep(req), args, _followed)
        from kbisect.cli.investigation import follow_investigation

        job_id = await client.start_investigation(InvestigationRequest(sweep=chain))
        return await started(client, job_id, args, follow_investigation)

    return with_client(settings, args, go)


async def _followed(client: JobClient, job_id: str, args: argparse.Namespace) -> int:
    return (await follow_sweep(client, job_id, args))[0]


async def follow_sweep(
    client: JobClient, job_id: str, args: argparse.Namespace
) -> tuple[int, SweepResult | None]:
    """Boots as they end (a bar on a terminal, a line each when piped), then the pairs."""
    result = await watch_sweep(client, job_id)
    if result is None:
        return 130, None
    show_result(result, job_id, args)
    undecided = any(p.verdict == PairWord.CANNOT_TELL for p in result.pairs)
    return int(undecided), result  # as a bisection that cannot decide


async def watch_sweep(client: JobClient, job_id: str) -> SweepResult | None:
    """The sweep's boots as they end, on stderr; its result (None: Ctrl-C stopped the
    watching)."""

    def bar() -> Awaitable[None]:
        return stage_bar(client, job_id, client.sweep_progress, _state)

    def lines() -> Awaitable[None]:
        return poll_stage(client, job_id, client.sweep_progress, stage_lines(_boot_lines))

    if not await until_done(client, job_id, "sweep", bar, lines):
        return None
    return await client.sweep_result(job_id)


def show_result(result: SweepResult, job_id: str, args: argparse.Namespace) -> None:
    if getattr(args, "plot", None):
        from kbisect.reports.sweep_plot import plot_sweep

        with writing(Path(args.plot), "--plot"):
            note(f"plot: {plot_sweep(result, Path(args.plot))}")
    if args.json:
        out(strict_json(sweep_report.to_json(result, job_id), indent=2))
    elif getattr(args, "markdown", False):
        out(sweep_report.markdown(result))
    else:
        for pair in result.pairs:
            out(sweep_report.pair_line(result, pair))
            for line in sweep_report.trace_lines(result, pair):
                out(f"  trace {line}")
        out(sweep_report.summary_line(result))
        for line in sweep_report.noise_lines(result):
            note(line)


def _boot_lines(p: SweepProgress) -> list[str]:
    lines = []
    for n, b in enumerate(p.boots, start=1):
        name = sweep_report.entry_name(p.names or p.kernels, b.kernel)
        what = sweep_report.boot_word(b)
        lines.append(f"boot {n}: {name} {b.testcase} {what}" + (f" on {b.host}" if b.host else ""))
    return lines


def _state(p: SweepProgress) -> tuple[str, int, int]:
    last = p.boots[-1] if p.boots else None
    where = sweep_report.entry_name(p.names or p.kernels, last.kernel) if last else ""
    # boots past --boots for an undecided pair go beyond the plan
    return (
        (f"{p.status}: last {where}" if where else p.status),
        len(p.boots),
        max(p.planned, len(p.boots)),
    )


def measure_options(s: argparse.ArgumentParser) -> None:
    """What a sweep measures and how much: `sweep` and `series watch` take the same."""
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
        help=f"boots of each kernel and testcase every pair gets ({DEFAULT_SWEEP_BOOTS}); "
        "fewer when every pair is decided sooner",
    )
    s.add_argument(
        "--max-boots",
        type=int,
        help="a pair still undecided after --boots goes on to this many boots of each of "
        f"its kernels ({DEFAULT_SWEEP_MAX_BOOTS}, or --boots if more); --max-boots equal "
        "to --boots: no further",
    )
    s.add_argument(
        "--min-effect",
        type=float,
        metavar="PCT",
        help="changes smaller than this percentage count as the same "
        f"({DEFAULT_MIN_EFFECT * 100:g}%%)",
    )
    s.add_argument("--profile", help=PROFILE_HELP)
    s.add_argument(
        "--trace",
        action="store_true",
        help="then boot both kernels of each changed pair once more under blktrace; the "
        "report sets their Q2C, D2C, merges and request sizes side by side",
    )


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
    measure_options(s)
    s.add_argument(
        "--patch",
        metavar="N=FILE",
        action="append",
        default=[],
        help="apply this patch to the Nth revision of the series (from 1; repeatable, in order), "
        "e.g. 'lab-bad lab-bad --patch 2=fix.diff' for the bad kernel against it with a fix",
    )
    s.add_argument(
        "--bisect",
        action="store_true",
        help="then bisect each change between its two kernels' source revisions (prebuilt "
        "kernels: --kernels K1=REV1,... and --repo), one job each",
    )
    s.add_argument("--plot", metavar="PNG", help="also write each metric across the series here")
    s.add_argument("--markdown", action="store_true", help="the pairs as a markdown table")
    job_output_options(s)
    s.set_defaults(func=cmd_sweep)
