"""A revision with a user's patches (`try --patch`): plain diffs and mailboxes, applied on a
temporary index as commits beside the user's branches, the same commits every time."""

from pathlib import Path

import pytest

from kbisect.builders.patched_commit import (
    PATCHED_REFS,
    Patch,
    apply_patches,
    read_patches,
    with_fixups,
)
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.infra.lab_plan import Span
from tests.conftest import git

WHO = ["-c", "user.name=t", "-c", "user.email=t@t"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main: a.c with three lines, then b.c; `fix` (a branch off main) edits both."""
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    (r / "a.c").write_text("int a;\nint b;\nint c;\n")
    git(r, "add", "a.c")
    git(r, *WHO, "commit", "-qm", "add a.c")
    (r / "b.c").write_text("int x;\n")
    git(r, "add", "b.c")
    git(r, *WHO, "commit", "-qm", "add b.c")
    git(r, "checkout", "-qb", "fix")
    (r / "a.c").write_text("int a;\nint b = 2;\nint c;\n")
    git(r, *WHO, "commit", "-qam", "a: set b")
    (r / "b.c").write_text("int x = 1;\n")
    git(r, *WHO, "commit", "-qam", "b: set x")
    git(r, "checkout", "-q", "main")
    return r


def _file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_plain_diff_becomes_one_commit_on_the_revision_and_the_worktree_is_untouched(
    repo: Path, tmp_path: Path
) -> None:
    diff = _file(tmp_path, "set-b.diff", git(repo, "diff", "main", "fix", "--", "a.c"))
    head, status = git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain")
    patched = apply_patches(Git(repo), "main", read_patches([diff]))
    assert patched.base == head.strip() and patched.tip != patched.base
    assert git(repo, "show", f"{patched.tip}:a.c") == "int a;\nint b = 2;\nint c;\n"
    assert git(repo, "show", f"{patched.tip}:b.c") == "int x;\n"
    assert git(repo, "show", "-s", "--format=%s%n%an", patched.tip) == "set-b.diff\nkbisect patch\n"
    assert git(repo, "rev-parse", f"{PATCHED_REFS}{patched.tip}").strip() == patched.tip
    # the user's branch, index and files as they were
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "status", "--porcelain") == status
    assert (repo / "a.c").read_text() == "int a;\nint b;\nint c;\n"
    # the same patches on the same revision: the same commit (the build cache finds it)
    assert apply_patches(Git(repo), "main", read_patches([diff])).tip == patched.tip


def test_a_format_patch_mailbox_gives_a_commit_a_mail_with_its_subject(
    repo: Path, tmp_path: Path
) -> None:
    mbox = _file(tmp_path, "series.mbox", git(repo, "format-patch", "--stdout", "main..fix"))
    patches = read_patches([mbox])
    assert [(p.source, p.subject) for p in patches] == [
        ("1 of series.mbox", "a: set b"),
        ("2 of series.mbox", "b: set x"),
    ]
    patched = apply_patches(Git(repo), "main", patches)
    assert git(repo, "rev-parse", f"{patched.tip}^{{tree}}") == git(repo, "rev-parse", "fix^{tree}")
    assert git(repo, "log", "--format=%s", f"main..{patched.tip}") == "b: set x\na: set b\n"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        # already applied: its hunks do not match main's lines any more
        (lambda r: git(r, "diff", "fix~2", "fix", "--", "a.c").replace("int c;", "int d;"),
         "does not apply to fix"),
        (lambda r: "just some words\n", "holds no diff"),
    ],
)  # fmt: skip
def test_a_patch_that_does_not_apply_or_holds_no_diff_is_one_line(
    repo: Path, tmp_path: Path, make: object, says: str
) -> None:
    path = _file(tmp_path, "p.patch", make(repo))  # type: ignore[operator]
    with pytest.raises(UserError) as err:
        apply_patches(Git(repo), "fix", read_patches([path]))
    assert says in str(err.value) and "\n" not in str(err.value), err.value
    assert git(repo, "for-each-ref", PATCHED_REFS) == ""


def test_a_patch_already_in_the_revision_changes_nothing_and_says_so(
    repo: Path, tmp_path: Path
) -> None:
    # a diff that adds and removes the same line applies and changes nothing
    path = _file(tmp_path, "noop.diff", "--- a/b.c\n+++ b/b.c\n@@ -1 +1 @@\n-int x;\n+int x;\n")
    with pytest.raises(UserError, match="changes nothing on main: drop it"):
        apply_patches(Git(repo), "main", read_patches([path]))


def test_a_patch_file_over_its_bound_or_not_a_file_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.patch"
    big.write_bytes(b"+" * ((4 << 20) + 1))
    for path, says in ((str(big), "over 4 MiB"), (str(tmp_path), "not a regular file")):
        with pytest.raises(UserError, match=says):
            read_patches([path])


def test_a_build_fix_goes_on_the_commits_of_its_span_and_nowhere_else(
    tmp_path: Path, tiny_tarball: Path
) -> None:
    """`--fixup`: the lab's build fix (the commit that ends a broken span) on every commit
    of the lab. Inside the span it applies and takes the breakage out; before the span it
    does not apply, after it the commit holds it already: both built as they are."""
    truth = create_lab(
        tmp_path / "lab", LabOptions(commits=9, culprit_at=5, seed=2, broken_build=(Span(4, 3),))
    )
    g = Git(tmp_path / "lab")
    history = [str(c["hash"]) for c in truth["history"]]  # type: ignore[attr-defined]
    broken = list(truth["broken_build"])  # type: ignore[call-overload]
    assert truth["culprit"] in broken and len(broken) == 3
    fix = history[history.index(broken[-1]) + 1]
    fixup = Patch("fix.diff", "fix.diff", g.patch(fix))
    for commit in history:
        patched = with_fixups(g, commit, [fixup])
        assert (patched.tip != commit) == (commit in broken), commit
        assert [p.source for p in patched.patches] == (["fix.diff"] if commit in broken else [])
        if commit in broken:
            assert "kbisect_lab_undefined" not in g.run("diff", fix, patched.tip)
