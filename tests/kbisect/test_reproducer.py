"""`kbisect reproduce ID DIR`: the files a finished bisection gives (hashes, configs, the
guest, a script bash accepts whose QEMU argv is kbisect's own), a sweep's changed pair,
guests' words escaped in the README, and the refusals (a running job, no culprit, a
non-empty folder, a sweep with no or several changed pairs)."""

import asyncio
import dataclasses
import re
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from temporalio.client import WorkflowExecutionStatus

from kbisect.builders import artifact_cache, kconfig
from kbisect.builders.kernel_build import compiler_version
from kbisect.cli import reproduce as cli_reproduce
from kbisect.contract import INVESTIGATION_WORKFLOW, SWEEP_WORKFLOW, WORKFLOW
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.infra.qemu import QemuMachine
from kbisect.jobs.client import JobClient
from kbisect.main import main
from kbisect.model import Artifact, Disk, GuestImage
from kbisect.reports import reproducer
from kbisect.settings import Settings
from kbisect.testcases import manifest as manifests
from kbisect.testcases import runner
from kbisect.workflows.bisect_types import BisectRequest, BisectResult, Step, Verification
from kbisect.workflows.sweep_types import (
    PairWord,
    SweepBoot,
    SweepPair,
    SweepRequest,
    SweepResult,
    SweepTestcase,
)

JOB = "bisect-nvme-snapshot-read-0000000a"
INV = "inv-nvme-snapshot-read-0000000b"


def _repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """A repository of three commits: old, the parent, the culprit (oldest first)."""
    repo = tmp_path / "linux"
    repo.mkdir()
    env = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    hashes = []
    for i, subject in enumerate(("Linux 6.1", "block: tidy", "nvme: set NOMERGES")):
        (repo / "file").write_text(f"{i}\n")
        subprocess.run(["git", "-C", str(repo), "add", "file"], check=True)
        subprocess.run(["git", "-C", str(repo), *env, "commit", "-q", "-m", subject], check=True)
        hashes.append(Git(repo).resolve("HEAD"))
    return repo, hashes


def _result(repo: Path, hashes: list[str], testcase: str = "nvme-snapshot-read") -> BisectResult:
    old, parent, culprit = hashes
    metric = "avg_read_sectors" if testcase == "nvme-snapshot-read" else ""
    return BisectResult(
        status="found",
        mode="regression",
        testcase=testcase,
        repo=str(repo),
        old=[old],
        new=culprit,
        culprit=culprit,
        candidates=[culprit],
        steps=[
            Step(old, "Linux 6.1", "good", "endpoint", value=512.0, boots=2, scores=[512, 512]),
            Step(parent, "block: tidy", "good", "test", value=512.0, boots=2, scores=[512, 511]),
            Step(
                culprit,
                "nvme: set NOMERGES",
                "bad",
                "endpoint",
                value=8.0,
                boots=3,
                scores=[8, 8.5, 8],
                build_seconds=90.0,
                test_seconds=60.0,
            ),
        ],
        message="first bad commit",
        subjects={culprit: "nvme: set NOMERGES", parent: "block: tidy"},
        metric=metric,
        unit="sectors",
        verification=Verification("revert", culprit, culprit, "confirmed", "it behaves", boots=2),
        profile="fast",
        repetitions=3,
        effect="-98.4% (95% CI -98.6% to -98.2%)",
        boots=9,
    )


def _ended(tmp_path: Path) -> BisectResult:
    return _result(*_repo(tmp_path))


def _found(tmp_path: Path, testcase: str = "nvme-snapshot-read") -> reproducer.Found:
    repo, hashes = _repo(tmp_path)
    result = _result(repo, hashes, testcase)
    parent = reproducer.parent_of(str(repo), hashes[2])
    return reproducer.of_bisection(result, JOB, parent, {}, manifests.load(testcase))


def _write(found: reproducer.Found, folder: Path) -> dict[str, tuple[bytes, int]]:
    files = reproducer.files(found, Settings.from_env())
    cli_reproduce.write(folder, files)
    return files


def _bash(script: Path, commands: str, cwd: Path) -> str:
    """Commands run in bash after sourcing the script (its main does not run)."""
    done = subprocess.run(
        ["bash", "-c", f"source {script} && {commands}"],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=True,
    )
    return done.stdout


