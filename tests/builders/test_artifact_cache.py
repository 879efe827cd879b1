"""The artifact cache: whole entries or none, whatever is on the disk."""

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest

from kbisect.builders import artifact_cache
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
