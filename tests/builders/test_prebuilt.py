"""Prebuilt kernels: .deb files (made here with dpkg-deb), kernel image files, package
names; and kernel lists, the git histories `bisect --kernels` runs over."""

import dataclasses
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from kbisect.builders import kernel_list, prebuilt
from kbisect.contract import Mode
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.jobs.kernel_phase import plan
from kbisect.jobs.request import JobOptions
from kbisect.model import Artifact, BuildSpec
from kbisect.settings import Settings
from kbisect.workflows.bisect_types import BisectResult, JobStatus


def make_deb(
    tmp_path: Path,
    release: str,
    version: str = "6.1.170-3",
    change: Callable[[Path], None] = lambda _root: None,
) -> Path:
    """A linux-image-shaped package: boot/vmlinuz-R, boot/config-R, lib/modules/R;
    `change` alters the package's folder before it is built."""
    root = tmp_path / f"pkg-{release}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: linux-image-{release}\nVersion: {version}\nArchitecture: amd64\n"
        "Maintainer: t <t@example.com>\nDescription: test kernel\n"
    )
    (root / "boot").mkdir()
    (root / "boot" / f"vmlinuz-{release}").write_bytes(f"kernel {release}".encode())
    (root / "boot" / f"config-{release}").write_text("CONFIG_BLK_DEV_NVME=y\n")
    md = root / "lib" / "modules" / release / "kernel" / "drivers" / "md"
    md.mkdir(parents=True)
    (md / "dm-mod.ko").write_bytes(b"\x7fELF")
    change(root)
    deb = tmp_path / f"linux-image-{release}_{version}_amd64.deb"
    subprocess.run(
        ["dpkg-deb", "-b", "-Zgzip", str(root), str(deb)], check=True, capture_output=True
    )
    return deb


def test_a_deb_is_unpacked_once_into_an_artifact(cache: Path, tmp_path: Path) -> None:
    s = Settings.from_env()
    deb = make_deb(tmp_path, "6.1.0-47-cloud-amd64")
    first = prebuilt.resolve(str(deb), s)
    assert first.name == "linux-image-6.1.0-47-cloud-amd64" and first.version == "6.1.170-3"
    art = first.artifact
    assert Path(art.kernel).read_bytes() == b"kernel 6.1.0-47-cloud-amd64"
    assert art.modules.endswith("lib/modules/6.1.0-47-cloud-amd64")
    assert Path(art.config).read_text() == "CONFIG_BLK_DEV_NVME=y\n"
    assert art.image_sha256 and art.prebuilt
    assert not art.cached
    again = prebuilt.resolve(str(deb), s)
    assert again.artifact.cached and again.artifact.kernel == art.kernel


