"""Artifacts keyed by (tree hash, config hash): the same inputs are never built twice.

A compile failure is cached too (it is as deterministic as a success), but only with
the compiler or linker line that proves it; a host failure never is.

Every file is written under a unique temporary name and renamed into place, so a reader
(another worker, a VM booting the image) sees an old whole file or a new whole one. An
entry that is torn or foreign (from an older kbisect, a moved cache, a crash) is a miss:
rebuilt, never trusted, never a crash.
"""

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from kbisect import settings
from kbisect.builders.classify import TreeBuildError, is_tree_error
from kbisect.errors import KernelBuildError
from kbisect.model import Artifact

log = logging.getLogger(__name__)
MAX_META_BYTES = 64 * 1024  # ours are under 2 KiB; a bigger one is not ours
# Artifact's fields and their types, checked before trusting an entry.
FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "commit": str,
    "tree": str,
    "config_hash": str,
    "kernel": str,
    "config": str,
    "build_log": str,
    "cached": bool,
    "seconds": (float, int),
    "image_sha256": str,
    "sources": str,
    "modules": str,
}
MODULES = "modules"  # the build's modules folder, lib/modules/RELEASE, kept under it
BUILD_LOG, HOST_LOG = "build.log", "host-failure.log"
SOURCES = "sources.txt"  # the files the build compiled, one a line


def entry_dir(tree: str, config_hash: str) -> Path:
    return settings.cache_dir() / "artifacts" / f"{tree[:20]}-{config_hash[:20]}"


def lookup(tree: str, config_hash: str, commit: str) -> Artifact | None:
    """The cached artifact; raises the cached KernelBuildError for a known-broken tree."""
    adir = entry_dir(tree, config_hash)
    meta = _read_meta(adir / "meta.json")
    if meta is None:
        return None
    if meta.get("status") == "failed":
        evidence, error = meta.get("evidence"), meta.get("error")
        if isinstance(evidence, str) and isinstance(error, str) and is_tree_error(evidence):
            _touch(adir)
            raise KernelBuildError(error, log_path=str(adir / BUILD_LOG))
        log.warning("%s: cached failure without a compiler error: rebuilding", adir.name)
        return None
    art = _artifact(meta, adir, tree, config_hash)
    if art is None:
        log.warning("%s: torn or foreign cache entry: rebuilding", adir.name)
        return None
    _touch(adir)
    return Artifact(**{**asdict(art), "commit": commit, "cached": True, "seconds": 0.0})


def _read_meta(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_META_BYTES + 1)
        meta = json.loads(data) if len(data) <= MAX_META_BYTES else None
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # a directory, unreadable, not JSON or not UTF-8
        log.warning("%s: unreadable (%s): rebuilding", path, exc)
        return None
    return meta if isinstance(meta, dict) else None


def _artifact(meta: dict[str, Any], adir: Path, tree: str, config_hash: str) -> Artifact | None:
    """The entry's artifact if it is whole and of these inputs, with paths in this entry
    (the cache may have moved since it was written)."""
    raw = meta.get("artifact")
    if meta.get("status") != "ok" or not isinstance(raw, dict):
        return None
    raw = {"modules": "", **raw}  # entries from before builds had modules
    if set(raw) != set(FIELD_TYPES) or (raw["tree"], raw["config_hash"]) != (tree, config_hash):
        return None
    if not all(isinstance(raw[k], t) for k, t in FIELD_TYPES.items()):
        return None
    kernel, config = adir / Path(raw["kernel"]).name, adir / Path(raw["config"]).name
    if not _nonempty(kernel) or not _nonempty(config):
        return None
    sources = str(adir / SOURCES) if raw["sources"] else ""
    modules = adir / MODULES / Path(raw["modules"]).name if raw["modules"] else None
    if modules is not None and not modules.is_dir():
        return None
    return Artifact(
        **{
            **raw,
            "kernel": str(kernel),
            "config": str(config),
            "build_log": str(adir / BUILD_LOG),
            "sources": sources,
            "modules": str(modules or ""),
        }
    )


def _nonempty(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def _touch(adir: Path) -> None:
    """Mark the entry used now: `kbisect gc` removes entries not used for a while."""
    try:
        os.utime(adir / "meta.json")
    except OSError:
        pass  # read-only or just replaced: the mark is only a hint


def store(artifact_dir: Path, artifact: Artifact) -> None:
    _write_meta(artifact_dir, {"status": "ok", "artifact": asdict(artifact)})


def store_failure(artifact_dir: Path, error: KernelBuildError) -> None:
    """Cache a failure the compiler or linker proved; anything else is not cached."""
    if not isinstance(error, TreeBuildError):
        log.warning("%s: not caching a failure with no compiler error: %s", artifact_dir, error)
        return
    meta: dict[str, object] = {
        "status": "failed",
        "error": str(error),
        "evidence": error.evidence,
        "build_log": error.log_path,
    }
    _write_meta(artifact_dir, meta)


def _write_meta(artifact_dir: Path, meta: dict[str, object]) -> None:
    artifact_dir.mkdir(parents=True, exist_ok=True)
    with _atomic(artifact_dir / "meta.json") as tmp:
        tmp.write_text(json.dumps(meta, indent=2))


def keep(src: Path, artifact_dir: Path, name: str) -> str:
    """Copy src into the entry as name, replacing any older file whole."""
    artifact_dir.mkdir(parents=True, exist_ok=True)
    dst = artifact_dir / name
    with _atomic(dst) as tmp:
        shutil.copy2(src, tmp)
    return str(dst)


def keep_tree(src: Path, artifact_dir: Path, name: str) -> str:
    """Copy the folder src into the entry as name/<src's name>, replacing an older one
    whole (a reader sees the old folder or the new, never half of one)."""
    parent = artifact_dir / name
    parent.mkdir(parents=True, exist_ok=True)
    dst = parent / src.name
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{src.name}.")) / "t"
    try:
        shutil.copytree(src, tmp, symlinks=True)
        old = dst.with_name(f".{src.name}.old")
        if dst.exists():
            os.replace(dst, old)
        os.replace(tmp, dst)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)
    return str(dst)


def keep_text(text: str, artifact_dir: Path, name: str) -> str:
    """Write text into the entry as name, replacing any older file whole."""
    artifact_dir.mkdir(parents=True, exist_ok=True)
    dst = artifact_dir / name
    with _atomic(dst) as tmp:
        tmp.write_text(text)
    return str(dst)


@contextmanager
def _atomic(dst: Path) -> Iterator[Path]:
    """A unique temporary path beside dst, renamed onto dst if the block succeeds."""
    fd, name = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)


class BuildLog:
    """A build log written under a unique name, then published whole: as build.log when
    the build reached a verdict, as host-failure.log when the host stopped it. Two builds
    of one entry at once never write one file."""

    def __init__(self, artifact_dir: Path) -> None:
        artifact_dir.mkdir(parents=True, exist_ok=True)
        self.dir = artifact_dir
        fd, name = tempfile.mkstemp(dir=artifact_dir, prefix=".build.", suffix=".log.tmp")
        self.tmp = Path(name)
        self.file: TextIO = open(fd, "w", errors="replace")

    def publish(self, name: str) -> Path:
        self.file.close()
        dst = self.dir / name
        os.replace(self.tmp, dst)
        return dst
