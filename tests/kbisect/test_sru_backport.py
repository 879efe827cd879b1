"""The SRU series of a verified backport: prerequisites first, each a cherry-pick with the
kernel team's trailers, that `git am` applies on the target; its cover letter carries the
target's before and after."""

import subprocess
from pathlib import Path
from typing import Any

import pytest

from kbisect.builders.backport_plan import plan_backport
from kbisect.errors import UserError
from kbisect.reports.backport_report import outcome_lines
from kbisect.reports.sru_backport import write_backport_series
from kbisect.reports.sru_patch import SruOptions
from kbisect.workflows.backport_types import BackportRequest, BackportResult, BackportWord
from kbisect.workflows.bisect_types import BisectResult, Step
from kbisect.workflows.sweep_types import PairWord, SweepBoot, SweepPair
from tests.conftest import git

SENDER = "Sam Sender <sam@example.com>"


def _backport(repo: Path, truth: dict[str, Any], word: str) -> tuple[BackportResult, BisectResult]:
    tip, fix = truth["distro"]["tip"], truth["culprit"]
    req = BackportRequest(str(repo), fix, tip, "nvme-snapshot-read", target_name="lab-distro",
                          job="bisect-x-1")  # fmt: skip
    plan = plan_backport(req)
    pair = SweepPair("nvme-snapshot-read", "avg_read_sectors", "sectors", 0, 1,
                     PairWord.CHANGED, "better", 63.0, 63.0, 63.0, None, 1, 1)  # fmt: skip
    boots = [SweepBoot("nvme-snapshot-read", 0, 8.0), SweepBoot("nvme-snapshot-read", 1, 512.0)]
    result = BackportResult(
        word, plan, str(repo), tip, "lab-distro", "nvme-snapshot-read", "bisect-x-1",
        "bisect-x-1-backport-1", pair, boots=boots, message=f"{word}: +6300.0%; 1+1 boots",
    )  # fmt: skip
    bisection = BisectResult(
        status="found", mode="fix", testcase="nvme-snapshot-read", repo=str(repo),
        old=[truth["old"]], new=truth["good"], culprit=fix, candidates=[fix],
        steps=[Step(truth["old"], "bug", "bad", "endpoint", value=8.0),
               Step(truth["good"], "fixed", "good", "endpoint", value=512.0)],
        message="fixed by", subjects={fix: "NVMe: Allow request merges"},
        metric="avg_read_sectors", unit="sectors", profile="fast",
    )  # fmt: skip
    return result, bisection


