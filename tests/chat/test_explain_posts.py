"""`explain JOB` in a door, once the explain job has its answer: the Why lines, and the
differential flame graph as a file (Matrix: in the reply's thread; GitLab: uploaded to the
project, linked in the note). The homeserver and GitLab are recording stand-ins here: what
counts is what the door uploads and posts (a real Synapse runs in test_matrix_bot.py)."""

import dataclasses
import io
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from nio import RoomSendResponse, UploadResponse
from temporalio.client import WorkflowExecutionStatus

from kbisect.contract import DOOR_RUNNING_JOBS, EXPLAIN_WORKFLOW
from kbisect.doors.actions import Attachment, Reply, execute
from kbisect.doors.gitlab import GitLabDoor, Target
from kbisect.doors.grammar import parse
from kbisect.doors.job_posts import Post, follow
from kbisect.doors.matrix import BotConfig, JobThread, MatrixBot
from kbisect.settings import Settings
from kbisect.workflows.bisect_types import BisectResult
from kbisect.workflows.explain_types import ExplainProgress, ExplainResult

STACKS = {
    "parent": {"dd;vfs_read;filemap_read": 90, "swapper;do_idle": 10},
    "culprit": {"dd;vfs_read;filemap_read": 40, "dd;vfs_read;nvme_setup_cmd;delay_tsc": 50},
}


def _explained() -> ExplainResult:
    return ExplainResult(
        "explained", "/lab", "nvme-snapshot-read", "throughput", "MB/s", "higher",
        "p" * 40, "c" * 40, ["parent", "culprit"], job="bisect-x-1",
        why=["self time in delay_tsc: 0% -> 11.6% of samples"], boots=5,
        message="throughput -25.8%", stacks=STACKS,
    )  # fmt: skip


@dataclass
class Jobs:
    """A finished bisection whose explain job has its answer."""

    asked: list[str] = field(default_factory=list)

    async def status_of(self, job_id: str) -> WorkflowExecutionStatus:
        self.asked.append(job_id)
        return WorkflowExecutionStatus.COMPLETED

    async def explain_result(self, job_id: str) -> ExplainResult:
        return _explained()


def _ours(job: str) -> bool:
    return True


@pytest.mark.asyncio
async def test_an_explained_job_replies_with_its_why_and_its_flame_graph(tmp_path: Path) -> None:
    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})
    jobs = Jobs()
    reply = await execute(parse("explain bisect-x-1"), jobs, settings, _ours)  # type: ignore[arg-type]
    assert jobs.asked == ["bisect-x-1-explain"]
    assert "self time in delay_tsc: 0% -> 11.6% of samples" in reply.text
    (flame,) = reply.files
    assert flame.name == "bisect-x-1-explain-flame.svg" and flame.mimetype == "image/svg+xml"
    svg = ET.fromstring(flame.data)
    assert svg.tag.endswith("svg") and b"delay_tsc" in flame.data


@dataclass
class Homeserver:
    uploads: list[tuple[str, str, bytes]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)

    async def upload(self, data: io.BytesIO, **kw: Any) -> tuple[UploadResponse, None]:
        self.uploads.append((kw["filename"], kw["content_type"], data.read()))
        return UploadResponse(f"mxc://hs/{len(self.uploads)}"), None

    async def room_send(self, room: str, kind: str, content: dict[str, Any], tx_id: Any) -> Any:
        self.sent.append(content)
        return RoomSendResponse(f"$e{len(self.sent)}", room)


