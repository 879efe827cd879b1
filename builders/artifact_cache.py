"""Artifacts keyed by (tree hash, config hash): the same inputs are never built twice.

A compile failure is cached too (it is as deterministic as a success), but only with
the compiler or linker line that proves it; a host failure never is.

Every file is written under a unique temporary name, synced to the disk and renamed into
place (then its folder synced), so a reader (another worker, a VM booting the image) sees
an old whole file or a new whole one, and a crash never leaves meta.json naming a file
whose blocks never reached the disk. An entry that is torn, foreign (from an older
kbisect, a moved cache) or damaged (a file no longer matches the sha256 stored with it)
is a miss: rebuilt, never trusted, never a crash, never a verdict.
"""

import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from kbisect import settings
from kbisect.builders.classify import TreeBuildError, is_tree_error
from kbisect.errors import InfraError, KernelBuildError
from kbisect.infra import host_lock
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
SYSTEM_MAP = "System.map"  # the image's symbols and their addresses, beside it


BUILD_LOCKS = 256  # lock files for builds in progress, a fixed set: none is ever removed


def entry_dir(tree: str, config_hash: str) -> Path:
    return settings.cache_dir() / "artifacts" / f"{tree[:20]}-{config_hash[:20]}"


@contextmanager
def building(tree: str, config_hash: str, progress: Callable[[str], None]) -> Iterator[None]:
    """Held while this entry is built, across processes: a second builder of the same
    kernel (two build workers of one host, a job and a `kbisect try`) waits for the first
    and then finds it cached, instead of building it again in another slot. The entries
    share BUILD_LOCKS files, by their key's hash, so a lock file is never removed under a
    waiter; two different kernels rarely share one (then one waits for the other)."""
    with _bucket_lock("", f"{tree}-{config_hash}", progress, "another build of this kernel"):
        yield


@contextmanager
def building_config(config_hash: str, progress: Callable[[str], None]) -> Iterator[None]:
    """Held by a build from scratch of this config (a slot not configured for it): a second
    such build, of another commit or another repository's, waits for it and then compiles
    from the ccache the first filled, instead of compiling every object twice at once (two
    workers starting a job on a fresh host, two clones of one kernel)."""
    with _bucket_lock("config-", config_hash, progress, "another first build of this config"):
        yield


@contextmanager
def _bucket_lock(
    prefix: str, key: str, progress: Callable[[str], None], what: str
) -> Iterator[None]:
    """An flock on one of BUILD_LOCKS files named `prefix`NNN (a set of its own for each
    prefix: one process never holds two of a set, nor waits on itself)."""
    bucket = int(hashlib.sha256(key.encode()).hexdigest(), 16) % BUILD_LOCKS
    folder = settings.cache_dir() / "build-locks"
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(
        folder / f"{prefix}{bucket:03d}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
    )
    try:
        host_lock.take(fd, fcntl.LOCK_EX, progress, f"waiting: {what}")
        yield
    finally:
        os.close(fd)  # releases the lock


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
    damage = _damage(adir, art, meta.get("digests", {}))
    if damage:
        log.warning("%s: %s: evicted, rebuilding", adir.name, damage)
        evict(adir)
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


def _damage(adir: Path, art: Artifact, digests: object) -> str:
    """Why the entry's files are not the ones stored ('' when they are): each is checked
    against its sha256, the image against the artifact's own."""
    if not art.image_sha256:
        return "bzImage has no sha256 to check it by"
    if not isinstance(digests, dict) or not all(
        isinstance(v, str) and inside(k) for k, v in digests.items()
    ):
        return "meta.json's digests are torn or foreign (no sha256 to check by)"
    for name, want in {**digests, Path(art.kernel).name: art.image_sha256}.items():
        try:
            got = _digest(adir / name)
        except OSError as exc:
            return f"{name} is unreadable ({exc.strerror}), so its sha256 cannot be checked"
        if got != want:
            return f"{name} does not match its sha256 (damaged on disk)"
    return ""


def inside(name: object) -> bool:
    """A path relative to the entry that stays in it (meta.json is read, not trusted)."""
    return (
        isinstance(name, str)
        and bool(name)
        and not Path(name).is_absolute()
        and (".." not in Path(name).parts)
    )


def _digest(path: Path, follow: bool = False) -> str:
    """A file's sha256; a folder's: each file's relative path and sha256, each symlink's
    target, in a fixed order. Symlinks are not followed (`follow`: the last one is, for
    the user's own kernel outside the cache); a FIFO or a device is an OSError, never
    read (one would hang the worker, or feed it without end)."""
    if not path.is_dir() or path.is_symlink():
        return file_sha256(path, follow)
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted([*dirnames, *filenames]):
            full = Path(dirpath, name)
            rel = str(full.relative_to(path)).encode()
            if full.is_symlink():
                h.update(b"L" + rel + b"\0" + os.readlink(full).encode() + b"\0")
            elif not full.is_dir():
                h.update(b"F" + rel + b"\0" + _digest(full).encode() + b"\0")
    return h.hexdigest()


