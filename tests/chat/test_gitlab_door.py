"""The GitLab receiver, over real HTTP on 127.0.0.1. No GitLab server runs here: the calls
python-gitlab makes are checked with `responses` against the shapes GitLab's REST API
documents (notes, uploads, issue labels, branches, repository files, commits with actions,
merge requests). The job service is a recording stand-in: a real job from a door is the Matrix
end-to-end test's; here what counts is what the receiver starts, how often, and says."""

import asyncio
import dataclasses
import html
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import gitlab
import pytest
import pytest_asyncio
import responses
from aiohttp import web
from markdown_it import MarkdownIt
from temporalio.client import WorkflowExecutionStatus

from benchmarks.nginx import free_port
from kbisect.builders.verify_commit import make_verify_commit
from kbisect.contract import (
    BACKPORT_WORKFLOW,
    DOOR_RUNNING_JOBS,
    EXPLAIN_WORKFLOW,
    INVESTIGATION_WORKFLOW,
    WORKFLOW,
    TestStatus,
)
from kbisect.doors.gitlab import (
    FollowedJob,
    GitLabConfig,
    GitLabDoor,
    Target,
    _safe,
    commands_in,
)
from kbisect.doors.quoting import WORD_JOINER, inert
from kbisect.errors import UserError
from kbisect.infra import qemu
from kbisect.infra.git import Git
from kbisect.jobs.explain_job import explain_id
from kbisect.reports.lines import md_code, md_lines
from kbisect.reports.sru_branch import push_sru_branch
from kbisect.reports.sru_patch import SruCommit
from kbisect.settings import Settings
from kbisect.workflows.bisect_types import (
    BadBoot,
    BisectRequest,
    BisectResult,
    Progress,
    Step,
    Verification,
)
from kbisect.workflows.explain_types import ExplainResult
from kbisect.workflows.investigation_types import (
    InvestigationProgress,
    InvestigationRequest,
    InvestigationResult,
    Stage,
    StageName,
    StageState,
)
from tests.chat.hanging_git import HangingGitServer, hanging_tree
from tests.conftest import git, tree_lab

GITLAB = "https://gitlab.example.com"
API = f"{GITLAB}/api/v4"
SECRET = "s3cret-hook-token"
PROJECT = 7


JOB = "inv-nvme-snapshot-read-00000001"  # the first investigation a note starts
BISECTION = f"{JOB}-bisect"  # its bisection


@dataclass
class RecordingJobs:
    """JobClient's calls the receiver makes, with a scripted investigation: its bisection
    runs two looks, then has found; the investigation ends with it."""

    started: list[BisectRequest] = field(default_factory=list)  # each investigation's
    looks: int = 0
    result_of: dict[str, BisectResult] = field(default_factory=dict)  # by bisection id
    cancelled: list[str] = field(default_factory=list)
    explained: dict[str, ExplainResult] = field(default_factory=dict)  # by explain job id
    stages: dict[str, str] = field(default_factory=dict)  # explain and backport jobs: kind
    investigations: dict[str, str] = field(default_factory=dict)  # its bisection, by id
    edit: Callable[[BisectResult], BisectResult] = lambda r: r  # a test's, to each result

    def needs(self) -> list[object]:
        return []

    async def describe(self, job_id: str) -> SimpleNamespace:
        if job_id in self.stages:
            return SimpleNamespace(workflow_type=self.stages[job_id])
        if job_id in self.investigations:
            return SimpleNamespace(workflow_type=INVESTIGATION_WORKFLOW)
        if job_id in self.result_of:
            return SimpleNamespace(workflow_type=WORKFLOW)
        raise UserError(f"no job {job_id!r}")

    async def start_explain(self, req: object, job_id: str, by: str = "") -> str:
        self.stages[job_id], self.by = EXPLAIN_WORKFLOW, by
        return job_id

    async def start_backport(self, req: object, job_id: str, by: str = "") -> str:
        self.stages[job_id], self.by = BACKPORT_WORKFLOW, by
        return job_id

    async def backport_result(self, job_id: str) -> None:
        raise UserError(f"job {job_id} failed: no build host")

    async def sweep_result(self, job_id: str) -> None:
        raise UserError(f"no job {job_id!r}")

    async def status_of(self, job_id: str) -> WorkflowExecutionStatus | None:
        # an explain job given its answer; none else: an SRU note goes without Why
        if job_id in self.explained:
            return WorkflowExecutionStatus.COMPLETED
        if job_id in self.result_of:  # a bisection: it runs two looks
            running = self.looks <= 2
            return WorkflowExecutionStatus.RUNNING if running else WorkflowExecutionStatus.COMPLETED
        return None

    async def explain_result(self, job_id: str) -> ExplainResult:
        if job_id not in self.explained:
            raise UserError(f"job {job_id} failed: no explain boot")
        return self.explained[job_id]

    async def require_workers(self, needs: object, *args: object) -> None:
        return None

    async def start_investigation(self, req: InvestigationRequest, by: str = "") -> str:
        assert req.bisection is not None
        self.started.append(req.bisection)
        self.by = by
        job = f"inv-nvme-snapshot-read-{len(self.started):08x}"
        self.investigations[job] = f"{job}-bisect"
        self.result_of[f"{job}-bisect"] = self.edit(_result(req.bisection))
        return job

    async def bisection_of(self, job_id: str) -> str:
        return self.investigations.get(job_id, job_id)

    async def investigation_progress(self, job_id: str) -> InvestigationProgress:
        bisection = self.investigations[job_id]
        stage = Stage(StageName.BISECT, bisection, WORKFLOW)
        return InvestigationProgress("bisect", f"job {bisection}", [stage])

    async def investigation_result(self, job_id: str) -> InvestigationResult:
        bisection = self.investigations[job_id]
        r = self.result_of[bisection]
        line = f"{r.status}: {r.message}"
        stage = Stage(StageName.BISECT, bisection, WORKFLOW, StageState.DONE, line)
        return InvestigationResult([stage], r.status, r.message, r.culprit, bisection, r.testcase)

    def job_url(self, job_id: str) -> str:
        return f"http://127.0.0.1:8233/namespaces/default/workflows/{job_id}"

    async def running(self, job_id: str) -> bool:
        if job_id in self.investigations:  # while its bisection does
            return self.looks <= 2
        self.looks += 1
        return self.looks <= 2

    async def progress(self, job_id: str) -> Progress:
        r = self.result_of[job_id]
        status = "calibrating" if self.looks == 1 else "bisecting"
        return Progress(status=status, metric=r.metric, steps=r.steps[: self.looks - 1])

    async def result(self, job_id: str) -> BisectResult:
        return self.result_of[job_id]

    async def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)

    async def job_request(self, job_id: str) -> BisectRequest | None:
        r = self.result_of[job_id]
        return BisectRequest(repo=r.repo, good=r.old, bad=r.new, testcase=r.testcase)


