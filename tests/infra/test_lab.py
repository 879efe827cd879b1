import dataclasses
import json
import re
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from kbisect.errors import InfraError, UserError
from kbisect.infra import lab, lab_culprits
from kbisect.infra.git import Git
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


def test_a_lab_is_served_from_one_pack_without_a_delta_search(
    tmp_path: Path, tiny_tarball: Path
) -> None:
    # A clone of the README lab over file:// compressed its 83,000 loose objects (54 s);
    # from one pack, with no delta search, it copies them (8 s).
    truth = create_lab(tmp_path / "lab", LabOptions(commits=4, culprit_at=2, seed=1))
    base = Git(lab.base_repo_path(tiny_tarball))
    counts = dict(line.split(": ") for line in base.run("count-objects", "-v").splitlines())
    assert (counts["count"], counts["packs"]) == ("0", "1"), counts
    assert Git(tmp_path / "lab").run("config", "pack.window").strip() == "0"
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--bare", f"file://{tmp_path / 'lab'}", str(clone)],
                   check=True)  # fmt: skip
    assert Git(clone).resolve("lab-bad") == truth["bad"]


def test_two_labs_made_at_once_import_the_source_once(tiny_tarball: Path) -> None:
    said: list[str] = []
    got: list[tuple[Path, str]] = []

    def make() -> None:
        got.append(lab._base_repo(said.append))

    makers = [threading.Thread(target=make) for _ in range(2)]
    for t in makers:
        t.start()
    for t in makers:
        t.join(60)
    assert len(got) == 2 and got[0] == got[1]  # the second waited for the first's import
    assert [s for s in said if s.startswith("importing")] == [said[0]], said


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


def test_culprit_patch(tmp_path: Path, tiny_tarball: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the patch named relative to here, as on a command line
    patch = Path("my.patch")
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
    git(lab_dir, "config", "kbisect.lab", "true")  # kbisect marks a lab before it writes it
    with pytest.raises(UserError, match="--replace"):
        create_lab(tmp_path / "lab", LabOptions(commits=4, seed=1))
    truth = create_lab(tmp_path / "lab", LabOptions(commits=4, seed=1, replace=True))
    assert git(tmp_path / "lab", "rev-parse", "HEAD").strip() == truth["bad"]


def test_replace_leaves_alone_what_only_looks_like_a_lab(
    tmp_path: Path, tiny_tarball: Path
) -> None:
    # Any bare repository with an `import` branch, and any folder beside an X.truth.json.
    create_lab(tmp_path / "full", LabOptions(commits=4, seed=1))
    theirs = tmp_path / "theirs.git"
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(tmp_path / "full"), str(theirs)], check=True
    )
    git(theirs, "update-ref", "refs/heads/import", "HEAD")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "precious").write_text("x")
    (tmp_path / "folder.truth.json").write_text('{"good": "a", "bad": "b"}')
    for dest in (theirs, folder):
        with pytest.raises(UserError, match="not a kbisect lab"):
            create_lab(dest, LabOptions(commits=4, seed=1, replace=True))
    assert (folder / "precious").read_text() == "x" and (theirs / "HEAD").is_file()


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


# --- The truth never lies: the culprit's change is exactly where the truth says (item 7) ---

SLOW_FILE = "lib/string.c"  # a built file: fillers pick it too


def _slow_patch(tmp_path: Path) -> Path:
    patch = tmp_path / "slow.patch"
    patch.write_text(
        "Subject: [PATCH] lib: make strings slower\n---\n"
        f"--- a/{SLOW_FILE}\n+++ b/{SLOW_FILE}\n@@ -1,2 +1,3 @@\n"
        f" /* {SLOW_FILE} */\n+/* slow */\n"
        f" int x_{abs(hash(SLOW_FILE))};\n"
    )
    return patch


def _lies(dest: Path, truth: dict[str, object], path: str, has: Callable[[str], bool]) -> list[int]:
    """Positions whose `path` has the culprit's change where the truth says it has not,
    or lacks it where the truth says it has (regression: from the culprit on; fix: until)."""
    culprit, fix = str(truth["culprit"]), truth["mode"] == "fix"
    commits = [{"position": 0, "hash": truth["old"]}, *truth["history"]]  # type: ignore[misc]
    lies = []
    for c in commits:
        after = c["position"] != 0 and _is_ancestor(dest, culprit, c["hash"])
        text = git(dest, "show", f"{c['hash']}:{path}")
        if has(text) != (after != fix):
            lies.append(c["position"])
    return lies


def _is_ancestor(repo: Path, older: str, newer: str) -> bool:
    argv = ["git", "-C", str(repo), "merge-base", "--is-ancestor", older, newer]
    return subprocess.run(argv, check=False).returncode == 0


