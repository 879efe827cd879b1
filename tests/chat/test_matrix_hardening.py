"""The Matrix bot against a real Synapse, run in this process (in a thread of its own) with a
recording stand-in for the job service: a command whose fetch hangs holds no other, a
message takes one command, the bot acts only on the jobs it started, a tree URL's
credentials never reach the room, and an exception that is not kbisect's gets one line
while the bot keeps serving."""

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kbisect.contract import INVESTIGATION_WORKFLOW
from kbisect.doors.matrix import PREFIX, BotConfig, MatrixBot, _quiet, command_text
from kbisect.doors.quoting import WORD_JOINER
from kbisect.jobs.client import JobClient, JobSummary
from kbisect.settings import Settings
from kbisect.workflows.bisect_types import BisectRequest
from kbisect.workflows.investigation_types import InvestigationProgress, InvestigationRequest
from kbisect.workflows.sweep_types import SweepRequest
from tests.chat.bot_process import bot_posts, members, reply_to
from tests.chat.hanging_git import HangingGitServer, hanging_tree
from tests.chat.homeserver import Synapse, User
from tests.conftest import tree_lab

BISECT = "!kbisect bisect tree=lab good=v1 bad=master testcase=nvme-snapshot-read"
CLI_JOB = "bisect-nvme-snapshot-read-cli1"  # a CLI user's, on a private path


@dataclass
class StubJobs:
    """The JobClient calls the bot makes; an investigation's progress fails as no kbisect
    error would."""

    started: list[BisectRequest] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    sweeps: list[SweepRequest] = field(default_factory=list)  # `test JOB`'s

    def needs(self) -> list[object]:
        return []

    async def require_workers(self, *args: object) -> None:
        return None

    async def start_investigation(self, req: InvestigationRequest, by: str = "") -> str:
        assert req.bisection is not None
        self.started.append(req.bisection)
        self.by = by
        return f"inv-nvme-snapshot-read-{len(self.started):08x}"

    async def bisection_of(self, job_id: str) -> str:
        return f"{job_id}-bisect"

    async def bisection_request(self, job_id: str) -> BisectRequest:
        return self.started[-1]

    async def start_sweep(self, req: SweepRequest, by: str = "") -> str:
        self.sweeps.append(req)
        return f"sweep-{len(self.sweeps):08x}"

    async def describe(self, job_id: str) -> SimpleNamespace:
        return SimpleNamespace(workflow_type=INVESTIGATION_WORKFLOW)

    async def investigation_progress(self, job_id: str) -> InvestigationProgress:
        raise RuntimeError("the service sent something odd")

    def job_url(self, job_id: str) -> str:
        return f"http://127.0.0.1:8233/namespaces/default/workflows/{job_id}"

    async def running(self, job_id: str) -> bool:
        return True

    async def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)

    async def jobs(self, limit: int = 20) -> list[JobSummary]:
        """The service's newest jobs: a CLI user's, and those the bot started."""
        ids = [CLI_JOB, *(f"inv-nvme-snapshot-read-{i:08x}" for i in range(1, 3))]
        now = datetime.now(UTC)
        return [JobSummary(i, "running", "bisecting", "nvme-snapshot-read", "", now) for i in ids]


@dataclass
class Room:
    hs: Synapse
    room: str
    alice: User  # allowed
    mallory: User  # not allowed
    bot_user: User
    bot: MatrixBot
    jobs: StubJobs
    settings: Settings
    upstream: Path
    thread: threading.Thread
    errors: list[BaseException]

    def posts(self) -> list[dict[str, Any]]:
        return bot_posts(self.alice, self.room, self.bot_user)

    def answer(self, to: str, timeout: float = 30.0, poll: float = 0.05) -> str:
        """The bot's reply to event `to` (waits for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.posts():
                if reply_to(e) == to:
                    return str(e["content"]["body"])
            if not self.thread.is_alive():
                raise AssertionError(f"the bot stopped: {self.errors}")
            time.sleep(poll)
        raise AssertionError(f"no reply to {to}")


def named(user: User) -> str:
    """The bot's refusal to a user: it names them, and mentions no one."""
    return f"Sorry @{WORD_JOINER}{user.user_id[1:]}"