def _result(req: BisectRequest) -> BisectResult:
    old, new = req.good[0], req.bad
    culprit = new
    tested = make_verify_commit(Git(Path(req.repo)), culprit, new, revert=True)  # as the worker
    return BisectResult(
        status="found",
        mode=req.mode,
        testcase=req.testcase,
        repo=req.repo,
        old=[old],
        new=new,
        culprit=culprit,
        candidates=[culprit],
        steps=[
            Step(old, "add a", "good", "endpoint", value=512.0, index=-1, boots=1),
            Step(new, "add c", "bad", "endpoint", value=8.0, index=1, boots=1),
        ],
        message="first bad commit",
        subjects={culprit: "add c"},
        metric="avg_read_sectors",
        unit="sectors",
        verification=Verification(
            kind="revert",
            change=culprit,
            onto=new,
            status="confirmed",
            message="ok",
            commit=tested.commit,
        ),
    )


@dataclass
class Calls:
    """What reached the (mocked) GitLab API: method, path, JSON or form body."""

    seen: list[tuple[str, str, Any]] = field(default_factory=list)

    def of(self, method: str, pattern: str) -> list[Any]:
        return [b for m, p, b in self.seen if m == method and re.fullmatch(pattern, p)]


def _gitlab_api(mock: responses.RequestsMock, calls: Calls, blobs: dict[str, str]) -> None:
    note_ids = iter(range(100, 10_000))

    def record(request: Any) -> Any:
        path = request.path_url.split("?")[0].removeprefix("/api/v4")
        ctype = request.headers.get("Content-Type", "")
        body: Any = request.body
        if body and "json" in ctype:
            body = json.loads(body)
        calls.seen.append((request.method, path, body))
        return path, body

    def note(request: Any) -> tuple[int, dict[str, str], str]:
        _, body = record(request)
        return 201, {}, json.dumps({"id": next(note_ids), "body": body["body"]})

    def ok(payload: dict[str, Any], status: int = 200) -> Any:
        def reply(request: Any) -> tuple[int, dict[str, str], str]:
            record(request)
            return status, {}, json.dumps(payload)

        return reply

    user = {
        "id": 99,
        "username": "kbisect-bot",
        "name": "Kay Bisect",
        "email": "kay@example.com",
        "commit_email": "kay@example.com",
    }
    mock.add_callback(
        responses.GET, f"{API}/user", callback=ok(user), content_type="application/json"
    )
    notes = re.compile(rf"{API}/projects/{PROJECT}/(issues|merge_requests)/\d+/notes")
    mock.add_callback(responses.POST, notes, callback=note, content_type="application/json")
    edit = re.compile(rf"{API}/projects/{PROJECT}/(issues|merge_requests)/\d+/notes/\d+")
    mock.add_callback(
        responses.PUT, edit, callback=ok({"id": 1, "body": "x"}), content_type="application/json"
    )
    upload = {
        "alt": "plot",
        "url": "/uploads/66dbcd21ec5d24ed6ea225176098d52b/plot.png",
        "full_path": "/group/project/uploads/66dbcd21ec5d24ed6ea225176098d52b/plot.png",
        "markdown": "![plot](/uploads/66dbcd21ec5d24ed6ea225176098d52b/plot.png)",
    }
    mock.add_callback(
        responses.POST,
        f"{API}/projects/{PROJECT}/uploads",
        callback=ok(upload, 201),
        content_type="application/json",
    )
    labels = re.compile(rf"{API}/projects/{PROJECT}/(issues|merge_requests)/\d+")
    mock.add_callback(
        responses.PUT,
        labels,
        callback=ok({"iid": 3, "labels": ["kbisect::found"]}),
        content_type="application/json",
    )
    target = {"name": "stable-6.1", "commit": {"id": "f" * 40, "short_id": "ffffffff"}}
    mock.add_callback(
        responses.GET,
        f"{API}/projects/{PROJECT}/repository/branches/stable-6.1",
        callback=ok(target),
        content_type="application/json",
    )

    def file_head(request: Any) -> tuple[int, dict[str, str], str]:
        record(request)
        path = request.path_url.split("?")[0].rsplit("/files/", 1)[1]
        blob = blobs.get(path.replace("%2F", "/"))
        if blob is None:
            return 404, {}, ""
        return 200, {"X-Gitlab-Blob-Id": blob, "X-Gitlab-File-Path": path}, ""

    files = re.compile(rf"{API}/projects/{PROJECT}/repository/files/[^?]+")
    mock.add_callback(responses.HEAD, files, callback=file_head)
    commit = {"id": "b" * 40, "short_id": "bbbbbbbb", "title": "Revert"}
    mock.add_callback(
        responses.POST,
        f"{API}/projects/{PROJECT}/repository/commits",
        callback=ok(commit, 201),
        content_type="application/json",
    )
    mr = {"iid": 12, "web_url": f"{GITLAB}/group/project/-/merge_requests/12"}
    mrs = f"{API}/projects/{PROJECT}/merge_requests"
    mock.add_callback(responses.POST, mrs, callback=ok(mr, 201), content_type="application/json")


def shown(body: str) -> str:
    """A note's text as GitLab shows it: its markdown rendered (CommonMark), tags dropped."""
    return html.unescape(re.sub(r"<[^>]*>", "", MarkdownIt("commonmark").render(body)))


def hook(note_id: int, text: str, author: str = "alice", on: str = "Issue") -> dict[str, Any]:
    """A Note Hook payload, shaped as GitLab's webhook documentation shows it."""
    payload: dict[str, Any] = {
        "object_kind": "note",
        "event_type": "note",
        "user": {"id": 1, "name": "Alice", "username": author},
        "project_id": PROJECT,
        "project": {
            "id": PROJECT,
            "name": "kernel",
            "default_branch": "master",
            "web_url": f"{GITLAB}/group/kernel",
            "path_with_namespace": "group/kernel",
        },
        "object_attributes": {
            "id": note_id,
            "note": text,
            "noteable_type": on,
            "author_id": 1,
            "project_id": PROJECT,
            "url": f"{GITLAB}/group/kernel/-/issues/3#note_{note_id}",
        },
    }
    if on == "Issue":
        payload["issue"] = {"id": 301, "iid": 3, "title": "read slowdown", "state": "opened"}
    else:
        payload["merge_request"] = {"id": 401, "iid": 4, "target_branch": "stable-6.1"}
    return payload


@dataclass
class Receiver:
    url: str
    door: GitLabDoor
    jobs: RecordingJobs
    calls: Calls
    upstream: Path
    blobs: dict[str, str]  # the target branch's files in the mocked project: path -> blob id
    settings: Settings

    async def post(
        self, payload: object, token: str | None = SECRET, event: str = "Note Hook"
    ) -> tuple[int, Any]:
        headers = {"X-Gitlab-Event": event}
        if token is not None:
            headers["X-Gitlab-Token"] = token
        async with (
            aiohttp.ClientSession() as s,
            s.post(self.url, json=payload, headers=headers) as r,
        ):
            return r.status, await r.json()

    async def settle(self) -> None:
        while self.door.tasks:
            await asyncio.gather(*list(self.door.tasks))


