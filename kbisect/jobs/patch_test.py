"""A candidate patch tested on a bisection's bad endpoint (a door's `test JOB` answering a
patch): one sweep of three kernels, the bad endpoint, the bad endpoint with the patch (a
commit beside the user's, builders.patched_commit) and the good endpoint. Its first pair
says whether the patch changes the bad kernel, its second whether the patched kernel then
reads as the good one, each judged as any sweep's pair is."""

from pathlib import Path

from kbisect.builders.patched_commit import Patch, apply_patches
from kbisect.infra.git import Git
from kbisect.workflows.bisect_types import BisectRequest
from kbisect.workflows.sweep_types import SweepRequest

PATCH_WORDS = "the patch"  # how a door names an upload ("the patch does not apply to ...")


def sweep_for_patch(req: BisectRequest, patches: list[Patch]) -> SweepRequest:
    """The sweep that measures `patches` on the bisection `req`'s bad endpoint, its kernels
    built as the bisection's were (its --config); UserError when a patch does not apply."""
    git = Git(Path(req.repo))
    bad, good = git.resolve(req.bad), git.resolve(req.good[0])
    patched = apply_patches(git, bad, patches, option="")
    names = ", ".join(p.source for p in patches)
    return SweepRequest(
        repo=req.repo,
        kernels=[bad, patched.tip, good],
        names=[f"bad {bad[:12]}", f"bad {bad[:12]} + {names}", f"good {good[:12]}"],
        testcases=[req.testcase],
        metric=req.metric,
        profile=req.profile,
        config=req.config,
        pass_fail_ok=True,  # a pass/fail testcase's pairs count failures, as a backport's
    )
