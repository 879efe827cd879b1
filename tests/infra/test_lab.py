import json
import subprocess
from pathlib import Path

import pytest

from kbisect.errors import InfraError, UserError
from kbisect.infra import lab_culprits
from kbisect.infra.lab import LabOptions, create_lab, truth_path
from kbisect.infra.lab_culprits import NVME_CORE, Culprit
from kbisect.infra.lab_plan import Span
from tests.conftest import git


def _diff(repo: Path, commit: str) -> str:
    return git(repo, "show", "--format=", "--first-parent", commit)


def test_regression_lab_truth_matches_the_history(tmp_path: Path, tiny_tarball: Path) -> None:
    dest = tmp_path / "lab"
    truth = create_lab(
        dest,
        LabOptions(
            commits=12, culprit_at=5, seed=1, broken_build=(Span(8),), broken_boot=(Span(2, 2),)
        ),
    )
    assert json.loads(truth_path(dest).read_text()) == truth
    assert not (dest / "kbisect.truth.json").exists()  # never inside the repository
    assert git(dest, "rev-list", "--count", "HEAD").strip() == "13"
    assert git(dest, "rev-parse", "HEAD").strip() == truth["bad"]
    assert git(dest, "rev-parse", "lab-good^{commit}", "lab-bad^{commit}").split() == [
        truth["good"],
        truth["bad"],
    ]
    assert git(dest, "tag").split() == ["lab-bad", "lab-good"]  # nothing else leaks
    assert git(dest, "rev-list", "--max-parents=0", "HEAD").strip() == truth["good"]
    assert "+" + lab_culprits.NOMERGES_LINE.rstrip("\n") in _diff(dest, str(truth["culprit"]))
    nomerges_at = [
        c["hash"]
        for c in truth["history"]  # type: ignore[attr-defined]
        if lab_culprits.NOMERGES_LINE.strip() in git(dest, "show", f"{c['hash']}:{NVME_CORE}")
    ]
    assert nomerges_at[0] == truth["culprit"] and len(nomerges_at) == 8
    (broken,) = truth["broken_build"]  # type: ignore[misc]
    assert "kbisect_lab_undefined" in _diff(dest, broken)
    assert len(truth["broken_boot"]) == 2  # type: ignore[arg-type]
    assert "panic(" in _diff(dest, truth["broken_boot"][0])  # type: ignore[index]


def test_same_seed_same_hashes(tmp_path: Path, tiny_tarball: Path) -> None:
    a = create_lab(tmp_path / "a", LabOptions(commits=10, seed=9, merges=1))
    b = create_lab(tmp_path / "b", LabOptions(commits=10, seed=9, merges=1))
    assert a["culprit"] == b["culprit"] and a["bad"] == b["bad"]


def test_fix_mode_old_has_the_bug_and_the_culprit_removes_it(
    tmp_path: Path, tiny_tarball: Path
) -> None:
    dest = tmp_path / "lab"
    truth = create_lab(dest, LabOptions(commits=8, mode="fix", culprit_at=3, seed=2))
    assert truth["bad"] == truth["old"] and truth["good"] == truth["new"]
    assert git(dest, "rev-parse", "lab-bad^{commit}").strip() == truth["old"]
    assert lab_culprits.NOMERGES_LINE in git(dest, "show", f"{truth['bad']}:{NVME_CORE}")
    assert "-" + lab_culprits.NOMERGES_LINE.rstrip("\n") in _diff(dest, str(truth["culprit"]))
    assert lab_culprits.NOMERGES_LINE not in git(dest, "show", f"{truth['good']}:{NVME_CORE}")
    assert git(dest, "log", "-1", "--format=%s", str(truth["culprit"])).strip() == (
        "NVMe: Allow request merges"
    )


def test_merges_are_real_merge_commits_with_both_sides(tmp_path: Path, tiny_tarball: Path) -> None:
    dest = tmp_path / "lab"
    truth = create_lab(dest, LabOptions(commits=30, merges=2, seed=4))
    merges = git(dest, "rev-list", "--merges", "HEAD").split()
    assert sorted(merges) == sorted(truth["merges"])  # type: ignore[type-var]
    for m in merges:
        p1, p2 = git(dest, "rev-parse", f"{m}^1", f"{m}^2").split()
        base = git(dest, "merge-base", p1, p2).strip()
        for parent in (p1, p2):
            # Whatever either side changed since the fork is in the merge: nothing lost.
            changed = git(dest, "diff", "--name-only", base, parent).split()
            assert changed
            assert git(dest, "diff", "--name-only", parent, m, "--", *changed) == ""
    assert truth["culprit"] in git(dest, "rev-list", "HEAD").split()


