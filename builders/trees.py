"""Named kernel trees: a bare local mirror per name, so a job (and a chat user, who has no
path to give) can say `tree=NAME` instead of `--repo PATH`.

A tree is its mirror, `$KBISECT_CACHE/trees/NAME.git`, and nothing else: its remote URL
and followed branch live in the mirror's own git config, so build and VM hosts that share
the cache see the same trees. Fetches copy only branches and tags (refspecs, never
`--mirror`), so the `refs/kbisect/` refs a job writes there survive the next fetch.
A URL's credentials (`https://user:token@host/...`) are fetched with, never shown: what
is printed or posted has `***` in their place (`redact`).
"""

import fcntl
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kbisect.errors import InfraError, UserError
from kbisect.infra.git import Git, git_argv, git_env
from kbisect.settings import Settings, private_dir, redact

NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
# git's own ext:: and fd:: transports run commands; only these reach a server.
URL_SCHEMES = ("git://", "http://", "https://", "ssh://", "file://")
SCP_LIKE = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^-].*")
BRANCH = re.compile(r"[A-Za-z0-9._/-]{1,200}")
# A web view's URL of a commit, {hash} where its hash goes: no space, quote or angle bracket
WEB = re.compile(r"https?://[^\s\"'<>`{}]+\{hash\}[^\s\"'<>`{}]*")
WEB_MAX = 300
# A URL's userinfo: after "://", up to the last "@" before the path (a raw "@" may be in it).
FETCH_TIMEOUT = 3600.0  # a first fetch of a whole kernel history takes a while
JOB_FETCH_TIMEOUT = 480.0  # a job's fetch is incremental, inside a 10-minute activity
# Transports a fetch may use: no ext::, fd:: or any remote helper a URL could name.
FETCH_PINS = (
    "protocol.allow=never",
    *(f"protocol.{p}.allow=always" for p in ("file", "git", "http", "https", "ssh")),
)


@dataclass(frozen=True)
class Tree:
    name: str
    url: str
    branch: str | None  # None: every branch
    path: Path
    web: str | None = None  # a web view's URL of a commit, {hash} in it (`tree add --web`)

    @property
    def shown_url(self) -> str:
        """The URL as printed or posted: without its credentials."""
        return redact(self.url)

    def to_json(self) -> dict[str, str | None]:
        return {
            "name": self.name,
            "url": self.shown_url,
            "branch": self.branch,
            "path": str(self.path),
            "web": self.web,
        }


def check_web(template: str) -> str:
    """A commit's web view URL, http(s), with {hash} once (UserError otherwise)."""
    if len(template) > WEB_MAX or not WEB.fullmatch(template):
        raise UserError(
            f"invalid --web {template[:80]!r}: give an http(s) URL with {{hash}} where the "
            "commit's hash goes, e.g. 'https://git.kernel.org/linus/{hash}'"
        )
    return template


def commit_url(template: str, commit: str) -> str:
    """The web view of a commit (a full hash) by a tree's template."""
    return template.replace("{hash}", commit)


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise UserError(
            f"invalid tree name {name!r}: use lower-case letters, digits, '.', '_' and '-' "
            "(e.g. linux-6.1)"
        )
    return name


def check_url(url: str) -> str:
    """A URL git fetches from: a server's, a file URL or an absolute path; never an
    option (leading '-') or a transport that runs a command."""
    if url.startswith("/"):
        return url
    if url.startswith(URL_SCHEMES) and len(url) > len("file://") and "\n" not in url:
        return url
    if SCP_LIKE.fullmatch(url):
        return url
    raise UserError(
        f"invalid tree URL {redact(url)!r}: give git://, http(s)://, ssh://, file:// or an "
        "absolute path"
    )


def check_branch(branch: str) -> str:
    if not BRANCH.fullmatch(branch) or branch.startswith("-") or ".." in branch:
        raise UserError(f"invalid branch {branch!r}: give a branch name, e.g. master")
    return branch


