"""A distro branch for a fix-mode lab (`kbisect lab create --mode fix --distro N`): the
seed's shape, where the kernel that ships is an upstream release plus the distro's own
commits, and the fix is in a later upstream release.

The branch forks from the old endpoint (it has the bug) and carries N commits, in turn: a
change of the distro's own (Ubuntu's "UBUNTU: SAUCE:" style), a packaging change (the
config annotations, outside the kernel build) and cherry-picks of later upstream
commits with stable's provenance line (`commit X upstream.`), under new hashes.
"""

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kbisect.errors import UserError
from kbisect.infra.git import Git

if TYPE_CHECKING:
    from kbisect.infra.lab import _Writer

DISTRO_BRANCH = "distro"
DISTRO_TAG = "lab-distro"
DISTRO_AUTHOR = ("Distro Kernel Team", "kernel-team@example.org")
STABLE_AUTHOR = ("Stable Maintainer", "stable@example.org")
ANNOTATIONS = "debian.master/config/annotations"
# The turn of each kind; picks past the upstream commits there are become SAUCE ones.
TURNS = ("sauce", "config", "pick", "pick", "sauce", "pick")

# (git, tree, parents, message, when, author, signed) -> commit
CommitFn = Callable[[Git, str, list[str], str, int, tuple[str, str], bool], str]


@dataclass(frozen=True)
class DistroCommit:
    hash: str
    kind: str  # sauce, config or pick
    upstream: str = ""  # the upstream commit a pick took

    def to_json(self) -> dict[str, str]:
        return {"hash": self.hash, "kind": self.kind, "upstream": self.upstream}


def write_distro(
    w: "_Writer",
    commit: CommitFn,
    base: tuple[str, str],
    upstream: Sequence[str],
    unbuilt: list[str],
    n: int,
    when: int,
    rng: random.Random,
) -> list[DistroCommit]:
    """N distro commits on `base` (commit, tree); `upstream`: the main line's plain commits
    a pick may take (it takes later ones as it goes, as stable does); `unbuilt`: files
    no other lab commit edits, for the SAUCE changes. The last commit is the distro tip."""
    git = w.git
    parent, tree = base
    env = w.index_at("distro", tree)
    picks = sorted(rng.sample(range(len(upstream)), min(len(upstream), TURNS.count("pick") * n)))
    made: list[DistroCommit] = []
    for i in range(n):
        when += 3600
        kind = TURNS[i % len(TURNS)]
        if kind == "pick" and not picks:
            kind = "sauce"
        if kind == "pick":
            up = upstream[picks.pop(0)]
            git.run("apply", "--cached", "-", env=env, input=git.patch(up))
            subject, _, body = git.run("show", "-s", "--format=%B", up).strip().partition("\n")
            name, mail = git.run("show", "-s", "--format=%an%x00%ae", up).strip().split("\0")
            message = (
                f"{subject}\n\ncommit {up} upstream.\n\n{body.strip()}\n"
                f"Signed-off-by: {STABLE_AUTHOR[0]} <{STABLE_AUTHOR[1]}>"
            )
            tip = commit(git, w.tree(env), [parent], message, when, (name, mail), False)
            made.append(DistroCommit(tip, kind, up))
        else:
            message = _own_change(w, env, kind, i, unbuilt, parent, rng)
            tip = commit(git, w.tree(env), [parent], message, when, DISTRO_AUTHOR, True)
            made.append(DistroCommit(tip, kind))
        parent = tip
    return made


def _own_change(
    w: "_Writer",
    env: dict[str, str],
    kind: str,
    i: int,
    unbuilt: list[str],
    parent: str,
    rng: random.Random,
) -> str:
    """A SAUCE change to a file the kernel build skips, or a config annotation: the
    distro's own commits, which never carry the bug nor the fix."""
    mark = f"{rng.getrandbits(32):08x}"
    if kind == "config":
        old = w.read(parent, ANNOTATIONS) if w.exists(parent, ANNOTATIONS) else "# Menu: HEADER\n"
        w.write(
            env, ANNOTATIONS, old + f"CONFIG_KBISECT_LAB_{mark.upper()} policy<{{'amd64': 'n'}}>\n"
        )
        return "UBUNTU: [Config] update annotations"
    if not unbuilt:
        raise UserError(f"--distro {i + 1} or more: more distro commits than the lab has files for")
    path = unbuilt.pop()
    w.write(
        env,
        path,
        w.read(parent, path)
        + f'\n/* distro change {i} */\nconst char kbisect_distro_{i}[] = "{mark}";\n',
    )
    subsys = "/".join(Path(path).parent.parts[:2])
    return f"UBUNTU: SAUCE: {subsys}: quirk for a distro-supported board ({mark[:4]})"