def test_culprit_patch(tmp_path: Path, tiny_tarball: Path) -> None:
    patch = tmp_path / "my.patch"
    patch.write_text(
        "Subject: [PATCH] lib: make strings slower\n---\n"
        "--- a/lib/string.c\n+++ b/lib/string.c\n@@ -1,2 +1,3 @@\n"
        " /* lib/string.c */\n+/* slow */\n"
        f" int x_{abs(hash('lib/string.c'))};\n"
    )
    dest = tmp_path / "lab"
    truth = create_lab(dest, LabOptions(commits=6, culprit_at=2, culprit_patch=patch, seed=1))
    assert "+/* slow */" in _diff(dest, str(truth["culprit"]))
    subject = git(dest, "log", "-1", "--format=%s", str(truth["culprit"])).strip()
    assert subject == "lib: make strings slower"


def test_a_patch_that_does_not_apply_is_a_clear_error(tmp_path: Path, tiny_tarball: Path) -> None:
    patch = tmp_path / "bad.patch"
    patch.write_text("--- a/nope.c\n+++ b/nope.c\n@@ -1 +1 @@\n-a\n+b\n")
    with pytest.raises(UserError, match="does not apply"):
        create_lab(tmp_path / "lab", LabOptions(commits=4, culprit_patch=patch, seed=1))


def test_refuses_a_non_empty_directory(tmp_path: Path, tiny_tarball: Path) -> None:
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "precious").write_text("x")
    with pytest.raises(UserError, match="not empty"):
        create_lab(tmp_path / "lab", LabOptions(commits=4, seed=1))
    assert (tmp_path / "lab" / "precious").read_text() == "x"


def test_replace_removes_only_a_lab(tmp_path: Path, tiny_tarball: Path) -> None:
    first = create_lab(tmp_path / "lab", LabOptions(commits=4, seed=1))
    second = create_lab(tmp_path / "lab", LabOptions(commits=4, seed=2, replace=True))
    assert first["bad"] != second["bad"]
    (tmp_path / "notalab").mkdir()
    (tmp_path / "notalab" / "precious").write_text("x")
    with pytest.raises(UserError, match="not a kbisect lab"):
        create_lab(tmp_path / "notalab", LabOptions(commits=4, seed=1, replace=True))
    assert (tmp_path / "notalab" / "precious").read_text() == "x"


def test_a_failed_lab_leaves_nothing_that_blocks_a_retry(
    tmp_path: Path, tiny_tarball: Path
) -> None:
    patch = tmp_path / "bad.patch"
    patch.write_text("--- a/nope.c\n+++ b/nope.c\n@@ -1 +1 @@\n-a\n+b\n")
    with pytest.raises(UserError, match="does not apply"):
        create_lab(tmp_path / "lab", LabOptions(commits=4, culprit_patch=patch, seed=1))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["bad.patch", "cache", "linux-source-6.1.tar.xz", "tarsrc"]
    )  # no half-made lab, no stray partial directory
    truth = create_lab(tmp_path / "lab", LabOptions(commits=4, seed=1))
    assert git(tmp_path / "lab", "rev-parse", "lab-bad^{commit}").strip() == truth["bad"]


def test_a_lab_goes_into_an_empty_directory(tmp_path: Path, tiny_tarball: Path) -> None:
    (tmp_path / "lab").mkdir()
    truth = create_lab(tmp_path / "lab", LabOptions(commits=4, seed=1))
    assert git(tmp_path / "lab", "rev-parse", "HEAD").strip() == truth["bad"]


def test_a_half_made_lab_from_an_older_run_can_be_replaced(
    tmp_path: Path, tiny_tarball: Path
) -> None:
    create_lab(tmp_path / "full", LabOptions(commits=4, seed=1))
    lab_dir = tmp_path / "lab"  # as a lab killed before it was finished left it
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(tmp_path / "full"), str(lab_dir)], check=True
    )
    git(lab_dir, "update-ref", "refs/heads/import", "HEAD")
    with pytest.raises(UserError, match="--replace"):
        create_lab(tmp_path / "lab", LabOptions(commits=4, seed=1))
    truth = create_lab(tmp_path / "lab", LabOptions(commits=4, seed=1, replace=True))
    assert git(tmp_path / "lab", "rev-parse", "HEAD").strip() == truth["bad"]


@pytest.mark.parametrize("where", ["file", "/proc/x", "/proc/self/status/lab"])
def test_a_place_where_no_lab_can_go_is_a_clear_error(
    tmp_path: Path, tiny_tarball: Path, where: str
) -> None:
    dest = tmp_path / "f" if where == "file" else Path(where)
    if where == "file":
        dest.write_text("precious")
    with pytest.raises(UserError, match=r"cannot create the lab in|not a directory"):
        create_lab(dest, LabOptions(commits=4, seed=1))
    if where == "file":
        assert dest.read_text() == "precious"


