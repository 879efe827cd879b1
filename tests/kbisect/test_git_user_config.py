"""The user's global git config (a HOME .gitconfig) changes neither the build slots'
files nor the SRU patch files; what kbisect needs from it (safe.directory, fetch
credentials) stays read."""

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from kbisect.builders import worktree
from kbisect.infra.git import LAB_IDENTITY, Git
from kbisect.reports.sru_patch import SruOptions, write_sru_patch
from tests.kbisect.test_sru_patch import SENDER, _fix_job, history  # noqa: F401 (a fixture)

LEAKY_GITCONFIG = """\
[user]
\tname = Home User
\temail = home@example.com
[core]
\tattributesFile = "{home}/attributes"
\teol = crlf
\tsymlinks = false
[format]
\tsignOff = true
\tattach
\tsuffix = .txt
\tto = list@example.com
\tcc = other@example.com
\theaders = "X-Leak: yes"
\tsignatureFile = "{home}/signature"
\tuseAutoBase = true
\tnotes = true
\tfrom = Leaky <leak@example.com>
\tthread = deep
\tforceInBodyFrom = true
\tfilenameMaxLength = 8
[diff]
\torderFile = "{home}/order"
\tcontext = 0
"""


@pytest.fixture
def leaky_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call it (after setting the repositories up) to run as a user whose ~/.gitconfig
    turns checkouts into CRLF and changes every part of format-patch's output."""

    def apply() -> None:
        home = tmp_path / "home"
        home.mkdir()
        (home / "attributes").write_text("* text eol=crlf\n")
        (home / "signature").write_text("SIGNATURE FROM FILE\n")
        (home / "order").write_text("zzz\n")
        (home / ".gitconfig").write_text(LEAKY_GITCONFIG.format(home=home))
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
        monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
        suffix = subprocess.run(
            ["git", "config", "--global", "format.suffix"], capture_output=True, text=True
        )
        assert suffix.stdout.strip() == ".txt"  # the hostile config is the one git reads

    return apply


def _plain(repo: Path, *args: str) -> str:
    env = {**LAB_IDENTITY, "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, env=env, capture_output=True, text=True
    ).stdout


def test_slot_checkouts_are_the_committed_bytes(
    tmp_path: Path, leaky_home: Callable[[], None]
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _plain(repo, "init", "-q", "-b", "main")
    (repo / ".gitattributes").write_text("*.txt text\n")
    (repo / "a.c").write_text("int a;\nint b;\n")
    (repo / "notes.txt").write_text("one\ntwo\n")
    (repo / "link.h").symlink_to("a.c")
    _plain(repo, "add", "-A")
    _plain(repo, "commit", "-qm", "one")
    first = _plain(repo, "rev-parse", "HEAD").strip()
    (repo / "a.c").write_text("int a;\nint c;\n")
    (repo / "notes.txt").write_text("one\nthree\n")
    _plain(repo, "commit", "-qam", "two")
    second = _plain(repo, "rev-parse", "HEAD").strip()
    leaky_home()

    for commit in (first, second):  # `worktree add`, then `checkout` in place
        wt = worktree.checkout(repo, commit, 0)
        for name in ("a.c", "notes.txt"):
            blob = subprocess.run(
                ["git", "-C", str(repo), "cat-file", "blob", f"{commit}:{name}"],
                capture_output=True,
                check=True,
            ).stdout
            assert (wt / name).read_bytes() == blob, name
        assert (wt / "link.h").is_symlink()


def test_sru_patch_files_ignore_the_users_format_settings(
    history: tuple[Path, list[str]],  # noqa: F811 (the imported fixture)
    tmp_path: Path,
    leaky_home: Callable[[], None],
) -> None:
    repo, (broken, _, fix) = history
    result = _fix_job(repo, broken, fix)
    leaky_home()
    opts = SruOptions(series="jammy", bug=2012345, signoff=SENDER)
    done = write_sru_patch(result, "bisect-x-1", tmp_path / "out", opts)
    cover, patch = done.files
    assert cover.name == "0000-cover-letter.patch"
    assert patch.name == "0001-drivers-make-setup-succeed.patch"
    for text in (cover.read_text(), patch.read_text()):
        for leak in ("multipart", "To: ", "Cc: ", "X-Leak", "base-commit", "SIGNATURE FROM"):
            assert leak not in text, leak
        assert "In-Reply-To" not in text and "References:" not in text
    text = patch.read_text()
    assert text.count(f"Signed-off-by: {SENDER}") == 1
    assert "Home User" not in text and "Leaky" not in text
    assert "From: Ada Author <ada@example.com>" in text
    assert "\n-\treturn 1;\n+\treturn 0;\n }\n" in text  # three lines of context


def test_format_patch_stdout_adds_no_signoff(
    history: tuple[Path, list[str]],  # noqa: F811 (the imported fixture)
    leaky_home: Callable[[], None],
) -> None:
    """The patch sru_risk reads (format-patch --stdout) is the commit as it is."""
    repo, (_, _, fix) = history
    _plain(repo, "notes", "add", "-m", "A NOTE", fix)
    leaky_home()
    text = Git(repo).run("format-patch", "-1", "--stdout", fix)
    for leak in ("Home User", "multipart", "X-Leak", "SIGNATURE FROM", "A NOTE", "Message-Id"):
        assert leak not in text, leak
    assert text.count("Signed-off-by:") == 1