@pytest_asyncio.fixture
async def receiver(tmp_path: Path, cache: Path) -> AsyncIterator[Receiver]:
    upstream, settings = tree_lab(tmp_path, cache)
    calls, jobs, blobs = Calls(), RecordingJobs(), {}
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        _gitlab_api(mock, calls, blobs)
        config = GitLabConfig(
            url=GITLAB, token="glpat-x", secret=SECRET, state=tmp_path / "gl.json"
        )
        gl = gitlab.Gitlab(GITLAB, private_token="glpat-x")
        door = GitLabDoor(config, settings, jobs, gl)  # type: ignore[arg-type]
        door_poll = 0.01
        import kbisect.doors.job_posts as posts

        saved, posts.POLL_SECONDS = posts.POLL_SECONDS, door_poll
        await door.start()
        runner = web.AppRunner(door.app())
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            url = f"http://127.0.0.1:{port}/webhook"
            yield Receiver(url, door, jobs, calls, upstream, blobs, settings)
        finally:
            posts.POLL_SECONDS = saved
            await runner.cleanup()


BISECT = "/kbisect bisect tree=lab good=v1 bad=master testcase=nvme-snapshot-read"


@pytest.mark.asyncio
async def test_a_job_whose_reply_gitlab_refuses_is_still_the_doors(receiver: Receiver) -> None:
    """GitLab refuses the reply note (and the progress note) once the job has started: the
    job is counted against its starter and followed all the same, its progress in a note
    its follower makes."""
    door, real_note, refused = receiver.door, receiver.door._note, [0]

    async def note(target: Target, body: str) -> int:
        if refused[0] < 2:
            refused[0] += 1
            raise gitlab.GitlabCreateError("502 Bad Gateway", 502)
        return await real_note(target, body)

    door._note = note  # type: ignore[method-assign]
    await receiver.post(hook(51, BISECT))
    with pytest.raises(gitlab.GitlabCreateError):  # the command's task, as GitLab said
        await receiver.settle()
    await receiver.settle()  # the job's follower
    job = JOB
    assert refused == [2] and receiver.jobs.started
    followed = door.followed[job]
    assert followed.by == "alice" and followed.done and followed.progress_note
    (progress, report) = receiver.calls.of("POST", rf"/projects/{PROJECT}/issues/3/notes")
    assert progress["body"].startswith(f"kbisect `{job}`") and report["body"].startswith("# ")


@pytest.mark.asyncio
async def test_wrong_or_missing_token_is_401_and_starts_nothing(receiver: Receiver) -> None:
    assert (await receiver.post(hook(1, BISECT), token="wrong"))[0] == 401
    assert (await receiver.post(hook(1, BISECT), token=None))[0] == 401
    await receiver.settle()
    assert receiver.jobs.started == [] and receiver.calls.of("POST", r".*/notes") == []


@pytest.mark.asyncio
async def test_a_note_starts_one_job_however_often_it_is_delivered(receiver: Receiver) -> None:
    payload = hook(11, f"Please bisect this:\n{BISECT}\nthanks")
    first, again = await asyncio.gather(receiver.post(payload), receiver.post(payload))
    assert sorted([first[0], again[0]]) == [200, 202]
    await receiver.settle()
    assert (await receiver.post(payload))[1] == {"duplicate": 11}
    await receiver.settle()
    assert len(receiver.jobs.started) == 1
    req = receiver.jobs.started[0]
    head = git(receiver.upstream, "rev-parse", "master").strip()
    assert req.tree == "lab" and req.bad == head and req.testcase == "nvme-snapshot-read"
    assert receiver.jobs.by == f"@alice (GitLab {PROJECT})"  # the job's "submitted by"

    notes = receiver.calls.of("POST", rf"/projects/{PROJECT}/issues/3/notes")
    job = JOB
    assert notes[0]["body"].startswith(f"kbisect started `{job}`: http://127.0.0.1:8233/")
    assert notes[1]["body"] == f"kbisect `{job}`: waiting to start"  # the progress note
    edits = receiver.calls.of("PUT", rf"/projects/{PROJECT}/issues/3/notes/101")
    assert any("- calibrating" in e["body"] for e in edits)
    lines = edits[-1]["body"].splitlines()  # the investigation's stage, its story, its end
    assert lines[2] == f"- bisect: job {BISECTION}"
    assert any(ln.startswith("- first bad commit: ") for ln in lines[3:-2]), lines
    assert lines[-2:] == ["- (report below)", f"- {job} found: first bad commit"]
    report = notes[2]["body"]  # the investigation's: each stage's answer, the SRU draft
    assert report.startswith(f"# kbisect {job}") and "![plot](/uploads/" in report
    assert f"## Bisect: {BISECTION}" in report and "## SRU draft" in report
    assert len(notes) == 3
    upload = receiver.calls.of("POST", rf"/projects/{PROJECT}/uploads")
    assert len(upload) == 1 and b'filename="inv-nvme' in upload[0]  # multipart, field "file"
    assert b'name="file"' in upload[0]
    assert receiver.calls.of("PUT", rf"/projects/{PROJECT}/issues/3") == [
        {"add_labels": "kbisect::found"}
    ]


@pytest.mark.asyncio
async def test_bad_text_gets_one_line_and_nothing_runs(receiver: Receiver, tmp_path: Path) -> None:
    texts = {
        21: f"/kbisect bisect tree=lab good=$(touch {tmp_path}/pwned) bad=x testcase=t",
        22: "/kbisect bisect tree=lab good=v1 bad=-x testcase=t",
        23: "/kbisect bisect tree=lab good=v1 bad=master testcase=t repo=/etc",
        24: "/kbisect bisect tree=nope good=v1 bad=master testcase=nvme-snapshot-read",
    }
    for note_id, text in texts.items():
        assert (await receiver.post(hook(note_id, text)))[0] == 202
    await receiver.settle()
    bodies = [n["body"] for n in receiver.calls.of("POST", r".*/issues/3/notes")]
    assert len(bodies) == 4 and all("\n" not in b for b in bodies), bodies
    assert "'$' is not allowed" in shown(bodies[0]) and "starts with '-'" in bodies[1]
    assert "unknown key 'repo'" in bodies[2] and "no tree 'nope'" in bodies[3]
    assert receiver.jobs.started == [] and not (tmp_path / "pwned").exists()


@pytest.mark.asyncio
async def test_own_notes_and_other_events_are_ignored(receiver: Receiver) -> None:
    assert (await receiver.post(hook(31, BISECT, author="kbisect-bot")))[1] == {
        "ignored": "no /kbisect command"
    }
    assert (await receiver.post(hook(32, "just a comment")))[0] == 200
    assert (await receiver.post({"object_kind": "push"}, event="Push Hook"))[0] == 200
    assert (await receiver.post({"object_kind": "note"}))[0] == 400
    await receiver.settle()
    assert receiver.jobs.started == [] and receiver.calls.of("POST", r".*/notes") == []


