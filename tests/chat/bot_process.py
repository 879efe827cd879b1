"""Run `kbisect chat matrix` as a process against a test homeserver, and read its room."""

import os
import subprocess
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.chat.homeserver import Synapse, User
from tests.e2e.service import KBISECT


def start_bot(
    hs: Synapse,
    bot: User,
    room: str,
    allowed: list[str],
    env: dict[str, str],
    workdir: Path,
    extra: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    password = workdir / "bot-password"
    password.write_text(bot.password + "\n")
    argv = [
        *KBISECT,
        "chat",
        "matrix",
        "--homeserver",
        hs.url,
        "--user",
        bot.user_id,
        "--password-file",
        str(password),
        "--room",
        room,
        *(a for user in allowed for a in ("--allow-user", user)),
        *extra,
    ]
    log_file = workdir / "bot.log"
    started = log_file.read_text().count("listening in") if log_file.exists() else 0  # restarts
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            argv, env={**os.environ, **env}, stdout=log, stderr=log, stdin=subprocess.DEVNULL
        )
    # Joined, and past its first sync: a command sent now is one it must answer.
    wait_for(
        lambda: (workdir / "bot.log").read_text().count("listening in") > started,
        60,
        "the bot",
        proc,
    )
    return proc


def wait_for(
    cond: Callable[[], object], timeout: float, what: str, proc: subprocess.Popen[bytes]
) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            raise AssertionError(f"the bot exited ({proc.returncode}) waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def members(user: User, room: str) -> set[str]:
    joined = user.api("GET", f"/rooms/{urllib.parse.quote(room)}/joined_members")
    return set(joined["joined"])


def bot_posts(user: User, room: str, bot: User) -> list[dict[str, Any]]:
    return [e for e in user.messages(room) if e["sender"] == bot.user_id]


def in_thread(event: dict[str, Any], root: str) -> bool:
    rel = event["content"].get("m.relates_to", {})
    return bool(rel.get("rel_type") == "m.thread" and rel.get("event_id") == root)


def reply_to(event: dict[str, Any]) -> str | None:
    rel = event["content"].get("m.relates_to", {})
    return rel.get("m.in_reply_to", {}).get("event_id")  # type: ignore[no-any-return]
