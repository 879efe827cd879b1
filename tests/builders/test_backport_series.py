import tempfile
from pathlib import Path
from typing import Any

import pytest

from kbisect.builders.backport_found import find_in, named_upstream
from kbisect.builders.backport_series import apply_series, plan_series, write_series
from kbisect.infra import lab_culprits
from kbisect.infra.git import Git
from kbisect.infra.lab_culprits import NVME_CORE
from tests.conftest import git


def _pick(repo: Path, onto: str, commit: str, message: str) -> str:
    """`commit`'s change on `onto` as a new commit with this message (git plumbing)."""
    g = Git(repo)
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        assert apply_series(g, onto, [commit], index).ok
        tree = g.run("write-tree", env={"GIT_INDEX_FILE": str(index)}).strip()
    return g.run("commit-tree", tree, "-p", onto, "-m", message).strip()


def test_a_fix_whose_context_an_earlier_commit_made_needs_it_first(
    distro_lab: tuple[Path, dict[str, Any]],
) -> None:
    repo, truth = distro_lab
    fix, prereq = str(truth["culprit"]), str(truth["prerequisite"])
    tip = truth["distro"]["tip"]
    g = Git(repo)
    assert find_in(g, fix, tip) is None
    series = plan_series(g, fix, tip)
    assert (series.commits, series.prerequisites, series.conflict) == ([prereq, fix], [prereq], "")
    made = write_series(g, tip, series.commits)
    assert git(repo, "rev-list", "--count", f"{tip}..{made}").strip() == "2"
    text = git(repo, "show", f"{made}:{NVME_CORE}")
    assert lab_culprits.NOMERGES_LINE not in text and lab_culprits.P2PDMA_CALL in text
    assert f"(cherry picked from commit {fix})" in git(repo, "show", "-s", "--format=%B", made)
    assert git(repo, "rev-parse", f"refs/kbisect/backport/{made}").strip() == made
    assert write_series(g, tip, series.commits) == made  # a retry writes the same commits


def test_a_prerequisite_the_target_has_under_another_hash_is_not_proposed(
    distro_lab: tuple[Path, dict[str, Any]],
) -> None:
    repo, truth = distro_lab
    fix, prereq = str(truth["culprit"]), str(truth["prerequisite"])
    tip = truth["distro"]["tip"]
    picked = _pick(repo, tip, prereq, f"nvme: helper\n\ncommit {prereq} upstream.")
    assert plan_series(Git(repo), fix, picked).commits == [fix]


@pytest.mark.parametrize(
    ("message", "how"),
    [
        ("NVMe: Allow request merges\n\ncommit {fix} upstream.\n", "provenance line"),
        ("NVMe: Allow request merges\n\n(cherry picked from commit {fix})\n", "provenance line"),
        ("NVMe: Allow request merges\n\nno provenance at all\n", "same patch"),
    ],
)
def test_a_change_already_in_the_target_is_found_under_another_hash(
    distro_lab: tuple[Path, dict[str, Any]], message: str, how: str
) -> None:
    repo, truth = distro_lab
    fix, prereq = str(truth["culprit"]), str(truth["prerequisite"])
    tip = truth["distro"]["tip"]
    with_prereq = _pick(repo, tip, prereq, "nvme: helper")
    fixed = _pick(repo, with_prereq, fix, message.format(fix=fix))
    later = _pick(repo, fixed, str(truth["history"][-1]["hash"]), "a later one")
    found = find_in(Git(repo), fix, later)
    assert found is not None and (found.commit, found.how) == (fixed, how)
    assert find_in(Git(repo), fix, str(truth["good"])).how == "ancestor"  # type: ignore[union-attr]


