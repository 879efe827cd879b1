"""Jobs: bisect, watch, status, cancel, report, mark, resume (all through kbisect.jobs.client)."""

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from kbisect.cli.investigation import follow_investigation
from kbisect.cli.job_service import (
    PROFILE_HELP,
    follow_result,
    job_output_options,
    no_start,
    started,
    with_client,
)
from kbisect.cli.output import note, out
from kbisect.cli.output_files import checked_output, writing
from kbisect.contract import (
    BACKPORT_WORKFLOW,
    DEFAULT_MAX_BOOTS,
    DEFAULT_MIN_EFFECT,
    DEFAULT_MIN_RATE_STEP,
    EXPLAIN_WORKFLOW,
    FLAKY_BOOTS_FACTOR,
    INVESTIGATION_WORKFLOW,
    MAX_COMMIT_BOOTS,
    SWEEP_WORKFLOW,
    WORKFLOW,
    Mode,
    strict_json,
)
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.jobs import explain_job, investigation
from kbisect.jobs.client import ANY_JOB, WORKER_GRACE, JobClient, check_job_id, check_kind
from kbisect.jobs.request import JobOptions
from kbisect.reports.job_report import bisect_log, markdown, to_json
from kbisect.reports.lines import columns
from kbisect.reports.sru_note import sru_note
from kbisect.workflows.bisect_types import BisectResult

if TYPE_CHECKING:
    from kbisect.reports.sru_patch import SruPatch
from kbisect.settings import Settings


# --- bisect --------------------------------------------------------------------------
def _options(args: argparse.Namespace) -> JobOptions:
    return JobOptions(
        good=args.good or [],
        bad=args.bad or "",
        testcase=args.testcase,
        repo=args.repo,
        tree=args.tree,
        mode=args.mode or Mode.REGRESSION.value,
        profile=args.profile,
        repetitions=args.repetitions,
        parallel=args.parallel,
        metric=args.metric,
        min_effect_pct=args.min_effect,
        max_boots=args.max_boots,
        verify=not args.no_verify,
        trace=args.trace,
        config=args.config,
        signature=args.signature or "",
        flaky=args.flaky,
        duets=args.duets,
        selftests_from=getattr(args, "selftests_from", None) or "",
        fixups=args.fixup,
    )


def cmd_bisect(args: argparse.Namespace, settings: Settings) -> int:
    """Start an investigation (the chain of stages runs in the service) and follow it; with
    --from-report, its options filled from an LKP report first (--dry-run: only shown)."""
    if args.from_report:
        from kbisect.cli import from_report

        filled = from_report.fill(args, settings)
        for line in filled:
            (out if args.dry_run else note)(line)
        if args.dry_run:
            return 0
    elif args.dry_run:
        raise UserError("--dry-run shows what --from-report MAIL fills: give --from-report")
    if not args.testcase:
        raise UserError("give --testcase NAME ('kbisect testcases'), or --from-report MAIL")
    chain = investigation.Chain(
        cross_tree=args.cross_tree,
        kernels=args.kernels or "",
        explain=False if args.no_explain else (True if args.explain else None),
        target=args.target or "",
    )
    req, said = investigation.plan(_options(args), chain, settings)
    if said:
        note(said)

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        await client.require_workers(client.needs(), grace=WORKER_GRACE)
        job_id = await client.start_investigation(req)
        return await started(client, job_id, args, follow_investigation)

    return with_client(settings, args, go)


# --- watch ---------------------------------------------------------------------------
def cmd_watch(args: argparse.Namespace, settings: Settings) -> int:
    check_job_id(args.id)

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        kind = (await client.describe(args.id)).workflow_type
        check_kind(args.id, kind, ANY_JOB)
        if kind == INVESTIGATION_WORKFLOW:
            return await follow_investigation(client, args.id, args)
        if kind == EXPLAIN_WORKFLOW:
            from kbisect.cli.explain import follow_explain

            return await follow_explain(client, args.id, args)
        if kind == BACKPORT_WORKFLOW:
            from kbisect.cli.backport import follow_backport

            return await follow_backport(client, args.id, args)
        if kind == SWEEP_WORKFLOW:
            from kbisect.cli.sweep import follow_sweep

            return (await follow_sweep(client, args.id, args))[0]
        return await _follow(client, args.id, args.json)

    return with_client(settings, args, go)


