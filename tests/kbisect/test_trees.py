"""Named trees against real git servers: a file URL and `git daemon` on 127.0.0.1."""

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.nginx import free_port
from kbisect.builders.trees import Trees
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.jobs.request import JobOptions, checked_request
from kbisect.settings import Settings
from kbisect.workers.validation import validate
from kbisect.workflows.bisect_types import BisectRequest
from tests.conftest import git


def _commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name + "\n")
    git(repo, "add", name)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"add {name}")
    return rev(repo, "HEAD")


def rev(repo: Path, name: str) -> str:
    return git(repo, "rev-parse", name).strip()


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "master")
    for name in ("a", "b", "c"):
        _commit(repo, name)
    git(repo, "tag", "v1", "HEAD~2")
    git(repo, "branch", "stable", "HEAD~1")
    return repo


@pytest.fixture
def settings(tmp_path: Path, cache: Path) -> Settings:
    return Settings.from_env({"KBISECT_CACHE": str(cache), "KBISECT_DATA": str(tmp_path / "d")})


def test_file_url_mirror_has_branches_and_tags(upstream: Path, settings: Settings) -> None:
    tree = Trees(settings).add("lab", f"file://{upstream}")
    mirror = Git(tree.path)
    assert mirror.resolve("v1") == rev(upstream, "v1")
    assert mirror.resolve("stable") == rev(upstream, "stable")
    assert mirror.resolve("master") == rev(upstream, "master")
    assert [t.name for t in Trees(settings).all()] == ["lab"]
    with pytest.raises(UserError, match="exists"):
        Trees(settings).add("lab", f"file://{upstream}")


def test_fetch_brings_new_commits_keeps_our_refs(upstream: Path, settings: Settings) -> None:
    trees = Trees(settings)
    tree = trees.add("lab", str(upstream))
    mirror = Git(tree.path)
    kept = mirror.resolve("master~1")
    mirror.run("update-ref", "refs/kbisect/verify/x", kept)
    new = _commit(upstream, "d")
    with pytest.raises(UserError):
        mirror.resolve(new)
    trees.fetch("lab")
    assert mirror.resolve("master") == new
    assert mirror.resolve("refs/kbisect/verify/x") == kept


def test_a_tree_s_web_view_links_each_commit_and_is_off_by_default(
    upstream: Path, settings: Settings
) -> None:
    from kbisect.builders.trees import commit_url
    from kbisect.doors.web.pages import commit_cell

    trees = Trees(settings)
    plain = trees.add("plain", str(upstream))
    web = "https://git.example.org/linux/commit/?id={hash}"
    lab = trees.add("lab", str(upstream), web=web)
    assert plain.web is None and lab.web == web and trees.get("lab").to_json()["web"] == web
    assert trees.of_mirror(str(lab.path)) == lab and trees.of_mirror(str(upstream)) is None
    head = rev(upstream, "master")
    assert commit_url(web, head) == f"https://git.example.org/linux/commit/?id={head}"
    cell = commit_cell(head, web)
    assert (
        cell
        == f"<a href='https://git.example.org/linux/commit/?id={head}'><code>{head[:12]}</code></a>"
    )
    assert commit_cell(head, "") == f"<code>{head[:12]}</code>"


def test_branch_follows_only_that_branch(upstream: Path, settings: Settings) -> None:
    tree = Trees(settings).add("stable", f"file://{upstream}", branch="stable")
    mirror = Git(tree.path)
    assert mirror.resolve("stable") == rev(upstream, "stable")
    assert tree.branch == "stable"
    with pytest.raises(UserError):
        mirror.resolve("master")


