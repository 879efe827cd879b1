"""git as kbisect runs it ignores the user's diff, colour, pager, hook and signing settings."""

import stat
import subprocess
from pathlib import Path

import pytest

from kbisect.builders import worktree
from kbisect.builders.verify_commit import make_verify_commit
from kbisect.infra.git import LAB_IDENTITY, SUBJECT_CAP, Git

HOSTILE_CONFIG = {
    "diff.noprefix": "true",
    "diff.mnemonicPrefix": "true",
    "color.ui": "always",
    "color.diff": "always",
    "core.pager": "sh -c 'echo PAGER; exit 1'",
    "pager.show": "sh -c 'echo PAGER; exit 1'",
    "apply.whitespace": "error",
    "log.showSignature": "true",
    "commit.gpgSign": "true",
    "gpg.program": "false",
    "core.autocrlf": "true",
    "format.pretty": "oneline",
}


def _plain(repo: Path, *args: str) -> str:
    """git without the user's config in the way: to set the repository up."""
    env = {**LAB_IDENTITY, "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, env=env, capture_output=True, text=True
    ).stdout


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    _plain(repo, "add", "-A")
    _plain(repo, "commit", "-qm", message)
    return _plain(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A repository whose own config and hooks would break every command kbisect runs."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    lines = [f"line {i}\n" for i in range(20)]
    c = {"base": _commit(repo, {"core.c": "".join(lines)}, "base")}
    lines[5] = "blk_queue_flag_set(QUEUE_FLAG_NOMERGES, q);   \n"  # trailing whitespace
    c["culprit"] = _commit(repo, {"core.c": "".join(lines)}, "nvme: set nomerges")
    c["later"] = _commit(repo, {"other.c": "y\n"}, "unrelated")
    external = tmp_path / "ext-diff"
    external.write_text("#!/bin/sh\necho EXTERNAL DIFF\n")
    external.chmod(0o755)
    for key, value in {**HOSTILE_CONFIG, "diff.external": str(external)}.items():
        _plain(repo, "config", key, value)
    hook = repo / ".git/hooks/post-checkout"
    hook.write_text(f"#!/bin/sh\necho HOOK; touch {tmp_path}/hook-ran; exit 1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    return repo, c


def test_resolve_and_commit_info(hostile: tuple[Path, dict[str, str]]) -> None:
    repo, c = hostile
    git = Git(repo)
    assert git.resolve("main") == c["later"]
    info = git.commit_info(c["culprit"])
    assert (info.hash, info.subject) == (c["culprit"], "nvme: set nomerges")
    assert info.author == "kbisect lab <lab@kbisect.invalid>"


def test_diffs_are_plain_patches(hostile: tuple[Path, dict[str, str]]) -> None:
    repo, c = hostile
    patch = Git(repo).run("diff", c["base"], c["culprit"], "--")
    assert patch.startswith("diff --git a/core.c b/core.c\n")
    assert "\x1b[" not in patch and "EXTERNAL" not in patch
    shown = Git(repo).run("show", c["culprit"])
    assert "\x1b[" not in shown and "EXTERNAL" not in shown and "PAGER" not in shown


@pytest.mark.parametrize("revert", [True, False])
def test_verify_commit(hostile: tuple[Path, dict[str, str]], revert: bool) -> None:
    repo, c = hostile
    git = Git(repo)
    change, onto = (c["culprit"], c["later"]) if revert else (c["culprit"], c["base"])
    made = make_verify_commit(git, change, onto, revert=revert)
    assert made.commit is not None, made.error
    text = git.run("show", f"{made.commit}:core.c")
    assert ("NOMERGES" in text) is not revert
    assert git.resolve(f"refs/kbisect/verify/{made.commit}") == made.commit


def test_worktree_checkout_runs_no_hook(
    hostile: tuple[Path, dict[str, str]], cache: Path, tmp_path: Path
) -> None:
    repo, c = hostile
    wt = worktree.checkout(repo, c["base"], 0)  # `worktree add`
    wt = worktree.checkout(repo, c["culprit"], 0)  # `checkout` in place
    assert not (tmp_path / "hook-ran").exists()
    assert b"\r\n" not in (wt / "core.c").read_bytes()  # core.autocrlf not applied
    assert Git(wt).resolve("HEAD") == c["culprit"]


def test_inherited_git_variables_do_not_redirect(
    hostile: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kbisect started from a git hook, or with a stray GIT_INDEX_FILE, still reads --repo."""
    repo, c = hostile
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "stray-index"))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", str(tmp_path / "ext-diff"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'diff.noprefix'='true'")
    git = Git(repo)
    assert git.resolve("main") == c["later"]
    assert git.run("diff", c["base"], c["culprit"]).startswith("diff --git a/core.c b/core.c")
    made = make_verify_commit(git, c["culprit"], c["later"], revert=True)
    assert made.commit is not None, made.error
    assert not (tmp_path / "stray-index").exists()


def test_a_subject_is_one_printable_line_of_at_most_the_cap(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subject = "\x1b[2Jnvme: " + "x" * (5 * SUBJECT_CAP)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=a\x07b", "-c", "user.email=a@b",
         "commit", "-q", "--allow-empty", "-m", subject],
        check=True,
    )  # fmt: skip
    info = Git(repo).commit_info("HEAD")
    assert info.subject.startswith("[2Jnvme: x") and len(info.subject) == SUBJECT_CAP
    assert info.subject.isprintable() and info.author.isprintable()