async def _follow(client: JobClient, job_id: str, as_json: bool) -> int:
    return (await follow_result(client, job_id, as_json))[0]


# --- the others ----------------------------------------------------------------------
def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    if args.limit < 1:
        raise UserError("--limit takes a number of jobs, 1 or more")

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        jobs = await client.jobs(args.limit)
        if args.json:
            out(strict_json([j.to_json() for j in jobs], indent=2))
        elif not jobs:
            out("no bisection jobs yet")
        else:
            header = ("JOB", "STATE", "STATUS", "TESTCASE", "CULPRIT", "STARTED")
            rows = [
                (
                    j.id,
                    j.state,
                    j.status or "-",
                    j.testcase or "-",
                    j.culprit[:12] or "-",
                    j.started.strftime("%Y-%m-%d %H:%M"),
                )
                for j in jobs
            ]
            out(columns(header, rows))
            for j in jobs:  # a failed job's cause, one line each, whole
                if j.error:
                    out(f"{j.id} failed: {j.error}")
        return 0

    return with_client(settings, args, go)


def cmd_cancel(args: argparse.Namespace, settings: Settings) -> int:
    check_job_id(args.id)

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        await client.cancel(args.id)
        out(f"asked {args.id} to stop")
        return 0

    return with_client(settings, args, go)


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    check_job_id(args.id)
    _check_email(args)
    plot = checked_output(args.plot, "--plot")
    log = checked_output(args.bisect_log, "--bisect-log", streams=True)
    if args.bug is not None and args.bug < 1:
        raise UserError(f"--bug {args.bug}: give a Launchpad bug number, 1 or more")

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        kind = (await client.describe(args.id)).workflow_type
        check_kind(args.id, kind, ANY_JOB)
        if kind == INVESTIGATION_WORKFLOW:
            if not any(
                getattr(args, o.removeprefix("--").replace("-", "_")) for o in REPORT_OPTIONS
            ):
                return await _investigation_report(client, args)
            args.id = await client.bisection_of(args.id)  # its bisection's SRU, plot or log
            kind = WORKFLOW
        _check_report_options(args, kind)
        if kind == EXPLAIN_WORKFLOW:
            from kbisect.cli.explain import show_result as show_explained

            show_explained(await client.explain_result(args.id), args.id, args)
            return 0
        if kind == BACKPORT_WORKFLOW:
            return await _backport_report(client, args)
        if kind == SWEEP_WORKFLOW:
            from kbisect.cli.sweep import show_result

            args.markdown = not args.json
            show_result(await client.sweep_result(args.id), args.id, args)
            return 0
        result = await client.result(args.id)
        if args.email:
            from kbisect.reports.email_report import mail

            out(mail(result, args.id, why=await explain_job.why_of(client, args.id)).rstrip("\n"))
            return 0
        if args.json:
            out(strict_json(to_json(result), indent=2))
            return 0
        if args.sru_patch:
            return _sru_patch(result, args)
        if args.sru:
            why = await explain_job.why_of(client, args.id)
            out(sru_note(result, args.id, bug=args.bug, series=args.series, why=why))
            return 0
        if log is not None:
            with writing(log, "--bisect-log"):
                log.write_text(bisect_log(result))
        text = markdown(result, args.id)
        if plot is not None:
            from kbisect.reports.plot import plot_scores

            with writing(plot, "--plot"):
                png = plot_scores(result, plot)
            text += f"\n![scores across commits]({png})\n"
        out(text)
        return 0

    return with_client(settings, args, go)


# report's options that only some kinds of job take (the others' reports would ignore them)
REPORT_OPTIONS = {
    "--plot": (WORKFLOW, SWEEP_WORKFLOW),
    "--bisect-log": (WORKFLOW,),
    "--sru": (WORKFLOW, BACKPORT_WORKFLOW),
    "--sru-patch": (WORKFLOW, BACKPORT_WORKFLOW),
    "--email": (WORKFLOW,),  # an investigation's: its bisection's
}
# what --email writes alone: the mail is the whole of stdout
EMAIL_ALONE = (
    "--json",
    "--plot",
    "--bisect-log",
    "--sru",
    "--sru-patch",
    "--bug",
    "--signoff",
    "--target",
)


