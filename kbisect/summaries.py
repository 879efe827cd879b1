"""A job's one-line summary, as Temporal's Web UI lists it: what the job measures and
where. Pure, so that a workflow starting a child job (a series watch's sweep) gives it
one, as the command line does."""

import os

from kbisect.contract import fit_summary
from kbisect.workflows.backport_types import BackportRequest
from kbisect.workflows.bisect_types import BisectRequest
from kbisect.workflows.explain_types import ExplainRequest
from kbisect.workflows.sweep_types import SweepRequest

Request = BisectRequest | SweepRequest | ExplainRequest | BackportRequest
# the cache's folder of kernel lists (builders.kernel_list): each list's repository is a
# folder named by its hash there, which says nothing to a person
KERNEL_LISTS = "kernel-lists"


def short(rev: str) -> str:
    """A full hash cut to 12 characters; a name (lab-good, v6.1) as it is."""
    hexdigits = set("0123456789abcdef")
    return rev[:12] if len(rev) == 40 and set(rev) <= hexdigits else rev


def where(repo: str) -> str:
    """The repository as the summary names it: its folder; a kernel list as such."""
    path = repo.rstrip("/")
    if os.path.basename(os.path.dirname(path)) == KERNEL_LISTS:
        return "a kernel list"
    return os.path.basename(path) or repo


def summary(req: Request) -> str:
    """One line for the workflow list (cut to Temporal's limit)."""
    return fit_summary(_summary(req))


def _summary(req: Request) -> str:
    repo = where(req.repo)
    if isinstance(req, BisectRequest):
        olds = ",".join(short(g) for g in req.good)
        return f"bisect {req.testcase} ({req.mode}) {olds}..{short(req.bad)} in {repo}"
    if isinstance(req, SweepRequest):
        names = req.names or [short(k) for k in req.kernels]
        span = f"{names[0]} .. {names[-1]}" if names else ""
        return f"sweep {', '.join(req.testcases)} over {len(req.kernels)} kernels {span} in {repo}"
    if isinstance(req, ExplainRequest):
        return f"explain {short(req.culprit)} ({req.testcase}) in {repo}"
    target = req.target_name or short(req.target)
    what = "revert" if req.revert else "backport"
    return f"{what} {short(req.change)} onto {target} ({req.testcase}) in {repo}"