# --- the files -----------------------------------------------------------------------------
def test_the_files_hold_both_hashes_the_fragments_the_guest_and_a_script_bash_takes(
    tmp_path: Path,
) -> None:
    found = _found(tmp_path)
    out = tmp_path / "out"
    files = _write(found, out)
    culprit, parent = found.new.commit, found.old.commit
    assert parent != culprit and len(parent) == 40 and found.adjacent
    commits = (out / "commits").read_text()
    assert commits == f"culprit {culprit}\nparent {parent}\n"
    sh = (out / "reproduce.sh").read_text()
    assert f"NEW={culprit}  # the culprit\n" in sh and f"OLD={parent}  # the parent\n" in sh
    assert "ADJACENT=1 " in sh and "build_kernel parent " in sh
    assert (out / "reproduce.sh").stat().st_mode & 0o111
    subprocess.run(["bash", "-n", str(out / "reproduce.sh")], check=True)
    # the fragments kbisect merges over tinyconfig, in its order, the testcase's last
    manifest = manifests.load("nvme-snapshot-read")
    fragments = kconfig.fragments_for(runner.build_spec(manifest))
    got = [(out / f"config/fragment-{i}.config").read_text() for i in range(len(fragments))]
    assert got == fragments and manifest.config_fragment in got[-1]
    assert f"FRAGMENTS={len(fragments)}\n" in sh
    assert not (out / "config/culprit.config").exists()  # this cache never built it
    # the guest as kbisect's image has it: its init, the script, the boot's parameters
    assert (out / "guest/init").read_bytes() == (
        Path(runner.__file__).parents[1] / "infra/guest_init.sh"
    ).read_bytes()
    assert (out / "guest/kbisect/testcase.sh").read_bytes() == manifest.script
    params = (out / "guest/kbisect/params.sh").read_text()
    assert "export KB_REPETITIONS='3'\n" in params  # an exact metric: no warm-up
    assert "export KB_NDISKS='2'\n" in params and "export READ_MIB='256'\n" in params
    assert (out / "testcase/manifest.toml").read_bytes() == (
        manifest.folder / "manifest.toml"
    ).read_bytes()
    assert set(files) == {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}


def test_the_jobs_own_config_is_shipped_where_this_hosts_cache_built_it(tmp_path: Path) -> None:
    found = _found(tmp_path)
    manifest = manifests.load("nvme-snapshot-read")
    key = kconfig.config_hash(runner.build_spec(manifest), compiler_version())
    git = Git(Path(found.repo))
    for name, commit in (("culprit", found.new.commit), ("parent", found.old.commit)):
        entry = artifact_cache.entry_dir(git.tree_of(commit), key)
        entry.mkdir(parents=True)
        (entry / "config").write_text(f"CONFIG_KBISECT_TEST_{name.upper()}=y\n")
    commits = {"culprit": found.new.commit, "parent": found.old.commit}
    configs = reproducer.job_configs(found.repo, commits, manifest)
    assert configs == {"culprit": "CONFIG_KBISECT_TEST_CULPRIT=y\n",
                       "parent": "CONFIG_KBISECT_TEST_PARENT=y\n"}  # fmt: skip
    out = tmp_path / "out"
    _write(dataclasses.replace(found, configs=configs), out)
    assert (out / "config/culprit.config").read_text() == configs["culprit"]
    assert (out / "config/parent.config").read_text() == configs["parent"]
    assert "config/culprit.config" in (out / "README.md").read_text()


