"""The release a distro kernel tree is for, as its packaging names it: the distribution
field of its changelog's newest released entry ("linux (5.15.0-91.101) jammy; ..."). An
SRU note names the series of the tree it went to, never a default of kbisect's."""

import re
from pathlib import Path

from kbisect.errors import KbisectError, UserError
from kbisect.infra.git import Git

SERIES = re.compile(r"[a-z][a-z0-9-]{1,30}")  # a release's code name (jammy, bookworm)
# Debian's, then Ubuntu kernel trees' (debian/debian.env names debian.master)
CHANGELOGS = ("debian/changelog", "debian.master/changelog")
ENTRY = re.compile(r"^[a-z0-9][a-z0-9.+-]* \([^()\s]+\) ([a-z][a-z0-9-]*)[ ;]")


def checked(series: str) -> str:
    if not SERIES.fullmatch(series):
        raise UserError(f"--series {series!r}: give a release's code name, e.g. jammy")
    return series


def series_of(repo: Path, rev: str) -> str | None:
    """`rev`'s series from its changelog; None where it has none (an upstream tree) or the
    repository is not readable from here (a report read on another host)."""
    for path in CHANGELOGS:
        try:
            text = Git(repo).run("show", f"{rev}:{path}")
        except KbisectError:
            continue
        # the newest entry with a released distribution: ENTRY's is lower case, which an
        # UNRELEASED entry on top is not; jammy-security, jammy-proposed are jammy's pockets
        for line in text.splitlines():
            if m := ENTRY.match(line):
                series = m.group(1).split("-", 1)[0]
                return series if SERIES.fullmatch(series) else None
    return None


def sru_series(given: str | None, repo: str, rev: str) -> str | None:
    """The series a note or patch names: the one given (checked), else the tree's."""
    if given:
        return checked(given)
    return series_of(Path(repo), rev)
