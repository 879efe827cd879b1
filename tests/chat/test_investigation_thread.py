"""An investigation from Matrix, end to end but for the kernels: a real Synapse room, the
bot in this process, a real Temporal dev server running the real InvestigationWorkflow and
its stage workflows with the fake activities, over a real named tree whose history the
fake scenario's commits are. `bisect ... cross-tree=yes explain=yes` is planned as the
CLI plans it (the cross-tree check found in the tree's history) and starts one
investigation; its thread shows each stage's line, that stage job's story and the answer,
once each, though the bot is restarted in the middle; `explain INV` and `status INV` then
answer for its bisection and its stages."""

import asyncio
import contextlib
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from benchmarks.dags import as_git_repo, linear
from kbisect.builders.trees import Trees
from kbisect.decide.strategy import Graph
from kbisect.doors import job_posts
from kbisect.doors.matrix import BotConfig, JobThread, MatrixBot, thread
from kbisect.errors import UserError
from kbisect.jobs.client import JobClient
from kbisect.settings import Settings
from tests.chat.bot_process import bot_posts, in_thread, reply_to
from tests.chat.homeserver import Synapse, User
from tests.conftest import git
from tests.web.jobs import CHAIN, serving
from tests.workflows import fakes
from tests.workflows.fakes import SCENARIOS, Scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _distro_tree(tmp: Path) -> tuple[Path, dict[str, str]]:
    """upstream c1..c16 (master) and a distro kernel forked from c2 (branch distro): the
    commits' hashes by name, the distro's as "distro"."""
    repo = tmp / "upstream.git"
    hashes = as_git_repo(linear(16), repo)
    empty = git(repo, "rev-parse", f"{hashes['c2']}^{{tree}}").strip()
    ident = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
             "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    made = subprocess.run(
        ["git", "-C", str(repo), "commit-tree", empty, "-p", hashes["c2"], "-m", "distro"],
        capture_output=True, text=True, check=True, env=ident,
    )  # fmt: skip
    hashes["distro"] = made.stdout.strip()
    git(repo, "update-ref", "refs/heads/master", hashes["c16"])
    git(repo, "update-ref", "refs/heads/distro", hashes["distro"])
    return repo, hashes


def _scenario(hashes: dict[str, str]) -> Scenario:
    """The fake activities' truth over the tree's own commits: c9 slows reads down; the
    distro kernel reads as fast as its merge base (the check passes)."""
    base = linear(16)
    graph = Graph(
        parents={hashes[c]: tuple(hashes[p] for p in ps) for c, ps in base.parents.items()},
        order=tuple(hashes[c] for c in base.order),
    )
    return Scenario(
        graph=graph, culprit=hashes["c9"], test_delay=0.3,
        noisy={hashes["distro"]: [fakes.FAST] * 500},  # outside the graph: its boots' values
    )  # fmt: skip


async def _until(what: str, cond: Callable[[], Any], timeout: float = 180) -> Any:
    """cond's first true answer (asked off the event loop: it reads the room over HTTP)."""
    deadline = time.monotonic() + timeout
    while True:
        found = await asyncio.to_thread(cond)
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.3)


def _notices(alice: User, room: str, bot: User, root: str) -> list[str]:
    """The bot's notices in the thread of root, oldest first."""
    return [
        e["content"]["body"]
        for e in bot_posts(alice, room, bot)
        if in_thread(e, root) and e["content"]["msgtype"] == "m.notice"
    ]


def _answer(alice: User, room: str, bot: User, asked: str) -> str | None:
    for e in bot_posts(alice, room, bot):
        if reply_to(e) == asked and e["content"]["m.relates_to"].get("rel_type") != "m.thread":
            return str(e["content"]["body"])
    return None


@contextlib.asynccontextmanager
async def _running(bot: MatrixBot) -> Any:
    """The bot serving in this event loop (beside the workflows' worker) until the block ends."""
    task = asyncio.create_task(bot.run())
    try:
        while not bot.nio.event_callbacks:  # past its first sync: listening
            assert not task.done(), task
            await asyncio.sleep(0.05)
        yield bot
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await bot.close()