def _given(args: argparse.Namespace, option: str) -> bool:
    return bool(getattr(args, option.removeprefix("--").replace("-", "_")))


def _check_email(args: argparse.Namespace) -> None:
    """--email with an option of another output: one line, before a service is asked."""
    clash = [o for o in EMAIL_ALONE if _given(args, o)]
    if args.email and clash:
        raise UserError(f"--email writes the mail alone on stdout: drop {' '.join(clash)}")


def _check_report_options(args: argparse.Namespace, kind: str) -> None:
    check_kind(args.id, kind, ANY_JOB)
    for option, kinds in REPORT_OPTIONS.items():
        if _given(args, option):
            check_kind(
                args.id,
                kind,
                kinds,
                f"{option} is for those ('kbisect report {args.id}' without it)",
            )


async def _investigation_report(client: JobClient, args: argparse.Namespace) -> int:
    """Every stage's answer in order, then the SRU draft of what it found."""
    from kbisect.reports import investigation_report

    found = await investigation.answers(client, args.id)
    if args.json:
        out(strict_json(investigation_report.to_json(args.id, found), indent=2))
        return 0
    sru = investigation_report.sru_draft(found, args.id)
    out(investigation_report.markdown(args.id, found, sru))
    return 0


async def _backport_report(client: JobClient, args: argparse.Namespace) -> int:
    """A backport job's answer; with --sru or --sru-patch, the SRU of what it verified."""
    from kbisect.cli.backport import show_result as show_backport

    result = await client.backport_result(args.id)
    if not (args.sru or args.sru_patch):
        show_backport(result, args.id, args.json)
        return 0
    if args.target:
        raise UserError("a backport job's SRU is for its own target: drop --target")
    if not result.job:
        raise UserError(
            f"backport job {args.id} was asked by hand, with no bisection behind it: an SRU "
            f"note needs one ('kbisect report {args.id}' gives its figures)"
        )
    bisection = await client.result(result.job)
    if args.sru:
        out(sru_note(bisection, result.job, bug=args.bug, series=args.series, backport=result))
        return 0
    from kbisect.reports.sru_backport import write_backport_series
    from kbisect.reports.sru_patch import SruOptions

    opts = SruOptions(series=args.series, bug=args.bug, signoff=args.signoff)
    return _sru_files(write_backport_series(result, bisection, Path(args.sru_patch), opts, args.id))


def _sru_patch(result: BisectResult, args: argparse.Namespace) -> int:
    from kbisect.reports.sru_patch import SruOptions, write_sru_patch

    opts = SruOptions(series=args.series, bug=args.bug, signoff=args.signoff, target=args.target)
    return _sru_files(write_sru_patch(result, args.id, Path(args.sru_patch), opts))


def _sru_files(done: "SruPatch") -> int:
    for f in done.files:
        out(str(f))
    where = (
        done.target_name
        if done.target_name == done.target[:12]
        else (f"{done.target_name} ({done.target[:12]})")
    )
    note(f"{done.provenance}; applies to {where}")
    if done.checkpatch:
        note(f"checkpatch: {done.checkpatch}")
    for n in done.notes:
        note(n)
    return 0


def cmd_mark(args: argparse.Namespace, settings: Settings) -> int:
    check_job_id(args.id)

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        job = await client.bisection_of(args.id)  # an investigation's: its bisection
        req = await client.bisection_request(job)
        commit = Git(Path(req.repo)).resolve(args.rev)
        out(await client.mark(job, commit, args.verdict))
        return 0

    return with_client(settings, args, go)


def cmd_resume(args: argparse.Namespace, settings: Settings) -> int:
    check_job_id(args.id)

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        out(await client.resume(await client.stage_running(args.id)))
        return 0

    return with_client(settings, args, go)


