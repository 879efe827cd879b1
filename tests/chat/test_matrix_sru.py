"""`!kbisect sru JOB series=S bug=N` in Matrix: the SRU text, then the cover letter and patch
as files in its thread, as `kbisect report --sru-patch` writes them. The homeserver is a
recording stand-in here (the real Synapse tests are test_matrix_bot.py and the e2e job);
what counts is what the bot uploads and posts."""

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from nio import RoomSendResponse, UploadResponse

from kbisect.doors.grammar import parse
from kbisect.doors.matrix import BotConfig, MatrixBot
from kbisect.errors import UserError
from kbisect.settings import Settings
from kbisect.workflows.bisect_types import BisectResult
from tests.kbisect.test_sru_patch import _fix_job, history  # noqa: F401 (a fixture)

SENDER = "Sam Sender <sam@example.com>"


@dataclass
class Homeserver:
    uploads: list[tuple[str, bytes]] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)

    async def upload(self, data: io.BytesIO, **kw: Any) -> tuple[UploadResponse, None]:
        self.uploads.append((kw["filename"], data.read()))
        return UploadResponse(f"mxc://hs/{len(self.uploads)}"), None

    async def room_send(self, room: str, kind: str, content: dict[str, Any], tx_id: Any) -> Any:
        self.sent.append(content)
        return RoomSendResponse(f"$e{len(self.sent)}", room)


@dataclass
class Jobs:
    result_: BisectResult

    async def result(self, job_id: str) -> BisectResult:
        return self.result_

    async def describe(self, job_id: str) -> None:
        raise UserError(f"no job {job_id!r}")

    async def status_of(self, job_id: str) -> None:
        return None  # no explain job: the note goes without Why


def _bot(tmp_path: Path, result: BisectResult, signoff: str | None) -> tuple[MatrixBot, Homeserver]:
    config = BotConfig(
        homeserver="http://127.0.0.1:1",
        user="@bot:hs",
        password="x",
        rooms=["!r:hs"],
        allowed=["@alice:hs"],
        state=tmp_path / "state.json",
        signoff=signoff,
    )
    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})
    bot = MatrixBot(config, settings)
    hs = Homeserver()
    bot.nio = hs  # type: ignore[assignment]
    bot.jobs = Jobs(result)  # type: ignore[assignment]
    return bot, hs


@pytest.mark.asyncio
async def test_sru_posts_the_cover_letter_and_patch_in_the_thread(
    history: tuple[Path, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    repo, (broken, _, fix) = history
    bot, hs = _bot(tmp_path, _fix_job(repo, broken, fix), SENDER)
    cmd = parse("sru bisect-x-1 series=noble bug=2012345")
    await bot._post_sru_patch("!r:hs", "$root", cmd)
    names = [name for name, _ in hs.uploads]
    assert names[0] == "0000-cover-letter.patch" and names[1].startswith("0001-")
    cover, patch = (data.decode() for _, data in hs.uploads)
    assert "Subject: [SRU][Noble][PATCH 0/1] drivers: make setup succeed" in cover
    assert "BugLink: https://bugs.launchpad.net/bugs/2012345" in patch
    assert f"Signed-off-by: {SENDER}\n---" in patch
    files = [c for c in hs.sent if c["msgtype"] == "m.file"]
    assert [f["body"] for f in files] == names
    assert all(f["m.relates_to"]["event_id"] == "$root" for f in hs.sent)
    assert [f["url"] for f in files] == ["mxc://hs/1", "mxc://hs/2"]
    (last,) = [c for c in hs.sent if c["msgtype"] == "m.notice"]
    assert last["body"].startswith(f"backported; applies to {broken[:12]}; git am")


@pytest.mark.asyncio
async def test_sru_without_a_sender_says_why_in_one_line(
    history: tuple[Path, list[str]],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, (broken, _, fix) = history
    monkeypatch.setenv("HOME", str(tmp_path))  # no git identity anywhere
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    bot, hs = _bot(tmp_path, _fix_job(repo, broken, fix), None)
    await bot._post_sru_patch("!r:hs", "$root", parse("sru bisect-x-1"))
    assert hs.uploads == []
    (notice,) = hs.sent
    assert notice["body"].startswith("no patch: a Signed-off-by needs 'Name <mail>'")
    assert "\n" not in notice["body"]


@pytest.mark.asyncio
async def test_branch_is_for_the_gitlab_door_only(
    history: tuple[Path, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    from kbisect.doors.actions import execute

    repo, (broken, _, fix) = history
    jobs = Jobs(_fix_job(repo, broken, fix))
    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})

    def ours(job: str) -> bool:  # the bot started it
        return True

    reply = await execute(parse("sru bisect-x-1 branch=sru/x"), jobs, settings, ours)  # type: ignore[arg-type]
    assert not reply.ok and reply.text.startswith("refused: branch= is for the GitLab door")
    reply = await execute(parse("sru bisect-x-1 series=noble bug=5"), jobs, settings, ours)  # type: ignore[arg-type]
    assert reply.ok and "to Noble, with the trailers" in reply.text and "bugs/5" in reply.text