@pytest.mark.parametrize("testcase", ["nvme-snapshot-read", "sched-pipe"])
@pytest.mark.parametrize("accel", ["kvm", "tcg", "kvm-probe"])
def test_the_scripts_qemu_argv_is_kbisects_own_for_that_boot(
    tmp_path: Path, testcase: str, accel: str
) -> None:
    """bash's reading of the script's argv, given a boot's paths, is the argv kbisect's
    QemuMachine builds for that boot (its disks, its profile, the host's root over 9p)."""
    found = _found(tmp_path, testcase)
    out = tmp_path / "out"
    _write(found, out)
    kernel, initrd, run = "/w/culprit/bzImage", "/w/initramfs.cpio", "/w/runs/culprit-1"
    printed = _bash(
        out / "reproduce.sh",
        f"qemu_argv {accel} {kernel} {initrd} {run} && printf '%s\\0' \"${{QEMU_ARGV[@]}}\"",
        tmp_path,
    )
    manifest = manifests.load(testcase)
    prof = runner.profile(found.profile)
    disks = [Disk(d.name, d.size_mib, prof) for d in manifest.disks]
    guest = GuestImage(initrd, tuple(manifest.tools), manifest.userland == "host")
    art = Artifact(found.new.commit, "", "", kernel, "", "")
    if accel == "kvm-probe":  # kbisect's probe boot: KVM, no disks, the probe's word
        want = QemuMachine().boot_argv(Path(run), "kvm", art, guest, [], "kbisect.probe=1")
    else:
        want = QemuMachine().boot_argv(Path(run), accel, art, guest, disks)
    assert printed.split("\0")[:-1] == want
    assert ("path=/," in printed) == (manifest.userland == "host")  # 9p for host userland


def test_a_boots_figure_is_the_median_of_its_scored_repetitions(tmp_path: Path) -> None:
    found = _found(tmp_path, "sched-pipe")  # a timing: its first repetition warms up
    out = tmp_path / "out"
    _write(found, out)
    assert "WARMUP=1 " in (out / "reproduce.sh").read_text()
    run = tmp_path / "run"
    run.mkdir()
    metric = manifests.load("sched-pipe").primary
    lines = [f'KBISECT {{"event":"metric","rep":{rep},"name":"{metric}","value":{v}}}'
             for rep, v in ((1, 100.0), (2, 5.0), (3, 7.5), (4, 6.0))]  # fmt: skip
    lines.append('KBISECT {"event":"metric","rep":2,"name":"other","value":99}')
    (run / "results.log").write_text("\n".join(lines) + "\n")
    assert _bash(out / "reproduce.sh", f"figure {run}", tmp_path) == "-\n"  # it never ended
    done = 'KBISECT {"event":"done","status":0}'
    (run / "results.log").write_text("\n".join([*lines, done]) + "\n")
    assert _bash(out / "reproduce.sh", f"figure {run}", tmp_path) == "6\n"
    (run / "results.log").write_text("\n".join([*lines[:3], done]) + "\n")  # 5 and 7.5
    assert _bash(out / "reproduce.sh", f"figure {run}", tmp_path) == "6.25\n"
    (run / "results.log").write_text("\n".join([*lines, done.replace("0", "1")]) + "\n")
    assert _bash(out / "reproduce.sh", f"figure {run}", tmp_path) == "-\n"  # the script failed
    (run / "results.log").write_text("")
    assert _bash(out / "reproduce.sh", f"figure {run}", tmp_path) == "-\n"
    assert _bash(out / "reproduce.sh", "mean 4 - 6", tmp_path) == "5\n"


def test_guests_and_repositories_words_are_one_escaped_line_in_the_readme(tmp_path: Path) -> None:
    repo, hashes = _repo(tmp_path)
    result = _result(repo, hashes, "nvme-snapshot-read")
    evil = "x\n# Injected heading\n![img](http://evil.example/p.png) <script>alert(1)</script>"
    result = dataclasses.replace(
        result,
        subjects={result.culprit: evil},
        effect="-98%\n## also <img src=x> nan",
        steps=[dataclasses.replace(s, scores=[float("inf"), 3.0]) for s in result.steps],
    )
    manifest = manifests.load("nvme-snapshot-read")
    found = reproducer.of_bisection(result, JOB, reproducer.parent_of(str(repo), hashes[2]), {},
                                    manifest)  # fmt: skip
    readme = reproducer.readme(
        found, manifest, reproducer.plan(found, manifest, Settings.from_env()), 3
    )
    headings = [ln for ln in readme.splitlines() if ln.startswith("#")]
    assert all(h.startswith(("# Reproducing", "## ")) for h in headings)
    assert "Injected" not in "".join(headings) and "also" not in "".join(headings)
    # markup shown as text: each < and [ backslashed (CommonMark shows the character)
    assert not re.search(r"(?<!\\)<(script|img)", readme) and "![" not in readme
    assert "\\<script>alert(1)\\</script>" in readme and "!\\[img\\]" in readme
    assert "inf" not in readme.split("## The job's figures")[1].split("## With")[0].lower()


