"""A job's static details, given to Temporal when it starts beside its summary
(kbisect.summaries): the Web UI shows them under the summary on the job's page (what was
asked, with which options, by whom)."""

import getpass
import os
import socket
from dataclasses import MISSING, fields

from kbisect.summaries import Request

# what the details leave out: plumbing, not what the user asked
PLUMBING = {"search_attributes", "build_queue", "vm_queue", "good_value", "bad_value"}


def cli_user() -> str:
    """Who starts a job from this shell: user@host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's uid)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


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
