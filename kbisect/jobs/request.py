"""A job's options as every door gives them (CLI flags, a chat or GitLab command), checked
into the one BisectRequest the service takes: the same checks and the same one-line
errors whoever asks, before a service or a job starts."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kbisect.contract import DEFAULT_MAX_BOOTS, Fixup, Mode
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.settings import Settings
from kbisect.testcases.tuning import check_repetitions, check_tuning, least_changes
from kbisect.workflows.bisect_types import BisectRequest

if TYPE_CHECKING:
    pass

# --parallel K starts K builds and VMs at once (and a local service with room for them):
# beyond this it is a typo, or a door's user asking for a whole farm.
MAX_PARALLEL = 32


@dataclass
class JobOptions:
    good: list[str]
    bad: str
    testcase: str
    repo: str | None = None  # a path; or
    tree: str | None = None  # a named tree ('kbisect tree add')
    mode: str = Mode.REGRESSION.value
    profile: str | None = None
    repetitions: int | None = None
    parallel: int = 1
    metric: str | None = None
    min_effect_pct: float | None = None  # None: the job kind's default (least_changes)
    max_boots: int = DEFAULT_MAX_BOOTS
    verify: bool = True
    trace: bool = False
    fetch: bool = True  # fetch a named tree first, so new revisions resolve
    config: str | None = None  # a path to the user's kernel config (--config)
    signature: str = ""  # a pass/fail job's bad boots show this console pattern
    flaky: bool = False  # a pass/fail job's failure comes and goes
    duets: bool = False  # probes booted beside references at one moment (BisectRequest)
    selftests_from: str = ""  # a kselftest testcase's revision (default: the new end)
    fixups: list[str] = field(default_factory=list)  # patch files (--fixup), in order


def repository(opts: JobOptions, settings: Settings) -> Path:
    from kbisect.builders.trees import Trees

    if (opts.repo is None) == (opts.tree is None):
        raise UserError("give a repository path (--repo) or a named tree (--tree), one of them")
    if opts.tree is None:
        return Path(opts.repo or "").resolve()
    trees = Trees(settings)
    tree = trees.fetch(opts.tree) if opts.fetch else trees.get(opts.tree)
    return tree.path


def checked_request(opts: JobOptions, settings: Settings) -> BisectRequest:
    """Everything about the input that can be checked here, before a service or a job."""
    from kbisect.testcases import kselftest
    from kbisect.testcases import manifest as manifests
    from kbisect.testcases.runner import profile

    if opts.mode not in tuple(Mode):
        raise UserError(f"unknown mode {opts.mode!r}: use regression or fix")
    if not 1 <= opts.parallel <= MAX_PARALLEL:
        raise UserError(
            f"parallel {opts.parallel}: give 1 to {MAX_PARALLEL} commits at once (--parallel K; "
            "parallel=K in chat)"
        )
    repo = repository(opts, settings)
    git = Git(repo)
    git.check_repo()
    # Resolved here so a typo fails before anything starts (the job resolves again).
    good = [git.resolve(g) for g in opts.good]
    bad = git.resolve(opts.bad)
    if bad in good:
        raise UserError(
            f"good and bad are the same commit ({bad[:12]}): nothing to bisect; "
            "give an older good (or, in fix mode, an older bad)"
        )
    new = bad if opts.mode == Mode.REGRESSION else good[0]
    testcase = kselftest.job_testcase(opts.testcase, repo, new, opts.selftests_from)
    manifest = manifests.load(testcase, repo)  # a kselftest's built now, on this host
    profile(opts.profile or manifest.profile)
    manifests.job_signature(manifest, opts.signature)
    flaky = manifests.job_flaky(manifest, opts.flaky)
    if opts.duets and manifest.pass_fail:
        raise UserError(f"--duets pairs timings, and {manifest.name} is pass/fail: drop --duets")
    min_effect, min_rate_step = least_changes(manifest, flaky, opts.min_effect_pct)
    check_tuning(manifest, opts.metric, min_effect, opts.max_boots, opts.trace)
    check_repetitions(manifest, opts.repetitions)
    config = ""
    if opts.config:  # kept where the build hosts see it (the shared cache)
        from kbisect.builders import kconfig

        config = kconfig.store_config(kconfig.read_config(opts.config), settings.cache_dir())
    fixups = []
    if opts.fixups:  # kept where the build hosts see them, as a --config is
        from kbisect.builders import patched_commit as pc

        patches = pc.read_patches(opts.fixups, "--fixup")
        fixups = [Fixup(p.source, pc.store_patch(p, settings.cache_dir())) for p in patches]
    return BisectRequest(
        fixups=fixups,
        config=config,
        repo=str(repo),
        good=good,
        bad=bad,
        testcase=manifest.name,
        mode=opts.mode,
        profile=opts.profile,
        repetitions=opts.repetitions,
        verify=opts.verify,
        parallel=opts.parallel,
        metric=opts.metric,
        min_effect=min_effect,
        min_rate_step=min_rate_step,
        max_boots=opts.max_boots,
        trace=opts.trace,
        tree=opts.tree,
        signature=opts.signature,
        flaky=opts.flaky,
        duets=opts.duets,
    )