@pytest.mark.parametrize("mode", ["regression", "fix"])
def test_a_slowdown_culprit_changes_only_the_nvme_completion_path(
    tmp_path: Path, tiny_tarball: Path, mode: str
) -> None:
    dest = tmp_path / "lab"
    options = LabOptions(
        commits=8, culprit_at=4, seed=3, mode=mode, culprit=Culprit.parse("slowdown:25")
    )
    truth = create_lab(dest, options)
    culprit = str(truth["culprit"])
    changed = git(dest, "show", "--format=", "--name-only", culprit).split()
    assert changed == [lab_culprits.NVME_CORE]
    diff = _diff(dest, culprit)
    sign = "+" if mode == "regression" else "-"
    assert f"{sign}\tnvme_pace_read(req);" in diff
    assert f"{sign}\tndelay(div_u64(gap * 25, 100));" in diff
    slow, fast = (
        (truth["new"], truth["old"]) if mode == "regression" else (truth["old"], truth["new"])
    )
    assert "nvme_pace_read" in git(dest, "show", f"{slow}:{NVME_CORE}")
    assert "nvme_pace_read" not in git(dest, "show", f"{fast}:{NVME_CORE}")
    assert all(  # no counter moves: request merging is never touched
        lab_culprits.NOMERGES_LINE not in git(dest, "show", f"{c['hash']}:{NVME_CORE}")
        for c in truth["history"]  # type: ignore[attr-defined]
    )
    assert truth["culprit_kind"] == "slowdown:25"
    subject = git(dest, "log", "-1", "--format=%s", culprit).strip()
    assert "slow" not in subject and subject == Culprit.parse("slowdown:25").subject


@pytest.mark.parametrize("mode", ["regression", "fix"])
def test_a_wbt_culprit_gives_ssds_the_rotational_latency_target(
    tmp_path: Path, tiny_tarball: Path, mode: str
) -> None:
    options = LabOptions(commits=8, culprit_at=4, seed=3, mode=mode, culprit=Culprit.parse("wbt"))
    truth = create_lab(tmp_path / "lab", options)
    culprit = str(truth["culprit"])
    changed = git(tmp_path / "lab", "show", "--format=", "--name-only", culprit).split()
    assert changed == [lab_culprits.BLK_WBT]
    slow, fast = (
        (truth["new"], truth["old"]) if mode == "regression" else (truth["old"], truth["new"])
    )
    assert "return 2000000ULL" not in git(tmp_path / "lab", "show", f"{slow}:block/blk-wbt.c")
    assert "return 2000000ULL" in git(tmp_path / "lab", "show", f"{fast}:block/blk-wbt.c")
    assert truth["culprit_kind"] == "wbt"


@pytest.mark.parametrize("mode", ["regression", "fix"])
def test_a_writelock_culprit_locks_buffered_block_device_writes_exclusively(
    tmp_path: Path, tiny_tarball: Path, mode: str
) -> None:
    culprit_kind = Culprit.parse("writelock")
    options = LabOptions(commits=8, culprit_at=4, seed=3, mode=mode, culprit=culprit_kind)
    truth = create_lab(tmp_path / "lab", options)
    lab_dir = tmp_path / "lab"
    culprit = str(truth["culprit"])
    changed = git(lab_dir, "show", "--format=", "--name-only", culprit).split()
    assert changed == [lab_culprits.BLK_FOPS]
    slow, fast = (
        (truth["new"], truth["old"]) if mode == "regression" else (truth["old"], truth["new"])
    )
    slow_text = git(lab_dir, "show", f"{slow}:{lab_culprits.BLK_FOPS}")
    fast_text = git(lab_dir, "show", f"{fast}:{lab_culprits.BLK_FOPS}")
    assert "\t\tinode_lock(bd_inode);" in slow_text and "inode_lock_shared" not in slow_text
    assert "\t\tinode_lock_shared(bd_inode);" in fast_text and "inode_lock(" not in fast_text
    assert truth["culprit_kind"] == "writelock"
    subject = git(lab_dir, "log", "-1", "--format=%s", culprit).strip()
    assert subject == culprit_kind.subject and "slow" not in subject


def test_a_writelock_culprit_needs_the_shared_lock_to_change() -> None:
    with pytest.raises(InfraError, match=r"block/fops\.c"):
        Culprit.parse("writelock").add("static ssize_t blkdev_write_iter(void) {}\n")


@pytest.mark.parametrize(
    "text",
    [
        *("slowdown", "slowdown:abc", "slowdown:0", "slowdown:95", "foo", "nomerges:3"),
        *("wbt:2", "writelock:1"),
    ],
)
def test_bad_culprit_kinds_say_what_to_pass(text: str) -> None:
    with pytest.raises(UserError, match="slowdown:25"):
        Culprit.parse(text)
