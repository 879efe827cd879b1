"""The kernels a series watch follows, oldest first: a named tree's tags matching a glob
(in version order, -rc before the release), the tree's branch head, or the Debian
packages the host's apt knows whose names match a glob (in version order).

Each kernel has a key that changes when the kernel does (a full hash, package=version),
so a watch tells a new kernel from one it has measured.
"""

import fnmatch
import functools
import re
import subprocess

from kbisect.builders.prebuilt import PACKAGE_RE
from kbisect.builders.trees import Trees
from kbisect.errors import InfraError, UserError
from kbisect.infra.git import Git
from kbisect.settings import Settings
from kbisect.workflows.series_types import SeriesKernel, SeriesWatch

_GLOB_RE = re.compile(r"^[A-Za-z0-9._*?\[\]/+-]{1,200}$")
APT_TIMEOUT = 120.0


def check_glob(glob: str, what: str) -> str:
    if not _GLOB_RE.match(glob) or glob.startswith("-"):
        raise UserError(f"{what} {glob!r}: give a glob of letters, digits, . _ - + / * ? [ ]")
    return glob


def check_source(watch: SeriesWatch) -> None:
    """One source: a tree (its tags or its head) or an apt glob of linux-image packages."""
    if bool(watch.tree) == bool(watch.apt):
        raise UserError("give what to watch: --tree NAME [--tags GLOB] or --apt GLOB")
    if watch.tags and not watch.tree:
        raise UserError("--tags needs --tree: the tags of which tree?")
    if watch.tags:
        check_glob(watch.tags, "--tags")
    if watch.apt:
        check_glob(watch.apt, "--apt")
        if not watch.apt.startswith("linux-image-"):
            raise UserError(f"--apt {watch.apt!r}: a glob of linux-image-* package names")


def discover(watch: SeriesWatch, settings: Settings) -> tuple[str, list[SeriesKernel]]:
    """The source's repository ("" for apt) and its kernels now, oldest first; a tree is
    fetched first."""
    check_source(watch)
    if watch.apt:
        return "", apt_kernels(watch.apt)
    tree = Trees(settings).fetch(watch.tree)
    git = Git(tree.path)
    return str(tree.path), tags(git, watch.tags) if watch.tags else [head(git)]


def tags(git: Git, glob: str) -> list[SeriesKernel]:
    out = git.run(
        "-c",
        "versionsort.suffix=-rc",
        "for-each-ref",
        "--sort=v:refname",
        "--format=%(refname:short) %(objectname) %(*objectname)",
        "refs/tags/",
    )
    found = []
    for line in out.splitlines():
        name, obj, peeled = [*line.split(" "), ""][:3]
        if fnmatch.fnmatchcase(name, glob):
            commit = peeled or obj  # an annotated tag names its commit through the tag
            found.append(SeriesKernel(name=name, key=commit, spec=commit))
    return found


def head(git: Git) -> SeriesKernel:
    commit = git.resolve("HEAD")
    return SeriesKernel(name=commit[:12], key=commit, spec=commit)


def apt_kernels(glob: str) -> list[SeriesKernel]:
    names = [
        n
        for n in _apt(["apt-cache", "pkgnames", "linux-image-"]).split()
        if fnmatch.fnmatchcase(n, glob) and PACKAGE_RE.match(n)
    ]
    if not names:
        return []
    versions = _versions(_apt(["apt-cache", "show", "--no-all-versions", "--", *sorted(names)]))
    found = [SeriesKernel(f"{n} {v}", f"{n}={v}", n) for n, v in versions.items()]
    order = functools.cmp_to_key(_compare)
    return sorted(found, key=lambda k: order(k.key.partition("=")[2]))


def _versions(show: str) -> dict[str, str]:
    """Package: Version from apt-cache show's stanzas."""
    found, package = {}, ""
    for line in show.splitlines():
        if line.startswith("Package: "):
            package = line.removeprefix("Package: ").strip()
        elif line.startswith("Version: ") and package:
            found[package] = line.removeprefix("Version: ").strip()
    return found


def _compare(a: str, b: str) -> int:
    """Debian's version order, as dpkg has it."""
    if a == b:
        return 0
    lt = subprocess.run(["dpkg", "--compare-versions", a, "lt", b], check=False)
    return -1 if lt.returncode == 0 else 1


def _apt(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=APT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"{argv[0]} {argv[1]} failed: {exc}") from exc
    if proc.returncode != 0:
        raise InfraError(f"{argv[0]} {argv[1]} failed: {proc.stderr.strip()[-300:]}")
    return proc.stdout