@pytest.mark.asyncio
async def test_sru_pushes_the_tested_commit_and_opens_a_merge_request(receiver: Receiver) -> None:
    await receiver.post(hook(41, BISECT))
    await receiver.settle()
    job = JOB  # the investigation: sru takes its bisection
    result = receiver.jobs.result_of[BISECTION]
    # The target branch has c as the tested commit's parent (the new endpoint) has it.
    receiver.blobs["c"] = git(receiver.upstream, "rev-parse", "master:c").strip()
    sru = f"/kbisect sru {job} series=noble bug=2012345 branch=sru/nvme"
    await receiver.post(hook(42, sru, on="MergeRequest"))
    await receiver.settle()
    assert receiver.calls.of("GET", rf"/projects/{PROJECT}/repository/branches/stable-6.1")
    assert len(receiver.calls.of("HEAD", rf"/projects/{PROJECT}/repository/files/c")) == 1
    (commit,) = receiver.calls.of("POST", rf"/projects/{PROJECT}/repository/commits")
    # What kbisect built and booted (the culprit reverted on the new endpoint): c removed.
    assert result.verification and result.verification.commit
    tested = result.verification.commit
    assert git(Path(result.repo), "ls-tree", "--name-only", tested) == "a\nb\n"
    assert commit["actions"] == [{"action": "delete", "file_path": "c"}]
    assert (commit["branch"], commit["start_sha"]) == ("sru/nvme", "f" * 40)
    assert (commit["author_name"], commit["author_email"]) == ("Kay Bisect", "kay@example.com")
    message = commit["commit_message"].splitlines()
    assert message[0] == 'Revert "add c"'
    assert message[2] == "BugLink: https://bugs.launchpad.net/bugs/2012345"
    assert message[-1] == "Signed-off-by: Kay Bisect <kay@example.com>"
    (mr,) = receiver.calls.of("POST", rf"/projects/{PROJECT}/merge_requests")
    assert (mr["source_branch"], mr["target_branch"]) == ("sru/nvme", "stable-6.1")
    assert mr["title"] == 'Revert "add c"' and "SRU Justification" in mr["description"]
    assert "in Noble" in mr["description"]  # the series the command names
    (reply,) = receiver.calls.of("POST", rf"/projects/{PROJECT}/merge_requests/4/notes")
    assert shown(reply["body"]).startswith("kbisect opened !12 from sru/nvme into stable-6.1")
    assert "revert: the change kbisect tested on" in reply["body"]


@pytest.mark.asyncio
async def test_sru_refuses_a_branch_whose_files_differ_from_the_tested_ones(
    receiver: Receiver,
) -> None:
    await receiver.post(hook(51, BISECT))
    await receiver.settle()
    job = JOB
    receiver.blobs["c"] = "0" * 40  # the branch has another c than the one tested
    await receiver.post(hook(52, f"/kbisect sru {job} branch=sru/nvme", on="MergeRequest"))
    await receiver.settle()
    (reply,) = receiver.calls.of("POST", rf"/projects/{PROJECT}/merge_requests/4/notes")
    assert "\n" not in reply["body"]
    assert shown(reply["body"]).startswith("`stable-6.1` (ffffffffffff) has other versions of c")
    assert f"kbisect report {BISECTION} --sru-patch DIR" in reply["body"]
    assert receiver.calls.of("POST", r".*/repository/commits") == []
    assert receiver.calls.of("POST", r".*/merge_requests") == []


@pytest.mark.asyncio
async def test_sru_text_in_a_note_names_the_series_and_bug(receiver: Receiver) -> None:
    await receiver.post(hook(61, BISECT))
    await receiver.settle()
    job = JOB
    await receiver.post(hook(62, f"/kbisect sru {job} series=focal bug=77"))
    await receiver.settle()
    body = receiver.calls.of("POST", rf"/projects/{PROJECT}/issues/3/notes")[-1]["body"]
    assert body.startswith("SRU Justification") and "in Focal" in body
    assert "BugLink" not in body or "bugs/77" in body


@pytest.mark.asyncio
async def test_allowed_users_only(receiver: Receiver) -> None:
    receiver.door.config = dataclasses.replace(receiver.door.config, allowed=("bob",))
    await receiver.post(hook(71, BISECT, author="alice"))
    await receiver.settle()
    (reply,) = receiver.calls.of("POST", rf"/projects/{PROJECT}/issues/3/notes")
    named = f"Sorry @{WORD_JOINER}alice"  # named, not mentioned: no note of the door notifies
    assert reply["body"].startswith(named) and receiver.jobs.started == []


def test_the_receiver_needs_allowed_users_or_allow_anyone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kbisect.main import main

    argv = ["gitlab", "serve", "--listen", "127.0.0.1:1", "--url", GITLAB]
    argv += ["--token-file", str(tmp_path / "t"), "--webhook-secret-file", str(tmp_path / "s")]
    with pytest.raises(SystemExit):
        main(argv)
    assert "one of the arguments --allow-user --allow-anyone is required" in capsys.readouterr().err


@pytest.mark.asyncio
async def test_start_up_warns_when_anyone_is_obeyed(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="kbisect.gitlab"):
        await receiver.door.start()
    assert any("obeying everyone who can comment" in r.message for r in caplog.records)


HOSTILE = "x\n/close\n/label ~pwned\n@all"  # a guest's reason: GitLab's quick actions, a ping


@pytest.mark.asyncio
async def test_a_guests_words_in_a_note_close_nothing_and_ping_no_one(receiver: Receiver) -> None:
    """A failed explain boot's reason, as the result channel gives it, in the door's note of
    the explain answer: on one line, no line of the note a quick action, no mention."""
    raw = qemu.RECORD_PREFIX + json.dumps({"event": "harness-failed", "reason": HOSTILE}) + "\n"
    _, detail = qemu.classify_run(qemu.parse_records(raw), "", True)
    job, parent, culprit = "bisect-nvme-snapshot-read-00000001", "a" * 40, "c" * 40
    receiver.door.followed[job] = FollowedJob(Target(PROJECT, "issue", 3, "master"), 1, done=True)
    receiver.jobs.explained[explain_id(job)] = ExplainResult(
        "explained", "/repo", "nvme-snapshot-read", "avg_read_sectors", "sectors", "higher",
        parent, culprit, ["add b", "add c"], job=job, boots=1,
        failed=[f"culprit {culprit[:12]}: {TestStatus.TESTCASE_FAILED}: explain boot: {detail}"],
    )  # fmt: skip
    await receiver.post(hook(95, f"/kbisect explain {job}"))
    await receiver.settle()
    (note,) = receiver.calls.of("POST", rf"/projects/{PROJECT}/issues/3/notes")
    body = note["body"]
    assert "failed boot: culprit cccccccccccc" in body and "x /close /label ~pwned" in shown(body)
    assert [ln for ln in body.splitlines() if ln.lstrip().startswith("/")] == []
    assert "@all" not in body


