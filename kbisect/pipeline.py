"""The one-commit pipeline behind `kbisect try`: resolve, build, boot, run, score."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbisect.builders import kconfig, prebuilt
from kbisect.builders.kernel_build import KernelBuilder
from kbisect.git import Git
from kbisect.infra.qemu import QemuMachine
from kbisect.model import Artifact, Commit
from kbisect.settings import Settings
from kbisect.testcases import manifest as manifests
from kbisect.testcases.runner import TestcaseRun, build_spec, profile, run_testcase
from kbisect.testcases.trace_run import Diagnostics, check_traceable, trace_testcase


@dataclass(frozen=True)
class TryResult:
    commit: Commit  # a prebuilt kernel's: its package (or file) name and version
    artifact: Artifact
    result: TestcaseRun
    diagnostics: Diagnostics | None = None  # with --trace
    prebuilt: bool = False


def try_commit(
    repo: Path,
    rev: str,
    testcase: str,
    profile_name: str | None = None,
    repetitions: int | None = None,
    on_stage: Callable[[str], None] = lambda _: None,
    on_detail: Callable[[str], None] = lambda _: None,
    settings: Settings | None = None,
    trace: bool = False,
    config: str | None = None,
) -> TryResult:
    """`config`: a path to the user's kernel config (--config) instead of tinyconfig."""
    # All input is checked before anything slow starts.
    settings = settings or Settings.from_env()
    git = Git(repo)
    git.check_repo()
    commit = git.commit_info(rev)
    manifest = manifests.load(testcase)
    if profile_name:
        profile(profile_name)
    if trace:
        check_traceable(manifest)
    spec = build_spec(manifest, kconfig.read_config(config) if config else "")
    on_stage(f"building {commit.hash[:12]} {commit.subject}")
    artifact = KernelBuilder(settings.jobs).build(repo, commit.hash, spec, on_detail)
    return _run(
        manifest, commit, artifact, settings, profile_name, repetitions, trace, on_stage, on_detail
    )


def try_kernel(
    kernel: str,
    testcase: str,
    profile_name: str | None = None,
    repetitions: int | None = None,
    on_stage: Callable[[str], None] = lambda _: None,
    on_detail: Callable[[str], None] = lambda _: None,
    settings: Settings | None = None,
    trace: bool = False,
    modules: Path | None = None,
) -> TryResult:
    """`kbisect try --kernel`: the testcase on a prebuilt kernel, with its own modules."""
    settings = settings or Settings.from_env()
    manifest = manifests.load(testcase)
    if profile_name:
        profile(profile_name)
    if trace:
        check_traceable(manifest)
    on_stage(f"fetching {kernel}")
    pre = prebuilt.resolve(kernel, settings, modules, on_detail)
    commit = Commit(hash=pre.name, subject=f"{pre.version} (prebuilt)")
    return _run(
        manifest,
        commit,
        pre.artifact,
        settings,
        profile_name,
        repetitions,
        trace,
        on_stage,
        on_detail,
        is_prebuilt=True,
    )


def _run(
    manifest: manifests.Manifest,
    commit: Commit,
    artifact: Artifact,
    settings: Settings,
    profile_name: str | None,
    repetitions: int | None,
    trace: bool,
    on_stage: Callable[[str], None],
    on_detail: Callable[[str], None],
    is_prebuilt: bool = False,
) -> TryResult:
    label = commit.hash if is_prebuilt else commit.hash[:12]
    on_stage(f"running {manifest.name} on {label}")
    machine = QemuMachine(accel=settings.accel)
    result = run_testcase(manifest, artifact, machine, profile_name, repetitions, on_detail)
    diagnostics = None
    if trace:
        on_stage(f"tracing {manifest.name} on {label} (blktrace)")
        diagnostics = trace_testcase(manifest, artifact, machine, profile_name, on_detail)
    return TryResult(commit, artifact, result, diagnostics, is_prebuilt)
