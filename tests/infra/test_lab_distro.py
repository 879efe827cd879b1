import subprocess
from pathlib import Path

import pytest

from kbisect.errors import UserError
from kbisect.infra import lab_culprits
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.infra.lab_culprits import NVME_CORE
from tests.conftest import git


def _applies(repo: Path, onto: str, *commits: str) -> bool:
    """Whether the commits' diffs apply in turn to `onto`, as `git apply` (no 3-way)."""
    index = repo / "kbisect-test.index"
    env = {"GIT_DIR": str(repo), "GIT_INDEX_FILE": str(index), "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "read-tree", onto], env=env, check=True)
    try:
        for c in commits:
            patch = git(repo, "diff-tree", "-p", "--full-index", f"{c}^", c)
            run = subprocess.run(
                ["git", "apply", "--cached", "-"], env=env, input=patch.encode(), check=False
            )
            if run.returncode:
                return False
        return True
    finally:
        index.unlink(missing_ok=True)


def test_a_distro_branch_forks_from_the_bug_with_its_own_commits_and_stable_picks(
    tmp_path: Path, tiny_tarball: Path
) -> None:
    dest = tmp_path / "lab"
    truth = create_lab(
        dest, LabOptions(commits=12, mode="fix", culprit_at=8, seed=3, distro=6,
                         fix_needs_prereq=True),
    )  # fmt: skip
    distro = truth["distro"]
    assert isinstance(distro, dict)
    tip, fix, prereq = distro["tip"], str(truth["culprit"]), str(truth["prerequisite"])
    assert git(dest, "rev-parse", "lab-distro^{commit}", "distro").split() == [tip, tip]
    assert git(dest, "merge-base", tip, str(truth["good"])).strip() == truth["old"]
    assert [c["kind"] for c in distro["commits"]] == [
        "sauce", "config", "pick", "pick", "sauce", "pick",
    ]  # fmt: skip
    assert lab_culprits.NOMERGES_LINE in git(dest, "show", f"{tip}:{NVME_CORE}")  # still the bug
    upstream = {c["hash"] for c in truth["history"]}  # type: ignore[attr-defined]
    for c in distro["commits"]:
        message = git(dest, "show", "-s", "--format=%B", c["hash"])
        if c["kind"] == "pick":  # another hash, the same patch, stable's provenance line
            assert c["upstream"] in upstream and c["hash"] != c["upstream"]
            assert f"commit {c['upstream']} upstream." in message
            ids = [git(dest, "show", h).encode() for h in (c["hash"], c["upstream"])]
            pid = [
                subprocess.run(["git", "patch-id", "--stable"], input=i, capture_output=True)
                .stdout.split()[0] for i in ids
            ]  # fmt: skip
            assert pid[0] == pid[1]
        else:
            assert message.startswith("UBUNTU: ")
    # The prerequisite is upstream before the fix, and the distro lacks it: the fix
    # applies there only after it.
    assert git(dest, "merge-base", "--is-ancestor", prereq, f"{fix}^").strip() == ""
    assert lab_culprits.P2PDMA_CALL in git(dest, "show", f"{fix}:{NVME_CORE}")
    assert not _applies(dest, tip, fix)
    assert _applies(dest, tip, prereq, fix)


def test_a_lab_without_a_distro_keeps_its_hashes_and_tags(
    tmp_path: Path, tiny_tarball: Path
) -> None:
    plain = create_lab(tmp_path / "a", LabOptions(commits=8, mode="fix", culprit_at=3, seed=2))
    other = create_lab(tmp_path / "b", LabOptions(commits=8, mode="fix", culprit_at=3, seed=2,
                                                  distro=2))  # fmt: skip
    assert plain["distro"] is None and plain["prerequisite"] is None
    assert plain["good"] == other["good"] and plain["bad"] == other["bad"]
    assert git(tmp_path / "a", "tag").split() == ["lab-bad", "lab-good"]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (LabOptions(distro=3), "--mode fix"),
        (LabOptions(mode="fix", fix_needs_prereq=True), "--distro N"),
        (
            LabOptions(
                mode="fix", distro=2, fix_needs_prereq=True, culprit=lab_culprits.Culprit("wbt")
            ),
            "nomerges",
        ),
        (LabOptions(mode="fix", distro=-1), "1 or more"),
    ],
)
def test_a_distro_lab_asked_wrongly_says_what_to_pass(
    tmp_path: Path, options: LabOptions, says: str
) -> None:
    with pytest.raises(UserError, match=says):
        create_lab(tmp_path / "lab", options)
    assert not (tmp_path / "lab").exists()