@pytest.mark.asyncio
async def test_matrix_posts_the_flame_graph_in_the_thread_of_the_answer(tmp_path: Path) -> None:
    config = BotConfig(
        homeserver="http://127.0.0.1:1", user="@bot:hs", password="x", rooms=["!r:hs"],
        allowed=["@alice:hs"], state=tmp_path / "state.json",
    )  # fmt: skip
    bot = MatrixBot(config, Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")}))
    hs = Homeserver()
    bot.nio = hs  # type: ignore[assignment]
    bot.jobs = Jobs()  # type: ignore[assignment]
    bot.state.jobs["bisect-x-1"] = JobThread(room="!r:hs", root="$job")  # started here
    event = SimpleNamespace(sender="@alice:hs", event_id="$ask")
    await bot._obey("!r:hs", event, "explain bisect-x-1")  # type: ignore[arg-type]
    answer, flame = hs.sent
    assert answer["body"].startswith("explained: cccccccccccc") and "delay_tsc" in answer["body"]
    ((name, mimetype, data),) = hs.uploads
    assert (name, mimetype) == ("bisect-x-1-explain-flame.svg", "image/svg+xml")
    assert data.startswith(b"<svg") or b"<svg" in data[:200]
    assert flame["msgtype"] == "m.file" and flame["url"] == "mxc://hs/1"
    assert flame["m.relates_to"]["event_id"] == "$e1"  # in the answer's thread


@pytest.mark.asyncio
async def test_gitlab_links_the_uploaded_flame_graph_in_the_note() -> None:
    uploads: list[tuple[str, bytes]] = []

    class Project:
        def upload(self, filename: str, filedata: bytes) -> dict[str, str]:
            uploads.append((filename, filedata))  # python-gitlab's documented call
            return {"markdown": f"[{filename}](/uploads/abc/{filename})"}

    door = GitLabDoor.__new__(GitLabDoor)
    door.gl = SimpleNamespace(projects=SimpleNamespace(get=lambda *a, **k: Project()))  # type: ignore[assignment]
    reply = Reply("explained: ...", files=[Attachment("j-flame.svg", b"<svg/>", "image/svg+xml")])
    body = await door._with_files(Target(7, "issue", 1, "main"), reply)
    assert uploads == [("j-flame.svg", b"<svg/>")]
    assert body == "explained: ...\n\n[j-flame.svg](/uploads/abc/j-flame.svg)"


@pytest.mark.asyncio
async def test_a_file_that_does_not_upload_is_said_and_the_answer_goes_anyway() -> None:
    class Project:
        def upload(self, filename: str, filedata: bytes) -> dict[str, str]:
            raise OSError("413 Request Entity Too Large")

    door = GitLabDoor.__new__(GitLabDoor)
    door.gl = SimpleNamespace(projects=SimpleNamespace(get=lambda *a, **k: Project()))  # type: ignore[assignment]
    reply = Reply("explained: ...", files=[Attachment("j-flame.svg", b"<svg/>", "image/svg+xml")])
    body = await door._with_files(Target(7, "issue", 1, "main"), reply)
    assert body == "explained: ...\n\n(could not upload j-flame.svg)"


@pytest.mark.asyncio
async def test_an_answer_without_samples_has_no_flame_graph(tmp_path: Path) -> None:
    class NoPerf(Jobs):
        async def explain_result(self, job_id: str) -> ExplainResult:
            return dataclasses.replace(_explained(), stacks={"parent": {}, "culprit": {}})

    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})
    reply = await execute(parse("explain bisect-x-1"), NoPerf(), settings, _ours)  # type: ignore[arg-type]
    assert reply.ok and reply.files == [] and "delay_tsc" in reply.text


@dataclass
class Starting:
    """A finished bisection whose explain job never ran: `explain` starts it, then it runs
    (booting) until the test says it ended."""

    started: list[tuple[str, str]] = field(default_factory=list)  # (job, by)
    cancelled: list[str] = field(default_factory=list)
    looks: int = 0  # `running` answers True this many times (-1: always)

    async def status_of(self, job_id: str) -> WorkflowExecutionStatus | None:
        started = [job for job, _ in self.started]
        return WorkflowExecutionStatus.RUNNING if job_id in started else None

    async def result(self, job_id: str) -> BisectResult:
        return BisectResult(
            "found", "regression", "nvme-snapshot-read", "/lab", ["p" * 40], "n" * 40,
            "c" * 40, ["c" * 40], [], "first bad commit", metric="throughput",
        )  # fmt: skip

    async def job_request(self, job_id: str) -> None:
        return None

    def needs(self) -> list[object]:
        return []

    async def require_workers(self, needs: object) -> None:
        return None

    async def start_explain(self, req: object, job_id: str, by: str = "") -> str:
        self.started.append((job_id, by))
        return job_id

    def job_url(self, job_id: str) -> str:
        return f"http://ui/{job_id}"

    async def describe(self, job_id: str) -> Any:
        return SimpleNamespace(workflow_type=EXPLAIN_WORKFLOW)

    async def running(self, job_id: str) -> bool:
        self.looks -= 1
        return self.looks != -1

    async def explain_progress(self, job_id: str) -> ExplainProgress:
        return ExplainProgress("booting", planned=10, boots=["boot 1: parent pppppppppppp"])

    async def explain_result(self, job_id: str) -> ExplainResult:
        return _explained()

    async def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)


