"""One long-lived worktree per (repository, build slot).

Switching commits in place rewrites only the files that differ, so the out-of-tree
build directory next to it rebuilds incrementally (seconds, not minutes).
"""

import fcntl
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from kbisect import settings
from kbisect.infra.git import Git

GRAVE = ".removing-"  # a slot being removed: <GRAVE><slot>-<remover's pid>


def repo_key(repo: Path) -> str:
    return hashlib.sha256(str(Path(repo).resolve()).encode()).hexdigest()[:12]


def slots_root() -> Path:
    return settings.cache_dir() / "slots"


def slot_dir(repo: Path, slot: int) -> Path:
    path = slots_root() / f"{repo_key(repo)}-{slot}"
    if not (path / "repo").is_file():
        prune_orphans()
        path.mkdir(parents=True, exist_ok=True)  # another worker may be making it too
        # Renamed into place: prune_orphans never reads half a path.
        fd, tmp = tempfile.mkstemp(dir=path, prefix=".repo.", suffix=".tmp")
        with open(fd, "w") as fh:
            fh.write(str(Path(repo).resolve()))
        os.replace(tmp, path / "repo")
    return path


def try_lock_slot(slot: Path) -> int | None:
    """An fd holding the slot's flock, or None if something holds it.

    The lock belongs to the open file description: children that inherit the fd (make,
    and any compiler orphaned by a killed worker) keep the slot locked until they exit.
    """
    return _lock(slot, fcntl.LOCK_EX | fcntl.LOCK_NB)


def lock_slot(slot: Path) -> int:
    """An fd holding the slot's flock, once whoever holds it lets go."""
    fd = _lock(slot, fcntl.LOCK_EX)
    if fd is None:
        raise AssertionError("a blocking flock returned without the lock")
    return fd


def _lock(slot: Path, how: int) -> int | None:
    fd = os.open(slot / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, how)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def orphan_slots(root: Path | None = None) -> list[Path]:
    """Slots (under root, the cache's by default) whose repository is gone (a deleted
    lab): 1.5 GB of worktree each."""
    found = []
    for slot in sorted((root or slots_root()).glob("*-*")):
        if slot.name.startswith(GRAVE):
            continue  # its remover holds it
        if slot.is_symlink() or not slot.is_dir():
            continue  # not a slot kbisect made: never written through, never removed
        owner = slot / "repo"
        try:
            if owner.is_file() and not Path(owner.read_text()).exists():
                found.append(slot)
        except OSError:
            continue  # unreadable: not one of ours to judge
    return found


def prune_orphans(dry_run: bool = False) -> list[Path]:
    """Remove orphan slots. One whose lock is held is kept: something (perhaps a compiler
    orphaned by a killed worker) still writes there."""
    removed = []
    for slot in orphan_slots():
        fd = lock_orphan(slot)
        if fd is None:
            continue
        try:
            if not dry_run:
                remove_locked(slot)
        finally:
            os.close(fd)
        removed.append(slot)
    return removed


def lock_orphan(slot: Path) -> int | None:
    """An fd holding an orphan slot's lock; None if it is in use, or if another process
    (two workers starting at once both prune) removed it first."""
    try:
        fd = try_lock_slot(slot)
    except FileNotFoundError:
        return None  # removed between our listing and our lock
    if fd is None:
        return None
    try:
        still = os.stat(slot / "lock").st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        still = False
    if not still:  # we waited on a lock whose slot went meanwhile
        os.close(fd)
        return None
    return fd


def abandoned_graves(root: Path) -> list[Path]:
    """Slots whose remover died before it was done."""
    found = []
    for grave in sorted(root.glob(f"{GRAVE}*")):
        try:
            os.kill(int(grave.name.rsplit("-", 1)[1]), 0)
        except ProcessLookupError:
            found.append(grave)
        except (ValueError, OSError):
            continue  # not a name we gave, or a remover we may not signal: alive
    return found


def remove_locked(slot: Path) -> bool:
    """Remove a slot whose lock the caller holds. It is renamed first (one atomic step),
    so a process racing for it finds it gone, never half removed with its lock file
    recreated. False if part of it stays (its repo file keeps it an orphan for the next
    prune)."""
    grave = slot.with_name(f"{GRAVE}{slot.name}-{os.getpid()}")
    try:
        os.rename(slot, grave)
    except FileNotFoundError:
        return True
    for _ in range(3):  # an open of its lock begun before the rename may land in it
        shutil.rmtree(grave, ignore_errors=True)
        if not grave.exists():
            return True
    return False


def prune_own_worktrees(git: Git) -> list[Path]:
    """Unregister this repository's worktrees that kbisect made (under the cache's slots)
    and whose directory is gone. `git worktree prune` would also drop the user's own
    stale entries, say a worktree on a disk that is not mounted right now."""
    ours = slots_root().resolve()
    removed = []
    for block in git.run("worktree", "list", "--porcelain", "-z").split("\0\0"):
        fields = dict(line.partition(" ")[::2] for line in block.split("\0") if line)
        path = Path(fields.get("worktree", "/"))
        if "prunable" in fields and "locked" not in fields and path.resolve().is_relative_to(ours):
            git.run("worktree", "remove", "--force", str(path))
            removed.append(path)
    return removed


def _is_worktree_of(wt: Path, repo: Path) -> bool:
    wt_git = Git(wt)
    top = wt_git.run("rev-parse", "--show-toplevel", check=False).strip()
    common = wt_git.run("rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
    ours = Git(repo).run("rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
    return bool(top) and Path(top) == wt.resolve() and common.strip() == ours.strip()


def checkout(repo: Path, commit: str, slot: int) -> Path:
    """The slot's worktree of repo, at commit (a full hash)."""
    wt = slot_dir(repo, slot) / "src"
    git = Git(repo)
    if wt.exists() and not _is_worktree_of(wt, repo):
        shutil.rmtree(wt)  # a stale worktree, e.g. its repository was re-created
    if not wt.exists():
        prune_own_worktrees(git)
        git.run("worktree", "add", "--detach", "--force", str(wt), commit)
    else:
        Git(wt).run("checkout", "--detach", "--force", commit)
    return wt
