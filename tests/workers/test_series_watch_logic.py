"""A series watch's logic on real git and the host's real apt: which kernels are new, in
which order, and what is kept and alerted, once."""

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest

from kbisect.builders import new_kernels
from kbisect.builders.trees import Trees
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.settings import Settings
from kbisect.workers import series_store
from kbisect.workers.series_activities import plan
from kbisect.workflows.series_types import SeriesRecord, SeriesWatch
from kbisect.workflows.sweep_types import PairWord, SweepBoot, SweepPair, SweepResult
from tests.conftest import git


def _commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name + "\n")
    git(repo, "add", name)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"add {name}")
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "master")
    return repo


@pytest.fixture
def settings(tmp_path: Path, cache: Path) -> Settings:
    return Settings.from_env({"KBISECT_CACHE": str(cache), "KBISECT_DATA": str(tmp_path / "d")})


def test_tags_come_in_version_order_rc_first_annotated_ones_as_their_commits(
    upstream: Path,
) -> None:
    commits = {}
    for tag in ("v6.10", "v6.2-rc1", "v6.2", "v6.9", "other"):
        commits[tag] = _commit(upstream, tag)
        if tag == "v6.9":
            git(upstream, "-c", "user.name=t", "-c", "user.email=t@t", "tag", "-a", "-m", "x", tag)
        else:
            git(upstream, "tag", tag)
    found = new_kernels.tags(Git(upstream), "v6.*")
    assert [k.name for k in found] == ["v6.2-rc1", "v6.2", "v6.9", "v6.10"]
    assert [k.key for k in found] == [commits[k.name] for k in found]  # v6.9 peeled
    assert all(k.spec == k.key for k in found)


def test_a_watch_has_one_source_and_safe_globs() -> None:
    for watch, says in [
        (SeriesWatch("w", ["t"]), "give what to watch"),
        (SeriesWatch("w", ["t"], tree="a", apt="linux-image-*"), "give what to watch"),
        (SeriesWatch("w", ["t"], apt="linux-image-*", tags="v*"), "--tags needs --tree"),
        (SeriesWatch("w", ["t"], tree="a", tags="$(x)"), "give a glob"),
        (SeriesWatch("w", ["t"], tree="a", tags="--upload-pack=x"), "give a glob"),
        (SeriesWatch("w", ["t"], apt="firefox*"), "linux-image-* package names"),
    ]:
        with pytest.raises(UserError, match=says.replace("*", r"\*").replace("$", r"\$")):
            new_kernels.check_source(watch)


def test_debian_versions_compare_as_dpkg_has_them() -> None:
    assert new_kernels._compare("6.1.170-3", "6.1.192-2") == -1
    assert new_kernels._compare("6.1.99-1", "6.1.170-3") == -1  # not as strings
    assert new_kernels._compare("1.0~rc1-1", "1.0-1") == -1
    assert new_kernels._compare("6.1.192-2", "6.1.170-3") == 1


@pytest.mark.skipif(shutil.which("apt-cache") is None, reason="apt is Debian's")
def test_apt_kernels_are_the_hosts_packages_in_version_order() -> None:
    found = new_kernels.apt_kernels("linux-image-*-cloud-amd64")
    names = subprocess.run(
        ["apt-cache", "pkgnames", "linux-image-"], capture_output=True, text=True, check=True
    ).stdout.split()
    wanted = {n for n in names if n.endswith("-cloud-amd64") and n[12].isdigit()}
    assert {k.spec for k in found} == wanted  # linux-image-cloud-amd64, the meta, is not one
    versions = [k.key.partition("=")[2] for k in found]
    assert all(new_kernels._compare(a, b) <= 0 for a, b in itertools.pairwise(versions))
    assert all(k.key == f"{k.spec}={v}" for k, v in zip(found, versions, strict=True))


def _result(n: int, changed_at: int) -> SweepResult:
    pairs = [
        SweepPair(
            "t",
            "m",
            "MB/s",
            k - 1,
            k,
            PairWord.CHANGED if k == changed_at else PairWord.SAME,
            "worse" if k == changed_at else "",
            effect=-0.3 if k == changed_at else 0.0,
        )
        for k in range(1, n)
    ]
    boots = [SweepBoot("t", k, 100.0 - k, [100.0 - k]) for k in range(n) for _ in range(3)]
    boots.append(SweepBoot("t", 0, None, error="panic"))  # a failed boot keeps nothing
    return SweepResult("r", [f"c{k}" for k in range(n)], [], [], [], pairs, boots, 12)