def test_a_change_that_conflicts_whatever_comes_first_says_where(
    distro_lab: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    repo, truth = distro_lab
    fix = str(truth["culprit"])
    tip = truth["distro"]["tip"]
    # A distro commit rewrites the very line the fix removes: no upstream commit helps.
    text = git(repo, "show", f"{tip}:{NVME_CORE}").replace(
        lab_culprits.NOMERGES_LINE,
        "\tblk_queue_flag_set(QUEUE_FLAG_NOMERGES, ns->queue); /* distro */\n",
    )
    g = Git(repo)
    blob = g.run("hash-object", "-w", "--stdin", input=text.encode()).strip()
    env = {"GIT_INDEX_FILE": str(tmp_path / "index")}
    g.run("read-tree", tip, env=env)
    g.run("update-index", "--cacheinfo", f"100644,{blob},{NVME_CORE}", env=env)
    tree = g.run("write-tree", env=env).strip()
    target = g.run("commit-tree", tree, "-p", tip, "-m", "UBUNTU: SAUCE: nvme: note").strip()
    series = plan_series(g, fix, target)
    # The fix needs the prerequisite, whose own context is the line the distro rewrote.
    prereq = str(truth["prerequisite"])
    assert series.commits == [] and series.conflict.startswith(f"{prereq[:12]} (")
    assert f"does not apply to {target[:12]} after 1 earlier commit: " in series.conflict


def test_provenance_lines_as_stable_and_ubuntu_write_them() -> None:
    h = "0123456789abcdef0123456789abcdef01234567"
    message = (
        f"subject\n\ncommit {h} upstream.\n[ Upstream commit {h[:12]} ]\n"
        f"(cherry picked from commit {h})\n(backported from commit {h[:12]} linux-next)\n"
        f"This reverts commit {h}.\n"
    )
    assert named_upstream(message) == [h, h[:12], h, h[:12]]


def test_a_later_upstream_fix_of_the_fix_is_listed_and_taken_on_request(
    distro_lab: tuple[Path, dict[str, Any]],
) -> None:
    from kbisect.builders.backport_plan import plan_backport
    from kbisect.workflows.backport_types import BackportRequest

    repo, truth = distro_lab
    fix, tip = truth["culprit"], truth["distro"]["tip"]
    g = Git(repo)
    # Upstream, a later commit fixes the fix (a comment on the line after it, as a fixup).
    text = git(repo, "show", f"master:{NVME_CORE}").replace(
        lab_culprits.P2PDMA_CALL, "\t/* P2PDMA only where the transport says so */\n"
        + lab_culprits.P2PDMA_CALL,
    )  # fmt: skip
    blob = g.run("hash-object", "-w", "--stdin", input=text.encode()).strip()
    env = {"GIT_INDEX_FILE": str(repo / "fixup.index")}
    g.run("read-tree", "master", env=env)
    g.run("update-index", "--cacheinfo", f"100644,{blob},{NVME_CORE}", env=env)
    tree = g.run("write-tree", env=env).strip()
    message = f'nvme: say where P2PDMA is set\n\nFixes: {fix[:12]} ("NVMe: Allow request merges")'
    later = g.run("commit-tree", tree, "-p", "master", "-m", message).strip()
    g.run("update-ref", "refs/heads/master", later)
    req = BackportRequest(str(repo), fix, tip, "nvme-snapshot-read")
    plan = plan_backport(req)
    assert plan.followups == [later] and later not in plan.series
    taken = plan_backport(BackportRequest(str(repo), fix, tip, "nvme-snapshot-read",
                                          with_followups=True))  # fmt: skip
    assert taken.series == [truth["prerequisite"], fix, later]
    assert "P2PDMA only where" in git(repo, "show", f"{taken.patched}:{NVME_CORE}")


def test_a_removed_line_that_reads_like_a_file_header_is_no_header(tmp_path: Path) -> None:
    from kbisect.builders.backport_series import read_lines

    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "notes.txt").write_text("one\n-- signature\nthree\n")
    who = ["-c", "user.name=A", "-c", "user.email=a@x"]
    git(repo, "add", ".")
    git(repo, *who, "commit", "-qm", "first")
    (repo / "notes.txt").write_text("one\nthree\n")  # the diff's line: "--- signature"
    git(repo, *who, "commit", "-qam", "second")
    assert read_lines(Git(repo), git(repo, "rev-parse", "HEAD").strip()) == {"notes.txt": [(1, 3)]}


def test_blame_runs_no_textconv_driver_the_trees_attributes_choose(tmp_path: Path) -> None:
    """A `diff=x` attribute and a `diff.x.textconv` in the repository's config: blame as the
    planner runs it neither runs the driver nor reads the lines it would shift."""
    from kbisect.builders.backport_series import blamed

    repo, ran = tmp_path / "r", tmp_path / "textconv-ran"
    repo.mkdir()
    git(repo, "init", "-q")
    driver = tmp_path / "textconv"
    driver.write_text(f'#!/bin/sh\ntouch {ran}\nseq 20\ncat "$1"\n')  # 20 lines first
    driver.chmod(0o755)
    git(repo, "config", "diff.x.textconv", str(driver))
    (repo / ".gitattributes").write_text("*.c diff=x\n")
    who = ["-c", "user.name=A", "-c", "user.email=a@x"]

    def commit(text: str) -> str:
        (repo / "f.c").write_text(text)
        git(repo, "add", ".")
        git(repo, *who, "commit", "-qm", "x")
        return git(repo, "rev-parse", "HEAD").strip()

    base = commit("a\nb\nc\nd\ne\nf\ng\n")
    prereq = commit("a\nb\nC\nd\ne\nf\ng\n")
    change = commit("a\nb\nC2\nd\ne\nf\ng\n")
    assert blamed(Git(repo), change, base) == {base, prereq}
    assert not ran.exists()