def test_a_metric_the_testcase_does_not_have_is_refused(tmp_path: Path) -> None:
    found = _found(tmp_path)
    bad = dataclasses.replace(found, metric="x;rm -rf")
    with pytest.raises(UserError, match="not a metric of the testcase"):
        reproducer.files(bad, Settings.from_env())


def test_a_testcase_with_a_host_peer_is_refused_in_one_line(tmp_path: Path) -> None:
    found = _found(tmp_path)
    networked = dataclasses.replace(found, manifest=manifests.load("iperf3"), metric="mbps")
    with pytest.raises(UserError, match="runs iperf3 on the host") as info:
        reproducer.files(networked, Settings.from_env())
    assert "\n" not in str(info.value)


# --- the command ---------------------------------------------------------------------------
class _Jobs:
    """The calls `reproduce` makes, of an investigation whose bisection ended."""

    def __init__(self, result: BisectResult, kind: str = INVESTIGATION_WORKFLOW) -> None:
        self.bisection, self.r, self.kind, self.config = f"{INV}-bisect", result, kind, ""

    async def describe(self, job_id: str) -> SimpleNamespace:
        return SimpleNamespace(workflow_type=WORKFLOW if job_id == self.bisection else self.kind)

    async def bisection_of(self, job_id: str) -> str:
        return self.bisection

    async def result(self, job_id: str) -> BisectResult:
        assert job_id == self.bisection
        return self.r

    async def bisection_request(self, job_id: str) -> BisectRequest:
        r = self.r
        return BisectRequest(r.repo, r.old, r.new, r.testcase, config=self.config)


def _serve(monkeypatch: pytest.MonkeyPatch, jobs: object) -> None:
    def with_client(
        settings: object, args: object, go: Callable[[object, object], Awaitable[int]]
    ) -> int:
        return asyncio.run(go(jobs, args))

    monkeypatch.setattr(cli_reproduce, "with_client", with_client)


def test_an_investigations_id_writes_its_bisections_files_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _ended(tmp_path)
    _serve(monkeypatch, _Jobs(result))
    out = tmp_path / "out"
    assert main(["reproduce", INV, str(out)]) == 0
    said = capsys.readouterr()
    assert said.out.strip() == (
        f"wrote {len(list(p for p in out.rglob('*') if p.is_file()))} files to {out}: "
        f"run {out / 'reproduce.sh'} LINUX (see {out / 'README.md'})"
    )
    assert f"{INV}-bisect" in (out / "README.md").read_text()
    parent = Git(Path(result.repo)).resolve(f"{result.culprit}^")
    assert f"OLD={parent}  # the parent" in (out / "reproduce.sh").read_text()