def _wait(cond: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def room(
    synapse: Synapse, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Room]:
    upstream, settings = tree_lab(tmp_path, cache)

    tag = uuid.uuid4().hex[:6]
    bot_user, alice, mallory = (synapse.register(f"{n}{tag}") for n in ("bot", "alice", "mallory"))
    room_id = alice.create_room()
    mallory.join(room_id)
    jobs = StubJobs()

    async def connect(settings: Settings) -> StubJobs:
        return jobs

    monkeypatch.setattr(JobClient, "connect", staticmethod(connect))
    config = BotConfig(
        homeserver=synapse.url,
        user=bot_user.user_id,
        password=bot_user.password,
        rooms=[room_id],
        allowed=[alice.user_id],
        state=tmp_path / "bot.json",
    )
    loop = asyncio.new_event_loop()
    bot = loop.run_until_complete(_make_bot(config, settings))
    errors: list[BaseException] = []
    task: asyncio.Task[None] = loop.create_task(bot.run())

    def serve() -> None:
        try:
            loop.run_until_complete(task)
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # what killed the bot: the test says so
            errors.append(exc)
        finally:
            loop.run_until_complete(bot.close())
            loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        _wait(lambda: bot.nio.event_callbacks or not thread.is_alive(), 60, "the bot to listen")
        assert bot_user.user_id in members(alice, room_id)
        yield Room(
            synapse,
            room_id,
            alice,
            mallory,
            bot_user,
            bot,
            jobs,
            settings,
            upstream,
            thread,
            errors,
        )
    finally:
        if thread.is_alive():
            loop.call_soon_threadsafe(task.cancel)
        thread.join(timeout=30)


async def _make_bot(config: BotConfig, settings: Settings) -> MatrixBot:
    return MatrixBot(config, settings)


def test_a_hanging_fetch_holds_no_other_command(room: Room) -> None:
    server = HangingGitServer(hold=10.0)
    try:
        hanging_tree(room.settings, "stuck", room.upstream, server.url())
        stuck = room.alice.say(room.room, BISECT.replace("tree=lab", "tree=stuck"))
        _wait(lambda: server.accepted, 30, "the fetch to connect")
        asked = time.monotonic()
        help_ = room.alice.say(room.room, "!kbisect help")
        assert room.answer(help_, timeout=10).startswith("commands: ")
        answered = time.monotonic() - asked
        # Through a homeserver (a send, the bot's sync, its reply, our read): a second and
        # some room for a loaded machine; the fetch holds on for 10.
        assert server.holding() and answered < 2.0, answered
    finally:
        server.release()
    assert "could not fetch" in room.answer(stuck)
    assert room.jobs.started == []


def test_a_message_is_one_command_and_a_stranger_gets_one_reply(room: Room) -> None:
    many = "\n".join(["!kbisect help"] * 300)
    first = room.alice.say(room.room, many)
    second = room.mallory.say(room.room, many)
    assert room.answer(first).startswith("commands: ")
    assert room.answer(second).startswith(named(room.mallory))
    last = room.alice.say(room.room, "!kbisect testcases")
    room.answer(last)
    assert len(room.posts()) == 3


def test_a_user_who_is_not_allowed_starts_no_job(room: Room) -> None:
    bisect = "!kbisect bisect tree=lab good=v1 bad=master testcase=nvme-snapshot-read"
    refused = room.mallory.say(room.room, bisect)
    assert room.answer(refused).startswith(named(room.mallory))
    started = room.alice.say(room.room, bisect)  # the same command from alice starts one
    assert room.answer(started).startswith("started ")
    assert len(room.jobs.started) == 1


def test_the_bot_acts_only_on_jobs_it_started(room: Room) -> None:
    cli_job = CLI_JOB
    asked = [
        room.alice.say(room.room, f"!kbisect {cmd}")
        for cmd in (
            f"report {cli_job}",
            f"status {cli_job}",
            f"cancel {cli_job}",
            f"mark {cli_job} master bad",
            f"sru {cli_job}",
        )
    ]
    for event in asked:
        answer = room.answer(event)
        assert answer.startswith("refused: ") and "not started here" in answer, answer
        assert "\n" not in answer
    started = room.answer(room.alice.say(room.room, BISECT))
    job = "inv-nvme-snapshot-read-00000001"
    assert started.startswith(f"started {job}")
    assert (
        room.answer(room.alice.say(room.room, f"!kbisect cancel {job}")) == f"asked {job} to stop"
    )
    assert room.jobs.cancelled == [job]
    listed = room.answer(room.alice.say(room.room, "!kbisect status")).splitlines()
    assert [line.split()[0] for line in listed] == [job]  # not the CLI's, nor one not started


def test_parallel_is_bounded(room: Room) -> None:
    answer = room.answer(room.alice.say(room.room, f"{BISECT} parallel=100000"))
    assert answer.startswith("parallel 100000: give 1 to ") and "\n" not in answer
    assert room.jobs.started == []


def test_a_tree_urls_credentials_never_reach_the_room(room: Room) -> None:
    server = HangingGitServer(hold=0.0)  # takes the connection and drops it
    try:
        hanging_tree(room.settings, "private", room.upstream, server.url("kb:glpat-SECRET123@"))
        answer = room.answer(room.alice.say(room.room, BISECT.replace("tree=lab", "tree=private")))
    finally:
        server.release()
    assert f"could not fetch http://***@{WORD_JOINER}127.0.0.1:" in answer
    assert "SECRET123" not in answer and "kb:" not in answer


def test_an_exception_not_kbisects_gets_one_line_and_the_bot_serves_on(room: Room) -> None:
    job = room.answer(room.alice.say(room.room, BISECT)).split()[1].rstrip(":")
    answer = room.answer(room.alice.say(room.room, f"!kbisect report {job}"))
    assert answer == "kbisect could not do that: the service sent something odd"
    assert room.answer(room.alice.say(room.room, "!kbisect help")).startswith("commands: ")
    assert room.thread.is_alive() and room.errors == []


def test_the_bots_posts_mention_no_one(room: Room) -> None:
    asked = room.alice.say(room.room, "!kbisect status @room")
    answer = room.answer(asked)
    assert answer == f"refused: '@{WORD_JOINER}room' is not a job id; 'status' lists them"
    (event,) = [e for e in room.posts() if reply_to(e) == asked]
    assert event["content"]["m.mentions"] == {}  # Matrix 1.7: nobody, whatever the body says


def test_no_line_of_a_post_reads_as_a_command_or_a_mention() -> None:
    body = "!kbisect cancel x\n  !kbisect help `a`\nsee !kbisect help\n@room @alice:hs.org"
    sent = _quiet({"msgtype": "m.notice", "body": body, "m.relates_to": {}})
    lines = sent["body"].split("\n")
    assert lines[:3] == ["` !kbisect cancel x `", "``   !kbisect help `a` ``", "see !kbisect help"]
    assert lines[3] == f"@{WORD_JOINER}room @{WORD_JOINER}alice:hs.org"
    assert command_text(sent["body"]) is None and command_text(body) == "cancel x"
    assert not any(ln.lstrip().startswith(PREFIX) for ln in lines)
    assert sent["m.mentions"] == {} and sent["m.relates_to"] == {}
