"""The GitLab door: a Note Hook receiver. `/kbisect ...` at the start of a line of a note
on an issue or merge request runs through the same grammar, checks and JobClient as the
CLI. A started job gets a reply note with its link, one progress note kept up to date, and
at the end a report note with the score plot (uploaded through the project uploads API)
and a scoped label, `kbisect::found` (or `kbisect::no-difference`, `kbisect::ambiguous`).
`bisect` starts an investigation: its progress note has each stage's line and that stage
job's story, then the investigation's outcome; its report note is the investigation's
report (every stage's answer and the SRU draft) with the last bisection's plot.
`/kbisect sru JOB [series=S] [bug=N] branch=B` pushes the commit kbisect built and tested
(its verification: the fix applied to the old endpoint, or the culprit reverted on the new
one) onto a new branch B from the target, with the SRU patch's message, through the
commits API, and opens a merge request whose description is the SRU note. The files it
changes go up as tested, byte for byte; first the target's copies of them must be the ones
the tested commit started from, else it refuses (the change would not be what was tested).

Without allowed users (GitLabConfig.allowed empty, `--allow-anyone`) everyone who can
comment on a project with the webhook is obeyed; start-up says so in a warning. A note gets
one reply when its author is not allowed or it holds more than MAX_COMMANDS commands (none
run). A command naming a job acts only on a job this receiver started from the same
project (its state file's followed jobs); others are refused in one line.

A hook must carry the webhook secret in `X-Gitlab-Token` (401 otherwise). Each note is
handled once, by its id, whatever GitLab redelivers; the handled ids and the followed
jobs are kept in a state file, so a restarted receiver follows its jobs on.
"""

import asyncio
import hmac
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gitlab
from aiohttp import web

from kbisect.contract import INVESTIGATION_WORKFLOW
from kbisect.doors import state_file
from kbisect.doors.actions import (
    Claim,
    Owns,
    Quota,
    Reply,
    bisection_of,
    check_origin,
    execute,
    failure_text,
    kind_of,
    off_loop,
    sru_options,
    sru_text,
)
from kbisect.doors.grammar import MAX_COMMANDS, Command, parse
from kbisect.doors.job_posts import Post, follow, summary
from kbisect.doors.quoting import code_span, inert
from kbisect.errors import InfraError, KbisectError, UserError
from kbisect.infra.git import Git
from kbisect.jobs import investigation, series_client
from kbisect.jobs.client import JobClient
from kbisect.jobs.series_client import ALERT_POLL_SECONDS, check_name
from kbisect.reports import investigation_report
from kbisect.reports.lines import md_code, md_lines, md_text
from kbisect.reports.sru_branch import push_sru_branch, tested_changes
from kbisect.reports.sru_patch import sru_commit
from kbisect.reports.sweep_report import alert_lines
from kbisect.settings import Settings
from kbisect.workflows.bisect_types import BisectResult
from kbisect.workflows.series_types import SeriesAlert

PREFIX = "/kbisect"
log = logging.getLogger("kbisect.gitlab")


@dataclass(frozen=True)
class GitLabConfig:
    url: str
    token: str
    secret: str
    state: Path
    allowed: tuple[str, ...] = ()  # usernames; empty: anyone who can comment
    signoff: str | None = None  # an SRU commit's Signed-off-by; default: the token's user
    series: tuple["SeriesIssue", ...] = ()  # watches whose alerts go to an issue each
    alerts_every: float = ALERT_POLL_SECONDS  # seconds between looks for their alerts


@dataclass(frozen=True)
class SeriesIssue:
    """`--series WATCH=GROUP/PROJECT#IID`: the watch's alerts as notes on that issue."""

    watch: str
    project: str  # a project's id or path
    issue: int

    @classmethod
    def parse(cls, text: str) -> "SeriesIssue":
        watch, sep, where = text.partition("=")
        project, hash_, iid = where.rpartition("#")
        if not (sep and hash_ and project and iid.isdigit()):
            raise UserError(
                f"--series {text!r}: write WATCH=GROUP/PROJECT#ISSUE, e.g. cloud=kernel/sru#12"
            )
        return cls(check_name(watch), project, int(iid))


@dataclass
class Target:
    """Where a note was written: a project's issue or merge request."""

    project: int
    kind: str  # "issue" or "merge_request"
    iid: int
    branch: str  # where an SRU branch starts: the MR's target, else the default branch