@pytest.mark.parametrize(
    ("name", "url", "branch", "error"),
    [
        ("Lab", "/x", None, "invalid tree name"),
        ("../x", "/x", None, "invalid tree name"),
        ("lab", "ext::sh -c touch% /tmp/pwned", None, "invalid tree URL"),
        ("lab", "-uhelp", None, "invalid tree URL"),
        ("lab", "fd::3", None, "invalid tree URL"),
        ("lab", "relative/path", None, "invalid tree URL"),
        ("lab", "/nonexistent/repo", None, "could not fetch"),
        ("lab", "UPSTREAM", "--upload-pack=x", "invalid branch"),
        ("lab", "UPSTREAM", "nosuchbranch", "could not fetch"),
    ],
)
def test_bad_input_is_one_line_and_leaves_nothing(
    upstream: Path, settings: Settings, name: str, url: str, branch: str | None, error: str
) -> None:
    with pytest.raises(UserError, match=error) as exc:
        Trees(settings).add(name, url.replace("UPSTREAM", str(upstream)), branch)
    assert "\n" not in str(exc.value)
    assert Trees(settings).all() == []
    assert list((settings.cache / "trees").glob(".*")) == []  # no half-made mirror


def test_missing_tree_says_how_to_add_it(settings: Settings) -> None:
    with pytest.raises(UserError, match="kbisect tree add nope URL"):
        Trees(settings).get("nope")


@pytest.fixture
def daemon(upstream: Path, server: None) -> Iterator[str]:
    """A real git server on 127.0.0.1 serving the upstream repository."""
    port = free_port()
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            f"--base-path={upstream.parent}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(upstream.parent),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"git://127.0.0.1:{port}/{upstream.name}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_git_daemon_tree_feeds_a_job_request_and_validation(
    daemon: str, upstream: Path, settings: Settings
) -> None:
    """`--tree` resolves revisions in the mirror, and the job's validation fetches again,
    so a commit pushed after the request was made is in the job's range."""
    Trees(settings).add("lab", daemon)
    opts = JobOptions(good=["v1"], bad="master", testcase="nvme-snapshot-read", tree="lab")
    req = checked_request(opts, settings)
    assert req.tree == "lab" and Path(req.repo) == Trees(settings).path("lab")
    assert req.good == [rev(upstream, "v1")]
    pushed = _commit(upstream, "e")
    job = validate(
        BisectRequest(repo=req.repo, good=req.good, bad="master", testcase=req.testcase, tree="lab")
    )
    assert job.new == pushed
    assert len(job.order) == 3  # b, c and the pushed e


def test_request_needs_exactly_one_of_repo_and_tree(upstream: Path, settings: Settings) -> None:
    both = JobOptions(good=["v1"], bad="master", testcase="x", repo=str(upstream), tree="lab")
    with pytest.raises(UserError, match="one of them"):
        checked_request(both, settings)
    unknown = JobOptions(good=["v1"], bad="master", testcase="x", tree="nope")
    with pytest.raises(UserError, match="no tree 'nope'"):
        checked_request(unknown, settings)


def test_a_urls_credentials_are_never_printed(
    upstream: Path,
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`https://user:token@host/...`: the mirror fetches with it, nothing shows it."""
    from kbisect.main import main

    url = f"http://kb:glpat-SECRET123@127.0.0.1:{free_port()}/linux.git"  # nothing listens
    tree = Trees(settings).add("lab", str(upstream))
    Git(tree.path).run("config", "remote.origin.url", url)
    assert Trees(settings).get("lab").url == url  # what git fetches with
    assert main(["tree", "list"]) == 0
    assert main(["tree", "list", "--json"]) == 0
    assert main(["tree", "fetch", "lab"]) == 6
    assert main(["tree", "add", "other", url]) == 2
    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert "SECRET123" not in text and "kb:" not in text, text
    assert text.count("http://***@127.0.0.1:") == 5, text  # list, json, fetch, add (2)


@pytest.mark.parametrize(
    "args",
    [
        ["Lab", "/x"],
        ["lab", "ext::sh -c id"],
        ["lab", "relative/path"],
        ["lab", "/x", "--branch=--upload-pack=x"],
        ["lab", "/x", "--web", "https://x/commit/"],  # no {hash}
        ["lab", "/x", "--web", "javascript:alert(1)//{hash}"],
        ["lab", "/x", "--web", "https://x/'><script>/{hash}"],
    ],
)
def test_tree_add_refuses_bad_input_before_it_says_fetching(
    settings: Settings, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from kbisect.main import main

    assert main(["tree", "add", *args]) == 2
    err = capsys.readouterr().err
    assert "fetching" not in err and err.count("\n") == 1, err
