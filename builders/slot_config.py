"""Keep a build slot's .config across commits whose change cannot alter it.

Configuring (tinyconfig, the fragments, olddefconfig) costs about 8 s a build on 2 cores,
and rewriting .config makes the next make re-sync the whole configuration (another few
seconds): more than the incremental compile of a bisection step. The resolved .config is
a function of the Kconfig files, the kconfig tooling and Makefiles (scripts/, Kconfig*,
Makefile*, config fragments: the build machinery of `sources.MACHINERY`), the fragments
and the compiler, so when the slot's last configured commit and this one differ in none
of those, the slot's .config is this commit's too, byte for byte, and is left untouched.
"""

import json
from pathlib import Path

from kbisect.builders.sources import MACHINERY
from kbisect.errors import KbisectError
from kbisect.infra.git import Git

STATE = "kbisect-configured.json"  # in the build dir: a fresh build dir forgets it


def reusable(repo: Path, out: Path, commit: str, config_hash: str) -> str | None:
    """The commit whose configuration the slot holds, if it is `commit`'s too; else None."""
    try:
        state = json.loads((out / STATE).read_text())
        prev, prev_hash = str(state["commit"]), str(state["config_hash"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if prev_hash != config_hash or not (out / ".config").is_file():
        return None
    if prev == commit:
        return prev
    try:
        changed = Git(repo).run("diff-tree", "-r", "-z", "--name-only", prev, commit)
    except KbisectError:  # the old commit is gone (a re-created repository)
        return None
    return None if any(MACHINERY.search(p) for p in changed.split("\0") if p) else prev


def configured_hash(out: Path) -> str | None:
    """The config hash the build dir is configured for, if any."""
    try:
        return str(json.loads((out / STATE).read_text())["config_hash"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def forget(out: Path) -> None:
    """Before configuring: a configuration cut short must never be taken for a whole one."""
    (out / STATE).unlink(missing_ok=True)


def remember(out: Path, commit: str, config_hash: str) -> None:
    tmp = out / f"{STATE}.tmp"
    tmp.write_text(json.dumps({"commit": commit, "config_hash": config_hash}))
    tmp.replace(out / STATE)
