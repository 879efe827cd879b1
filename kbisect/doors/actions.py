"""What a door's command does, through the same JobClient and checks as the CLI: the reply
is text for a person (markdown where a door renders it), and a started job's id.

`bisect` starts an investigation (kbisect.jobs.investigation.plan, as `kbisect bisect`):
the chain of stage jobs runs in the service and the door follows it (job_posts). A command
that takes a bisection (explain, backport, sru, mark, report email=yes) given an
investigation's id works on its bisection; `status` and `report` of one show the
investigation, stage by stage.

A door acts only on the jobs it started (`owns`, from the door's own state) and on the
stage jobs of an investigation it started: a CLI job on a private path, or another
project's, is refused in one line. A person runs at most DOOR_RUNNING_JOBS jobs through a
door at a time, whatever their kind (Quota); an investigation is one. A command's
blocking work (a tree's fetch, git, testcase files) runs on a few threads of its own, off
the door's event loop, so a fetch that hangs holds one thread and never the door's other
hooks or messages.
"""

import asyncio
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ParamSpec, TypeVar

from temporalio.client import WorkflowExecutionStatus

from kbisect.builders.patched_commit import patches_of
from kbisect.builders.trees import Trees
from kbisect.contract import (
    BACKPORT_WORKFLOW,
    DOOR_RUNNING_JOBS,
    EXPLAIN_WORKFLOW,
    INVESTIGATION_WORKFLOW,
    WORKFLOW,
)
from kbisect.doors.grammar import Command, help_text
from kbisect.errors import KbisectError, UserError
from kbisect.infra.git import Git
from kbisect.jobs import backport_job, explain_job, investigation, patch_test
from kbisect.jobs.client import JOB_KINDS, JobClient, check_job_id
from kbisect.reports import email_report, investigation_report, lkp_job, lkp_report
from kbisect.reports.backport_report import outcome_lines as backport_outcome
from kbisect.reports.explain_report import flame_svg
from kbisect.reports.explain_report import outcome_lines as explain_outcome
from kbisect.reports.job_report import markdown
from kbisect.reports.lines import outcome_lines
from kbisect.reports.sru_patch import SruOptions, SruPatch, write_sru_patch
from kbisect.settings import Settings
from kbisect.workflows.bisect_types import BisectResult
from kbisect.workflows.investigation_types import Stage

# More commands with blocking work than this wait for a thread (the event loop does not).
BLOCKING = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kbisect-door")
STATUS_LOOKS = 100  # 'status' lists the door's own among this many newest jobs
INVESTIGATION_PREFIX = JOB_KINDS[INVESTIGATION_WORKFLOW] + "-"  # "inv-": new_job_id's
# A stage job's id: the investigation's, the stage's name, and an explain or backport
# job's suffix when it is one of the bisection's (investigation_types: stage_id,
# explain_id, backport_id). The investigation's id ends in new_job_id's tag.
STAGE_ID = re.compile(
    r"(inv-.+-[0-9a-f]{8})-(?:check|kernels|sweep|bisect(?:-\d+)?)"
    r"(?:-explain|-backport-[0-9a-f]{8})?"
)
Owns = Callable[[str], bool]  # whether a job id was started through this door (and place)
Claim = Callable[[], None]  # takes one of the asker's running jobs for a start (Quota)
P = ParamSpec("P")
T = TypeVar("T")