async def test_an_investigations_thread_shows_each_stage_and_the_answer_once(
    env: WorkflowEnvironment,
    synapse: Synapse,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, hashes = _distro_tree(tmp_path)
    cache = {"KBISECT_CACHE": str(tmp_path / "cache"), "KBISECT_DATA": str(tmp_path / "data")}
    tag = uuid.uuid4().hex[:6]
    bot_user, alice = (synapse.register(f"{n}{tag}") for n in ("bot", "alice"))
    room = alice.create_room()
    monkeypatch.setattr(job_posts, "POLL_SECONDS", 0.2)
    async with serving(env, *CHAIN, settings=cache) as jobs:
        mirror = Trees(jobs.settings).add("lab", str(repo)).path
        SCENARIOS[str(mirror)] = SCENARIOS[str(mirror.resolve())] = _scenario(hashes)

        async def connect(settings: Settings) -> JobClient:
            return jobs

        monkeypatch.setattr(JobClient, "connect", staticmethod(connect))
        config = BotConfig(
            homeserver=synapse.url, user=bot_user.user_id, password=bot_user.password,
            rooms=[room], allowed=[alice.user_id], state=tmp_path / "bot.json",
        )  # fmt: skip
        command = "!kbisect bisect tree=lab good=distro bad=master testcase=nvme-snapshot-read"
        async with _running(MatrixBot(config, jobs.settings)) as first:
            asked = await asyncio.to_thread(
                alice.say, room, f"{command} cross-tree=yes explain=yes"
            )
            started = await _until("the start", lambda: _answer(alice, room, bot_user, asked))
            assert started.startswith("started inv-nvme-snapshot-read-"), started
            inv = started.split()[1].rstrip(":")
            (root,) = [
                e["event_id"] for e in bot_posts(alice, room, bot_user) if reply_to(e) == asked
            ]
            bisect = f"bisect: job {inv}-bisect"
            await _until(bisect, lambda: bisect in _notices(alice, room, bot_user, root))
        before = list(first.state.jobs[inv].posted)  # what the first bot posted
        # the bot restarted in the middle of the bisection: it follows the chain on
        async with _running(MatrixBot(config, jobs.settings)) as bot:
            ended = f"{inv} found: first bad commit: {hashes['c9']}"
            thread = await _until(
                "the answer",
                lambda: (
                    (n := _notices(alice, room, bot_user, root))
                    and any(t.startswith(ended) for t in n)
                    and n
                ),
            )
            images = await _until(
                "the plot",
                lambda: [
                    e for e in bot_posts(alice, room, bot_user)
                    if in_thread(e, root) and e["content"]["msgtype"] == "m.image"
                ],
            )  # fmt: skip
            posted = bot.state.jobs[inv].posted
            explain = await asyncio.to_thread(alice.say, room, f"!kbisect explain {inv}")
            explained = await _until("explain", lambda: _answer(alice, room, bot_user, explain))
            status = await asyncio.to_thread(alice.say, room, f"!kbisect status {inv}")
            stages = await _until("status", lambda: _answer(alice, room, bot_user, status))
    c9 = hashes["c9"]
    order = [
        f"check: job {inv}-check",
        f"the distro good {hashes['distro'][:12]} -> their merge base {hashes['c2'][:12]}",
        bisect,
        f"first bad commit: {hashes['c9']}",  # the bisection's outcome
        f"# kbisect {inv}-bisect",  # its report's summary
        f"explain: job {inv}-bisect-explain",
        "explained: ",  # its answer
        ended,
    ]
    at = [next((i for i, t in enumerate(thread) if line in t), -1) for line in order]
    assert -1 not in at and at == sorted(at), list(zip(order, at, strict=True))
    assert "same" in thread[at[1]] and thread[-1].startswith(ended)
    # each post once, though the bot restarted: every key its own, every notice one key
    assert len(posted) == len(set(posted)) and len(images) == 1
    assert posted[: len(before)] == before and "stage:check" in before
    assert "explain:outcome" not in before  # the second bot's, after its restart
    assert len(thread) == len(posted) - 1, (thread, posted)  # the plot: the last key
    assert {"stage:check", "check:outcome", "bisect:outcome", "explain:outcome"} <= set(posted)
    # explain INV answers for its bisection: the explain stage's own answer
    assert explained == thread[at[6]] and explained.startswith("explained: ")
    lines = stages.splitlines()  # status INV: how it ended, then each stage's line
    assert lines[0] == f"{inv}: ended" and lines[1].startswith(f"found: first bad commit: {c9}")
    assert [line.split(":")[0] for line in lines[2:]] == ["check", "bisect", "explain"]
    assert f"({inv}-bisect-explain)" in lines[4]


class _Cancelled:
    """A bisection that ended without a result: all its follower has left to post is that."""

    async def running(self, job_id: str) -> bool:
        return False

    async def result(self, job_id: str) -> None:
        raise UserError("the job was cancelled")


async def test_a_post_the_bot_was_sending_when_it_stopped_is_kept_and_in_the_thread_once(
    synapse: Synapse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = uuid.uuid4().hex[:6]
    bot_user, alice = (synapse.register(f"{n}{tag}") for n in ("bot", "alice"))
    room = alice.create_room()

    async def connect(settings: Settings) -> Any:
        return _Cancelled()

    monkeypatch.setattr(JobClient, "connect", staticmethod(connect))
    config = BotConfig(
        homeserver=synapse.url, user=bot_user.user_id, password=bot_user.password,
        rooms=[room], allowed=[alice.user_id], state=tmp_path / "bot.json",
    )  # fmt: skip
    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "data")})
    job, key, text = "nvme-snapshot-read-0123abcd", "phase:calibrating", "calibrating: both ends"
    async with _running(MatrixBot(config, settings)) as first:
        root = await first._send(room, {"msgtype": "m.notice", "body": job}, tx_id=None)
        assert root is not None
        # the first bot stops with this post on its way: the server has it, the bot's
        # state only says it was sending it (the phase is past: it is not computed again)
        notice = {"msgtype": "m.notice", "body": text, "m.relates_to": thread(root)}
        assert await first._send(room, notice, tx_id=f"kbisect-{job}-{key}")
        first.state.jobs[job] = JobThread(room, root, sending=[key, text])
        first.state.save()
    async with _running(MatrixBot(config, settings)) as bot:
        await _until("the outcome", lambda: bot.state.jobs[job].done)
    assert bot.state.jobs[job].posted == [key, "outcome"] and bot.state.jobs[job].sending == []
    notices = _notices(alice, room, bot_user, root)
    assert notices[0] == text and len(notices) == 2 and "cancelled" in notices[1], notices