def test_quoting_leaves_no_quick_action_and_no_mention() -> None:
    """Each hostile line stays one line, shown as it was (CommonMark, as GitLab renders it),
    but none starts with "/" and no @ is followed by a name's character."""
    hostile = [
        "/close",
        "  /label ~x",
        "@all",
        "cc @user, @group/sub and (@someone)",
        "/assign @me `code` and ``two`` backticks",
        "` /unlabel ~y`",
        "mail kay@example.com",
    ]
    posted = inert("\n".join(hostile), "/").split("\n")
    assert len(posted) == len(hostile)
    mention = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9_.]")  # GitLab's: (?<!\w)@name
    for line in posted:
        assert not line.lstrip().startswith("/") and not mention.search(line), line
    md = MarkdownIt("commonmark")
    assert md.render(posted[0]) == "<p><code>/close</code></p>\n"
    shown = md.render(posted[4]).replace(WORD_JOINER, "")
    assert shown == "<p><code>/assign @me `code` and ``two`` backticks</code></p>\n"
    assert (
        posted[3] == f"cc @{WORD_JOINER}user, @{WORD_JOINER}group/sub and (@{WORD_JOINER}someone)"
    )
    assert posted[6] == "mail kay@example.com"  # an address, not a mention


def test_a_fenced_block_of_a_note_is_shown_as_it_is_and_the_rest_made_inert() -> None:
    """A console in a fenced code block (a report's bad boot) is shown as the guest wrote
    it: its mentions left (none notifies in code), its "/" lines a space in, never quoted in
    backticks. The same lines outside a fence, or in what only looks like one, are inert."""
    console = "/init: line 5: fio: not found\nmail a@b @all"
    fenced = [*md_code(f"{console}\n```"), "~~~~", "/close @all", "  ~~~~~  ", "```a`b", "/close"]
    posted = _safe("\n".join(["## The bad boot", "", *fenced, "", console]))
    blocks = [t.content for t in MarkdownIt("commonmark").parse(posted) if t.type == "fence"]
    assert blocks == [f" {console}\n```\n", " /close @all\n"]
    # "```a`b" opens no fence (a backtick after), so what follows it is not code
    inert_lines = ["` /init: line 5: fio: not found `", f"mail a@b @{WORD_JOINER}all"]
    assert posted.splitlines()[-5:] == ["```a`b", "` /close `", "", *inert_lines]


def test_plain_lines_escaped_for_a_note_show_as_they_are() -> None:
    """A line a line, as the same text: no emphasis from "x * y", no list, heading, rule or
    HTML, and no code block from a line's indent (which would show the escapes)."""
    lines = ["x * y, *z*, _w_, a_b", "    indented `code`", "1. one", "- two", "# three", "---"]
    lines += ["", "a | b <b>c</b> &amp; \\"]
    assert shown(md_lines("\n".join(lines))).splitlines() == [ln.strip() for ln in lines if ln]


# Markdown that a guest or a repository may write: an image the reader's browser would
# fetch, raw HTML, a link, and a comment that would hide the rest of the note.
MARKUP = "![p](http://127.0.0.2:9/t.png) <img src=x> [a](http://x) <!--"
MARKUP_SHOWN = html.escape(MARKUP, quote=False)  # in the rendered HTML, shown as text


def _rendered_inert(body: str) -> str:
    """body as CommonMark renders it, checked: no raw HTML, and no image or link but to the
    project's uploads (kbisect's plots and flame graphs)."""
    md = MarkdownIt("commonmark")
    tokens = [t for block in md.parse(body) for t in [block, *(block.children or [])]]
    assert [t.content for t in tokens if t.type.startswith("html")] == [], body
    for t in tokens:
        if t.type in ("image", "link_open"):
            assert str(t.attrs.get("src", t.attrs.get("href"))).startswith("/uploads/"), body
    return md.render(body)


def _with_markup(r: BisectResult) -> BisectResult:
    """r with markup in every guest's and repository's words it carries: each step's note
    (a guest's last words), the subjects, the verification's message, the bad boot."""
    assert r.verification is not None and r.culprit
    return dataclasses.replace(
        r,
        steps=[dataclasses.replace(s, note=MARKUP) for s in r.steps],
        subjects={c: f"{s} {MARKUP}" for c, s in r.subjects.items()},
        verification=dataclasses.replace(r.verification, message=MARKUP),
        bad_boot=BadBoot(r.culprit, "fails", f"{MARKUP}\n/init: line 5: fio: not found"),
    )


@pytest.mark.asyncio
async def test_markup_in_guests_and_repositorys_words_is_text_in_every_note(
    receiver: Receiver,
) -> None:
    """The door's plain posts (the progress note's steps and outcome, `status`, the explain
    answer with a failed boot's reason, the SRU merge request's description) show others'
    markdown as the text it is: no image that a reader's browser fetches, no link, no HTML."""
    job = BISECTION  # a stage job of the door's investigation
    receiver.jobs.edit = _with_markup
    await _said(receiver, 300, BISECT)
    receiver.jobs.explained[explain_id(job)] = dataclasses.replace(
        _explained(job),
        subjects=[f"add b {MARKUP}", f"add c {MARKUP}"],
        failed=[f"culprit cccccccccccc: {TestStatus.TESTCASE_FAILED}: {MARKUP}"],
    )
    (status,) = await _said(receiver, 301, f"/kbisect status {job}")
    (explained,) = await _said(receiver, 302, f"/kbisect explain {job}")
    receiver.blobs["c"] = git(receiver.upstream, "rev-parse", "master:c").strip()
    await receiver.post(hook(303, f"/kbisect sru {job} branch=sru/nvme", on="MergeRequest"))
    await receiver.settle()
    (mr,) = receiver.calls.of("POST", rf"/projects/{PROJECT}/merge_requests")
    progress = receiver.calls.of("PUT", rf"/projects/{PROJECT}/issues/3/notes/101")[-1]["body"]
    for body in (progress, status, explained, mr["description"]):
        assert MARKUP_SHOWN in _rendered_inert(body), body
    notes = receiver.calls.of("POST", r".*/notes") + receiver.calls.of("PUT", r".*/notes/\d+")
    for note in notes:
        _rendered_inert(note["body"])
    assert len(notes) > 8


