"""A series watch end to end: a real Temporal dev server running its Schedule, the real
tick and sweep workflows and series activities (fake builds and boots, whose truth is a
file in the commit), a named tree made by the test, and the Matrix bot posting to a real
Synapse room. A new tag that slows the kernel down gives one alert with its plot; after
the server, the worker and the bot restart, nothing is swept or posted twice."""

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.nginx import free_port
from kbisect.infra import temporal_server
from tests.chat.bot_process import bot_posts, start_bot, wait_for
from tests.chat.homeserver import Synapse, User
from tests.conftest import git
from tests.e2e.service import KBISECT

WATCH = "lab-watch"
BOT_ARGS = ("--series", WATCH, "--alerts-every", "1")  # a look a second: no 30 s waits


class Service:
    """The dev server (its database kept across restarts) and the test worker."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.tmp, self.env = tmp, env
        self.port, self.ui_port = free_port(), free_port()
        self.server: subprocess.Popen[bytes] | None = None
        self.worker: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        tmp = self.tmp
        self.server = temporal_server.start(
            port=self.port, ui_port=self.ui_port, db=tmp / "t.db", log=tmp / "temporal.log"
        )
        queue = self.env["KBISECT_CONTROL_QUEUE"]
        with open(tmp / "worker.log", "ab") as log:
            self.worker = subprocess.Popen(
                [sys.executable, "-m", "tests.chat.series_worker", self.address, queue],
                env={**os.environ, **self.env},
                stdout=log,
                stderr=log,
            )

    def stop(self) -> None:
        for proc in (self.worker, self.server):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)


@pytest.fixture
def service(tmp_path: Path, server: None) -> Iterator[Service]:
    queue = f"kb-{uuid.uuid4().hex[:6]}"
    env = {
        "KBISECT_CACHE": str(tmp_path / "cache"),
        "KBISECT_DATA": str(tmp_path / "data"),
        "KBISECT_CONTROL_QUEUE": queue,
        "KBISECT_BUILD_QUEUE": queue,
        "KBISECT_VM_QUEUE": queue,
    }
    svc = Service(tmp_path, env)
    svc.env["KBISECT_TEMPORAL_ADDRESS"] = svc.address
    svc.start()
    try:
        yield svc
    finally:
        svc.stop()


def kbisect(svc: Service, *args: str) -> str:
    proc = subprocess.run(
        [*KBISECT, *args],
        env={**os.environ, **svc.env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def ticks(svc: Service) -> list[dict[str, Any]]:
    shown: list[dict[str, Any]] = json.loads(
        kbisect(svc, "series", "show", WATCH, "--json", "--no-start")
    )["ticks"]
    return shown


def looks_done(svc: Service) -> int:
    """How many looks the watch has had, once none runs (0 while one does)."""
    states = [t["state"] for t in ticks(svc)]
    return len(states) if all(s == "completed" for s in states) else 0


def until(cond: Callable[[], object], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


def _commit(repo: Path, name: str, tag: str) -> str:
    (repo / name).write_text(name + "\n")
    git(repo, "add", name)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"add {name}")
    git(repo, "tag", tag)
    return git(repo, "rev-parse", "HEAD").strip()


async def _skipped(address: str) -> int:
    """The looks the watch's Schedule skipped because one still ran (SKIP would count the
    second check here; BUFFER_ONE holds it until the running look ends)."""
    from temporalio.client import Client

    client = await Client.connect(address)
    desc = await client.get_schedule_handle(f"kbisect-series-{WATCH}").describe()
    return desc.info.num_actions_skipped_overlap


async def _summary_of(address: str, job: str) -> str:
    """A job's one line in Temporal's workflow list (its static summary)."""
    from temporalio.client import Client

    client = await Client.connect(address)
    return await (await client.get_workflow_handle(job).describe()).static_summary() or ""


def _watched(service: Service, tmp_path: Path) -> tuple[Path, str]:
    """An upstream tree with tag v1, the watch of its tags after its first look: (the
    upstream, what `series watch` printed)."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "master")
    _commit(upstream, "one", "v1")
    kbisect(service, "tree", "add", "lab", f"file://{upstream}")
    made = kbisect(
        service,
        "series", "watch", WATCH, "--tree", "lab", "--tags", "v*",
        "--testcase", "nvme-snapshot-read", "--every", "1d", "--no-start",
    )  # fmt: skip
    until(lambda: looks_done(service) == 1, "the first look")
    return upstream, made