def _fillers_touching(dest: Path, truth: dict[str, object], path: str) -> int:
    """How many filler commits edited `path`."""
    touched = set(git(dest, "rev-list", "--full-history", "--all", "--", path).split())
    fillers = {c["hash"] for c in truth["history"] if c["kind"] == "filler"}  # type: ignore[attr-defined]
    return len(touched & fillers)


# Before the fix, with commits=24: regression seeds 2, 3, 4, 5 lied (seed 2: lab-bad and
# every commit from position 4 on lacked the change); fix seeds 13, 16, 19 failed with
# "does not apply" (a filler had taken the bug out before the culprit).
LYING_SEEDS = (0, 1, 2, 3, 4, 5, 13, 16, 19)


@pytest.mark.parametrize("mode", ["regression", "fix"])
def test_fillers_never_revert_a_patched_culprit(
    tmp_path: Path, tiny_tarball: Path, mode: str
) -> None:
    """A patch of our own to a file that fillers also edit (a built one)."""
    patch = _slow_patch(tmp_path)
    lying: dict[int, list[int]] = {}
    shared = 0
    for seed in LYING_SEEDS:
        dest = tmp_path / f"lab{seed}"
        options = LabOptions(commits=24, mode=mode, seed=seed, culprit_patch=patch)
        truth = create_lab(dest, options)
        if lies := _lies(dest, truth, SLOW_FILE, lambda text: "/* slow */" in text):
            lying[seed] = lies
        shared += _fillers_touching(dest, truth, SLOW_FILE) > 0
    assert lying == {}
    assert shared >= 4  # the case is hit: fillers edited the patched file


@pytest.mark.parametrize("mode", ["regression", "fix"])
def test_a_side_branch_edit_of_the_patched_file_merges_with_the_culprit(
    tmp_path: Path, tiny_tarball: Path, mode: str
) -> None:
    """Seed 15: side-0 forks at 0, the culprit is at 16 on main, a side filler (22) edits
    the patched file, the merge is 23. Before the fix the merge took the side's file:
    regression lied from 23 on, fix at 22."""
    dest = tmp_path / "lab"
    options = LabOptions(
        commits=48, merges=2, mode=mode, seed=15, culprit_patch=_slow_patch(tmp_path)
    )
    truth = create_lab(dest, options)
    history = {c["position"]: c for c in truth["history"]}  # type: ignore[attr-defined]
    assert truth["culprit_position"] == 16 and history[16]["branch"] == "main"
    assert history[22]["branch"] == "side-0" and history[21]["hash"] != truth["culprit"]
    assert not _is_ancestor(dest, str(truth["culprit"]), history[22]["hash"])
    touched = git(dest, "rev-list", "--full-history", "--all", "--", SLOW_FILE).split()
    assert history[22]["hash"] in touched
    assert _lies(dest, truth, SLOW_FILE, lambda text: "/* slow */" in text) == []
    merged = git(dest, "show", f"{history[23]['hash']}:{SLOW_FILE}")
    assert "kbisect_lab_change_22" in merged  # the side's edit is in the merge too


CULPRIT_MARKS: dict[str, Callable[[str], bool]] = {
    "nomerges": lambda text: lab_culprits.NOMERGES_LINE in text,
    "wbt": lambda text: "return 2000000ULL" not in text,
    "writelock": lambda text: "\t\tinode_lock(bd_inode);" in text,
    "slowdown:25": lambda text: "nvme_pace_read" in text,
    "patch": lambda text: "/* slow */" in text,
}


def _culprit_options(tmp_path: Path, kind: str) -> tuple[str, LabOptions]:
    """The culprit's file and the options that make it."""
    if kind == "patch":
        return SLOW_FILE, LabOptions(culprit_patch=_slow_patch(tmp_path))
    culprit = Culprit.parse(kind)
    return culprit.path, LabOptions(culprit=culprit)


@pytest.mark.parametrize("mode", ["regression", "fix"])
@pytest.mark.parametrize("kind", list(CULPRIT_MARKS))
def test_fillers_that_edit_the_culprits_file_keep_its_change(
    tmp_path: Path, tiny_tarball: Path, monkeypatch: pytest.MonkeyPatch, kind: str, mode: str
) -> None:
    """Every built filler edits the culprit's file, before and after the culprit."""
    path, base = _culprit_options(tmp_path, kind)
    monkeypatch.setattr(lab, "BUILT_FILES", (path,) * 40)
    for seed in range(2):
        dest = tmp_path / f"lab{seed}"
        options = dataclasses.replace(base, commits=12, mode=mode, seed=seed)
        truth = create_lab(dest, options)
        assert _lies(dest, truth, path, CULPRIT_MARKS[kind]) == []
        assert _fillers_touching(dest, truth, path) >= 4