@pytest.mark.parametrize(
    ("change", "kind", "says"),
    [
        (
            {"culprit": None, "status": "ambiguous"},
            INVESTIGATION_WORKFLOW,
            "did not name one commit",
        ),
        ({}, "ExplainWorkflow", f"{INV} is an explain job, not a bisection or an investigation"),
        ({"config": "/cache/configs/x.config"}, INVESTIGATION_WORKFLOW, "not yet: .* --config"),
    ],
)
def test_a_job_with_nothing_to_reproduce_is_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, object],
    kind: str,
    says: str,
) -> None:
    config = str(change.pop("config", ""))
    jobs = _Jobs(dataclasses.replace(_ended(tmp_path), **change), kind)  # type: ignore[arg-type]
    jobs.config = config
    _serve(monkeypatch, jobs)
    out = tmp_path / "out"
    assert main(["reproduce", INV, str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert re.search(says, err), err
    assert not out.exists()


class _Handle:
    async def describe(self) -> SimpleNamespace:
        return SimpleNamespace(workflow_type=WORKFLOW, status=WorkflowExecutionStatus.RUNNING)


def test_a_running_job_is_refused_with_where_to_follow_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real client's refusal, its server a stand-in whose job still runs."""
    temporal = SimpleNamespace(get_workflow_handle=lambda *_, **__: _Handle())
    client = JobClient(Settings.from_env(), temporal)  # type: ignore[arg-type]
    _serve(monkeypatch, client)
    out = tmp_path / "out"
    assert main(["reproduce", JOB, str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"kbisect: error: job {JOB} is still running: follow it with 'kbisect watch {JOB}'"
    )
    assert not out.exists()


def test_a_folder_that_is_not_empty_is_refused_before_any_service_unless_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine").write_text("keep me\n")

    def boom(*_: object) -> int:
        raise AssertionError("a service was asked before the folder was checked")

    monkeypatch.setattr(cli_reproduce, "with_client", boom)
    assert main(["reproduce", JOB, str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"kbisect: error: {out} is not empty: give a new or empty folder, or --force to write there"
    )
    _serve(monkeypatch, _Jobs(_ended(tmp_path)))
    assert main(["reproduce", JOB, str(out), "--force"]) == 0
    assert (out / "reproduce.sh").is_file() and (out / "mine").read_text() == "keep me\n"


def test_every_option_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    text = capsys.readouterr().out
    assert "--force" in text and "write into DIR though it is not empty" in text
    assert "the folder to write, new or empty" in text


def _newc(data: bytes) -> dict[str, tuple[int, bytes]]:
    """A newc cpio's entries: path -> (mode, contents or a link's target)."""
    entries, at = {}, 0
    while True:
        head = data[at : at + 110]
        assert head[:6] == b"070701", head[:6]
        mode, size, name_size = (int(head[6 + 8 * i : 14 + 8 * i], 16) for i in (1, 6, 11))
        name = data[at + 110 : at + 110 + name_size - 1].decode()
        at += 110 + name_size
        at += -at % 4
        body = data[at : at + size]
        at += size + (-(at + size) % 4)
        if name == "TRAILER!!!":
            return entries
        entries[name] = (mode, body)


@pytest.mark.skipif(not Path("/bin/busybox").is_file(), reason="busybox-static is not here")
def test_the_scripts_initramfs_holds_what_kbisects_image_holds(tmp_path: Path) -> None:
    """Every path of the image, with its mode and bytes: busybox and its applets, the
    testcase's tool and its libraries, init, the script and its parameters."""
    from kbisect.infra.initramfs import build_image

    found = _found(tmp_path)
    out = tmp_path / "out"
    _write(found, out)
    manifest = manifests.load("nvme-snapshot-read")
    work = tmp_path / "work"
    work.mkdir()
    _bash(out / "reproduce.sh", f"WORK={work} make_initramfs {work}/image.cpio", tmp_path)
    theirs = _newc((work / "image.cpio").read_bytes())
    reps = found.repetitions
    ours = build_image(manifest.tools, manifest.script, runner.guest_params(manifest, reps))
    want = _newc(Path(ours.initramfs).read_bytes())
    assert "usr/sbin/dmsetup" in want and "bin/sh" in want and "kbisect/params.sh" in want
    assert sorted(theirs) == sorted(want)
    assert {p: e for p, e in theirs.items() if e != want[p]} == {}


# --- a sweep's changed pair ----------------------------------------------------------------
SWEEP = "sweep-nvme-snapshot-read-0000000c"


def _swept(repo: Path, hashes: list[str], changed: tuple[int, ...] = (2,)) -> SweepResult:
    """A sweep of the three commits on the seed's testcase; the pairs ending at `changed`
    (indices) changed."""
    tc = SweepTestcase("nvme-snapshot-read", "avg_read_sectors", "sectors", "higher", "fast", 3,
                       60.0, exact=True)  # fmt: skip

    def pair(i: int) -> SweepPair:
        word, direction = (PairWord.CHANGED, "worse") if i in changed else (PairWord.SAME, "")
        return SweepPair(tc.name, tc.metric, tc.unit, i - 1, i, word, direction, -0.984,
                         -0.986, -0.982, boots_old=2, boots_new=2)  # fmt: skip

    pairs = [pair(1), pair(2)]
    values = {0: 512.0, 1: 512.0, 2: 8.0}
    boots = [SweepBoot(tc.name, k, values[k], [values[k]] * 3) for k in (0, 1, 2) for _ in (1, 2)]
    names = ["v6.1", "block-tidy", "nvme-nomerges"]
    return SweepResult(str(repo), hashes, names, ["Linux 6.1", "block: tidy", "nvme: NOMERGES"],
                       [tc], pairs, boots, 2)  # fmt: skip


class _SweepJobs:
    def __init__(self, result: SweepResult) -> None:
        self.r = result

    async def describe(self, job_id: str) -> SimpleNamespace:
        return SimpleNamespace(workflow_type=SWEEP_WORKFLOW)

    async def sweep_result(self, job_id: str) -> SweepResult:
        return self.r

    async def sweep_request(self, job_id: str) -> SweepRequest:
        return SweepRequest(self.r.repo, self.r.kernels, ["nvme-snapshot-read"])


def test_a_sweeps_changed_pair_is_its_new_kernel_against_its_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, hashes = _repo(tmp_path)
    _serve(monkeypatch, _SweepJobs(_swept(repo, hashes)))
    out = tmp_path / "out"
    assert main(["reproduce", SWEEP, str(out)]) == 0, capsys.readouterr().err
    assert (out / "commits").read_text() == f"new {hashes[2]}\nold {hashes[1]}\n"
    sh = (out / "reproduce.sh").read_text()
    assert f"NEW={hashes[2]}  # the new\n" in sh and f"OLD={hashes[1]}  # the old\n" in sh
    assert "ADJACENT=1 " in sh and "build_kernel old " in sh  # block-tidy is its parent
    subprocess.run(["bash", "-n", str(out / "reproduce.sh")], check=True)
    readme = (out / "README.md").read_text()
    assert f"found kernel 3 `{hashes[2]}` worse than kernel 2 `{hashes[1]}`" in readme
    assert "| old (kernel 2: block-tidy) | " in readme and "| 512 | 2 | 512, 512 |" in readme
    assert "| new (kernel 3: nvme-nomerges) | " in readme and "| 8 | 2 | 8, 8 |" in readme
    assert "-98.4% (95% CI -98.6% to -98.2%)" in readme
    assert f"kbisect bisect --repo LINUX --good {hashes[1]} --bad {hashes[2]}" in readme
    # the sweep again: its revisions as the command takes them (--kernels is prebuilt files)
    sweep = next(ln for ln in readme.splitlines() if ln.strip().startswith("kbisect sweep "))
    assert f"--repo LINUX {hashes[1]} {hashes[2]} --testcase nvme-snapshot-read" in sweep, sweep
    assert "--kernels" not in sweep and "--repetitions" not in sweep  # sweep takes neither


def test_a_pair_that_is_not_a_commit_and_its_parent_is_built_without_that_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, hashes = _repo(tmp_path)
    swept = _swept(repo, [hashes[0], hashes[2]], changed=(1,))  # Linux 6.1, then the culprit
    swept.pairs, swept.names = swept.pairs[:1], swept.names[:2]
    swept.boots = [b for b in swept.boots if b.kernel < 2]
    _serve(monkeypatch, _SweepJobs(swept))
    out = tmp_path / "out"
    assert main(["reproduce", SWEEP, str(out)]) == 0
    sh = (out / "reproduce.sh").read_text()
    assert "ADJACENT=0 " in sh and f"OLD={hashes[0]}  # the old" in sh
    readme = (out / "README.md").read_text()
    assert f"The old kernel is `{hashes[0]}`." in readme and "Its parent is" not in readme


@pytest.mark.parametrize(
    ("changed", "argv", "says"),
    [
        ((), [], "changed no pair: there is nothing to reproduce"),
        ((1, 2), [], "changed more than one pair: give --pair N, N one of 2, 3"),
        ((1, 2), ["--pair", "4"], "changed no pair ending at kernel 4"),
    ],
)
def test_a_sweep_without_one_changed_pair_is_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    changed: tuple[int, ...],
    argv: list[str],
    says: str,
) -> None:
    repo, hashes = _repo(tmp_path)
    _serve(monkeypatch, _SweepJobs(_swept(repo, hashes, changed)))
    out = tmp_path / "out"
    assert main(["reproduce", SWEEP, str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and says in err, err
    assert not out.exists()
    # a pair named among several: that one
    if len(changed) == 2:
        assert main(["reproduce", SWEEP, str(out), "--pair", "2"]) == 0
        assert (out / "commits").read_text() == f"new {hashes[1]}\nold {hashes[0]}\n"