@dataclass
class FollowedJob:
    target: Target
    progress_note: int  # its note's id (0: none yet)
    lines: list[str] = field(default_factory=list)
    posted: list[str] = field(default_factory=list)
    done: bool = False
    by: str = ""  # who started it (a username): their running jobs count against Quota


def commands_in(note: str) -> list[str]:
    """The commands of a note: every line that starts with the prefix."""
    found = []
    for line in note.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == PREFIX:
            found.append(rest)
    return found


# Building a patch runs its Makefiles' code on the build hosts: only for allowed users.
ANYONE_NO_PATCH = (
    "refused: test builds the patch it answers, which runs its code on the build hosts, and "
    "this door lets anyone in (--allow-anyone): name the users it serves (--allow-user)"
)


def pasted_mail(note: str) -> bytes | None:
    """What a note holds besides its commands (a report pasted for `bisect from-report`, a
    patch for `test`, its code fences dropped); None: nothing."""
    kept = [
        line
        for line in note.splitlines()
        if line.strip().partition(" ")[0] != PREFIX and not line.strip().startswith("```")
    ]
    text = "\n".join(kept)
    return text.encode() if text.strip() else None


def target_of(payload: dict[str, Any]) -> Target:
    attrs = payload["object_attributes"]
    project = payload["project"]
    if attrs.get("noteable_type") == "MergeRequest":
        mr = payload["merge_request"]
        return Target(project["id"], "merge_request", mr["iid"], mr["target_branch"])
    if attrs.get("noteable_type") == "Issue":
        return Target(project["id"], "issue", payload["issue"]["iid"], project["default_branch"])
    raise UserError(f"notes on a {attrs.get('noteable_type')} are not taken")


