"""Which files a build compiled, and which commits cannot change the kernel it makes.

Kbuild writes a `.NAME.cmd` file next to every target it makes, listing the sources and
headers the target was made from (fixdep's `deps_` and `source_` lines). Their union is
what the chosen config compiles. A commit whose change against its first parent touches
none of those files, and no build machinery (Kconfig, Makefiles, scripts, tools, config
fragments), makes the same kernel as that parent: its verdict is its parent's, and it
needs no build.

What the dependency files cannot see: a file compiled only by commits in between (a
Kconfig change enables it, a later one disables it). Both Kconfig changes count as
relevant, and the endpoints' union covers every file compiled at either end.
"""

import os
import re
from collections.abc import Iterable
from pathlib import Path

from kbisect.infra.git import Git

# Paths that steer the build itself rather than being compiled into it.
MACHINERY = re.compile(
    r"(^|/)(Kconfig|Makefile|Kbuild)[^/]*$"
    r"|\.(mk|lds|lds\.S)$"
    r"|^(scripts|tools|usr)/"
    r"|(^|/)configs/"
)


def compiled_sources(out: Path, src: Path) -> list[str]:
    """Every file under `src` that a target in the build directory `out` was made from,
    relative to `src`, sorted."""
    prefix = os.path.relpath(src, out).rstrip("/") + "/"
    absolute = str(src.resolve()).rstrip("/") + "/"
    found: set[str] = set()
    for cmd in out.rglob(".*.cmd"):
        try:
            text = cmd.read_text(errors="replace")
        except OSError:
            continue
        for token in text.split():
            for head in (prefix, absolute):
                if token.startswith(head):
                    found.add(os.path.normpath(token[len(head) :]))
    return sorted(found)


def relevant(path: str, sources: frozenset[str] | set[str]) -> bool:
    return path in sources or MACHINERY.search(path) is not None


def inert_commits(
    git: Git, commits: Iterable[str], sources: frozenset[str] | set[str]
) -> dict[str, str]:
    """commit -> its first parent, for the commits whose change touches nothing relevant
    (the same kernel as that parent). Root commits are never inert."""
    inert: dict[str, str] = {}
    for commit in commits:
        parents = git.run("rev-list", "--parents", "-n", "1", commit).split()[1:]
        if not parents:
            continue
        changed = git.run(
            "diff-tree", "-r", "-z", "--name-only", "--no-commit-id", parents[0], commit
        ).split("\0")
        if not any(relevant(p, sources) for p in changed if p):
            inert[commit] = parents[0]
    return inert


def read_sources(path: str) -> set[str]:
    """A build's compiled sources, as kept with its artifact ('' or missing: none known)."""
    if not path:
        return set()
    try:
        return set(Path(path).read_text().split("\n")) - {""}
    except OSError:
        return set()
