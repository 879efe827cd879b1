"""The one-commit pipeline behind `kbisect try`: resolve, build, boot, run, score."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbisect.builders import kconfig, prebuilt
from kbisect.builders.kernel_build import KernelBuilder
from kbisect.builders.patched_commit import Patched, apply_patches, read_patches
from kbisect.infra.git import Git
from kbisect.infra.qemu import QemuMachine
from kbisect.model import Artifact, Commit
from kbisect.reports.try_report import TryResult
from kbisect.settings import Settings
from kbisect.testcases import kselftest
from kbisect.testcases import manifest as manifests
from kbisect.testcases.runner import build_spec, profile, run_testcase
from kbisect.testcases.trace_run import check_traceable, trace_testcase
from kbisect.testcases.tuning import check_repetitions


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class TryOptions:
    """How to run the testcase, whatever the kernel: a build or a prebuilt one."""

    profile_name: str | None = None
    repetitions: int | None = None
    trace: bool = False
    on_stage: Callable[[str], None] = _quiet
    on_detail: Callable[[str], None] = _quiet
    settings: Settings | None = None
    selftests_from: str = ""  # a kselftest testcase's revision (default: the one tried)

    def testcase(self, name: str, repo: Path | None = None) -> manifests.Manifest:
        """The testcase, checked with these options before anything slow starts (a
        kselftest's selftests built from `repo`)."""
        manifest = manifests.load(name, repo)
        check_repetitions(manifest, self.repetitions)
        if self.profile_name:
            profile(self.profile_name)
        if self.trace:
            check_traceable(manifest)
        return manifest


def try_commit(
    repo: Path,
    rev: str,
    testcase: str,
    opts: TryOptions = TryOptions(),
    config: str | None = None,
    patches: list[str] | None = None,
) -> TryResult:
    """`config`: a path to the user's kernel config (--config) instead of tinyconfig;
    `patches`: patch files applied to `rev` in order (--patch)."""
    git = Git(repo)
    git.check_repo()
    commit = git.commit_info(rev)
    patched = None
    if patches:
        patched = apply_patches(git, rev, read_patches(patches))
        commit = git.commit_info(patched.tip)
    testcase = kselftest.job_testcase(testcase, repo, commit.hash, opts.selftests_from)
    manifest = opts.testcase(testcase, repo)
    spec = build_spec(manifest, kconfig.read_config(config) if config else "")
    settings = opts.settings or Settings.from_env()
    opts.on_stage(f"building {commit.hash[:12]} {commit.subject}")
    artifact = KernelBuilder(settings.jobs).build(repo, commit.hash, spec, opts.on_detail)
    return _run(manifest, commit, artifact, opts, patched=patched)


def try_kernel(
    kernel: str, testcase: str, opts: TryOptions = TryOptions(), modules: Path | None = None
) -> TryResult:
    """`kbisect try --kernel`: the testcase on a prebuilt kernel, with its own modules."""
    manifest = opts.testcase(testcase)
    prebuilt.check_spec(kernel, modules)  # refused before it says it fetches
    opts.on_stage(f"fetching {kernel}")
    settings = opts.settings or Settings.from_env()
    pre = prebuilt.resolve(kernel, settings, modules, opts.on_detail)
    commit = Commit(hash=pre.name, subject=f"{pre.version} (prebuilt)")
    return _run(manifest, commit, pre.artifact, opts, is_prebuilt=True)


def _run(
    manifest: manifests.Manifest,
    commit: Commit,
    artifact: Artifact,
    opts: TryOptions,
    is_prebuilt: bool = False,
    patched: Patched | None = None,
) -> TryResult:
    label = commit.hash if is_prebuilt else commit.hash[:12]
    opts.on_stage(f"running {manifest.name} on {label}")
    settings = opts.settings or Settings.from_env()
    machine = QemuMachine(accel=settings.accel)
    result = run_testcase(
        manifest, artifact, machine, opts.profile_name, opts.repetitions, opts.on_detail
    )
    diagnostics = None
    if opts.trace:
        opts.on_stage(f"tracing {manifest.name} on {label} (blktrace)")
        diagnostics = trace_testcase(manifest, artifact, machine, opts.profile_name, opts.on_detail)
    return TryResult(commit, artifact, result, diagnostics, is_prebuilt, patched)