@pytest.mark.asyncio
async def test_a_series_watchs_notes_show_guest_markup_as_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An alert (its kernels' names, its traced boots' words) and a blocked tick (its
    reason) show markup as the text it is."""
    from kbisect.doors.gitlab import SeriesIssue
    from kbisect.jobs import series_client
    from kbisect.reports import sweep_plot
    from kbisect.workflows.series_types import SeriesAlert
    from kbisect.workflows.sweep_types import PairWord, SweepPair, SweepResult, SweepTrace

    pair = SweepPair("t", "m", "MB/s", 0, 1, PairWord.CHANGED, "worse", -0.5, -0.6, -0.4)
    alert = SeriesAlert("w/k", "w", "series-w-1-sweep", f"v1 {MARKUP}", "v2", pair)
    traces = [SweepTrace("t", k, {"error": MARKUP}) for k in (0, 1)]
    kernels = ["v1", "v2"]
    result = SweepResult("r", ["a", "b"], kernels, kernels, [], [pair], [], 12, traces=traces)
    blocked = series_client.Blocked("series-w-2/blocked", "w", "series-w-2-sweep", MARKUP)

    async def news(jobs: object, watch: str, since: str) -> series_client.News:
        return series_client.News([alert], [blocked], "mark")

    class Sweeps:
        async def sweep_result(self, job_id: str) -> SweepResult:
            return result

    def plot(result: SweepResult, out: Path) -> Path:  # the plot is not what is tested
        out.write_bytes(b"png")
        return out

    monkeypatch.setattr(series_client, "news", news)
    monkeypatch.setattr(sweep_plot, "plot_sweep", plot)
    calls = Calls()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        _gitlab_api(mock, calls, {})
        config = GitLabConfig(
            url=GITLAB, token="glpat-x", secret=SECRET, state=tmp_path / "gl.json",
            series=(SeriesIssue.parse(f"w={PROJECT}#3"),),
        )  # fmt: skip
        settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})
        gl = gitlab.Gitlab(GITLAB, private_token="glpat-x")
        door = GitLabDoor(config, settings, Sweeps(), gl)  # type: ignore[arg-type]
        await door.start()
        async with asyncio.timeout(60):
            while len(calls.of("POST", r".*/notes")) < 2:
                await asyncio.sleep(0.01)
        for task in list(door.tasks):
            task.cancel()
    for note in calls.of("POST", r".*/notes"):
        assert MARKUP_SHOWN in _rendered_inert(note["body"]), note["body"]


def test_commands_are_found_at_line_starts_only() -> None:
    text = "see `/kbisect help`\n/kbisect status\n  /kbisect help\nx /kbisect cancel y"
    assert commands_in(text) == ["status", "help"]


def test_tested_changes_become_the_commits_api_actions(tmp_path: Path) -> None:
    """Each file the tested commit changes, with its bytes as tested (base64) and its mode."""
    import base64

    from kbisect.reports.sru_branch import tested_changes
    from kbisect.reports.sru_patch import SruCommit

    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "master")
    (repo / "drivers").mkdir()
    (repo / "drivers" / "f.c").write_text("int a;\n")
    (repo / "gone").write_text("x\n")
    (repo / "tool").write_text("#!/bin/sh\n")
    git(repo, "add", ".")
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    git(repo, *ident, "commit", "-qm", "base")
    onto = git(repo, "rev-parse", "HEAD").strip()
    (repo / "drivers" / "f.c").write_bytes(b"int a = 1;\n\xff\n")
    (repo / "drivers" / "new.c").write_text("int b;\n")
    (repo / "gone").unlink()
    (repo / "tool").chmod(0o755)
    git(repo, "add", "-A")
    git(repo, *ident, "commit", "-qm", "tested")
    tested = git(repo, "rev-parse", "HEAD").strip()
    made = SruCommit(tested, onto, "m", "revert", ("t", "t@t"), {})
    changes = {c.path: c for c in tested_changes(Git(repo), made)}
    assert changes["drivers/f.c"].old_blob == git(repo, "rev-parse", f"{onto}:drivers/f.c").strip()
    assert changes["drivers/new.c"].old_blob is None
    actions = [a for c in changes.values() for a in c.actions()]
    content = base64.b64encode(b"int a = 1;\n\xff\n").decode()
    assert actions == [
        {"action": "update", "file_path": "drivers/f.c", "content": content, "encoding": "base64"},
        {
            "action": "create",
            "file_path": "drivers/new.c",
            "content": base64.b64encode(b"int b;\n").decode(),
            "encoding": "base64",
        },
        {"action": "delete", "file_path": "gone"},
        {"action": "chmod", "file_path": "tool", "execute_filemode": True},
    ]


@pytest.mark.asyncio
async def test_a_hanging_fetch_holds_no_other_hook(receiver: Receiver) -> None:
    """While a bisect's fetch waits on a server that never answers, a hook with a wrong
    token is answered 401 and another note's command is answered, each within a second."""
    server = HangingGitServer(hold=5.0)
    try:
        hanging_tree(receiver.settings, "stuck", receiver.upstream, server.url())
        assert (await receiver.post(hook(81, BISECT.replace("tree=lab", "tree=stuck"))))[0] == 202
        while not server.accepted:  # the fetch is connected, waiting for an answer
            await asyncio.sleep(0.01)
        sent = time.monotonic()
        assert (await receiver.post(hook(82, BISECT), token="wrong"))[0] == 401
        assert time.monotonic() - sent < 1.0 and server.holding()
        sent = time.monotonic()
        assert (await receiver.post(hook(83, "/kbisect help")))[0] == 202
        while not receiver.calls.of("POST", r".*/notes") and time.monotonic() < sent + 5:
            await asyncio.sleep(0.01)
        (answer,) = receiver.calls.of("POST", r".*/notes")
        assert answer["body"].startswith("commands: ")
        assert time.monotonic() - sent < 1.0 and server.holding()
    finally:
        server.release()
    await receiver.settle()
    bodies = [n["body"] for n in receiver.calls.of("POST", r".*/issues/3/notes")]
    assert len(bodies) == 2 and "could not fetch" in bodies[1] and "\n" not in bodies[1]
    assert receiver.jobs.started == []


@pytest.mark.asyncio
async def test_a_note_of_many_commands_gets_one_reply(receiver: Receiver) -> None:
    receiver.door.config = dataclasses.replace(receiver.door.config, allowed=("alice",))
    many = "\n".join(["/kbisect help"] * 300)
    await receiver.post(hook(91, many, author="alice"))
    await receiver.settle()
    await receiver.post(hook(92, many, author="mallory"))
    await receiver.settle()
    await receiver.post(hook(93, "/kbisect help\n/kbisect testcases", author="alice"))
    await receiver.settle()
    bodies = [n["body"] for n in receiver.calls.of("POST", r".*/issues/3/notes")]
    assert len(bodies) == 4, bodies
    assert bodies[0].startswith("refused: 300 commands in one note") and "\n" not in bodies[0]
    assert bodies[1].startswith(f"Sorry @{WORD_JOINER}mallory")
    assert bodies[2].startswith("commands: ") and "nvme-snapshot-read" in bodies[3]