def file_sha256(path: Path, follow: bool = False) -> str:
    """A regular file's sha256, opened without following a symlink unless `follow`;
    OSError for anything else."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    with os.fdopen(os.open(path, flags), "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return hashlib.file_digest(fh, "sha256").hexdigest()


def check_entry(adir: Path, tree: str, config_hash: str) -> str:
    """Why the folder is not a whole, undamaged entry of these inputs ('' when it is):
    what lookup checks, for an entry not yet in place (one fetched from the store)."""
    meta = _read_meta(adir / "meta.json")
    art = None if meta is None else _artifact(meta, adir, tree, config_hash)
    if meta is None or art is None:
        return "its meta.json is torn or foreign"
    return _damage(adir, art, meta.get("digests", {}))


def evict(adir: Path) -> None:
    """The entry is no longer one (its meta.json goes): the next build of it is a miss
    and replaces its files; `kbisect gc` removes what stays behind."""
    with suppress(OSError):
        (adir / "meta.json").unlink(missing_ok=True)


def check_before_boot(art: Artifact) -> None:
    """Before a boot: the image is byte for byte the one built or unpacked (its sha256),
    and its cache folder is marked used (kbisect gc keeps what running jobs boot).
    InfraError when it changed or is gone (retried, never a verdict); a damaged cache
    entry is evicted so the next build of it rebuilds."""
    if not art.image_sha256:
        return  # nothing recorded to check it by
    image = Path(art.kernel)
    holder = _holder(image)
    redo = "cancel the job and start it again: that kernel is rebuilt, the others are cached"
    try:
        got = _digest(image, follow=holder is None)  # in the cache, a symlink is not ours
    except OSError as exc:
        raise InfraError(f"the kernel image {image} is gone or unreadable: {redo}") from exc
    if got != art.image_sha256:
        log.warning("%s does not match its sha256 (damaged on disk): evicted", image)
        if holder is not None and holder.parent.name == "artifacts":
            evict(holder)
        raise InfraError(f"the kernel image {image} does not match its sha256 (damaged): {redo}")
    if holder is not None:
        with suppress(OSError):  # only a hint for gc, as _touch
            os.utime(holder / "meta.json" if (holder / "meta.json").exists() else holder)


def _holder(image: Path) -> Path | None:
    """The cache folder kbisect gc ages that holds this image: a build's entry or an
    unpacked prebuilt package; None for a file outside the cache (the user's own)."""
    cache = settings.cache_dir()
    for base in (cache / "artifacts", cache / "prebuilt" / "unpacked"):
        if base in image.parents and image.parent != base:
            return base / image.relative_to(base).parts[0]
    return None


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
    """Publish the entry; the sha256 of each of its files (the image's is the artifact's)
    goes with it, checked on every hit."""
    files = [artifact.config, artifact.sources, artifact.modules]
    digests = {
        str(Path(f).relative_to(artifact_dir)): _digest(Path(f))
        for f in files
        if f and Path(f).is_relative_to(artifact_dir)
    }
    meta: dict[str, object] = {"status": "ok", "artifact": asdict(artifact), "digests": digests}
    _write_meta(artifact_dir, meta)


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
    whole (a reader sees the old folder or the new, never half of one). Its symlinks are
    left out (a modules folder's `build` and `source` point into the build host's tree):
    an entry holds files and folders only, so no host follows a link out of it."""
    parent = artifact_dir / name
    parent.mkdir(parents=True, exist_ok=True)
    dst = parent / src.name
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{src.name}.")) / "t"
    try:
        shutil.copytree(src, tmp, symlinks=True, ignore=_symlinks)
        _sync_tree(tmp)
        old = dst.with_name(f".{src.name}.old")
        if dst.exists():
            os.replace(dst, old)
        os.replace(tmp, dst)
        _sync(parent)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)
    return str(dst)


def _symlinks(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if os.path.islink(os.path.join(folder, n))]


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
        _sync(tmp)
        os.replace(tmp, dst)
        _sync(dst.parent)
    finally:
        tmp.unlink(missing_ok=True)


def _sync(path: Path) -> None:
    """Flush a file's or a folder's (its names') writes to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_tree(root: Path) -> None:
    """Every file and folder under root on the disk (symlinks are names in their folder)."""
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            if not os.path.islink(os.path.join(dirpath, name)):
                _sync(Path(dirpath, name))
        _sync(Path(dirpath))


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
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        dst = self.dir / name
        os.replace(self.tmp, dst)
        _sync(self.dir)
        return dst