class GitLabDoor:
    def __init__(
        self, config: GitLabConfig, settings: Settings, jobs: JobClient, gl: gitlab.Gitlab
    ) -> None:
        self.config = config
        self.settings = settings
        self.jobs = jobs
        self.gl = gl
        raw = state_file.load(config.state)
        self.handled: set[int] = set(raw.get("handled", []))
        self.followed = {
            job: FollowedJob(target=Target(**j.pop("target")), **j)
            for job, j in raw.get("jobs", {}).items()
        }
        self.alerts: list[str] = list(raw.get("alerts", []))  # series alerts posted, by key
        # per watch, where its ticks are read from next (series_client.News.since)
        self.series_since: dict[str, str] = dict(raw.get("series_since", {}))
        self.lock = asyncio.Lock()
        self.tasks: set[asyncio.Task[None]] = set()
        self.me = ""
        self.quota = Quota(self._running_for)

    def _running_for(self, author: str) -> int:
        """The author's jobs this receiver started and follows still (not seen to end)."""
        return sum(1 for job in self.followed.values() if job.by == author and not job.done)

    def _save(self) -> None:
        jobs = {k: asdict(v) for k, v in self.followed.items()}
        state = {
            "handled": sorted(self.handled),
            "jobs": jobs,
            "alerts": self.alerts,
            "series_since": self.series_since,
        }
        state_file.save(self.config.state, state)

    async def start(self) -> None:
        """Who the token is (its own notes are skipped), and the jobs to follow on."""
        await asyncio.to_thread(self.gl.auth)
        self.me = str(self.gl.user.username) if self.gl.user else ""
        if not self.config.allowed:
            log.warning(
                "no allowed users: obeying everyone who can comment on a project that "
                "sends this receiver its notes (jobs, SRU branches and merge requests)"
            )
        for job_id, job in self.followed.items():
            if not job.done:
                self._spawn(self._follow(job_id))
        for where in self.config.series:
            self._spawn(self._follow_series(where))

    def app(self) -> web.Application:
        app = web.Application(client_max_size=2**20)
        app.router.add_post("/", self.hook)
        app.router.add_post("/webhook", self.hook)
        return app

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # --- the hook ------------------------------------------------------------------
    async def hook(self, request: web.Request) -> web.Response:
        token = request.headers.get("X-Gitlab-Token", "")
        if not hmac.compare_digest(token.encode(), self.config.secret.encode()):
            return web.json_response({"error": "wrong or missing X-Gitlab-Token"}, status=401)
        if request.headers.get("X-Gitlab-Event") != "Note Hook":
            return web.json_response({"ignored": "not a Note Hook"})
        try:
            payload = await request.json()
            note = payload["object_attributes"]
            note_id, text = int(note["id"]), str(note["note"])
            author = str(payload["user"]["username"])
            target = target_of(payload)
        except (ValueError, KeyError, TypeError, UserError) as exc:
            return web.json_response({"error": f"not a note hook kbisect takes: {exc}"}, status=400)
        commands = commands_in(text)
        if not commands or author == self.me:
            return web.json_response({"ignored": "no /kbisect command"})
        async with self.lock:  # two deliveries of one note at once: one wins
            if note_id in self.handled:
                return web.json_response({"duplicate": note_id})
            self.handled.add(note_id)
            self._save()
        self._spawn(self._handle(target, author, commands, pasted_mail(text)))
        return web.json_response({"accepted": note_id}, status=202)

    async def _handle(
        self, target: Target, author: str, commands: list[str], mail: bytes | None = None
    ) -> None:
        refusal = self._refusal(author, len(commands))
        if refusal:  # one reply, however many commands the note holds
            note = await self._note(target, md_lines(refusal))
            log.info("%s: refused %d commands -> note %s", author, len(commands), note)
            return
        for text in commands:
            with self.quota.command(author) as claim:  # held until the job is recorded
                note = await self._command(target, author, text, claim, mail)
            log.info("%s: %s -> note %s", author, text.split(" ", 1)[0], note)

    async def _command(
        self, target: Target, author: str, text: str, claim: Claim, mail: bytes | None = None
    ) -> int:
        """One command, its reply note (its id), and the job it started followed (`mail`:
        what the note holds besides its commands, for `bisect from-report`)."""
        try:
            by = f"@{author} (GitLab {target.project})"
            reply = await self._run(target, text, by, claim, mail)
        except Exception as exc:  # a note must never be left unanswered
            log.exception("command %r", text)
            reply = Reply(text=failure_text(exc), ok=False)
        try:
            return await self._note(target, await self._with_files(target, reply))
        finally:
            if reply.job_id:
                await self._adopt(target, author, reply.job_id)

    async def _adopt(self, target: Target, author: str, job_id: str) -> None:
        """A job started here is the door's, counted against its starter and followed,
        whatever posting does: GitLab away, its follower makes the progress note."""
        job = self.followed[job_id] = FollowedJob(target=target, progress_note=0, by=author)
        self._save()
        try:
            job.progress_note = await self._note(target, f"kbisect `{job_id}`: waiting to start")
            self._save()
        finally:
            self._spawn(self._follow(job_id))

    async def _with_files(self, target: Target, reply: Reply) -> str:
        """The reply's text, and its files uploaded to the project, each a markdown link
        (a file that does not upload is said, and the text goes anyway)."""
        links = []
        for f in reply.files:
            try:
                project = self.gl.projects.get(target.project, lazy=True)
                up = await asyncio.to_thread(project.upload, f.name, filedata=f.data)
                links.append(up["markdown"])
            except Exception as exc:  # GitLab's errors, the network's: said, not fatal
                log.warning("could not upload %s: %s", f.name, exc)
                links.append(f"(could not upload {f.name})")
        return "\n\n".join([_markdown_of(reply), *links])

    def _refusal(self, author: str, count: int) -> str | None:
        if self.config.allowed and author not in self.config.allowed:
            return f"Sorry @{author}, kbisect here takes commands from its allowed users."
        if count > MAX_COMMANDS:
            return (
                f"refused: {count} commands in one note; kbisect takes at most {MAX_COMMANDS} "
                "a note and ran none of these: write them in fewer notes"
            )
        return None

    def _owns(self, target: Target) -> Owns:
        """Whether a job was started by this receiver from target's project."""

        def owns(job: str) -> bool:
            followed = self.followed.get(job)
            return followed is not None and followed.target.project == target.project

        return owns

    async def _run(
        self, target: Target, text: str, by: str, claim: Claim, mail: bytes | None = None
    ) -> Reply:
        try:
            cmd = parse(text)
        except UserError as exc:
            return Reply(text=str(exc), ok=False)
        if cmd.verb == "test" and not self.config.allowed:
            return Reply(text=ANYONE_NO_PATCH, ok=False)
        if cmd.verb == "sru" and cmd.one("branch"):
            try:
                check_origin(cmd.job or "", self._owns(target))
                return await self._sru_branch(target, cmd)
            except KbisectError as exc:
                return Reply(text=" ".join(str(exc).split()), ok=False)
        reply = await execute(cmd, self.jobs, self.settings, self._owns(target), by, claim, mail)
        if reply.job_id:
            link = self.jobs.job_url(reply.job_id)
            text = f"kbisect started `{reply.job_id}`: {link}"
            said = reply.text.split("\n", 1)[1:]  # what the start said besides (plain)
            text += "".join(f"\n\n{md_lines(line)}" for line in said)
            return Reply(text, job_id=reply.job_id, markdown=True)
        return reply

    # --- GitLab calls (python-gitlab is synchronous: asyncio.to_thread, whose threads a
    # command's fetch, on actions.BLOCKING, never holds) -----------------------------------
    def _noteable(self, target: Target) -> Any:
        project = self.gl.projects.get(target.project, lazy=True)
        if target.kind == "merge_request":
            return project.mergerequests.get(target.iid, lazy=True)
        return project.issues.get(target.iid, lazy=True)

    async def _note(self, target: Target, body: str) -> int:
        def create() -> int:
            return int(self._noteable(target).notes.create({"body": _safe(body)}).id)

        return await asyncio.to_thread(create)

    async def _edit(self, target: Target, note_id: int, body: str) -> None:
        def update() -> None:
            self._noteable(target).notes.update(note_id, {"body": _safe(body)})

        await asyncio.to_thread(update)

    async def _follow(self, job_id: str) -> None:
        job = self.followed[job_id]

        async def send(post: Post) -> None:
            job.lines.append(post.text if not post.is_summary else "(report below)")
            body = f"kbisect `{job_id}` ({self.jobs.job_url(job_id)}):\n\n" + "\n".join(
                f"- {md_text(line)}" for line in "\n".join(job.lines).splitlines()
            )
            if job.progress_note:
                await self._edit(job.target, job.progress_note, body)
            else:  # its start could not post one
                job.progress_note = await self._note(job.target, body)
            job.posted.append(post.key)
            self._save()

        while True:
            try:
                result = await follow(self.jobs, job_id, job.posted, send)
                await self._finish(job_id, job, result)
                job.done = True
                self._save()
                return
            except (InfraError, gitlab.GitlabError) as exc:
                log.warning("following %s: %s; trying again", job_id, exc)
                await asyncio.sleep(10)
            except UserError as exc:  # the server no longer knows the job: nothing to follow
                log.warning("stopped following %s: %s", job_id, exc)
                job.done = True
                self._save()
                return
            except Exception:  # not foreseen: the job is followed on, the receiver serves on
                log.exception("following %s; trying again in a minute", job_id)
                await asyncio.sleep(60)

    async def _finish(self, job_id: str, job: FollowedJob, result: BisectResult | None) -> None:
        """The report note, with the plot of `result` (an investigation's: its last
        bisection's, if it has one), and the label of how it ended; once (key "report")."""
        from kbisect.reports.plot import plot_scores

        status = result.status if result is not None else ""
        if await kind_of(self.jobs, job_id) == INVESTIGATION_WORKFLOW:
            try:
                found = await investigation.answers(self.jobs, job_id)
            except UserError:  # it failed or was cancelled: its progress note says why
                return
            sru = await off_loop(investigation_report.sru_draft, found, job_id)  # git
            text = investigation_report.markdown(job_id, found, sru)
            status = found.result.status
        elif result is not None:
            text = await off_loop(summary, result, job_id)
        else:
            return
        project = self.gl.projects.get(job.target.project, lazy=True)
        if "report" not in job.posted:
            if result is not None:
                png = await asyncio.to_thread(
                    plot_scores, result, self.config.state.parent / f"{job_id}.png"
                )
                name, data = f"{job_id}.png", png.read_bytes()
                png.unlink(missing_ok=True)
                upload = await asyncio.to_thread(project.upload, name, filedata=data)
                text += f"\n\n{upload['markdown']}"
            await self._note(job.target, text)
            job.posted.append("report")
            self._save()
        label = f"kbisect::{status}"
        manager = project.mergerequests if job.target.kind == "merge_request" else project.issues
        await asyncio.to_thread(manager.update, job.target.iid, {"add_labels": label})

    # --- series watches' alerts ----------------------------------------------------
    async def _follow_series(self, where: SeriesIssue) -> None:
        """Each alert of the watch, and each tick blocked on the host, oldest first, once
        (by its key) as a note on the issue, looked for every `alerts_every` seconds from the
        last tick read, however long ago. GitLab notes take no idempotency key: a crash
        between a note and the state file's save would post that one alert again."""
        while True:
            try:
                since = self.series_since.get(where.watch, "")
                news = await series_client.news(self.jobs, where.watch, since)
                for alert in news.alerts:
                    if alert.key not in self.alerts:
                        await self._post_alert(where, alert)
                for blocked in news.blocked:
                    if blocked.key not in self.alerts:
                        body = f"- {md_text(blocked.line())}"
                        await self._series_note(where, body, blocked.key)
                self.series_since[where.watch] = news.since
                self._save()
            except (KbisectError, gitlab.GitlabError) as exc:
                log.warning("series %s: %s; looking again", where.watch, exc)
            except Exception:  # not foreseen: the receiver serves on
                log.exception("series %s; looking again", where.watch)
            await asyncio.sleep(self.config.alerts_every)

    async def _post_alert(self, where: SeriesIssue, alert: SeriesAlert) -> None:
        """The alert's lines and the sweep's plot (uploaded to the project) in one note."""
        from kbisect.reports.sweep_plot import plot_sweep

        result = await self.jobs.sweep_result(alert.sweep)
        project = self.gl.projects.get(where.project, lazy=True)
        png = await off_loop(plot_sweep, result, self.config.state.parent / f"{alert.sweep}.png")
        upload = await asyncio.to_thread(project.upload, png.name, filedata=png.read_bytes())
        png.unlink(missing_ok=True)
        lines = alert_lines(alert, result)
        body = "\n".join(f"- {md_text(line)}" for line in lines) + f"\n\n{upload['markdown']}"
        await self._series_note(where, body, alert.key)

    async def _series_note(self, where: SeriesIssue, body: str, key: str) -> None:
        """A watch's note on its issue, its key then kept as posted."""
        project = self.gl.projects.get(where.project, lazy=True)
        issue = project.issues.get(where.issue, lazy=True)
        await asyncio.to_thread(issue.notes.create, {"body": _safe(body)})
        self.alerts.append(key)
        self._save()
        log.info(
            "series %s: alert %s posted on %s#%d", where.watch, key, where.project, where.issue
        )

    def _signoff(self) -> str | None:
        """The SRU commit's sender: --signoff, else the token's user as GitLab shows it."""
        if self.config.signoff:
            return self.config.signoff
        user = self.gl.user
        name = getattr(user, "name", "") if user else ""
        mail = next(
            (m for k in ("commit_email", "email", "public_email") if (m := getattr(user, k, ""))),
            "",
        )
        return f"{name} <{mail}>" if name and mail else None

    async def _sru_branch(self, target: Target, cmd: Command) -> Reply:
        """The tested commit on a new branch, and a merge request of it."""
        job, branch = await bisection_of(self.jobs, cmd.job or ""), cmd.one("branch") or ""
        result = await self.jobs.result(job)
        note = md_lines(await off_loop(sru_text, result, job, cmd))
        made = await off_loop(sru_commit, result, job, sru_options(cmd, self._signoff()))
        changes = await off_loop(tested_changes, Git(Path(result.repo)), made)
        project = self.gl.projects.get(target.project, lazy=True)

        mr = await asyncio.to_thread(
            push_sru_branch, project, target.branch, branch, made, changes, job, note, _safe
        )
        return Reply(
            f"kbisect opened !{mr.iid} from {code_span(branch)} into {code_span(target.branch)}: "
            f"{mr.web_url} ({made.provenance}: the change kbisect tested on {made.onto[:12]})",
            markdown=True,
        )


def _markdown_of(reply: Reply) -> str:
    """A reply's text as a note's markdown: kbisect's markdown as it is, a mail (verbatim)
    as a code block that shows it as it is, for copying, and other text escaped line by
    line."""
    if reply.markdown:
        return reply.text
    return "\n".join(md_code(reply.text)) if reply.verbatim else md_lines(reply.text)


def _safe(body: str) -> str:
    """A note of ours must never act when GitLab takes it, nor when its hook comes back to
    us: no line starts with "/" (a quick action such as `/close`, applied as the bot's; or
    our own `/kbisect`) and no mention (`@all`) notifies. body is markdown of ours: others'
    words in it escaped (md_text, md_lines), or in a fenced code block."""
    return inert(body, "/", markdown=True)