def test_a_kernel_image_finds_its_modules_by_release(tmp_path: Path) -> None:
    image = tmp_path / "vmlinuz-6.1.0-x"
    image.write_bytes(b"k")
    mods = tmp_path / "mods"
    mods.mkdir()
    got = prebuilt.resolve(str(image), Settings.from_env(), modules=mods)
    assert got.artifact.modules == str(mods) and got.version == "6.1.0-x"
    bz = tmp_path / "bzImage"
    bz.write_bytes(b"k2")
    plain = prebuilt.resolve(str(bz), Settings.from_env())
    assert plain.artifact.modules == "" and plain.version == "local"  # all built in
    with pytest.raises(UserError, match="not a folder"):
        prebuilt.resolve(str(bz), Settings.from_env(), modules=tmp_path / "none")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("linux-headers-6.1", "not a file and not a Debian package name"),
        ("-o=evil", "not a file and not a Debian package name"),
        ("linux-image-6.1; reboot", "not a file and not a Debian package name"),
        ("/nonexistent/k.deb", "no such file"),
    ],
)
def test_what_is_not_a_kernel_is_one_line(spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        prebuilt.resolve(spec, Settings.from_env())


def test_a_package_apt_does_not_know_says_how_to_list_them(cache: Path) -> None:
    with pytest.raises(UserError, match="apt-cache search linux-image"):
        prebuilt.resolve("linux-image-0.0.0-kbisect-none", Settings.from_env())


def test_a_deb_that_is_no_kernel_is_refused(cache: Path, tmp_path: Path) -> None:
    not_deb = tmp_path / "x.deb"
    not_deb.write_bytes(b"junk")
    with pytest.raises(UserError, match="not a Debian package"):
        prebuilt.resolve(str(not_deb), Settings.from_env())


def _host_file(tmp_path: Path) -> Path:
    """A file outside the package that a symlink in it could point at."""
    secret = tmp_path / "host" / "secret"
    secret.parent.mkdir(exist_ok=True)
    secret.write_text("the host's\n")
    return secret


def _link_image(root: Path, target: Path) -> None:
    image = next((root / "boot").glob("vmlinuz-*"))
    image.unlink()
    image.symlink_to(target)


def _link_boot(root: Path, target: Path) -> None:
    (target / "vmlinuz-6.1.0-x").write_bytes(b"host kernel")
    shutil.rmtree(root / "boot")
    (root / "boot").symlink_to(target)


def _link_module(root: Path, target: Path) -> None:
    module = next((root / "lib" / "modules").rglob("dm-mod.ko"))
    module.unlink()
    module.symlink_to(target)


def _link_modules_folder(root: Path, target: Path) -> None:
    folder = root / "lib" / "modules" / "6.1.0-x"
    shutil.rmtree(folder)
    folder.symlink_to(target)


@pytest.mark.parametrize(
    ("change", "what"),
    [
        (lambda root, host: _link_image(root, host), "boot/vmlinuz-6.1.0-x"),
        (lambda root, host: _link_image(root, Path("vmlinuz-other")), "boot/vmlinuz-6.1.0-x"),
        (lambda root, host: _link_boot(root, host.parent), "boot/vmlinuz-6.1.0-x"),
        (lambda root, host: _link_module(root, host), "dm-mod.ko"),
        (lambda root, host: _link_modules_folder(root, host.parent), "lib/modules/6.1.0-x"),
    ],
    ids=["image-to-host", "image-inside", "boot-folder", "module", "modules-folder"],
)
def test_a_deb_whose_kernel_or_module_is_a_symlink_is_refused(
    cache: Path, tmp_path: Path, change: Callable[[Path, Path], None], what: str
) -> None:
    host = _host_file(tmp_path)
    deb = make_deb(tmp_path, "6.1.0-x", change=lambda root: change(root, host))
    with pytest.raises(UserError, match="symbolic link") as err:
        prebuilt.resolve(str(deb), Settings.from_env())
    message = str(err.value)
    assert what in message and "\n" not in message, message


# --- kernel lists ----------------------------------------------------------------------
def test_a_kernel_list_is_a_deterministic_linear_history(cache: Path, tmp_path: Path) -> None:
    specs = ["linux-image-6.1.0-47-cloud-amd64", "linux-image-6.1.0-50-cloud-amd64"]
    a = kernel_list.make(specs, Settings.from_env())
    b = kernel_list.make(specs, Settings.from_env())
    assert a.commits == b.commits and len(a.commits) == 2
    git = Git(a.repo)
    assert git.run("rev-parse", f"{a.last}^").strip() == a.first
    assert git.commit_info(a.last).subject == specs[1]
    assert kernel_list.is_kernel_list(a.repo) and not kernel_list.is_kernel_list(tmp_path)
    assert kernel_list.kernel_at(a.repo, a.first) == specs[0]
    assert kernel_list.builds_around(a.repo, a.last) == (specs[0], specs[1])
    line = kernel_list.builds_line(a.repo, a.last, Mode.REGRESSION)
    assert line == f"last good build: {specs[0]}; first bad build: {specs[1]}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("linux-image-6.1.0-47-cloud-amd64", "at least two"),
        ("linux-image-a,linux-image-a", "twice"),
        ("linux-image-a,/nonexistent/vmlinuz", "neither"),
        ("linux-image-a,-rf", "not a kernel"),
    ],
)
def test_a_bad_kernel_list_is_one_line(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        kernel_list.parse(text)


def test_files_in_a_kernel_list_become_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bzImage").write_bytes(b"k")
    monkeypatch.chdir(tmp_path)
    assert kernel_list.parse("bzImage=v1, linux-image-x=v2") == [
        (str(tmp_path / "bzImage"), "v1"),
        ("linux-image-x", "v2"),
    ]


class _Fake:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def build(self, repo: Path, commit: str, spec: BuildSpec, progress: object) -> Artifact:
        self.calls.append(commit)
        return Artifact(commit, "t", "c", "k", "cfg", "log")


def test_the_builder_fetches_a_lists_kernels_and_builds_the_rest(
    cache: Path, tmp_path: Path
) -> None:
    s = Settings.from_env()
    debs = [str(make_deb(tmp_path, f"6.1.0-{n}-cloud-amd64")) for n in (47, 50)]
    kl = kernel_list.make(debs, s)
    fake = _Fake()
    builder = kernel_list.KernelListBuilder(fake, s)
    art = builder.build(kl.repo, kl.last, BuildSpec(()), lambda _: None)
    assert art.commit == kl.last and Path(art.kernel).name == "vmlinuz-6.1.0-50-cloud-amd64"
    assert fake.calls == []
    builder.build(tmp_path, "abc", BuildSpec(()), lambda _: None)
    assert fake.calls == ["abc"]


# --- the two phases of bisect --kernels -----------------------------------------------
def _result(kl: kernel_list.KernelList, culprit: str) -> BisectResult:
    return BisectResult(
        JobStatus.FOUND, "regression", "t", str(kl.repo), [kl.first], kl.last, culprit, [], [], ""
    )


def _repo(tmp_path: Path, commits: int) -> Path:
    repo = tmp_path / "src"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for i in range(commits):
        subprocess.run(
            [
                "git",
                "-C",
                str(repo),
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@e",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                f"c{i}",
            ],
            check=True,
        )
    return repo


def test_mapped_builds_lead_to_the_commits_between_them(cache: Path, tmp_path: Path) -> None:
    tiny_repo = _repo(tmp_path, 3)
    revs = Git(tiny_repo).run("rev-list", "--reverse", "HEAD").split()
    text = ",".join(
        f"linux-image-6.1.0-{n}-cloud-amd64={r}" for n, r in zip((1, 2, 3), revs, strict=True)
    )
    opts = JobOptions(good=[], bad="", testcase="nvme-snapshot-read", repo=str(tiny_repo))
    phase = plan(text, opts, Settings.from_env())
    assert phase.options.good == [phase.kernels.first] and phase.options.bad == phase.kernels.last
    assert phase.options.repo == str(phase.kernels.repo) and not phase.options.verify
    second = phase.phase.commits_between(_result(phase.kernels, phase.kernels.commits[2]))
    assert second is not None and second.good == [revs[1]] and second.bad == revs[2]
    assert second.repo == str(tiny_repo.resolve()) and second.verify
    fix = plan(text, JobOptions(**{**opts.__dict__, "mode": "fix"}), Settings.from_env())
    assert fix.options.good == [fix.kernels.last] and fix.options.bad == fix.kernels.first
    fixed = fix.phase.commits_between(
        dataclasses.replace(_result(fix.kernels, fix.kernels.commits[1]), mode="fix")
    )
    assert fixed is not None and fixed.good == [revs[1]] and fixed.bad == revs[0]


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ("linux-image-a=v1,linux-image-b", {"repo": "."}, "every kernel"),
        ("linux-image-a=v1,linux-image-b=v2", {}, "give --repo"),
        ("linux-image-a,linux-image-b", {"repo": "."}, "needs K=REV"),
        ("linux-image-a,linux-image-b", {"good": ["x"]}, "drop --good"),
    ],
)
def test_kernel_phase_input_is_checked_first(
    cache: Path, text: str, extra: dict[str, object], message: str
) -> None:
    opts = JobOptions(**{"good": [], "bad": "", "testcase": "nvme-snapshot-read", **extra})  # type: ignore[arg-type]
    with pytest.raises(UserError, match=message):
        plan(text, opts, Settings.from_env())


def test_a_kernel_lists_report_names_builds_not_commits(cache: Path) -> None:
    from kbisect.reports.job_report import markdown, to_json
    from kbisect.reports.lines import outcome_lines

    specs = [f"linux-image-6.1.0-{n}-cloud-amd64" for n in (47, 50, 53)]
    kl = kernel_list.make(specs, Settings.from_env())
    result = _result(kl, kl.commits[2])
    text = markdown(result, "job-1")
    assert f"last good build: {specs[1]}; first bad build: {specs[2]}" in text
    assert "Bisect log" not in text  # nothing for git bisect replay to replay
    assert to_json(result)["builds"] == {"last_old": specs[1], "first_new": specs[2]}
    assert outcome_lines(result) == [f"last good build: {specs[1]}; first bad build: {specs[2]}"]
    fix = dataclasses.replace(result, mode="fix")
    assert outcome_lines(fix) == [f"last bad build: {specs[1]}; first good build: {specs[2]}"]
