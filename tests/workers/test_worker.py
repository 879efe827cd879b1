"""Each worker prunes its own cache (`kbisect gc`) at start and on a timer, and never what
a running job uses."""

import asyncio
import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from kbisect.builders import artifact_cache
from kbisect.builders import cache_gc as gc
from kbisect.contract import GC_DAYS
from kbisect.model import Artifact
from kbisect.settings import Settings
from kbisect.workers import worker

DAY = 86400.0


def _aged(path: Path, days: float) -> Path:
    when = time.time() - days * DAY
    for p in [*path.rglob("*"), path]:
        os.utime(p, (when, when))
    return path


def _run_dir(cache: Path, days_ago: float) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() - days_ago * DAY))
    run = cache / "runs" / f"{stamp}-{os.urandom(4).hex()}"
    run.mkdir(parents=True)
    (run / "console.log").write_text("booting\n")
    return _aged(run, days_ago)


class Stop(Exception):
    """Ends the loop where the fake clock says so."""


def _clock(rounds: int) -> tuple[list[float], Any]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == rounds:
            raise Stop

    return slept, sleep


async def test_gc_runs_at_start_then_every_interval_with_the_default_age(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Path, float, bool]] = []

    def collect(settings: Settings, days: float, dry_run: bool) -> gc.GcReport:
        calls.append((settings.cache, days, dry_run))
        return gc.GcReport(dry_run=dry_run)

    monkeypatch.setattr(gc, "collect", collect)
    slept, sleep = _clock(3)
    with pytest.raises(Stop):
        await worker.gc_loop(Settings.from_env(), sleep=sleep)
    assert calls == [(cache, GC_DAYS, False)] * 3  # at start, then after each wait
    assert slept == [worker.GC_EVERY_HOURS * 3600] * 3


async def test_a_failing_gc_is_logged_and_tried_again(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def collect(settings: Settings, days: float, dry_run: bool) -> gc.GcReport:
        raise PermissionError(13, "Permission denied", str(cache / "runs"))

    monkeypatch.setattr(gc, "collect", collect)
    slept, sleep = _clock(2)
    with caplog.at_level(logging.WARNING, logger="kbisect.workers.worker"), pytest.raises(Stop):
        await worker.gc_loop(Settings.from_env(), sleep=sleep)
    assert len(slept) == 2  # the worker went on after the first failure
    failures = [r.getMessage() for r in caplog.records]
    assert len(failures) == 2 and "Permission denied" in failures[0]


def test_gc_keeps_what_a_running_job_uses(cache: Path) -> None:
    """The timer's pass with the default age: a kernel built weeks ago that a job boots
    now, a run being written, its guest image and config stay; the old go."""
    old_run, live_run = _run_dir(cache, 30), _run_dir(cache, 30)
    (live_run / "console.log").write_text("still booting\n")
    adir = artifact_cache.entry_dir("a" * 40, "c" * 64)
    adir.mkdir(parents=True)
    (adir / "bzImage").write_bytes(b"kernel")
    (adir / "config").write_text("CONFIG_X=y\n")
    art = Artifact(
        "1" * 40,
        "a" * 40,
        "c" * 64,
        str(adir / "bzImage"),
        str(adir / "config"),
        str(adir / "build.log"),
        image_sha256=hashlib.sha256(b"kernel").hexdigest(),
    )
    artifact_cache.store(adir, art)
    unused = artifact_cache.entry_dir("b" * 40, "d" * 64)
    unused.mkdir(parents=True)
    (unused / "bzImage").write_bytes(b"old kernel")
    for entry in (adir, unused):
        _aged(entry, 30)  # both built a month ago
    artifact_cache.check_before_boot(art)  # a job boots it now
    worker.gc_once(Settings.from_env())
    assert adir.exists() and (adir / "meta.json").exists() and live_run.exists()
    assert not old_run.exists() and not unused.exists()


class FakeWorker:
    def __init__(self, activities: list[object]) -> None:
        self.activities = activities
        self.done = asyncio.Event()

    def config(self) -> dict[str, object]:
        return {"activities": self.activities}

    async def run(self) -> None:
        await self.done.wait()


async def test_a_build_or_vm_worker_prunes_its_cache_until_it_stops(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _run_dir(cache, 30)
    monkeypatch.setattr(worker, "GC_EVERY_HOURS", 0.01 / 3600)  # a tiny interval
    passes: list[float] = []
    real = worker.gc_once
    monkeypatch.setattr(worker, "gc_once", lambda s: (passes.append(time.time()), real(s)))
    w = FakeWorker([object()])
    running = asyncio.create_task(worker.run_workers([w], Settings.from_env()))  # type: ignore[list-item]
    for _ in range(200):
        if len(passes) >= 3:
            break
        await asyncio.sleep(0.01)
    assert len(passes) >= 3 and not old.exists()
    w.done.set()
    await asyncio.wait_for(running, 5)  # the workers ended: so did the timer
    seen = len(passes)
    await asyncio.sleep(0.05)
    assert len(passes) == seen


async def test_a_workflow_only_worker_leaves_the_cache_alone(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _run_dir(cache, 30)
    monkeypatch.setattr(worker, "GC_EVERY_HOURS", 0.01 / 3600)  # it would prune at once
    passes: list[Settings] = []
    monkeypatch.setattr(worker, "gc_once", passes.append)
    w = FakeWorker([])
    running = asyncio.create_task(worker.run_workers([w], Settings.from_env()))  # type: ignore[list-item]
    await asyncio.sleep(0.1)  # a pruning task would have run a pass or several by now
    w.done.set()
    await asyncio.wait_for(running, 5)
    assert passes == [] and old.exists()
