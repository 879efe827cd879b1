"""bisect --cross-tree: the distro endpoint off upstream's line, replaced by the merge base
once a sweep says it behaves like it."""

import subprocess
from pathlib import Path
from typing import Any

import pytest

from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.jobs import cross_tree
from kbisect.workflows.bisect_types import BisectRequest
from kbisect.workflows.sweep_types import PairWord, SweepPair


def _request(good: str, bad: str, mode: str = "fix") -> BisectRequest:
    return BisectRequest(repo="r", good=[good], bad=bad, testcase="nvme-snapshot-read",
                         mode=mode, config="/c")  # fmt: skip


def test_a_distro_bad_is_replaced_by_its_merge_base_with_upstream(
    distro_lab: tuple[Path, dict[str, Any]],
) -> None:
    repo, truth = distro_lab
    tip = truth["distro"]["tip"]
    req = _request(truth["good"], tip)
    ct = cross_tree.find(Git(repo), req)
    assert ct is not None
    assert (ct.distro, ct.upstream, ct.base, ct.side) == (tip, truth["good"], truth["old"], "bad")
    job = cross_tree.on_base(req, ct)
    assert (job.bad, job.good, job.cross_tree) == (truth["old"], [truth["good"]], tip)
    assert ct.sweep.kernels == [tip, truth["old"]] and ct.sweep.config == "/c"
    same = SweepPair("nvme-snapshot-read", "avg_read_sectors", "sectors", 0, 1, PairWord.SAME)
    assert ct.refusal(same) is None
    changed = SweepPair("nvme-snapshot-read", "avg_read_sectors", "sectors", 0, 1,
                        PairWord.CHANGED, "worse", -0.984)  # fmt: skip
    why = ct.refusal(changed)
    assert why is not None and "does not behave like the distro bad" in why
    assert "(avg_read_sectors changed, -98.4%)" in why and "bisect the distro branch itself" in why


def test_endpoints_on_one_line_need_no_cross_tree(distro_lab: tuple[Path, dict[str, Any]]) -> None:
    repo, truth = distro_lab
    assert cross_tree.find(Git(repo), _request(truth["good"], truth["bad"])) is None


def test_an_upstream_the_distro_already_has_is_a_clear_error(
    distro_lab: tuple[Path, dict[str, Any]],
) -> None:
    repo, truth = distro_lab
    tip = truth["distro"]["tip"]
    # In a regression the distro kernel is the good one: an upstream it contains is no range.
    with pytest.raises(UserError, match="is already in the distro's history"):
        cross_tree.find(Git(repo), _request(tip, truth["old"], mode="regression"))


def _clone(repo: Path, dest: Path, branch: str) -> Path:
    """A clone of one branch, with only its own objects."""
    args = ["--no-local", "--bare", "--single-branch", "--branch", branch]
    subprocess.run(["git", "clone", "-q", *args, str(repo), str(dest)], check=True)
    return dest


def test_a_target_in_a_named_tree_is_fetched_into_the_jobs_repository(
    distro_lab: tuple[Path, dict[str, Any]], tmp_path: Path, cache: Path
) -> None:
    from kbisect.builders.trees import Trees
    from kbisect.jobs.backport_job import from_tree
    from kbisect.settings import Settings

    repo, truth = distro_lab
    settings = Settings.from_env({"KBISECT_CACHE": str(cache)})
    # The distro kernel lives in a tree of its own: a clone that has only its branch.
    distro, upstream = (
        _clone(repo, tmp_path / "ubuntu", "distro"),
        _clone(repo, tmp_path / "upstream", "master"),
    )
    Trees(settings).add("ubuntu", str(distro), branch="distro")
    assert not Git(upstream).ok("cat-file", "-e", truth["distro"]["tip"])
    assert from_tree(settings, upstream, "ubuntu", "") == truth["distro"]["tip"]
    assert Git(upstream).ok("cat-file", "-e", truth["distro"]["tip"])
    assert (
        Git(upstream).resolve("refs/kbisect/targets/ubuntu/heads/distro")
        == (truth["distro"]["tip"])
    )
    heads = Git(upstream).run("for-each-ref", "--format=%(refname)", "refs/heads")
    assert heads.split() == ["refs/heads/master"]  # the user's refs as they were
