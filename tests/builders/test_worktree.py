"""Build slots' worktrees: kbisect cleans up its own worktree entries and nobody else's."""

import multiprocessing
import shutil
from pathlib import Path

import pytest

from kbisect.builders import worktree
from tests.conftest import git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    (path / "f").write_text("1\n")
    git(path, "add", "f")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return path


def _entries(repo: Path) -> list[str]:
    return sorted(p.name for p in (repo / ".git/worktrees").iterdir())


def test_a_users_stale_worktree_survives(repo: Path, cache: Path, tmp_path: Path) -> None:
    mine = tmp_path / "my-worktree"
    git(repo, "worktree", "add", "-q", "--detach", str(mine))
    shutil.rmtree(mine)  # on an unmounted disk, say: `git worktree prune` would drop it
    worktree.checkout(repo, git(repo, "rev-parse", "HEAD").strip(), 0)
    assert "my-worktree" in _entries(repo)
    assert "my-worktree" in git(repo, "worktree", "list")


def test_our_stale_worktree_entries_are_removed(repo: Path, cache: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    wt = worktree.checkout(repo, head, 0)
    shutil.rmtree(wt)  # e.g. a person cleared part of the cache
    worktree.checkout(repo, head, 0)
    listed = git(repo, "worktree", "list", "--porcelain")
    assert "prunable" not in listed and listed.count("worktree ") == 2
    assert len(_entries(repo)) == 1


def test_prune_orphans_keeps_a_slot_in_use(repo: Path, cache: Path, tmp_path: Path) -> None:
    import fcntl

    gone = tmp_path / "gone"
    shutil.copytree(repo, gone)
    busy, idle = worktree.slot_dir(gone, 0), worktree.slot_dir(gone, 1)
    shutil.rmtree(gone)
    with open(busy / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert worktree.prune_orphans() == [idle]
    assert busy.exists() and not idle.exists()


def _prune(_: int) -> list[Path]:
    return worktree.prune_orphans()


def test_workers_pruning_at_once_remove_each_orphan_once_and_none_fails(
    repo: Path, cache: Path, tmp_path: Path
) -> None:
    """Two workers starting at once both prune: each slot goes once, and one that another
    process removed while it was listed or locked is no error (a run in CI failed so)."""
    gone = tmp_path / "gone"
    shutil.copytree(repo, gone)
    slots = [worktree.slot_dir(gone, i) for i in range(40)]
    for slot in slots:
        (slot / "src").mkdir()
        for n in range(20):
            (slot / "src" / f"f{n}").write_text("x" * 4096)
    shutil.rmtree(gone)
    with multiprocessing.get_context("fork").Pool(6) as pool:
        removed = [slot for found in pool.map(_prune, range(12)) for slot in found]
    assert sorted(removed) == sorted(slots)
    assert list(worktree.slots_root().iterdir()) == []