def test_a_new_slow_tag_gives_one_alert_with_its_plot_and_none_after_restarts(
    synapse: Synapse, service: Service, tmp_path: Path
) -> None:
    upstream, made = _watched(service, tmp_path)
    assert f"watch {WATCH} (kbisect-series-{WATCH}): tree lab tags v*, every 1d" in made
    assert ticks(service)[0]["message"] == "baseline v1: newer kernels are swept against it"

    tag = uuid.uuid4().hex[:6]
    bot, alice = (synapse.register(f"{n}{tag}") for n in ("bot", "alice"))
    room = alice.create_room()
    bot_env = {**service.env, "KBISECT_DATA": str(tmp_path / "bot-data")}
    bot_proc = start_bot(synapse, bot, room, [alice.user_id], bot_env, tmp_path, BOT_ARGS)
    try:
        _commit(upstream, "slow", "v2")  # the seed's bug: 8-sector reads from here on
        _commit(upstream, "three", "v3-rc1")  # slow too, and the same as v2
        kbisect(service, "series", "check", WATCH, "--no-start")
        wait_for(lambda: len(bot_posts(alice, room, bot)) >= 2, 180, "the alert", bot_proc)
        time.sleep(2)  # nothing else comes
        posts = bot_posts(alice, room, bot)
        assert len(posts) == 2, [p["content"].get("body") for p in posts]
        alert, plot = posts
        body = alert["content"]["body"]
        assert body.startswith(f"kbisect alert: {WATCH}: nvme-snapshot-read avg_read_sectors: ")
        assert "v1 -> v2: changed (worse), -98.4%" in body
        sweep = body.rsplit("kbisect report ", 1)[1]
        assert plot["content"]["msgtype"] == "m.image"
        assert plot["content"]["m.relates_to"]["event_id"] == alert["event_id"]
        assert plot["content"]["body"] == f"{sweep}: each kernel's level"

        done = ticks(service)[0]
        assert [k["name"] for k in done["series"]] == ["v1", "v2", "v3-rc1"]
        assert [(a["old"], a["new"]) for a in done["alerts"]] == [("v1", "v2")]
        assert done["sweep"] == sweep
        # the look's sweep, a child job, has its line in the Web UI as any sweep has
        line = asyncio.run(_summary_of(service.address, sweep))
        assert line.startswith("sweep nvme-snapshot-read over 3 kernels v1 .. v3-rc1 in "), line
        assert done["kept"] == {
            "v1": {"nvme-snapshot-read": 1},
            "v2": {"nvme-snapshot-read": 1},
            "v3-rc1": {"nvme-snapshot-read": 1},
        }  # a count: one boot of each decides

        # Everything restarts: the server (from its database), the worker and the bot.
        bot_proc.terminate()
        bot_proc.wait(timeout=30)
        service.stop()
        service.start()
        log = tmp_path / "bot.log"
        seen = log.read_text().count(f"series {WATCH}: 1 alert(s), 0 posted now")
        bot_proc = start_bot(synapse, bot, room, [alice.user_id], bot_env, tmp_path, BOT_ARGS)
        wait_for(
            lambda: log.read_text().count(f"series {WATCH}: 1 alert(s), 0 posted now") > seen,
            60,
            "the restarted bot's first look",
            bot_proc,
        )
        kbisect(service, "series", "check", WATCH, "--no-start")
        until(lambda: looks_done(service) == 3, "the third look")
        assert ticks(service)[0]["message"] == "nothing new since v3-rc1"
        assert len(bot_posts(alice, room, bot)) == 2
    finally:
        bot_proc.terminate()
        bot_proc.wait(timeout=30)
    listed = json.loads(kbisect(service, "series", "list", "--json", "--no-start"))
    assert [(w["name"], w["tags"], w["every_minutes"]) for w in listed] == [(WATCH, "v*", 1440.0)]
    kbisect(service, "series", "remove", WATCH, "--no-start")
    assert json.loads(kbisect(service, "series", "list", "--json", "--no-start")) == []