async def off_loop(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """fn's result, computed on a BLOCKING thread."""
    return await asyncio.get_running_loop().run_in_executor(BLOCKING, lambda: fn(*args, **kwargs))


def failure_text(exc: BaseException) -> str:
    """One line for a command that failed in a way kbisect did not foresee (no credentials)."""
    from kbisect.settings import redact

    return redact(" ".join(f"kbisect could not do that: {exc}".split()))


def is_investigation(job_id: str) -> bool:
    """Whether the id has an investigation's form or one of its stage jobs' (the server
    says which it is)."""
    return job_id.startswith(INVESTIGATION_PREFIX)


def investigation_of(job_id: str) -> str | None:
    """The investigation whose stage job this id is, by its form; None: it is none."""
    found = STAGE_ID.fullmatch(job_id)
    return found[1] if found else None


def check_origin(job: str, owns: Owns) -> None:
    """UserError unless the door started the job, or the investigation it is a stage of."""
    parent = investigation_of(job)
    if not (owns(job) or (parent is not None and owns(parent))):
        raise UserError(
            f"refused: {job} was not started here: kbisect acts here only on the jobs started "
            "here ('status' lists them); use the kbisect command line for others"
        )


class Quota:
    """A person's running jobs through one door: at most DOOR_RUNNING_JOBS, bisections,
    explain and backport jobs alike. They are the jobs the door follows still that the
    person started (`running`, the door's count) and the starts under way: a start's
    claim is held from its check until the door has recorded the job, so commands sent
    at once cannot each pass the check."""

    def __init__(self, running: Callable[[str], int]) -> None:
        self.running = running
        self.starting: Counter[str] = Counter()

    @contextmanager
    def command(self, who: str) -> Iterator[Claim]:
        """One of who's commands: its claim, called just before it starts a job, is held
        until the block (which records the job) ends."""
        claimed = 0

        def claim() -> None:
            nonlocal claimed
            running = self.running(who) + self.starting[who]
            if running >= DOOR_RUNNING_JOBS:
                raise UserError(
                    f"refused: you have {running} jobs running here, and kbisect runs at "
                    f"most {DOOR_RUNNING_JOBS} a person at a time: cancel one ('status' "
                    "lists them) or wait for one to end"
                )
            self.starting[who] += 1
            claimed += 1

        try:
            yield claim
        finally:
            self.starting[who] -= claimed


def no_start() -> None:
    """The claim of a caller that starts no job (the tests' stand-ins of a door)."""
    raise UserError("refused: this starts no job here")


@dataclass(frozen=True)
class Attachment:
    """A file a reply posts beside its text (a flame graph)."""

    name: str
    data: bytes
    mimetype: str


@dataclass
class Reply:
    text: str
    job_id: str | None = None  # the job this command started
    ok: bool = True
    files: list[Attachment] = field(default_factory=list)
    # text is markdown kbisect wrote, what it inserts escaped (the report); else plain text,
    # which a door rendering markdown escapes (it holds a guest's or a repository's words)
    markdown: bool = False
    # plain text to be copied as it is (a mail): a door rendering markdown shows it as a
    # code block, its lines and blanks kept; the others post it as they post plain text
    verbatim: bool = False


async def execute(
    cmd: Command,
    client: JobClient,
    settings: Settings,
    owns: Owns,
    by: str = "",
    claim: Claim = no_start,
    mail: bytes | None = None,
) -> Reply:
    """Run one parsed command (`by`: who asked, e.g. '@alice:hs (Matrix)', for the jobs it
    starts; `claim`: their Quota's, called before a start; `mail`: what the command
    answers, as the door found it: the report of a `bisect from-report`, the patch of a
    `test`); a KbisectError becomes a one-line refusal, never a crash."""
    try:
        if cmd.from_report:
            cmd, said = await off_loop(from_mail, cmd, mail, settings)
            if cmd.switch("dry-run"):
                return Reply("\n".join(said))
            reply = await _execute(cmd, client, settings, owns, by, claim)
            return replace(reply, text="\n".join([reply.text, *said]))
        return await _execute(cmd, client, settings, owns, by, claim, mail)
    except KbisectError as exc:
        return Reply(text=" ".join(str(exc).split()), ok=False)


def from_mail(cmd: Command, mail: bytes | None, settings: Settings) -> tuple[Command, list[str]]:
    """A `bisect from-report` as the plain bisect command the report and its keys make
    (the keys win), and the lines that say each field and where it came from."""
    if mail is None:
        raise UserError(
            "refused: bisect from-report reads an LKP report: send the command as a reply to "
            "the mail (pasted, or its file), or paste the mail below the command's line"
        )
    given = lkp_job.Given(
        testcase=cmd.one("testcase"),
        metric=cmd.one("metric"),
        good=tuple(cmd.options().good),
        bad=cmd.one("bad"),
        mode=cmd.one("mode"),
        tree=cmd.one("tree"),
        option=lambda name: f"{name}=",
    )
    try:  # lkp_report says what is missing in the command line's words
        report = lkp_report.parse(lkp_report.mail_text(mail, "the mail"))
        filled = lkp_job.fill(report, given, Trees(settings).all())
    except UserError as exc:
        raise UserError(door_words(str(exc))) from exc
    keys = {**cmd.keys, "testcase": [filled.testcase], "mode": [filled.mode]}
    keys.update(good=[",".join(filled.good)], bad=[filled.bad], tree=[filled.tree or ""])
    if filled.metric:
        keys["metric"] = [filled.metric]
    return Command(verb="bisect", keys=keys), filled.lines


# The command line's options in a refusal (lkp_report's), as a door writes them.
CLI_OPTION = re.compile(r"--(testcase|metric|good|bad|mode|tree|repo|from-report) ?")


def door_words(text: str) -> str:
    """A refusal in a door's words: `--bad REV` is `bad=REV`; there is no --repo here."""
    text = re.sub(r",? or give --repo DIR", "", text).replace("--repo DIR or ", "")
    text = text.replace("--from-report the mail: ", "the mail: ")
    return CLI_OPTION.sub(lambda m: f"{m[1]}=", text)


async def _execute(
    cmd: Command,
    client: JobClient,
    settings: Settings,
    owns: Owns,
    by: str,
    claim: Claim,
    attached: bytes | None = None,
) -> Reply:
    if cmd.job is not None:
        check_origin(cmd.job, owns)
    if cmd.verb == "help":
        return Reply(help_text())
    if cmd.verb == "testcases":
        return Reply(await off_loop(_testcases))
    if cmd.verb == "bisect":
        return await _bisect(cmd, client, settings, by, claim)
    if cmd.verb == "status":
        return Reply(await _status(client, cmd.job, owns))
    job = check_job_id(cmd.job or "")
    if cmd.verb == "cancel":
        await client.cancel(job)
        return Reply(f"asked {job} to stop")
    email = cmd.verb == "report" and cmd.switch("email")
    if cmd.verb == "report" and not email and await kind_of(client, job) == INVESTIGATION_WORKFLOW:
        return await _investigation_report(client, job)
    job = await bisection_of(client, job)  # an investigation's: its bisection
    if cmd.verb == "mark":
        req = await client.bisection_request(job)
        commit = await off_loop(Git(Path(req.repo)).resolve, cmd.rev or "")
        return Reply(await client.mark(job, commit, cmd.verdict or ""))
    if cmd.verb == "sru" and cmd.one("branch"):
        raise UserError(
            "refused: branch= is for the GitLab door, which pushes the patch to a branch; "
            "here write: sru JOB [series=jammy] [bug=N]"
        )
    if cmd.verb == "explain":
        return await _explain(client, job, by, claim)
    if cmd.verb == "backport":
        return await _backport(client, job, cmd.one("target") or "", by, claim)
    if cmd.verb == "test":
        return await _test(client, job, attached, by, claim)
    result = await client.result(job)
    if email:  # `kbisect report JOB --email`'s text: the mail, for the person to send
        why = await explain_job.why_of(client, job)
        mail = await off_loop(email_report.mail, result, job, why)  # git: the author
        return Reply(mail.rstrip("\n"), verbatim=True)
    if cmd.verb == "report":
        text = await off_loop(markdown, result, job)  # git: the commits' subjects
        return Reply(text, markdown=True)
    why = await explain_job.why_of(client, job)
    return Reply(await off_loop(sru_text, result, job, cmd, why))


def sru_options(cmd: Command, signoff: str | None = None) -> SruOptions:
    """An sru command's series and bug as the CLI's --series and --bug."""
    bug = cmd.one("bug")
    return SruOptions(
        series=cmd.one("series") or None, bug=int(bug) if bug else None, signoff=signoff
    )


def sru_text(result: BisectResult, job: str, cmd: Command, why: list[str] | None = None) -> str:
    """The SRU justification, with the bug and series the command names (and the Why
    lines of the job's explain job, when it has one)."""
    from kbisect.builders.distro_series import SERIES
    from kbisect.reports.sru_note import sru_note

    opts = sru_options(cmd)
    if opts.series and not SERIES.fullmatch(opts.series):
        raise UserError(f"refused: series={opts.series}: give a release's code name, e.g. jammy")
    return sru_note(result, job, bug=opts.bug, series=opts.series, why=why)


def sru_files(
    result: BisectResult, job: str, cmd: Command, signoff: str | None, out: Path
) -> SruPatch:
    """The cover letter and patch of an sru command, as `kbisect report --sru-patch` writes
    them (the tested commit, checked against the branch it is for, checkpatch run)."""
    return write_sru_patch(result, job, out, sru_options(cmd, signoff))


async def bisection_of(client: JobClient, job: str) -> str:
    """The job itself, or an investigation's bisection (its last), for a command that
    takes a bisection; no call to the server for an id of no investigation's form."""
    return await client.bisection_of(job) if is_investigation(job) else job


async def _investigation_report(client: JobClient, job: str) -> Reply:
    """An ended investigation's report (every stage's answer, then the SRU draft), as
    `kbisect report INV` gives it; while it runs, its stages so far."""
    if await client.running(job):
        text = await _investigation_status(client, job)
        return Reply(f"{text}\n(its report comes once it has ended: 'report {job}' then)")
    found = await investigation.answers(client, job)
    sru = await off_loop(investigation_report.sru_draft, found, job)  # git: the patch
    return Reply(investigation_report.markdown(job, found, sru), markdown=True)


async def _ran(
    client: JobClient,
    job_id: str,
    answer: Callable[[], Awaitable[str]],
    how_far: Callable[[], Awaitable[str]],
) -> str | None:
    """A stage job asked for again: its answer once it has one, how far it is while it
    runs; None: it is to start (it never ran, or it failed)."""
    now = await client.status_of(job_id)
    if now == WorkflowExecutionStatus.COMPLETED:
        return await answer()
    if now == WorkflowExecutionStatus.RUNNING:
        return await how_far()
    return None


async def _explain_how_far(client: JobClient, eid: str) -> str:
    p = await client.explain_progress(eid)
    return f"{eid} is {p.status}: {len(p.boots)} of {p.planned} explain boots so far"


async def _backport_how_far(client: JobClient, bid: str) -> str:
    return f"{bid} is {(await client.backport_progress(bid)).status}"


async def _explain(client: JobClient, job: str, by: str, claim: Claim) -> Reply:
    """The job's explain job: its answer and flame graph once it has one, how far it is
    while it runs, else started (the door follows it; asked again, the command shows it)."""
    eid = explain_job.explain_id(job)
    files: list[Attachment] = []

    async def answer() -> str:
        result = await client.explain_result(eid)
        if any(result.stacks.values()):  # a guest without perf leaves no samples
            svg = await off_loop(flame_svg, result)
            files.append(Attachment(f"{eid}-flame.svg", svg.encode(), "image/svg+xml"))
        return "\n".join(explain_outcome(result))

    said = await _ran(client, eid, answer, lambda: _explain_how_far(client, eid))
    if said is not None:
        return Reply(said, files=files)
    req = await explain_job.request_for(client, job)
    await client.require_workers(client.needs())
    claim()
    await client.start_explain(req, eid, by)
    return Reply(
        f"started {eid}: {client.job_url(eid)} ('explain {job}' again shows the answer)",
        job_id=eid,
    )


async def _backport(client: JobClient, job: str, target: str, by: str, claim: Claim) -> Reply:
    """The job's fix taken to `target`: started (the door follows it and posts its figures
    and SRU note), or its answer when it ran before."""
    req = await backport_job.request_for(client, job, target)  # resolves target: git
    bid = backport_job.backport_id(job, req)

    async def answer() -> str:
        return "\n".join(backport_outcome(await client.backport_result(bid)))

    said = await _ran(client, bid, answer, lambda: _backport_how_far(client, bid))
    if said is not None:
        return Reply(said)
    await client.require_workers(client.needs())
    claim()
    await client.start_backport(req, bid, by)
    return Reply(f"started {bid}: {client.job_url(bid)}", job_id=bid)


async def _test(client: JobClient, job: str, patch: bytes | None, by: str, claim: Claim) -> Reply:
    """The patch the command answers, measured on the bisection's bad endpoint beside both
    endpoints (one sweep, which the door follows)."""
    if patch is None:
        raise UserError(
            "refused: test JOB measures a patch: send the command as a reply to the patch (its "
            "file or its text), or paste the patch below the command's line"
        )
    req = await client.bisection_request(job)
    try:
        patches = patches_of(patch, patch_test.PATCH_WORDS, patch_test.PATCH_WORDS)
        sweep = await off_loop(patch_test.sweep_for_patch, req, patches)  # git: a commit
    except UserError as exc:
        raise UserError(f"refused: {exc}") from exc
    await client.require_workers(client.needs())
    claim()
    sid = await client.start_sweep(sweep, by)
    return Reply(
        f"started {sid}: {client.job_url(sid)}\nits first pair says whether the patch changes "
        "the bad kernel, its second whether the patched kernel then reads as the good one",
        job_id=sid,
    )


async def _bisect(
    cmd: Command, client: JobClient, settings: Settings, by: str, claim: Claim
) -> Reply:
    """Start an investigation, planned and checked as `kbisect bisect` plans it (the
    tree's fetch, git and the testcase's files: off the event loop); the door follows it."""
    req, _ = await off_loop(investigation.plan, cmd.options(), cmd.chain(), settings)
    await client.require_workers(client.needs())
    claim()
    job_id = await client.start_investigation(req, by)
    text = f"started {job_id}: {client.job_url(job_id)}"
    if cmd.switch("cross-tree") and req.check is None:  # plan's note, in the door's words
        text += (
            "\ncross-tree=yes: the endpoints are on one line already; bisecting them as they are"
        )
    return Reply(text, job_id=job_id)


async def kind_of(client: JobClient, job_id: str) -> str:
    """The job's workflow: a bisection's when its id has neither an investigation's form
    nor a stage job's (no call to the server), else the one the server names."""
    if not (
        is_investigation(job_id)
        or explain_job.is_explain(job_id)
        or backport_job.is_backport(job_id)
    ):
        return WORKFLOW
    return (await client.describe(job_id)).workflow_type


async def _status(client: JobClient, job: str | None, owns: Owns) -> str:
    if job is None:
        jobs = [j for j in await client.jobs(STATUS_LOOKS) if owns(j.id)][:10]
        if not jobs:
            return "no bisection jobs yet"
        return "\n".join(
            f"{j.id} {j.state} {j.status or '-'} {j.testcase or '-'} {j.culprit or ''}".rstrip()
            + (f": {j.error}" if j.error else "")
            for j in jobs
        )
    check_job_id(job)
    kind = await kind_of(client, job)
    if kind == INVESTIGATION_WORKFLOW:
        return await _investigation_status(client, job)
    if kind == EXPLAIN_WORKFLOW:
        if await client.running(job):
            return await _explain_how_far(client, job)
        return "\n".join([f"{job}: ended", *explain_outcome(await client.explain_result(job))])
    if kind == BACKPORT_WORKFLOW:
        if await client.running(job):
            return await _backport_how_far(client, job)
        return "\n".join([f"{job}: ended", *backport_outcome(await client.backport_result(job))])
    if await client.running(job):
        p = await client.progress(job)
        text = f"{job}: {p.status}, {p.candidates} candidates, {len(p.steps)} steps done"
        return text + (f", testing {', '.join(c[:12] for c in p.current)}" if p.current else "")
    return "\n".join([f"{job}: ended", *outcome_lines(await client.result(job))])


async def _investigation_status(client: JobClient, job: str) -> str:
    """How far an investigation is, or how it ended; then each stage's line, in order."""
    if await client.running(job):
        p = await client.investigation_progress(job)
        head, stages = f"{job}: {p.status}" + (f": {p.message}" if p.message else ""), p.stages
    else:
        try:
            r = await client.investigation_result(job)
            head, stages = f"{job}: ended\n{r.status}: {r.message}", r.stages
        except UserError as exc:  # it failed or was cancelled: its stages, if a worker says
            head, stages = f"{job}: ended\n{exc}", await last_stages(client, job)
    return "\n".join([head, *(investigation_report.stage_line(s) for s in stages)])


async def last_stages(client: JobClient, job: str) -> list[Stage]:
    """A failed or cancelled investigation's stages: its last progress (a closed
    workflow's query, from its history: a workflow worker answers); none without one."""
    try:
        return (await client.investigation_progress(job)).stages
    except KbisectError:
        return []


def _testcases() -> str:
    from kbisect.testcases import manifest as manifests

    return "\n".join(
        f"{e.name}: broken: {e.error}"
        if e.manifest is None
        else f"{e.name}: {e.manifest.description} (metrics: {', '.join(e.manifest.metrics)}; "
        f"primary: {e.manifest.primary})"
        for e in manifests.catalog()
    )