class Trees:
    def __init__(self, settings: Settings) -> None:
        self.root = settings.cache / "trees"

    def path(self, name: str) -> Path:
        return self.root / f"{check_name(name)}.git"

    def get(self, name: str) -> Tree:
        path = self.path(name)
        if not (path / "HEAD").exists():
            raise UserError(f"no tree {name!r}: add it with 'kbisect tree add {name} URL'")
        git = Git(path)
        url = git.run("config", "--get", "remote.origin.url", check=False).strip()
        branch = git.run("config", "--get", "kbisect.branch", check=False).strip() or None
        web = git.run("config", "--get", "kbisect.web", check=False).strip()
        return Tree(name, url, branch, path, web if web and WEB.fullmatch(web) else None)

    def of_mirror(self, repo: str) -> Tree | None:
        """The named tree whose mirror a job's repository is (None: a path of its own)."""
        path = Path(repo).resolve()
        if path.parent != self.root.resolve() or not path.name.endswith(".git"):
            return None
        name = path.name.removesuffix(".git")
        return self.get(name) if NAME.fullmatch(name) and (path / "HEAD").exists() else None

    def all(self) -> list[Tree]:
        if not self.root.is_dir():
            return []
        names = sorted(p.name.removesuffix(".git") for p in self.root.glob("*.git"))
        return [self.get(n) for n in names if NAME.fullmatch(n)]

    def check_new(
        self, name: str, url: str, branch: str | None = None, web: str | None = None
    ) -> None:
        """What `add` refuses, before anything is fetched (UserError)."""
        path = self.path(name)
        check_url(url)
        if branch is not None:
            check_branch(branch)
        if web is not None:
            check_web(web)
        if path.exists():
            raise UserError(
                f"tree {name!r} exists ({self.get(name).shown_url}): 'kbisect tree fetch {name}' "
                "updates it"
            )

    def add(self, name: str, url: str, branch: str | None = None, web: str | None = None) -> Tree:
        self.check_new(name, url, branch, web)
        path = self.path(name)
        (private_dir(self.root.parent) / self.root.name).mkdir(exist_ok=True)  # cache 0700
        partial = self.root / f".{name}.adding"
        subprocess.run(["rm", "-rf", "--", str(partial)], check=True)
        git = Git(partial)
        subprocess.run(
            git_argv(self.root, "init", "-q", "--bare", str(partial)),
            env=git_env(),
            check=True,
            capture_output=True,
        )
        heads = f"refs/heads/{branch}" if branch else "refs/heads/*"
        git.run("config", "remote.origin.url", url)
        git.run("config", "remote.origin.fetch", f"+{heads}:{heads}")
        git.run("config", "--add", "remote.origin.fetch", "+refs/tags/*:refs/tags/*")
        git.run("config", "remote.origin.tagOpt", "--no-tags")
        if branch:
            git.run("config", "kbisect.branch", branch)
            git.run("symbolic-ref", "HEAD", f"refs/heads/{branch}")
        if web:
            git.run("config", "kbisect.web", web)
        try:
            _fetch(partial, url)
        except InfraError as exc:  # the URL is the user's: say so, and leave nothing
            subprocess.run(["rm", "-rf", "--", str(partial)], check=True)
            raise UserError(f"{exc}; check the URL (and --branch)") from exc
        partial.rename(path)
        return self.get(name)

    def fetch(self, name: str) -> Tree:
        tree = self.get(name)
        _fetch(tree.path, tree.url)
        return tree

    def remove(self, name: str) -> Tree:
        tree = self.get(name)
        with _locked(tree.path):
            subprocess.run(["rm", "-rf", "--", str(tree.path)], check=True)
        return tree


def fetch_repo(repo: Path, timeout: float = JOB_FETCH_TIMEOUT) -> None:
    """Bring a tree's mirror up to date (a job's repository, before it is validated)."""
    url = Git(repo).run("config", "--get", "remote.origin.url", check=False).strip()
    if not url:
        raise UserError(f"{repo} is not a kbisect tree (no origin): see 'kbisect tree list'")
    _fetch(repo, url, timeout)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One fetch at a time per mirror: two jobs starting together would race on refs."""
    with open(path / "kbisect-fetch.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _fetch(path: Path, url: str, timeout: float = FETCH_TIMEOUT) -> None:
    pins = [part for kv in FETCH_PINS for part in ("-c", kv)]
    argv = git_argv(path, *pins, "fetch", "--quiet", "--prune", "origin")
    with _locked(path):
        try:
            proc = subprocess.run(
                argv,
                env=git_env(),
                capture_output=True,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise InfraError(f"fetching {redact(url)} took over {timeout:.0f} s") from exc
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        why = next((e for e in err if "fatal:" in e), err[-1] if err else "git fetch failed")
        raise InfraError(redact(f"could not fetch {url}: {why.removeprefix('fatal: ')}"))
    if not Git(path).run("for-each-ref", "--count=1", "refs/heads/").strip():
        raise UserError(f"{redact(url)} has no branches to fetch (check the URL and --branch)")