def _watched_in_a_room(
    synapse: Synapse, service: Service, tmp_path: Path
) -> tuple[Path, User, User, str, subprocess.Popen[bytes]]:
    """The watched upstream, and a bot posting the watch's alerts in alice's new room:
    (upstream, bot, alice, room, the bot's process)."""
    upstream, _ = _watched(service, tmp_path)
    tag = uuid.uuid4().hex[:6]
    bot, alice = (synapse.register(f"{n}{tag}") for n in ("bot", "alice"))
    room = alice.create_room()
    bot_env = {**service.env, "KBISECT_DATA": str(tmp_path / "bot-data")}
    bot_proc = start_bot(synapse, bot, room, [alice.user_id], bot_env, tmp_path, BOT_ARGS)
    return upstream, bot, alice, room, bot_proc


def test_a_blocked_look_is_an_alert_and_the_next_look_waits_for_it(
    synapse: Synapse, service: Service, tmp_path: Path
) -> None:
    upstream, bot, alice, room, bot_proc = _watched_in_a_room(synapse, service, tmp_path)
    try:
        _commit(upstream, "host-fails", "v2")  # its boots fail as a broken host's do
        kbisect(service, "series", "check", WATCH, "--no-start")
        wait_for(lambda: len(bot_posts(alice, room, bot)) >= 1, 180, "the alert", bot_proc)
        checked = kbisect(service, "series", "check", WATCH, "--no-start")  # while it waits
        assert "after the look under way" in checked
        time.sleep(3)
        posts = [p["content"]["body"] for p in bot_posts(alice, room, bot)]
        assert len(posts) == 1, posts  # once, however many looks the bot makes
        sweep = f"{ticks(service)[0]['id']}-sweep"
        assert posts[0] == (
            f"kbisect alert: the watch {WATCH} is blocked: "
            f"{posts[0].split(' is blocked: ', 1)[1].split(' (sweep ')[0]} "
            f"(sweep {sweep}: fix the host, then 'kbisect resume {sweep}')"
        )
        assert "disk is full" in posts[0]
        states = [t["state"] for t in ticks(service)]
        assert states == ["running", "completed"], states
        assert asyncio.run(_skipped(service.address)) == 0  # the check waits, not skipped
    finally:
        bot_proc.terminate()
        bot_proc.wait(timeout=30)


def test_a_look_that_cannot_decide_is_an_alert_of_its_own(
    synapse: Synapse, service: Service, tmp_path: Path
) -> None:
    """Silence would read as all clear: a pair that cannot tell (here the new kernel does
    not build) is posted as "could not decide", once."""
    upstream, bot, alice, room, bot_proc = _watched_in_a_room(synapse, service, tmp_path)
    try:
        _commit(upstream, "broken", "v2")
        kbisect(service, "series", "check", WATCH, "--no-start")
        wait_for(lambda: len(bot_posts(alice, room, bot)) >= 2, 180, "the alert", bot_proc)
        time.sleep(2)
        posts = bot_posts(alice, room, bot)
        assert len(posts) == 2, [p["content"].get("body") for p in posts]
        body = posts[0]["content"]["body"]
        assert body.startswith(f"kbisect could not decide: {WATCH}: nvme-snapshot-read "), body
        assert "v1 -> v2: cannot tell" in body and "kernel 2 does not build" in body, body
        assert posts[1]["content"]["msgtype"] == "m.image"  # the sweep's plot, as an alert's
        (done,) = [t for t in ticks(service) if t["state"] == "completed"][:1]
        assert done["message"].endswith("0 of 1 pairs changed, 1 cannot tell in 2 kernels")
        assert [a["pair"]["verdict"] for a in done["alerts"]] == ["cannot tell"]
        shown = kbisect(service, "series", "show", WATCH, "--no-start")
        assert any(line.startswith("undecided ") for line in shown.splitlines()), shown
    finally:
        bot_proc.terminate()
        bot_proc.wait(timeout=30)
