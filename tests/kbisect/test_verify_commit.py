"""The verify commit: a revert on the new endpoint, or the fix applied to the old one."""

import subprocess
from pathlib import Path

import pytest

from kbisect.builders.verify_commit import make_verify_commit
from kbisect.infra.git import LAB_IDENTITY, Git


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    env = {**LAB_IDENTITY, "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", message], check=True, env=env)
    return Git(repo).resolve("HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Git, dict[str, str]]:
    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp_path)], check=True)
    lines = [f"line {i}\n" for i in range(20)]
    c = {"base": _commit(tmp_path, {"core.c": "".join(lines), "other.c": "x\n"}, "base")}
    lines[5] = "blk_queue_flag_set(QUEUE_FLAG_NOMERGES, q);\n"
    c["culprit"] = _commit(tmp_path, {"core.c": "".join(lines)}, "nvme: set nomerges")
    c["later"] = _commit(tmp_path, {"other.c": "y\n"}, "unrelated")
    lines[5] = "something else entirely\n"
    c["rewrite"] = _commit(tmp_path, {"core.c": "".join(lines)}, "rewrite the same line")
    return Git(tmp_path), c


def _show(git: Git, commit: str, path: str) -> str:
    return git.run("show", f"{commit}:{path}")


def test_revert_on_the_new_endpoint(repo: tuple[Git, dict[str, str]]) -> None:
    git, c = repo
    made = make_verify_commit(git, c["culprit"], c["later"], revert=True)
    assert made.commit is not None and made.subject == 'Revert "nvme: set nomerges"'
    assert "NOMERGES" not in _show(git, made.commit, "core.c")
    assert _show(git, made.commit, "other.c") == "y\n"  # the rest of the endpoint is kept
    assert git.run("rev-parse", f"{made.commit}^").strip() == c["later"]
    assert f"This reverts commit {c['culprit']}" in git.run("log", "-1", made.commit)
    # A retried activity writes the same commit, and a ref keeps it from gc.
    again = make_verify_commit(git, c["culprit"], c["later"], revert=True)
    assert again.commit == made.commit
    assert git.resolve(f"refs/kbisect/verify/{made.commit}") == made.commit
    assert git.resolve("main") == c["rewrite"]  # branches untouched


def test_fix_applied_to_the_old_endpoint(repo: tuple[Git, dict[str, str]]) -> None:
    git, c = repo
    made = make_verify_commit(git, c["culprit"], c["base"], revert=False)
    assert made.commit is not None and made.subject == "nvme: set nomerges"
    assert "NOMERGES" in _show(git, made.commit, "core.c")
    assert "cherry picked from commit" in git.run("log", "-1", made.commit)


def test_a_conflict_is_reported_not_raised(repo: tuple[Git, dict[str, str]]) -> None:
    git, c = repo
    made = make_verify_commit(git, c["culprit"], c["rewrite"], revert=True)
    assert made.commit is None and "does not revert cleanly" in made.error


def test_a_change_not_there_to_revert(repo: tuple[Git, dict[str, str]]) -> None:
    git, c = repo
    made = make_verify_commit(git, c["culprit"], c["base"], revert=True)
    assert made.commit is None and "is not in" in made.error
    made = make_verify_commit(git, c["culprit"], c["later"], revert=False)
    assert made.commit is None and "already in" in made.error
