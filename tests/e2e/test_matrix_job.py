"""A real job from chat: a user's `!kbisect bisect tree=...` on a real Synapse starts a real
investigation of the lab (dev server, worker, QEMU) from a named tree, its bisection a
stage job; the bot, killed mid-job and started again, follows it on in its thread without
posting anything twice, and ends with the bisection's outcome, its report's summary, the
investigation's outcome and the score plot. `backport INV target=...` takes the
investigation's bisection to the target."""

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from benchmarks.nginx import free_port
from kbisect.infra import temporal_server
from tests.chat.bot_process import KBISECT, bot_posts, in_thread, reply_to, start_bot, wait_for
from tests.chat.homeserver import Synapse
from tests.e2e.service import SEED, service_env, start_worker

pytestmark = pytest.mark.e2e


def test_chat_user_bisects_a_named_tree_through_a_bot_restart(
    real_lab: tuple[Path, dict[str, object]], synapse: Synapse, tmp_path: Path
) -> None:
    lab, truth = real_lab
    port, ui_port = free_port(), free_port()
    server = temporal_server.start(port=port, ui_port=ui_port, db=tmp_path / "t.db")
    tag = uuid.uuid4().hex[:6]
    tree = f"lab-{tag}"
    env = service_env(tmp_path, port, ui_port, tag)
    full_env = {**os.environ, **env}
    worker = start_worker(env, tmp_path / "worker.log")
    bot_user, alice = synapse.register(f"bot{tag}"), synapse.register(f"alice{tag}")
    room = alice.create_room()
    subprocess.run([*KBISECT, "tree", "add", tree, f"file://{lab}"], env=full_env, check=True)
    bot = start_bot(synapse, bot_user, room, [alice.user_id], env, tmp_path)
    try:
        asked = alice.say(
            room,
            f"!kbisect bisect tree={tree} good=lab-good bad=lab-bad testcase={SEED} repetitions=1",
        )

        def root() -> dict[str, object] | None:
            return next((e for e in bot_posts(alice, room, bot_user) if reply_to(e) == asked), None)

        wait_for(root, 120, "the job's first post", bot)
        first = root()
        assert first is not None
        body = str(first["content"]["body"])  # type: ignore[index]
        assert body.startswith(f"started inv-{SEED}-"), body
        job_id = body.split()[1].rstrip(":")
        assert f"http://127.0.0.1:{ui_port}/namespaces/default/workflows/{job_id}" in body
        root_id = str(first["event_id"])

        def thread() -> list[dict[str, object]]:
            return [e for e in bot_posts(alice, room, bot_user) if in_thread(e, root_id)]

        wait_for(lambda: len(thread()) >= 2, 600, "progress in the thread", bot)
        os.kill(bot.pid, signal.SIGKILL)  # mid-job, with no chance to tidy up
        bot.wait()
        bot = start_bot(synapse, bot_user, room, [alice.user_id], env, tmp_path)
        wait_for(
            lambda: any(e["content"]["msgtype"] == "m.image" for e in thread()),  # type: ignore[index]
            2400,
            "the job's end in the thread",
            bot,
        )
        watched = subprocess.run(
            [*KBISECT, "watch", job_id, "--json"], env=full_env, capture_output=True, text=True
        )
        result = json.loads(watched.stdout)
        # Then the fix for the kernel that ships: no upstream Fixes: here, so the culprit
        # reverted on lab-bad, built (the verification's kernel, cached) and booted.
        backported = alice.say(room, f"!kbisect backport {job_id} target=lab-bad")

        def backport_root() -> dict[str, object] | None:
            posts = bot_posts(alice, room, bot_user)
            return next((e for e in posts if reply_to(e) == backported), None)

        wait_for(backport_root, 120, "the backport's first post", bot)
        started = backport_root()
        assert started is not None
        back_id = str(started["event_id"])

        def back_thread() -> list[str]:
            posts = bot_posts(alice, room, bot_user)
            return [str(e["content"]["body"]) for e in posts if in_thread(e, back_id)]  # type: ignore[index]

        wait_for(lambda: any("[Test Plan]" in b for b in back_thread()), 1200,
                 "the backport's SRU note", bot)  # fmt: skip
        backport_posts = back_thread()
    finally:
        bot.terminate()
        bot.wait(timeout=30)
        os.killpg(worker.pid, signal.SIGKILL)
        server.terminate()
        server.wait(timeout=30)
        subprocess.run([*KBISECT, "tree", "remove", tree], env=full_env, check=False)

    posts = thread()
    bodies = [str(e["content"]["body"]) for e in posts]  # type: ignore[index]
    assert len(bodies) == len(set(bodies)), bodies  # nothing posted twice across the restart
    assert any(b.startswith("calibrating") for b in bodies), bodies
    assert any(b.startswith("step 1: ") for b in bodies), bodies
    steps = [b for b in bodies if b.startswith("step ")]
    assert len(steps) == len(result["steps"])
    if result["culprit"]:
        assert result["culprit"] == truth["culprit"]
        outcome = f"first bad commit: {result['culprit']}"
    else:  # broken commits beside it may leave candidates
        assert truth["culprit"] in result["candidates"]
        outcome = result["message"]
    assert any(b.startswith(outcome) for b in bodies), (outcome, bodies)
    assert f"bisect: job {job_id}-bisect" in bodies  # the investigation's stage
    assert any(b.startswith(f"# kbisect {job_id}-bisect") for b in bodies)  # its summary
    assert any(b.startswith(f"{job_id} {result['status']}: ") for b in bodies)  # the end
    assert [e["content"]["msgtype"] for e in posts][-1] == "m.image"  # type: ignore[index]
    # the investigation's id to backport: its bisection's backport
    assert str(started["content"]["body"]).startswith(f"started {job_id}-bisect-backport-")  # type: ignore[index]
    assert any(b.startswith("verified: ") for b in backport_posts), backport_posts
    assert any(b.startswith("boot 1: ") for b in backport_posts), backport_posts
    note = next(b for b in backport_posts if "[Test Plan]" in b)
    assert "with the backport: avg_read_sectors" in note and f"backport of job {job_id}" in note