# --- the parser ----------------------------------------------------------------------
def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    b = sub.add_parser(
        "bisect",
        help="start an investigation (check, bisection, verification, explain, backport) and "
        "follow it",
    )
    where = b.add_mutually_exclusive_group()
    where.add_argument("--repo", help="the kernel git repository (a path)")
    where.add_argument(
        "--tree", help="a named tree instead of a path ('kbisect tree add'); fetched first"
    )
    b.add_argument(
        "--kernels",
        metavar="K1,K2,...",
        help="bisect over prebuilt kernels first, oldest first: Debian linux-image-* "
        "package names, .deb files or vmlinuz files; K=REV maps each to its source "
        "revision in --repo, and the commits between the last good and first bad build "
        "are bisected next",
    )
    b.add_argument(
        "--good",
        action="append",
        metavar="REV",
        help="a revision without the change (repeatable); in fix mode the fixed one",
    )
    b.add_argument(
        "--bad",
        metavar="REV",
        help="a revision with the change (in fix mode: the old, broken one)",
    )
    b.add_argument("--testcase", help="a testcase name ('kbisect testcases')")
    b.add_argument(
        "--from-report",
        metavar="MAIL",
        help="an Intel 0-day/LKP regression mail (a file, or - for standard input, at most "
        "1 MiB, read as text only): its testcase, metric, commits, mode and named tree fill "
        "the options not given here; one line a field says where it came from",
    )
    b.add_argument(
        "--dry-run",
        action="store_true",
        help="with --from-report: print the fields the report gives, and start nothing",
    )
    b.add_argument(
        "--config",
        metavar="FILE",
        help="build from this kernel config (a distro's, e.g. /boot/config-*) trimmed by "
        "localmodconfig to the testcase's modules, instead of tinyconfig",
    )
    b.add_argument(
        "--fixup",
        metavar="FILE",
        action="append",
        default=[],
        help="apply this patch (a diff or a format-patch mail) to each commit built where it "
        "applies and the commit lacks it, as a build fix a span of the range needs "
        "(repeatable, in order; the report lists which commits had which)",
    )
    b.add_argument(
        "--mode",
        choices=tuple(Mode),
        help="regression: name the commit that broke it; fix: the commit that fixed it "
        "(default: regression; with --from-report, an improvement is found as a fix)",
    )
    b.add_argument("--profile", help=PROFILE_HELP)
    b.add_argument(
        "--repetitions", type=int, help="runs of the testcase per boot (default: the testcase's)"
    )
    b.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="K",
        help="test K commits at once, cutting the range in K+1 parts per round: fewer "
        "rounds, more builds; needs workers with room for K builds and VMs",
    )
    b.add_argument(
        "--metric",
        help="the metric the verdicts are made on (default: the testcase's primary; "
        "'kbisect testcases --json' lists them)",
    )
    b.add_argument(
        "--min-effect",
        type=float,
        metavar="PCT",
        help="endpoints closer than this percentage count as no difference "
        f"(default {DEFAULT_MIN_EFFECT * 100:g}); with --flaky, the least change in "
        f"failure rate, in points (default {DEFAULT_MIN_RATE_STEP * 100:g})",
    )
    b.add_argument(
        "--max-boots",
        type=int,
        default=DEFAULT_MAX_BOOTS,
        metavar="N",
        help="boots per endpoint before giving up on a noisy metric "
        f"(default {DEFAULT_MAX_BOOTS}); a commit gets at most {MAX_COMMIT_BOOTS}, or more in "
        f"proportion to a higher N; a --flaky job {FLAKY_BOOTS_FACTOR} times both",
    )
    b.add_argument(
        "--signature",
        metavar="REGEX",
        help="pass/fail testcases: a boot is bad only when its console shows this pattern "
        "(the culprit's panic or oops line); other failures are skipped",
    )
    b.add_argument(
        "--selftests-from",
        metavar="REV",
        help="a kselftest:TARGET[:TEST] testcase's selftests from this revision of the repository "
        "(default: the new end: the bad revision, in fix mode the good one)",
    )
    b.add_argument(
        "--flaky",
        action="store_true",
        help="pass/fail testcases: the failure comes and goes (one boot in ten); commits "
        "are booted until a posterior over the culprit decides, not once each",
    )
    b.add_argument(
        "--duets",
        action="store_true",
        help="boot each probe beside a reference at one moment, each guest on half of the VM "
        "worker's --measure-cpus (which must hold two guests), so the host's drift reaches "
        "both alike; off by default: not yet measured on a host with room",
    )
    b.add_argument(
        "--cross-tree",
        action="store_true",
        help="the distro endpoint (bad in fix mode, good in a regression) is an upstream "
        "release plus distro commits: check that their merge base behaves like it, then "
        "bisect upstream from there (then: kbisect backport JOB --target DISTRO)",
    )
    b.add_argument(
        "--target",
        metavar="REV",
        help="once the change is named, take it to this revision (the distro kernel that "
        "ships) and measure it there before and after (as kbisect backport JOB --target)",
    )
    explained = b.add_mutually_exclusive_group()
    explained.add_argument(
        "--explain",
        action="store_true",
        help="explain the culprit once named even on a counter (a timing's is by default): "
        "its statistics and CPU profile against its parent's (kbisect explain)",
    )
    explained.add_argument(
        "--no-explain",
        action="store_true",
        help="do not explain the culprit of a timing metric once it is named",
    )
    b.add_argument(
        "--no-verify",
        action="store_true",
        help="do not test the named commit reverted on (in fix mode: applied to) --bad",
    )
    b.add_argument(
        "--trace",
        action="store_true",
        help="once a commit is named, boot the endpoints and it once more under blktrace; "
        "the report compares their traces (Q2C, D2C, merges, request sizes)",
    )
    job_output_options(b)
    b.set_defaults(func=cmd_bisect)

    _add_job_commands(sub)