def test_first_look_is_a_baseline_then_only_newer_tags_are_swept_and_kept_once(
    upstream: Path, settings: Settings
) -> None:
    c1 = _commit(upstream, "one")
    git(upstream, "tag", "v1")
    Trees(settings).add("lab", f"file://{upstream}")
    watch = SeriesWatch("w", ["t"], tree="lab", tags="v*")

    first = plan(watch, settings)
    assert (first.series, first.message) == ([], "baseline v1: newer kernels are swept against it")
    assert plan(watch, settings).message == "nothing new since v1"

    c2, c3 = _commit(upstream, "two"), _commit(upstream, "three")
    git(upstream, "tag", "v2", c2)
    git(upstream, "tag", "v3", c3)
    swept = plan(watch, settings)  # the tree is fetched by the look itself
    assert [k.name for k in swept.series] == ["v1", "v2", "v3"]
    assert swept.kernels == [c1, c2, c3]
    assert swept.repo == str(Trees(settings).path("lab"))

    kept = series_store.Kept(series_store.path(settings, "w"))
    rec = SeriesRecord("w", "sweep-1", swept.series, _result(3, changed_at=2))
    alerts = kept.record(rec)
    kept.save()
    assert [(a.old, a.new, a.pair.direction) for a in alerts] == [("v2", "v3", "worse")]
    assert alerts[0].key == f"w/{c2}/{c3}/t/m"
    again = series_store.Kept(series_store.path(settings, "w"))
    assert again.record(rec) == alerts  # a retried record: the same alerts, nothing added
    assert again.kept() == {"v1": {"t": 3}, "v2": {"t": 3}, "v3": {"t": 3}}
    assert plan(watch, settings).message == "nothing new since v3"

    c4 = _commit(upstream, "four")
    git(upstream, "tag", "v4", c4)
    later = plan(watch, settings)
    assert [k.name for k in later.series] == ["v3", "v4"]  # the last one, fresh, then the new
    again.record(SeriesRecord("w", "sweep-2", later.series, _result(2, changed_at=0)))
    assert again.kept()["v3"] == {"t": 6}  # its fresh boots join its first ones
    again.save()

    git(upstream, "tag", "-d", "v4")  # the last kernel measured leaves the source
    for name in ("five", "six"):
        git(upstream, "tag", f"w-{name}", _commit(upstream, name))
    moved = plan(SeriesWatch("w", ["t"], tree="lab", tags="w-*"), settings)
    assert [k.name for k in moved.series] == ["v4", "w-six"]  # the newest only


def test_a_watch_of_a_missing_tree_is_one_line(settings: Settings) -> None:
    with pytest.raises(UserError, match="no tree 'nope': add it with"):
        plan(SeriesWatch("w", ["t"], tree="nope"), settings)


def test_a_pair_that_cannot_tell_is_an_alert_of_its_own_kind(settings: Settings) -> None:
    from kbisect.reports.sweep_report import alert_lines
    from kbisect.workflows.series_types import SeriesKernel

    series = [SeriesKernel(f"v{k}", f"tag:v{k}", f"c{k}") for k in range(3)]
    result = _result(3, changed_at=2)
    result.pairs[0].verdict, result.pairs[0].bound = PairWord.CANNOT_TELL, 0.48
    kept = series_store.Kept(series_store.path(settings, "w"))
    alerts = kept.record(SeriesRecord("w", "sweep-1", series, result))
    assert [(a.old, a.new, a.pair.verdict) for a in alerts] == [
        ("v0", "v1", PairWord.CANNOT_TELL),
        ("v1", "v2", PairWord.CHANGED),
    ]
    assert alerts[0].key.endswith("/undecided") and not alerts[1].key.endswith("/undecided")
    head = alert_lines(alerts[0], result)[0]
    assert head.startswith("kbisect could not decide: w: t m: v0 -> v1: cannot tell"), head
    assert alert_lines(alerts[1], result)[0].startswith("kbisect alert: w: t m: v1 -> v2")


@pytest.mark.parametrize(
    ("extra", "boots", "cap"),
    [([], 12, 48), (["--boots", "60"], 60, 60), (["--max-boots", "24"], 12, 24)],
)
def test_a_watch_takes_the_sweeps_cap_as_sweep_does(
    extra: list[str], boots: int, cap: int, settings: Settings
) -> None:
    from kbisect.cli.series import watch_of
    from kbisect.main import build_parser

    argv = ["series", "watch", "w", "--apt", "linux-image-*", "--testcase", "nvme-snapshot-read"]
    watch = watch_of(build_parser().parse_args([*argv, *extra]), settings)
    assert (watch.boots, watch.max_boots) == (boots, cap)
