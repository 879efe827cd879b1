"""One long-lived worktree per (repository, build slot).

Switching commits in place rewrites only the files that differ, so the out-of-tree
build directory next to it rebuilds incrementally (seconds, not minutes).
"""

import hashlib
import shutil
from pathlib import Path

from kbisect import settings
from kbisect.git import Git


def repo_key(repo: Path) -> str:
    return hashlib.sha256(str(Path(repo).resolve()).encode()).hexdigest()[:12]


def slot_dir(repo: Path, slot: int) -> Path:
    path = settings.cache_dir() / "slots" / f"{repo_key(repo)}-{slot}"
    if not path.exists():
        prune_orphans()
        path.mkdir(parents=True)
        (path / "repo").write_text(str(Path(repo).resolve()))
    return path


def prune_orphans() -> list[Path]:
    """Remove slots whose repository is gone (a deleted lab): 1.5 GB of worktree each."""
    removed = []
    for slot in (settings.cache_dir() / "slots").glob("*-*"):
        owner = slot / "repo"
        if owner.exists() and not Path(owner.read_text()).exists():
            shutil.rmtree(slot, ignore_errors=True)
            removed.append(slot)
    return removed


def checkout(repo: Path, commit: str, slot: int) -> Path:
    """The slot's worktree of repo, at commit (a full hash)."""
    wt = slot_dir(repo, slot) / "src"
    git = Git(repo)
    if wt.exists() and not Git(wt).ok("rev-parse", "--git-dir"):
        shutil.rmtree(wt)  # a stale worktree, e.g. its repository was re-created
    if not wt.exists():
        git.run("worktree", "prune")
        git.run("worktree", "add", "--detach", "--force", str(wt), commit)
    else:
        Git(wt).run("checkout", "--detach", "--force", commit)
    return wt
