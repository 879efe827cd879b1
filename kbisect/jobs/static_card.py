"""A job's static summary and details, given to Temporal when it starts: the Web UI shows
the summary as one line in the workflow list and on the job's page, and the details
under it (what was asked, with which options, by whom)."""

import getpass
import os
import socket
from dataclasses import MISSING, fields

from kbisect.contract import (
    BackportRequest,
    BisectRequest,
    ExplainRequest,
    SweepRequest,
    fit_summary,
)

Request = BisectRequest | SweepRequest | ExplainRequest | BackportRequest
# what the details leave out: plumbing, not what the user asked
PLUMBING = {"search_attributes", "build_queue", "vm_queue", "good_value", "bad_value"}


def cli_user() -> str:
    """Who starts a job from this shell: user@host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's uid)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def _short(rev: str) -> str:
    """A full hash cut to 12 characters; a name (lab-good, v6.1) as it is."""
    hexdigits = set("0123456789abcdef")
    return rev[:12] if len(rev) == 40 and set(rev) <= hexdigits else rev


def summary(req: Request) -> str:
    """One line for the workflow list: what the job measures, where (cut to Temporal's
    limit)."""
    return fit_summary(_summary(req))


def _summary(req: Request) -> str:
    repo = os.path.basename(req.repo.rstrip("/")) or req.repo
    if isinstance(req, BisectRequest):
        olds = ",".join(_short(g) for g in req.good)
        return f"bisect {req.testcase} ({req.mode}) {olds}..{_short(req.bad)} in {repo}"
    if isinstance(req, SweepRequest):
        names = req.names or [_short(k) for k in req.kernels]
        span = f"{names[0]} .. {names[-1]}" if names else ""
        return f"sweep {', '.join(req.testcases)} over {len(req.kernels)} kernels {span} in {repo}"
    if isinstance(req, ExplainRequest):
        return f"explain {_short(req.culprit)} ({req.testcase}) in {repo}"
    target = req.target_name or _short(req.target)
    what = "revert" if req.revert else "backport"
    return f"{what} {_short(req.change)} onto {target} ({req.testcase}) in {repo}"


def details(req: Request, by: str) -> str:
    """Markdown: every option the job was asked with, and who asked."""
    lines = [f"- **submitted by**: {by}"]
    for f in fields(req):
        value = getattr(req, f.name)
        default = (
            f.default_factory()
            if f.default_factory is not MISSING
            else f.default
            if f.default is not MISSING
            else MISSING
        )
        if f.name in PLUMBING or value == default:
            continue  # plumbing, or an option left as it is (--no-verify is shown)
        shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        lines.append(f"- **{f.name.replace('_', ' ')}**: {shown}")
    return "\n".join(lines)
