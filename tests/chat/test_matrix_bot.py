"""The Matrix bot against a real Synapse and a real Temporal dev server: who it obeys, what
it refuses (in one line, with nothing started) and what it ignores."""

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.nginx import free_port
from kbisect.doors.quoting import WORD_JOINER
from kbisect.infra import temporal_server
from tests.chat.bot_process import KBISECT, bot_posts, members, reply_to, start_bot, wait_for
from tests.chat.homeserver import Synapse


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory, server: None) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("temporal")
    port, ui_port = free_port(), free_port()
    server = temporal_server.start(port=port, ui_port=ui_port, db=tmp / "t.db", log=tmp / "log")
    tag = uuid.uuid4().hex[:6]
    try:
        yield {
            "KBISECT_TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
            "KBISECT_CONTROL_QUEUE": f"kb-{tag}",
            "KBISECT_BUILD_QUEUE": f"kb-build-{tag}",
            "KBISECT_VM_QUEUE": f"kb-vm-{tag}",
        }
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_bot_obeys_allowed_users_refuses_bad_text_and_ignores_the_rest(
    synapse: Synapse, temporal: dict[str, str], tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    bot, alice, mallory = (synapse.register(f"{n}{tag}") for n in ("bot", "alice", "mallory"))
    room = alice.create_room()
    mallory.join(room)
    alice.say(room, "!kbisect help")  # before the bot started: history, not a command
    env = {**temporal, "KBISECT_DATA": str(tmp_path / "data"), "KBISECT_CACHE": str(tmp_path)}
    bot_proc = start_bot(synapse, bot, room, [alice.user_id], env, tmp_path)
    pwned = tmp_path / "pwned"
    try:
        assert bot.user_id in members(alice, room)
        asked = {
            mallory.say(room, "!kbisect status"): f"Sorry @{WORD_JOINER}{mallory.user_id[1:]}",
            alice.say(room, "!kbisect help"): "commands: bisect tree=NAME",
            alice.say(
                room, f"!kbisect bisect tree=lab good=$(touch {pwned}) bad=x testcase=t"
            ): "refused: '$' is not allowed",
            alice.say(
                room, "!kbisect bisect tree=lab good=--upload-pack=x bad=x testcase=t"
            ): "starts with '-'",
            alice.say(room, "!kbisect bisect tree=lab good=a bad=b testcase=t colour=red"): (
                "refused: unknown key 'colour' for bisect"
            ),
            alice.say(room, "!kbisect bisect tree=nope good=a bad=b testcase=nvme-snapshot-read"): (
                "no tree 'nope': add it with 'kbisect tree add nope URL'"
            ),
            alice.say(room, "!kbisect status"): "no bisection jobs yet",
        }
        alice.say(room, "!kbisect help", msgtype="m.notice")  # a notice: bots' talk
        alice.say(room, "hello, is the bot here?")  # not a command
        wait_for(
            lambda: len(bot_posts(alice, room, bot)) >= len(asked),
            60,
            "the bot's replies",
            bot_proc,
        )
        last = alice.say(room, "!kbisect testcases")  # answered last: nothing else came
        wait_for(
            lambda: any(reply_to(e) == last for e in bot_posts(alice, room, bot)),
            60,
            "the reply to testcases",
            bot_proc,
        )
    finally:
        bot_proc.terminate()
        bot_proc.wait(timeout=30)
    posts = bot_posts(alice, room, bot)
    answers = {reply_to(e): e["content"]["body"] for e in posts}
    assert len(posts) == len(asked) + 1, [e["content"]["body"] for e in posts]
    for event_id, says in asked.items():
        assert says in answers[event_id], (says, answers[event_id])
        assert "\n" not in answers[event_id]
    assert all(e["content"]["msgtype"] == "m.notice" for e in posts)
    assert "nvme-snapshot-read" in answers[last] and "fio-read-latency" in answers[last]
    assert not pwned.exists()
    jobs = subprocess.run(
        [*KBISECT, "status", "--json"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(jobs.stdout) == []  # nothing started
