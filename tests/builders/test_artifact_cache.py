"""The artifact cache: whole entries or none, whatever is on the disk."""

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from kbisect.builders import artifact_cache
from kbisect.errors import InfraError
from kbisect.model import Artifact

TREE, CFG = "a" * 40, "c" * 64


def _entry(name: str = "bzImage", text: str = "kernel image") -> tuple[Path, Artifact]:
    adir = artifact_cache.entry_dir(TREE, CFG)
    adir.mkdir(parents=True, exist_ok=True)
    for fname, body in ((name, text), ("config", "CONFIG_X=y\n"), ("build.log", "log\n")):
        (adir / fname).write_text(body)
    art = Artifact(
        commit="1" * 40,
        tree=TREE,
        config_hash=CFG,
        kernel=str(adir / name),
        config=str(adir / "config"),
        build_log=str(adir / "build.log"),
        seconds=12.0,
        image_sha256=hashlib.sha256(text.encode()).hexdigest(),
    )
    artifact_cache.store(adir, art)
    return adir, art


def test_a_whole_entry_is_found(cache: Path) -> None:
    _, art = _entry()
    hit = artifact_cache.lookup(TREE, CFG, "2" * 40)
    assert hit is not None and hit.cached and hit.commit == "2" * 40
    assert hit.kernel == art.kernel and hit.seconds == 0.0


def _rewrite(meta: Callable[[dict[str, object]], object]) -> Callable[[Path], None]:
    def apply(adir: Path) -> None:
        path = adir / "meta.json"
        path.write_text(json.dumps(meta(json.loads(path.read_text()))))

    return apply


def _art(change: dict[str, object]) -> Callable[[Path], None]:
    def edit(m: dict[str, object]) -> dict[str, object]:
        art = m["artifact"]
        assert isinstance(art, dict)
        return {**m, "artifact": {**art, **change}}

    return _rewrite(edit)


TORN: dict[str, Callable[[Path], None]] = {
    "half-written json": lambda d: (d / "meta.json").write_text('{"status": "ok", "arti'),
    "not utf-8": lambda d: (d / "meta.json").write_bytes(b"\xff\xfe{}"),
    "a list": _rewrite(lambda m: [m]),
    "no status": _rewrite(lambda m: {"artifact": m["artifact"]}),
    "unknown status": _rewrite(lambda m: {**m, "status": "maybe"}),
    "no artifact": _rewrite(lambda m: {"status": "ok"}),
    "unknown field": _art({"bogus": 1}),
    "missing field": _rewrite(lambda m: {**m, "artifact": {"tree": TREE}}),
    "wrong type": _art({"seconds": "fast"}),
    "another tree (foreign)": _art({"tree": "b" * 40}),
    "another config (foreign)": _art({"config_hash": "d" * 64}),
    "a failure with no message": _rewrite(lambda m: {"status": "failed", "error": 3}),
    "empty bzImage": lambda d: (d / "bzImage").write_bytes(b""),
    "missing bzImage": lambda d: (d / "bzImage").unlink(),
    "missing config": lambda d: (d / "config").unlink(),
    "a directory for meta.json": lambda d: ((d / "meta.json").unlink(), (d / "meta.json").mkdir()),
    "huge meta.json": _rewrite(lambda m: {**m, "padding": "x" * 2_000_000}),
}


@pytest.mark.parametrize("damage", sorted(TORN))
def test_a_torn_or_foreign_entry_is_a_miss(damage: str, cache: Path) -> None:
    adir, _ = _entry()
    TORN[damage](adir)
    assert artifact_cache.lookup(TREE, CFG, "2" * 40) is None