@pytest.mark.parametrize("mode", ["regression", "fix"])
@pytest.mark.parametrize("kind", list(CULPRIT_MARKS))
def test_a_lab_whose_fillers_revert_the_culprit_is_refused(
    tmp_path: Path, tiny_tarball: Path, monkeypatch: pytest.MonkeyPatch, kind: str, mode: str
) -> None:
    """Broken on purpose: fillers rewrite the culprit's file from the old endpoint's text
    (the bug in regression mode was the import's text)."""
    path, base = _culprit_options(tmp_path, kind)
    clean = (tmp_path / "tarsrc" / "linux-source-6.1" / path).read_text()
    if kind == "patch":
        buggy = clean.replace("\n", "\n/* slow */\n", 1)
    else:
        buggy = base.culprit.add(clean)
    old_text = clean if mode == "regression" else buggy
    monkeypatch.setattr(lab, "BUILT_FILES", (path,) * 40)
    monkeypatch.setattr(lab, "_filler_base", lambda w, tree, p: old_text)
    dest = tmp_path / "lab"
    options = dataclasses.replace(base, commits=12, mode=mode, seed=0)
    end = "lab-bad" if mode == "regression" else "lab-good"
    with pytest.raises(InfraError) as exc:
        create_lab(dest, options)
    message = str(exc.value)
    assert re.fullmatch(
        rf"lab check: {re.escape(path)} at {end} \([0-9a-f]{{12}}\) lacks the change of the "
        r"culprit [0-9a-f]{12}, so the truth would lie; no lab made .*",
        message,
    ), message
    assert not dest.exists() and not truth_path(dest).exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".lab")] == []