def test_the_verified_series_applies_with_git_am_prerequisite_first(
    distro_lab: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    repo, truth = distro_lab
    result, bisection = _backport(repo, truth, BackportWord.VERIFIED)
    assert result.plan.series == [truth["prerequisite"], truth["culprit"]]
    opts = SruOptions(series="jammy", bug=2012345, signoff=SENDER)
    done = write_backport_series(result, bisection, tmp_path / "out", opts, result.id)
    cover, first, second = done.files
    assert "[SRU][Jammy][PATCH 0/2] NVMe: Allow request merges" in cover.read_text()
    assert f"From: {SENDER}" in cover.read_text()
    assert "[PATCH 1/2] nvme: add a helper for the PCI P2PDMA check" in first.read_text()
    assert "[PATCH 2/2] NVMe: Allow request merges" in second.read_text()
    for patch, upstream in zip((first, second), result.plan.series, strict=True):
        message = patch.read_text().split("\n\n", 1)[1].split("\n---\n", 1)[0].strip().splitlines()
        assert message[0] == "BugLink: https://bugs.launchpad.net/bugs/2012345"
        assert message[-2:] == [
            f"(cherry picked from commit {upstream})",
            f"Signed-off-by: {SENDER}",
        ]
    letter = cover.read_text()
    assert (
        "1. " + truth["prerequisite"][:12] in letter
        and "prerequisite (the change's context)" in letter
    )
    assert "without the backport: avg_read_sectors 8 sectors (1 boot)" in letter
    assert "with the backport: avg_read_sectors 512 sectors (1 boot)" in letter
    assert "job bisect-x-1-backport-1 (backport of job bisect-x-1)" in letter

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    git(clone, "checkout", "-q", truth["distro"]["tip"])
    git(clone, "-c", "user.name=S", "-c", "user.email=s@x", "am", "-q", "--empty=drop",
        str(cover), str(first), str(second))  # fmt: skip
    assert git(clone, "log", "-2", "--format=%s").splitlines() == [
        "NVMe: Allow request merges", "nvme: add a helper for the PCI P2PDMA check",
    ]  # fmt: skip
    text = (clone / "drivers/nvme/host/core.c").read_text()
    assert "QUEUE_FLAG_NOMERGES" not in text


def test_an_unverified_backport_is_not_sent(
    distro_lab: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    repo, truth = distro_lab
    result, bisection = _backport(repo, truth, BackportWord.NOT_VERIFIED)
    with pytest.raises(UserError, match="not verified: an SRU ships what was verified"):
        write_backport_series(result, bisection, tmp_path / "out", SruOptions(signoff=SENDER), "b")
    assert not (tmp_path / "out").exists()


def test_a_regression_without_an_upstream_fix_sends_the_culprits_revert(
    tmp_path: Path, tiny_tarball: Path
) -> None:
    from kbisect.infra.lab import LabOptions, create_lab

    repo = tmp_path / "lab"
    truth = create_lab(repo, LabOptions(commits=8, culprit_at=3, seed=2))
    culprit, bad = str(truth["culprit"]), str(truth["bad"])
    req = BackportRequest(str(repo), culprit, bad, "nvme-snapshot-read", target_name="lab-bad",
                          revert=True, job="bisect-x-2")  # fmt: skip
    plan = plan_backport(req)
    assert plan.revert and plan.series == [culprit] and plan.word == ""
    clean = plan_backport(BackportRequest(str(repo), culprit, str(truth["good"]),
                                          "nvme-snapshot-read", revert=True))  # fmt: skip
    assert clean.word == BackportWord.NOT_AFFECTED and "nothing to revert" in clean.message
    pair = SweepPair("nvme-snapshot-read", "avg_read_sectors", "sectors", 0, 1,
                     PairWord.CHANGED, "better", 63.0)  # fmt: skip
    result = BackportResult(BackportWord.VERIFIED, plan, str(repo), bad, "lab-bad",
                            "nvme-snapshot-read", "bisect-x-2", "b-2", pair,
                            boots=[SweepBoot("nvme-snapshot-read", 1, 512.0)])  # fmt: skip
    assert (
        outcome_lines(result)[1]
        == f'revert 1: {culprit[:12]} ("{plan.subjects[culprit]}"): the change'
    )
    bisection = BisectResult(
        status="found", mode="regression", testcase="nvme-snapshot-read", repo=str(repo),
        old=[str(truth["good"])], new=bad, culprit=culprit, candidates=[culprit], steps=[],
        message="first bad commit", subjects={culprit: plan.subjects[culprit]},
        metric="avg_read_sectors", unit="sectors",
    )  # fmt: skip
    opts = SruOptions("jammy", signoff=SENDER)  # the lab's tree names no release
    done = write_backport_series(result, bisection, tmp_path / "out", opts, "b-2")
    cover, patch = done.files
    assert 'Subject: [SRU][Jammy][PATCH 1/1] Revert "nvme: set nomerges' in patch.read_text()
    assert f"This reverts commit {culprit}." in patch.read_text()
    assert f"Revert commit {culprit[:12]}" in cover.read_text()
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    git(clone, "checkout", "-q", bad)
    git(clone, "-c", "user.name=S", "-c", "user.email=s@x", "am", "-q", "--empty=drop",
        str(cover), str(patch))  # fmt: skip
    assert "QUEUE_FLAG_NOMERGES" not in (clone / "drivers/nvme/host/core.c").read_text()