def _add_job_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    w = sub.add_parser("watch", help="follow a job until it ends")
    w.add_argument("id", help="the job id")
    w.add_argument("--json", action="store_true", help="the result as JSON on stdout")
    no_start(w)
    w.set_defaults(func=cmd_watch)

    st = sub.add_parser("status", help="list the newest jobs")
    st.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    st.add_argument("--json", action="store_true", help="a JSON list on stdout")
    no_start(st)
    st.set_defaults(func=cmd_status)

    c = sub.add_parser("cancel", help="stop a job")
    c.add_argument("id", help="the job id")
    no_start(c)
    c.set_defaults(func=cmd_cancel)

    r = sub.add_parser("report", help="a finished job as markdown (or --json, or --email)")
    r.add_argument("id", help="the job id")
    r.add_argument("--json", action="store_true", help="the result as JSON")
    r.add_argument("--plot", metavar="PNG", help="also write the scores across commits here")
    r.add_argument("--bisect-log", metavar="FILE", help="also write the git bisect log here")
    r.add_argument("--sru", action="store_true", help="a draft Ubuntu SRU justification")
    r.add_argument(
        "--email",
        action="store_true",
        help="a mail in the kernel lists' form for you to send: a regression report with "
        "its '#regzbot introduced:' line, or in fix mode a stable backport request",
    )
    r.add_argument(
        "--sru-patch",
        metavar="DIR",
        help="write the SRU cover letter and patch (git format-patch) here, ready for git am",
    )
    r.add_argument(
        "--series",
        metavar="NAME",
        help="the release the fix goes to, e.g. jammy (default: the tree's own, from its "
        "debian/changelog; none named where it has none)",
    )
    r.add_argument("--bug", type=int, metavar="N", help="the Launchpad bug for the BugLink")
    r.add_argument(
        "--signoff",
        metavar="'NAME <MAIL>'",
        help="the sender's Signed-off-by (default: git's user.name and user.email)",
    )
    r.add_argument(
        "--target",
        metavar="REV",
        help="the branch the patch must apply to (default: the branch holding the endpoint the "
        "job tested it on, and for a backport not the fix; else that endpoint)",
    )
    no_start(r)
    r.set_defaults(func=cmd_report)

    m = sub.add_parser("mark", help="tell a running job that a commit is good, bad or skip")
    m.add_argument("id", help="the job id")
    m.add_argument("rev", help="the revision (in the job's repository)")
    m.add_argument("verdict", choices=("good", "bad", "skip"), help="good, bad or skip")
    no_start(m)
    m.set_defaults(func=cmd_mark)

    rs = sub.add_parser("resume", help="go on with a job blocked on a host problem, once fixed")
    rs.add_argument("id", help="the job id")
    no_start(rs)
    rs.set_defaults(func=cmd_resume)
