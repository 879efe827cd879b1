"""`bisect --cross-tree`: a distro kernel against a later upstream release, the seed's shape.

The distro endpoint (the bad one in fix mode, the good one in a regression) is not on
upstream's line: it is an upstream release plus the distro's own commits. The job bisects
upstream from their merge base instead, so that the distro's commits are never
candidates; first a sweep checks that the merge base behaves like the distro endpoint
(syzbot's check of its merge bases). If it does not, the distro's own commits matter, and
no upstream range holds the answer: the job stops and says so.
"""

import dataclasses

from kbisect.contract import Mode
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.workflows.bisect_types import BisectRequest
from kbisect.workflows.investigation_types import CrossTreeCheck
from kbisect.workflows.sweep_types import SweepRequest


def find(git: Git, req: BisectRequest) -> CrossTreeCheck | None:
    """The cross-tree shape of a checked request, with the sweep that checks the merge
    base; None when the endpoints are on one line already (the job runs as it is)."""
    if req.mode == Mode.FIX:
        distro, upstream, side = req.bad, req.good[0], "bad"
    else:
        if len(req.good) != 1:
            raise UserError("--cross-tree takes one --good (the distro kernel that was good)")
        distro, upstream, side = req.good[0], req.bad, "good"
    if git.is_ancestor(distro, upstream):
        return None
    base = git.run("merge-base", distro, upstream, check=False).strip()
    if not base:
        raise UserError(
            f"{distro[:12]} and {upstream[:12]} share no history: --cross-tree needs a "
            "distro kernel forked from the upstream one"
        )
    if base == upstream:
        later = "fixed" if req.mode == Mode.FIX else "bad"
        raise UserError(
            f"the {later} upstream {upstream[:12]} is already in the distro's history "
            f"({distro[:12]}): give a later upstream release"
        )
    return CrossTreeCheck(check_sweep(req, distro, base, side), distro, upstream, base, side)


def on_base(req: BisectRequest, ct: CrossTreeCheck) -> BisectRequest:
    """The job on upstream's line: the merge base in the distro endpoint's place."""
    if ct.side == "bad":
        return dataclasses.replace(req, bad=ct.base, cross_tree=ct.distro)
    return dataclasses.replace(req, good=[ct.base], cross_tree=ct.distro)


def check_sweep(req: BisectRequest, distro: str, base: str, side: str) -> SweepRequest:
    """The sweep that compares the distro endpoint with the merge base."""
    return SweepRequest(
        repo=req.repo, kernels=[distro, base], testcases=[req.testcase],
        names=[f"the distro {side} {distro[:12]}", f"their merge base {base[:12]}"],
        metric=req.metric, profile=req.profile, min_effect=req.min_effect, config=req.config,
    )  # fmt: skip