def test_concurrent_writers_of_one_entry_do_not_collide(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adir, art = _entry()
    real_replace = os.replace
    calls: list[str] = []

    def interleaved(src: str | Path, dst: str | Path) -> None:
        calls.append(str(src))
        if len(calls) == 1:  # another builder stores the same key meanwhile
            artifact_cache.store(adir, Artifact(**{**asdict(art), "seconds": 99.0}))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", interleaved)
    artifact_cache.store(adir, art)
    assert len(set(calls)) == len(calls) == 2  # two temp names, not one shared
    hit = artifact_cache.lookup(TREE, CFG, art.commit)
    assert hit is not None
    assert not [p for p in adir.iterdir() if p.name.endswith(".tmp")]


BUILD_LOCKS = [
    (artifact_cache.building, (TREE, CFG), (TREE, "d" * 64), "another build of this kernel"),
    (artifact_cache.building_config, (CFG,), ("d" * 64,), "another first build of this config"),
]


@pytest.mark.parametrize(("lock", "key", "other_key", "said"), BUILD_LOCKS)
def test_a_second_builder_of_one_kernel_or_config_waits_for_the_first(
    cache: Path, lock: Any, key: tuple[str, ...], other_key: tuple[str, ...], said: str
) -> None:
    waits: list[str] = []
    entered = threading.Event()

    def second() -> None:
        with lock(*key, waits.append):
            entered.set()

    with lock(*key, pytest.fail):
        other = threading.Thread(target=second)
        other.start()
        deadline = time.monotonic() + 10
        while not waits and time.monotonic() < deadline:
            time.sleep(0.05)
        assert waits and not entered.is_set()  # it waits, and says so
        with lock(*other_key, pytest.fail):
            pass  # another kernel's (config's) build does not wait
    other.join(10)
    assert entered.is_set() and waits[0] == f"waiting: {said}"


def test_a_build_holding_its_kernels_lock_takes_its_configs_without_waiting_on_itself(
    cache: Path,
) -> None:
    for tree in (f"{i:040x}" for i in range(300)):  # whatever bucket each lands in
        with artifact_cache.building(tree, CFG, pytest.fail):
            with artifact_cache.building_config(CFG, pytest.fail):
                pass


def test_keep_replaces_a_file_atomically(cache: Path, tmp_path: Path) -> None:
    """A VM booting the old image (file open) reads it whole; a new reader gets the new one."""
    adir, art = _entry()
    src = tmp_path / "new-bzImage"
    src.write_text("new kernel image")
    with open(art.kernel) as booting:
        artifact_cache.keep(src, adir, "bzImage")
        assert booting.read() == "kernel image"
    assert Path(art.kernel).read_text() == "new kernel image"
    assert sorted(p.name for p in adir.iterdir()) == ["build.log", "bzImage", "config", "meta.json"]


def test_an_entry_from_before_modules_is_still_a_hit(cache: Path) -> None:
    adir, _ = _entry()
    _rewrite(
        lambda m: {**m, "artifact": {k: v for k, v in m["artifact"].items() if k != "modules"}}
    )(adir)  # type: ignore[attr-defined]
    hit = artifact_cache.lookup(TREE, CFG, "2" * 40)
    assert hit is not None and hit.modules == ""


def test_a_builds_modules_folder_is_part_of_the_entry(cache: Path) -> None:
    adir, _ = _entry()
    mods = adir / artifact_cache.MODULES / "6.1.170"
    _art({"modules": "/elsewhere/modules/6.1.170"})(adir)
    assert artifact_cache.lookup(TREE, CFG, "2" * 40) is None  # the folder is gone: rebuild
    mods.mkdir(parents=True)
    hit = artifact_cache.lookup(TREE, CFG, "2" * 40)
    assert hit is not None and hit.modules == str(mods)


def _zero(path: Path) -> None:
    """Overwrite in place with zeros of the same size (a torn write, a bad disk)."""
    path.write_bytes(b"\0" * path.stat().st_size)


def test_a_damaged_kernel_image_is_a_miss_and_the_entry_goes(
    cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    adir, _ = _entry()
    _zero(adir / "bzImage")
    with caplog.at_level(logging.WARNING, logger="kbisect.builders.artifact_cache"):
        assert artifact_cache.lookup(TREE, CFG, "2" * 40) is None
    assert not (adir / "meta.json").exists()  # evicted: the next build stores a new one
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "bzImage" in lines[0] and "sha256" in lines[0]
    assert artifact_cache.lookup(TREE, CFG, "2" * 40) is None  # still a miss, quietly


@pytest.mark.parametrize("damaged", ["config", artifact_cache.SOURCES, "modules"])
def test_a_damaged_config_sources_or_module_is_a_miss(damaged: str, cache: Path) -> None:
    adir, _ = _entry()
    (adir / artifact_cache.SOURCES).write_text("kernel/fork.c\n")
    mods = adir / artifact_cache.MODULES / "6.1.170"
    (mods / "kernel").mkdir(parents=True)
    (mods / "kernel" / "dm-snapshot.ko").write_text("ko")
    _art({"sources": "x", "modules": str(mods)})(adir)
    artifact_cache.store(adir, artifact_cache.lookup(TREE, CFG, "1" * 40))  # type: ignore[arg-type]
    assert artifact_cache.lookup(TREE, CFG, "2" * 40) is not None
    target = {"config": adir / "config", "modules": mods / "kernel" / "dm-snapshot.ko"}
    _zero(target.get(damaged, adir / damaged))
    assert artifact_cache.lookup(TREE, CFG, "2" * 40) is None


def test_an_entry_from_before_file_digests_is_checked_by_its_image(cache: Path) -> None:
    adir, _ = _entry()
    _rewrite(lambda m: {k: v for k, v in m.items() if k != "digests"})(adir)
    assert artifact_cache.lookup(TREE, CFG, "2" * 40) is not None
    _zero(adir / "bzImage")
    assert artifact_cache.lookup(TREE, CFG, "2" * 40) is None


def test_an_image_without_a_digest_is_a_miss(cache: Path) -> None:
    """Nothing to check it against: rebuilt (every build records one)."""
    adir, _ = _entry()
    _art({"image_sha256": ""})(adir)
    assert artifact_cache.lookup(TREE, CFG, "2" * 40) is None


def test_a_kernel_damaged_before_its_boot_is_a_host_problem_not_a_verdict(cache: Path) -> None:
    adir, _ = _entry()
    hit = artifact_cache.lookup(TREE, CFG, "2" * 40)
    assert hit is not None
    artifact_cache.check_before_boot(hit)  # whole: boots
    _zero(adir / "bzImage")
    with pytest.raises(InfraError, match="sha256"):
        artifact_cache.check_before_boot(hit)
    assert not (adir / "meta.json").exists()  # evicted: the next build of it rebuilds
    (adir / "bzImage").unlink()
    with pytest.raises(InfraError, match="gone"):
        artifact_cache.check_before_boot(hit)


def test_a_boot_marks_its_entry_used(cache: Path) -> None:
    """gc ages entries by their last use: a job booting a kernel built weeks ago keeps it."""
    adir, _ = _entry()
    hit = artifact_cache.lookup(TREE, CFG, "2" * 40)
    assert hit is not None
    old = time.time() - 30 * 86400
    os.utime(adir / "meta.json", (old, old))
    artifact_cache.check_before_boot(hit)
    assert (adir / "meta.json").stat().st_mtime > time.time() - 60


def test_an_artifact_with_no_digest_boots_unchecked(tmp_path: Path) -> None:
    """A kernel from elsewhere with no digest recorded: nothing to compare it with."""
    art = Artifact(commit="c", tree="t", config_hash="h", kernel="/k", config="", build_log="")
    artifact_cache.check_before_boot(art)


def test_every_file_is_on_disk_before_it_is_published(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """write temp, fsync it, rename, fsync the folder: a crash never leaves meta.json
    pointing at a file whose blocks never reached the disk."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        events.append(("rename", str(src)))
        real_replace(src, dst)
        events.append(("renamed", str(dst)))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    adir = artifact_cache.entry_dir(TREE, CFG)
    src = tmp_path / "image"
    src.write_text("kernel image")
    mods = tmp_path / "6.1.170"
    (mods / "kernel").mkdir(parents=True)
    (mods / "kernel" / "a.ko").write_text("ko")
    log = artifact_cache.BuildLog(adir)
    log.file.write("CC init/main.o\n")
    artifact_cache.keep(src, adir, "bzImage")
    artifact_cache.keep_text("x\n", adir, artifact_cache.SOURCES)
    artifact_cache.keep_tree(mods, adir, artifact_cache.MODULES)
    log.publish(artifact_cache.BUILD_LOG)
    _entry()  # stores meta.json
    renames = [i for i, (kind, _) in enumerate(events) if kind == "rename"]
    assert len(renames) >= 5
    for i in renames:
        tmp = events[i][1]
        synced = [p for kind, p in events[:i] if kind == "fsync"]
        assert tmp in synced or any(p.startswith(tmp + "/") for p in synced), tmp
        dst_dir = str(Path(events[i + 1][1]).parent)
        assert ("fsync", dst_dir) in events[i + 1 :], f"{dst_dir} not synced after {tmp}"
    copied_ko = [p for kind, p in events if kind == "fsync" and p.endswith("/a.ko")]
    assert copied_ko, "the module tree's files are synced too"