@pytest.mark.asyncio
async def test_parallel_is_bounded_as_on_the_command_line(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbisect.jobs.request import JobOptions, checked_request

    await receiver.post(hook(95, f"{BISECT} parallel=100000"))
    await receiver.settle()
    (reply,) = receiver.calls.of("POST", r".*/issues/3/notes")
    assert reply["body"].startswith("parallel 100000: give 1 to ") and "\n" not in reply["body"]
    assert receiver.jobs.started == []
    opts = JobOptions(good=["v1"], bad="master", testcase="nvme-snapshot-read", tree="lab")
    opts.parallel = 100000  # what `kbisect bisect --parallel 100000` checks the same way
    with pytest.raises(UserError, match="parallel 100000: give 1 to "):
        checked_request(opts, receiver.settings)


@pytest.mark.asyncio
async def test_the_door_acts_only_on_jobs_it_started_in_that_project(receiver: Receiver) -> None:
    await receiver.post(hook(101, BISECT))
    await receiver.settle()
    own = JOB
    result = receiver.jobs.result_of[BISECTION]
    receiver.blobs["c"] = git(receiver.upstream, "rev-parse", "master:c").strip()
    cli_job, elsewhere = "bisect-nvme-snapshot-read-cli1", "bisect-nvme-snapshot-read-other"
    receiver.jobs.result_of |= {cli_job: result, elsewhere: result}
    receiver.door.followed[elsewhere] = FollowedJob(  # started from another project
        target=Target(PROJECT + 1, "issue", 1, "master"), progress_note=1, done=True
    )
    before = len(receiver.calls.of("POST", r".*/notes"))
    note_id = 110
    for job in (cli_job, elsewhere):
        for cmd in ("report", "status", "cancel", "mark {} master bad", "sru", "sru {} branch=x"):
            text = cmd.format(job) if "{}" in cmd else f"{cmd} {job}"
            note_id += 1
            await receiver.post(hook(note_id, f"/kbisect {text}", on="MergeRequest"))
    await receiver.settle()
    bodies = [n["body"] for n in receiver.calls.of("POST", r".*/notes")][before:]
    assert len(bodies) == 12 and all("\n" not in b for b in bodies), bodies
    assert all(b.startswith("refused: ") and "not started here" in b for b in bodies), bodies
    assert receiver.jobs.cancelled == [] and receiver.calls.of("POST", r".*/commits") == []
    await receiver.post(hook(130, f"/kbisect cancel {own}", on="MergeRequest"))
    await receiver.settle()
    assert receiver.jobs.cancelled == [own]


@pytest.mark.asyncio
async def test_a_tree_urls_credentials_are_in_no_note(receiver: Receiver) -> None:
    url = f"http://kb:glpat-SECRET123@127.0.0.1:{free_port()}/linux.git"  # nothing listens
    hanging_tree(receiver.settings, "private", receiver.upstream, url)
    await receiver.post(hook(140, BISECT.replace("tree=lab", "tree=private")))
    await receiver.settle()
    (reply,) = receiver.calls.of("POST", r".*/issues/3/notes")
    assert f"could not fetch http://***@{WORD_JOINER}127.0.0.1:" in shown(reply["body"])
    assert "SECRET123" not in reply["body"] and "kb:" not in reply["body"]


@pytest.mark.parametrize("listen", [":99999", "0.0.0.0:99999", "0.0.0.0:0", "a b:80", "x:8o"])
def test_a_listen_address_out_of_range_is_one_line(
    listen: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kbisect.jobs.client import JobClient
    from kbisect.main import main

    async def no_service(*args: object) -> None:
        raise AssertionError("reached the job service with a bad --listen")

    monkeypatch.setattr(JobClient, "connect", no_service)
    for f in ("t", "s"):
        (tmp_path / f).write_text("x\n")
    argv = ["gitlab", "serve", "--listen", listen, "--url", GITLAB, "--allow-anyone"]
    argv += ["--token-file", str(tmp_path / "t"), "--webhook-secret-file", str(tmp_path / "s")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"--listen {listen}: " in err


def test_a_listen_address_is_host_and_port() -> None:
    from kbisect.doors.commands import listen_address

    assert listen_address("0.0.0.0:8093") == ("0.0.0.0", 8093)
    assert listen_address("[::1]:8093") == ("::1", 8093)
    assert listen_address("gitlab-hooks.example.org:443") == ("gitlab-hooks.example.org", 443)


@pytest.mark.asyncio
async def test_a_restarted_receiver_keeps_its_handled_notes(receiver: Receiver) -> None:
    payload = hook(12, BISECT)
    assert (await receiver.post(payload))[0] in (200, 202)
    await receiver.settle()
    assert len(receiver.jobs.started) == 1
    # A new receiver on the same state file, as after a restart; GitLab redelivers the hook.
    door = GitLabDoor(receiver.door.config, receiver.settings, receiver.jobs, receiver.door.gl)
    await door.start()
    runner = web.AppRunner(door.app())
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    again = dataclasses.replace(receiver, url=f"http://127.0.0.1:{port}/webhook", door=door)
    try:
        assert await again.post(payload) == (200, {"duplicate": 12})
        await again.settle()
    finally:
        await runner.cleanup()
    assert len(receiver.jobs.started) == 1


@pytest.mark.asyncio
async def test_series_alerts_are_one_note_each_on_their_issue_whatever_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbisect.doors.gitlab import SeriesIssue
    from kbisect.jobs import series_client
    from kbisect.workflows.series_types import SeriesAlert
    from kbisect.workflows.sweep_types import (
        PairWord,
        SweepBoot,
        SweepPair,
        SweepResult,
        SweepTestcase,
    )

    pair = SweepPair("t", "m", "MB/s", 0, 1, PairWord.CHANGED, "worse", -0.5, -0.6, -0.4)
    alert = SeriesAlert("w/a/b/t/m", "w", "series-w-1-sweep", "v1", "v2", pair)
    tc = SweepTestcase("t", "m", "MB/s", "higher", "fast", 3, 60.0)
    boots = [SweepBoot("t", k, v, [v]) for k, v in ((0, 512.0), (1, 8.0)) for _ in range(3)]
    result = SweepResult("r", ["a", "b"], ["v1", "v2"], ["v1", "v2"], [tc], [pair], boots, 12)

    blocked = series_client.Blocked("series-w-2/blocked", "w", "series-w-2-sweep", "disk full")
    mark = "2026-11-28T09:00:00+00:00"
    looks = [0]  # the door's looks for alerts, counted
    sinces: list[str] = []  # where each look read from

    async def news(jobs: object, watch: str, since: str) -> series_client.News:
        assert watch == "w"
        looks[0] += 1
        sinces.append(since)
        return series_client.News([alert], [blocked], mark)

    class Sweeps:
        async def sweep_result(self, job_id: str) -> SweepResult:
            assert job_id == alert.sweep
            return result

    monkeypatch.setattr(series_client, "news", news)
    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})
    calls = Calls()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        _gitlab_api(mock, calls, {})
        for _ in range(2):  # the receiver, then the receiver restarted from its state file
            config = GitLabConfig(
                url=GITLAB,
                token="glpat-x",
                secret=SECRET,
                state=tmp_path / "gl.json",
                series=(SeriesIssue.parse(f"w={PROJECT}#3"),),
                alerts_every=0.01,
            )
            gl = gitlab.Gitlab(GITLAB, private_token="glpat-x")
            door = GitLabDoor(config, settings, Sweeps(), gl)  # type: ignore[arg-type]
            await door.start()
            # Many looks after the first: a note not posted by then never is (a fixed
            # sleep was too short on a loaded host: the plot takes its time).
            first = looks[0]
            async with asyncio.timeout(120):
                while looks[0] < first + 20:
                    await asyncio.sleep(0.01)
            for task in list(door.tasks):
                task.cancel()
    notes = calls.of("POST", rf"/projects/{PROJECT}/issues/3/notes")
    assert len(notes) == 2, notes  # the alert, and the blocked tick: once each
    assert notes[1]["body"] == (
        "- kbisect alert: the watch w is blocked: disk full (sweep series-w-2-sweep: fix the "
        "host, then 'kbisect resume series-w-2-sweep')"
    )
    # The first look reads from the start; every later one, the restarted receiver's
    # first included, from the mark the last look left in the state file.
    assert sinces[0] == "" and set(sinces[1:]) == {mark}
    lines = notes[0]["body"].splitlines()
    assert lines[0] == (
        "- kbisect alert: w: t m: v1 -> v2: changed (worse), -50.0% (-60.0% to -40.0%), "
        "0+0 boots (sweep series-w-1-sweep)"
    )
    assert lines[1] == "- kbisect report series-w-1-sweep"
    assert lines[-1].startswith("![plot](/uploads/")
    assert len(calls.of("POST", rf"/projects/{PROJECT}/uploads")) == 1


def test_a_series_issue_is_watch_project_and_issue() -> None:
    from kbisect.doors.gitlab import SeriesIssue

    assert SeriesIssue.parse("cloud=kernel/sru#12") == SeriesIssue("cloud", "kernel/sru", 12)
    for bad in ("cloud", "cloud=kernel/sru", "cloud=#12", "cloud=kernel/sru#x", "Bad=p#1"):
        with pytest.raises(UserError):
            SeriesIssue.parse(bad)


def test_a_merge_requests_title_from_a_subject_pings_no_one() -> None:
    made = SruCommit("b" * 40, "c" * 40, "Fix @all reads\n\n/close\n", "revert", ("K", "k@x"), {})
    created: list[dict[str, str]] = []
    project = SimpleNamespace(
        branches=SimpleNamespace(get=lambda _: SimpleNamespace(commit={"id": "f" * 40})),
        commits=SimpleNamespace(create=lambda _: None),
        mergerequests=SimpleNamespace(create=lambda data: created.append(data)),
    )
    push_sru_branch(project, "stable", "sru/x", made, [], "job", made.message, _safe)
    (mr,) = created
    assert "@all" not in mr["title"] and "@all" not in mr["description"]
    assert not any(ln.lstrip().startswith("/") for ln in mr["description"].splitlines())


def _explained(job: str) -> ExplainResult:
    return ExplainResult(
        "explained", "/repo", "nvme-snapshot-read", "avg_read_sectors", "sectors", "higher",
        "a" * 40, "c" * 40, ["add b", "add c"], job=job, boots=1, message="-98%",
    )  # fmt: skip


async def _said(receiver: Receiver, note_id: int, text: str, author: str = "alice") -> list[str]:
    """The notes that answer one note of ours (its replies, then any progress note)."""
    before = len(receiver.calls.of("POST", r".*/notes"))
    await receiver.post(hook(note_id, text, author=author))
    await receiver.settle()
    return [n["body"] for n in receiver.calls.of("POST", r".*/notes")][before:]


@pytest.mark.asyncio
async def test_explain_and_backport_jobs_started_here_are_the_doors(receiver: Receiver) -> None:
    """Started from a note, an explain or backport job is the door's, as a bisection is:
    followed, and `status` and `cancel` act on it (not refused as another's)."""
    job = JOB
    await _said(receiver, 200, BISECT)
    eid = explain_id(BISECTION)  # the investigation's bisection's
    started, _ = await _said(receiver, 201, f"/kbisect explain {job}")
    assert started.startswith(f"kbisect started `{eid}`: ")
    assert receiver.door.followed[eid].by == "alice"
    receiver.jobs.explained[eid] = _explained(BISECTION)  # it has ended with its answer
    (status,) = await _said(receiver, 202, f"/kbisect status {eid}")
    assert status.startswith(f"{eid}: ended\nexplained: cccccccccccc (add c) against its parent")
    assert await _said(receiver, 203, f"/kbisect cancel {eid}") == [f"asked {eid} to stop"]
    started, _ = await _said(receiver, 204, f"/kbisect backport {job} target=master")
    bid = started.split("`")[1]
    assert receiver.jobs.stages[bid] == BACKPORT_WORKFLOW
    (status,) = await _said(receiver, 205, f"/kbisect status {bid}")
    assert status == f"job {bid} failed: no build host"  # its own result, not a bisection's
    assert await _said(receiver, 206, f"/kbisect cancel {bid}") == [f"asked {bid} to stop"]
    assert receiver.jobs.cancelled == [eid, bid]


@pytest.mark.asyncio
async def test_a_person_runs_at_most_door_running_jobs_backports_alike(receiver: Receiver) -> None:
    """With DOOR_RUNNING_JOBS of alice's running (one ended does not count), each of her
    commands that would start a job, a backport's too, is refused in one line and starts
    nothing; bob's backport starts, and once one of hers ends, her next one starts."""
    job = JOB
    await _said(receiver, 300, BISECT)
    assert receiver.door.followed[job].done  # ended: not one of her running jobs
    running = [f"bisect-nvme-snapshot-read-run{n}" for n in range(DOOR_RUNNING_JOBS)]
    for other in running:
        receiver.door.followed[other] = FollowedJob(
            Target(PROJECT, "issue", 3, "master"), 1, by="alice"
        )
    asks = [BISECT, f"/kbisect explain {job}", f"/kbisect backport {job} target=master"]
    said = await _said(receiver, 301, "\n".join(asks))
    assert len(said) == 3 and all("\n" not in s for s in said), said
    refusal = f"refused: you have {DOOR_RUNNING_JOBS} jobs running here, and kbisect runs at "
    assert all(s.startswith(refusal) for s in said), said
    assert len(receiver.jobs.started) == 1 and receiver.jobs.stages == {}
    bobs = await _said(receiver, 302, f"/kbisect backport {job} target=master", author="bob")
    assert bobs[0].startswith("kbisect started `") and len(receiver.jobs.stages) == 1
    receiver.door.followed[running[0]].done = True
    (started, _) = await _said(receiver, 303, f"/kbisect explain {job}")
    assert started.startswith(f"kbisect started `{explain_id(BISECTION)}`")