def _bot(tmp_path: Path, jobs: object) -> tuple[MatrixBot, Homeserver]:
    config = BotConfig(
        homeserver="http://127.0.0.1:1", user="@bot:hs", password="x", rooms=["!r:hs"],
        allowed=["@alice:hs", "@bob:hs"], state=tmp_path / "state.json",
    )  # fmt: skip
    bot = MatrixBot(config, Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")}))
    hs = Homeserver()
    bot.nio = hs  # type: ignore[assignment]
    bot.jobs = jobs  # type: ignore[assignment]
    bot.state.jobs["bisect-x-1"] = JobThread(room="!r:hs", root="$job")  # started here
    return bot, hs


async def _ask(bot: MatrixBot, hs: Homeserver, who: str, text: str) -> str:
    """The bot's answer to who's command (its reply, whatever a follower posts meanwhile)."""
    event = SimpleNamespace(sender=who, event_id=f"$ask{len(hs.sent)}")
    await bot._obey("!r:hs", event, text)  # type: ignore[arg-type]
    (body,) = [
        c["body"]
        for c in hs.sent
        if c.get("m.relates_to", {}).get("m.in_reply_to", {}).get("event_id") == event.event_id
    ]
    return str(body)


@pytest.mark.asyncio
async def test_an_explain_started_in_matrix_is_the_bots_status_and_cancel_reach_it(
    tmp_path: Path,
) -> None:
    """Started from chat, the explain job is the bot's, as a bisection is: in its state, a
    thread of its own, and `status` and `cancel` act on it (not refused as a CLI job)."""
    jobs = Starting(looks=-1)
    bot, hs = _bot(tmp_path, jobs)
    try:
        started = await _ask(bot, hs, "@alice:hs", "explain bisect-x-1")
        assert started.startswith("started bisect-x-1-explain: http://ui/bisect-x-1-explain")
        assert jobs.started == [("bisect-x-1-explain", "@alice:hs (Matrix)")]
        assert bot.state.jobs["bisect-x-1-explain"].by == "@alice:hs"
        assert "bisect-x-1-explain" in bot.followers  # its thread: phases, boots, answer
        status = await _ask(bot, hs, "@alice:hs", "status bisect-x-1-explain")
        assert status == "bisect-x-1-explain is booting: 1 of 10 explain boots so far"
        cancel = await _ask(bot, hs, "@alice:hs", "cancel bisect-x-1-explain")
        assert cancel == "asked bisect-x-1-explain to stop"
        assert jobs.cancelled == ["bisect-x-1-explain"]
    finally:
        for task in bot.followers.values():
            task.cancel()


@pytest.mark.asyncio
async def test_a_job_started_when_its_reply_cannot_be_posted_is_still_the_bots(
    tmp_path: Path,
) -> None:
    """The homeserver refuses the reply: the job runs all the same, so the bot counts it
    against its starter and follows it, in a thread under the command."""
    jobs = Starting(looks=-1)
    bot, _ = _bot(tmp_path, jobs)

    async def refused(room: str, to: str, text: str) -> str | None:
        raise OSError("the homeserver is away")

    bot._reply = refused  # type: ignore[method-assign]
    event = SimpleNamespace(sender="@alice:hs", event_id="$cmd")
    try:
        with pytest.raises(OSError):
            await bot._obey("!r:hs", event, "explain bisect-x-1")  # type: ignore[arg-type]
        thread = bot.state.jobs["bisect-x-1-explain"]
        assert (thread.root, thread.by) == ("$cmd", "@alice:hs")
        assert "bisect-x-1-explain" in bot.followers
    finally:
        for task in bot.followers.values():
            task.cancel()


@pytest.mark.asyncio
async def test_a_person_at_the_limit_of_running_jobs_starts_no_explain(tmp_path: Path) -> None:
    """DOOR_RUNNING_JOBS of alice's run (one that ended does not count): her explain is
    refused in one line and starts nothing; bob's starts."""
    jobs = Starting(looks=-1)
    bot, hs = _bot(tmp_path, jobs)
    for n in range(DOOR_RUNNING_JOBS):
        bot.state.jobs[f"bisect-r-{n}"] = JobThread("!r:hs", f"$r{n}", by="@alice:hs")
    bot.state.jobs["bisect-e-1"] = JobThread("!r:hs", "$e", done=True, by="@alice:hs")
    try:
        refused = await _ask(bot, hs, "@alice:hs", "explain bisect-x-1")
        assert refused.startswith(f"refused: you have {DOOR_RUNNING_JOBS} jobs running here")
        assert "\n" not in refused and jobs.started == []
        assert (await _ask(bot, hs, "@bob:hs", "explain bisect-x-1")).startswith("started ")
        assert [by for _, by in jobs.started] == ["@bob:hs (Matrix)"]
    finally:
        for task in bot.followers.values():
            task.cancel()


@pytest.mark.asyncio
async def test_an_explain_job_is_followed_in_its_thread_to_its_answer() -> None:
    """The door's thread of an explain job: its phase and boots as they come, then its
    answer, each once."""
    jobs = Starting(looks=2)
    sent: list[Post] = []

    async def send(post: Post) -> None:
        sent.append(post)

    assert await follow(jobs, "bisect-x-1-explain", [], send, poll=0) is None  # type: ignore[arg-type]
    assert [p.key for p in sent] == ["phase:booting", "boot:0", "outcome"]
    assert sent[1].text == "boot 1: parent pppppppppppp"
    assert sent[2].text.startswith("explained: cccccccccccc") and "delay_tsc" in sent[2].text