@pytest.mark.parametrize("mode", ["regression", "fix"])
def test_a_side_branch_that_reverts_the_culprit_is_refused(
    tmp_path: Path, tiny_tarball: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Broken on purpose as before the fix, with seed 15 (side-0 forks at 0, its filler 22
    edits the patched file, the culprit is at 16 on main, the merge at 23). Fix mode:
    fillers rewrite the file from the import's text, so 22 takes the bug out before the
    fix (it already has the culprit's change). Regression mode: the merge takes the side's
    tree, so it reverts the culprit."""
    if mode == "fix":
        clean = (tmp_path / "tarsrc" / "linux-source-6.1" / SLOW_FILE).read_text()
        monkeypatch.setattr(lab, "_filler_base", lambda w, tree, p: clean)
        where, what = "position 22", "already has"
    else:
        monkeypatch.setattr(lab._Writer, "merge", lambda w, side, a, b: w.git.tree_of(b))
        where, what = "lab-bad", "lacks"
    patch = _slow_patch(tmp_path)
    options = LabOptions(commits=48, merges=2, mode=mode, seed=15, culprit_patch=patch)
    expected = rf"lab check: {SLOW_FILE} at {where} \(\w{{12}}\) {what} the change of the culprit"
    with pytest.raises(InfraError, match=expected):
        create_lab(tmp_path / "lab", options)


def _delete_patch(tmp_path: Path) -> Path:
    """A patch that deletes SLOW_FILE (two lines in the tiny tree)."""
    text = (tmp_path / "tarsrc" / "linux-source-6.1" / SLOW_FILE).read_text()
    patch = tmp_path / "rm.patch"
    patch.write_text(
        f"--- a/{SLOW_FILE}\n+++ /dev/null\n@@ -1,2 +0,0 @@\n"
        + "".join(f"-{line}\n" for line in text.splitlines())
    )
    return patch


@pytest.mark.parametrize("mode", ["regression", "fix"])
def test_a_patch_that_deletes_a_file_fillers_edit(
    tmp_path: Path, tiny_tarball: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Fillers pass over a file the patch deleted instead of bringing it back."""
    patch = _delete_patch(tmp_path)
    monkeypatch.setattr(lab, "BUILT_FILES", (SLOW_FILE, "lib/vsprintf.c") * 10)
    dest = tmp_path / "lab"
    options = LabOptions(commits=12, mode=mode, seed=1, culprit_at=1, culprit_patch=patch)
    truth = create_lab(dest, options)
    for c in [{"position": 0, "hash": truth["old"]}, *truth["history"]]:  # type: ignore[misc]
        after = c["position"] != 0 and _is_ancestor(dest, str(truth["culprit"]), c["hash"])
        present = (
            subprocess.run(
                ["git", "-C", str(dest), "cat-file", "-e", f"{c['hash']}:{SLOW_FILE}"], check=False
            ).returncode
            == 0
        )
        assert present == (after == (mode == "fix")), c["position"]
    assert _fillers_touching(dest, truth, "lib/vsprintf.c") >= 2


def test_a_patch_a_filler_spoilt_says_where(
    tmp_path: Path, tiny_tarball: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The filler at 1 edits the file the patch deletes whole: the patch no longer applies
    at 2, which the error says (it did say "to the lab base", which took it)."""
    patch = _delete_patch(tmp_path)
    monkeypatch.setattr(lab, "BUILT_FILES", (SLOW_FILE,) * 10)
    options = LabOptions(commits=6, seed=1, culprit_at=2, culprit_patch=patch)
    with pytest.raises(UserError, match=r"does not apply to the lab at position 2: .*--culprit-at"):
        create_lab(tmp_path / "lab", options)


def test_a_merge_that_conflicts_with_the_culprit_is_a_clear_error(
    tmp_path: Path, tiny_tarball: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every built filler edits the patched file, on both sides of a merge: the merge of
    two additions at the file's end conflicts, and the lab says what to do."""
    monkeypatch.setattr(lab, "BUILT_FILES", (SLOW_FILE,) * 40)
    options = LabOptions(commits=12, merges=1, seed=1, culprit_patch=_slow_patch(tmp_path))
    with pytest.raises(UserError, match=rf"merging side-0 conflicts in {SLOW_FILE} .*--seed"):
        create_lab(tmp_path / "lab", options)
    assert not (tmp_path / "lab").exists()


def _diff_of(before: str | None, after: str | None) -> str:
    """`git diff -U0` of file f from `before` to `after` (None: no file), as lab.py's check
    reads the culprit's diff and each commit's drift from it."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in (("a", before), ("b", after)):
            if text is not None:
                (Path(tmp) / name).write_text(text)
        argv = ["git", "diff", "--no-index", "--no-color", "-U0"]
        argv += [
            "a" if before is not None else "/dev/null",
            "b" if after is not None else "/dev/null",
        ]
        out = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, check=False).stdout
    return re.sub(r"(?m)^(diff --git|---|\+\+\+) (a|b)/[ab]\b", r"\1 \2/f", out).replace(
        "a/a b/b", "a/f b/f"
    )


def _keeps(before: str | None, after: str | None, text: str | None, has: bool) -> bool:
    """Whether `text` shows the change before -> after (has) or not (lacks), as lab.py judges."""
    change = lab._parse_diff(_diff_of(before, after))["f"]
    drift = lab._parse_diff(_diff_of(after if has else before, text))
    return "f" not in drift or lab._leaves_alone(change, drift["f"], has)


BODY = "".join(f"line {i}\n" for i in range(20))
FILLER = '\n/* lab change 7 */\nconst char x[] = "1";\n'


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (BODY, BODY.replace("line 9\n", "line 9\nadded\n")),  # an addition in the middle
        (BODY, BODY.replace("line 9\n", "")),  # a deletion in the middle
        (BODY, BODY.replace("line 9\n", "line nine\n")),  # a change
        (BODY, BODY + "added\n"),  # an addition at the end, where fillers add too
        (BODY, BODY.replace("line 19\n", "")),  # a deletion at the end
        (BODY, BODY.replace("line 0\n", "")),  # a deletion at the start
        (BODY, BODY.replace("line 5\n", "-- five\n")),  # a line that looks like a header
        ("/* f */\nint x;\n", "/* f */\n/* slow */\nint x;\n"),  # the tiny tree's patch
    ],
)
def test_the_check_tells_a_file_with_the_change_from_one_without(before: str, after: str) -> None:
    # A filler's edit at the end of the file (before or after the change) keeps either
    # side recognisable; the other side is always told apart.
    for extra in ("", FILLER, FILLER + FILLER.replace("7", "8")):
        has, lacks = after + extra, before + extra
        assert _keeps(before, after, has, has=True) and not _keeps(before, after, has, has=False)
        assert _keeps(before, after, lacks, has=False)
        assert not _keeps(before, after, lacks, has=True)
    # A filler between the lacking commit and the culprit's parent: its lines are not there.
    assert _keeps(before + FILLER, after + FILLER, before, has=False)
    assert not _keeps(before + FILLER, after + FILLER, after, has=False)


def test_the_check_reads_a_line_without_a_newline() -> None:
    after = BODY + "no newline"  # "\\ No newline at end of file" in the culprit's diff
    assert _keeps(BODY, after, after, has=True) and not _keeps(BODY, after, after, has=False)
    assert _keeps(BODY, after, BODY, has=False) and not _keeps(BODY, after, BODY, has=True)


def test_the_check_follows_a_new_and_a_deleted_file() -> None:
    assert _keeps(None, "x\n", "x\n" + FILLER, has=True)
    assert not _keeps(None, "x\n", None, has=True)
    assert _keeps(None, "x\n", None, has=False)
    assert not _keeps(None, "x\n", "x\n", has=False)
    assert _keeps("x\n", None, None, has=True)
    assert not _keeps("x\n", None, "x\n", has=True)
