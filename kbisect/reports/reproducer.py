"""`kbisect reproduce ID DIR`: what reproduces a job's answer without kbisect: a
bisection's culprit against its parent, or a sweep's changed pair, its new kernel against
its old one (`Found`, from of_bisection or of_sweep).

The files (`files`): the two kernels' hashes, the .config kbisect built each
with where this host's cache still has it (else kbisect's config fragments: tinyconfig,
then the fragments, then olddefconfig, as builders.kernel_build does), the guest's own
files (init, lib.sh, the testcase's script, params and files), the testcase's folder,
`reproduce.sh` (reproducer_script) and a README with the job's figures to compare with.
Everything the job's result holds that a guest or a repository wrote reaches the README
as one printable, bounded line of markdown text (email_report.text, lines.md_text).
"""

import math
import re
import shlex
import statistics
from dataclasses import dataclass
from pathlib import Path

from kbisect import infra
from kbisect.builders import artifact_cache, kconfig
from kbisect.builders.kernel_build import compiler_version
from kbisect.builders.kernel_list import is_kernel_list
from kbisect.contract import Mode
from kbisect.errors import KbisectError, UserError
from kbisect.infra.git import Git
from kbisect.infra.initramfs import GUEST_FILES, TOOL_PACKAGES, guest_file, params_file
from kbisect.infra.qemu import QEMU, QemuMachine
from kbisect.model import Artifact, Disk, GuestImage
from kbisect.reports import sweep_report
from kbisect.reports.email_report import figure, figures, reproduce_lines, text
from kbisect.reports.job_report import terms
from kbisect.reports.lines import md_code, md_text
from kbisect.reports.reproducer_script import (
    ACCELS,
    BUILD_TOOLS,
    HASH,
    NAME,
    PROBE,
    PROBE_CMDLINE,
    SLOTS,
    ScriptPlan,
    script,
)
from kbisect.settings import Settings
from kbisect.testcases import manifest as manifests
from kbisect.testcases import runner
from kbisect.workflows.bisect_types import BisectResult, Step, StepSource
from kbisect.workflows.sweep_types import PairWord, SweepPair, SweepResult

NAME_CAP = 60
MAX_BOOTS = 10  # the script's default boots a kernel, at most (BOOTS=N runs more)
MAX_FILE = 4 << 20  # a testcase's file copied, at most (a manifest's are a few KiB)
SCORES_SHOWN = 12
# The commands reproduce.sh runs whose Debian package is not named as the command
PACKAGE_OF = {QEMU: "qemu-system-x86", **TOOL_PACKAGES}
KERNEL_HEADERS = ("libelf-dev", "libssl-dev")  # what a kernel's build includes
_PACKAGES = re.compile(r"^packages=\(\n(.*?)\n\)", re.M | re.S)
_SLOT_OF = {v: k for k, v in SLOTS.items()}


@dataclass(frozen=True)
class Side:
    """One of the two kernels the folder builds and boots."""

    name: str  # its files' and the script's word: parent or culprit; old or new (a sweep's)
    label: str  # its row in the README's figures
    commit: str  # the full hash
    scores: tuple[float, ...]  # each of its boots' figure, as the job measured them
    boots: int  # the job's boots of it (0: its figure is another commit's, same kernel)


@dataclass(frozen=True)
class Found:
    """What the folder reproduces: two kernels of the job's repository, as the command
    found them."""

    job: str  # the bisection's id (an investigation's bisect stage's), or the sweep's
    repo: str
    testcase: str
    metric: str  # the job's ("" : the testcase's primary)
    pass_fail: bool
    repetitions: int  # 0: the testcase's
    profile: str  # "": the testcase's
    old: Side
    new: Side
    adjacent: bool  # new's first parent is old: the script checks it in LINUX
    claim: str  # what kbisect said of the two, markdown: the README's first sentence
    effect: str  # the job's figure of the change, markdown
    with_kbisect: list[str]  # the kbisect commands that reproduce it, one a line
    build_seconds: list[float]  # the job's builds, each
    boot_seconds: list[float]  # the job's boots, each
    configs: dict[str, str]  # a side's name -> the .config kbisect built it with
    manifest: manifests.Manifest  # the job's testcase, loaded once


def culprit_of(result: BisectResult, job: str) -> str:
    """The culprit's full hash; UserError (one line) for a job that named none."""
    if not result.culprit:
        raise UserError(
            f"job {job} did not name one commit ({text(result.status, NAME_CAP)}): there is "
            "nothing to reproduce; narrow the candidates with 'kbisect mark' in a new job"
        )
    if is_kernel_list(Path(result.repo)):
        raise UserError(
            f"not yet: job {job} bisected prebuilt kernels, not commits; reproduce the "
            "bisection of the commits between them (kbisect bisect --kernels K=REV,...)"
        )
    if not HASH.fullmatch(result.culprit):
        raise UserError(f"job {job} named {text(result.culprit, 80)!r}, not a full commit hash")
    return result.culprit


def first_parent(repo: str, commit: str) -> str | None:
    """The commit's first parent in the repository, read here (None: none, or unreadable)."""
    try:
        return Git(Path(repo)).resolve(f"{commit}^")
    except KbisectError:
        return None


def parent_of(repo: str, culprit: str) -> str:
    """The culprit's first parent in the job's repository, read here."""
    try:
        parent = Git(Path(repo)).resolve(f"{culprit}^")
    except KbisectError as exc:
        raise UserError(
            f"cannot read the culprit's parent in the job's repository {text(repo, 200)}: "
            f"run 'kbisect reproduce' where it is readable ({exc})"
        ) from exc
    if not HASH.fullmatch(parent):
        raise UserError(f"the culprit's parent {text(parent, 80)!r} is not a full commit hash")
    return parent


def job_configs(repo: str, commits: dict[str, str], manifest: manifests.Manifest) -> dict[str, str]:
    """Each commit's .config as kbisect resolved it, where this host's artifact cache has
    that build (the same tree, fragments and compiler as the job's worker)."""
    key = kconfig.config_hash(runner.build_spec(manifest), compiler_version())
    found = {}
    for name, commit in commits.items():
        try:
            tree = Git(Path(repo)).tree_of(commit)
            path = artifact_cache.entry_dir(tree, key) / "config"
            if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_FILE:
                config = path.read_text()
                if "CONFIG_" in config:
                    found[name] = config
        except (KbisectError, OSError, UnicodeDecodeError):
            continue  # not built here: the script starts from the fragments
    return found


def install_packages() -> list[str]:
    """infra/install.sh's Debian packages, in its order."""
    listed = _PACKAGES.search((Path(infra.__file__).parent / "install.sh").read_text())
    return listed[1].replace("\\\n", " ").split() if listed else []


def packages(tools: list[str]) -> list[str]:
    """The packages of install.sh that reproduce.sh's commands come from."""
    wanted = {PACKAGE_OF.get(t, t) for t in (*BUILD_TOOLS, QEMU, "busybox", "ccache", *tools)}
    return [p for p in install_packages() if p in wanted or p in KERNEL_HEADERS]


def _step(result: BisectResult, commit: str) -> Step | None:
    """The commit's step; the endpoint's when it was one."""
    steps = [s for s in result.steps if s.commit == commit]
    return next((s for s in steps if s.source == StepSource.ENDPOINT), steps[0] if steps else None)


def of_bisection(
    result: BisectResult,
    job: str,
    parent: str,
    configs: dict[str, str],
    manifest: manifests.Manifest,
) -> Found:
    """A finished bisection's culprit (culprit_of) against its first parent (parent_of)."""
    culprit = culprit_of(result, job)
    old_w, new_w = terms(result.mode)

    def side(name: str, label: str, commit: str) -> Side:
        step = _step(result, commit)
        if step is None:
            return Side(name, label, commit, (), 0)
        scores = tuple(step.scores or ([step.value] if step.value is not None else []))
        return Side(name, label, commit, scores, step.boots)

    what = "fix" if result.mode == Mode.FIX else "first bad commit"
    subject = md_text(text(result.subjects.get(culprit, "")))
    claim = (
        f'kbisect named `{culprit}` ("{subject}") the {what} for the testcase '
        f"{md_text(text(result.testcase, NAME_CAP))}"
    )
    effect = (
        f"The {new_w} endpoint against the {old_w} one: "
        f"{md_text(figures(result.effect)) if result.effect else 'not measured'}."
    )
    # the commands of reproduce_lines (its prose is the mail's), unindented
    commands = [ln.strip() for ln in reproduce_lines(result, culprit) if ln.startswith("  ")]
    return Found(
        job=job,
        repo=result.repo,
        testcase=result.testcase,
        metric=result.metric or "",
        pass_fail=result.pass_fail,
        repetitions=result.repetitions or 0,
        profile=result.profile or "",
        old=side("parent", f"parent (behaves as {old_w})", parent),
        new=side("culprit", f"culprit ({new_w})", culprit),
        adjacent=True,
        claim=claim,
        effect=effect,
        with_kbisect=commands,
        build_seconds=[st.build_seconds for st in result.steps if st.build_seconds > 0],
        boot_seconds=[
            st.test_seconds / st.boots for st in result.steps if st.test_seconds > 0 and st.boots
        ],
        configs=configs,
        manifest=manifest,
    )


def changed_pair(result: SweepResult, job: str, new: int | None) -> SweepPair:
    """The sweep's changed pair that ends at kernel `new` (1-based in the series), or its
    only changed one; UserError (one line) naming the choices otherwise."""
    changed = [p for p in result.pairs if p.verdict == PairWord.CHANGED]
    if new is not None:
        changed = [p for p in changed if p.new == new - 1]
    if len(changed) == 1:
        return changed[0]
    if not changed:
        where = f" ending at kernel {new}" if new is not None else ""
        raise UserError(f"sweep {job} changed no pair{where}: there is nothing to reproduce")
    ends = ", ".join(sorted({str(p.new + 1) for p in changed}))
    raise UserError(f"sweep {job} changed more than one pair: give --pair N, N one of {ends}")


def sweep_commits(result: SweepResult, job: str, pair: SweepPair) -> tuple[str, str]:
    """The pair's old and new commits (full hashes); UserError for prebuilt kernels."""
    old, new = result.kernels[pair.old], result.kernels[pair.new]
    if is_kernel_list(Path(result.repo)) or not (HASH.fullmatch(old) and HASH.fullmatch(new)):
        raise UserError(
            f"not yet: sweep {job} measured prebuilt kernels, not commits: reproduce a "
            "sweep of the commits they were built from"
        )
    return old, new


def of_sweep(
    result: SweepResult,
    job: str,
    pair: SweepPair,
    configs: dict[str, str],
    manifest: manifests.Manifest,
    adjacent: bool,
) -> Found:
    """A sweep's changed pair (sweep_commits): its new kernel against its old one."""
    old, new = sweep_commits(result, job, pair)
    testcase = next((t for t in result.testcases if t.name == pair.testcase), None)
    values = sweep_report.values_by_kernel(result, pair.testcase)

    def side(name: str, i: int) -> Side:
        boots = sum(b.kernel == i and b.testcase == pair.testcase for b in result.boots)
        label = f"{name} (kernel {i + 1}: {md_text(text(sweep_report.label(result, i), NAME_CAP))})"
        return Side(name, label, result.kernels[i], tuple(values[i]), boots)

    word = md_text(text(pair.direction or pair.verdict, 20))
    claim = (
        f"kbisect's sweep found kernel {pair.new + 1} `{result.kernels[pair.new]}` "
        f"{word} than kernel {pair.old + 1} `{result.kernels[pair.old]}` on the testcase "
        f"{md_text(text(pair.testcase, NAME_CAP))}"
    )
    interval = (
        f"{pair.effect:+.1%} (95% CI {pair.low:+.1%} to {pair.high:+.1%})"
        if pair.effect is not None and pair.low is not None and pair.high is not None
        else "not measured"
    )
    q = shlex.quote
    profile = f" --profile {q(testcase.profile)}" if testcase else ""  # sweep takes no more
    tuning = profile + (f" --repetitions {testcase.repetitions}" if testcase else "")
    tc = f"--testcase {q(text(pair.testcase, NAME_CAP))}"
    return Found(
        job=job,
        repo=result.repo,
        testcase=pair.testcase,
        metric=pair.metric,
        pass_fail=bool(testcase and testcase.pass_fail),
        repetitions=testcase.repetitions if testcase else 0,
        profile=testcase.profile if testcase else "",
        old=side("old", pair.old),
        new=side("new", pair.new),
        adjacent=adjacent,
        claim=claim,
        effect=f"The new kernel against the old one: {interval}.",
        with_kbisect=[
            f"kbisect sweep --repo LINUX {old} {new} {tc}{profile}",
            f"kbisect bisect --repo LINUX --good {old} --bad {new} {tc}{tuning}",
        ],
        build_seconds=[],
        boot_seconds=[],
        configs=configs,
        manifest=manifest,
    )


def _boots(found: Found, exact: bool) -> int:
    """Each kernel's boots by default: as many as the job gave either (at most MAX_BOOTS)."""
    given = max(found.old.boots, found.new.boots)
    return max(1, min(MAX_BOOTS, given or (1 if exact else 3)))


def plan(found: Found, manifest: manifests.Manifest, settings: Settings) -> ScriptPlan:
    """What reproduce.sh does for this job: its testcase's boots as the job ran them."""
    metric = found.metric or manifest.primary
    if metric not in manifest.metrics or not NAME.fullmatch(metric):
        raise UserError(
            f"job {found.job} judged {text(metric, NAME_CAP)!r}, not a metric of the testcase "
            f"{text(found.testcase, NAME_CAP)} as it is here: reproduce it where it ran"
        )
    if manifest.peer:
        raise UserError(
            f"the testcase {text(found.testcase, NAME_CAP)} runs {manifest.peer} on the host "
            "beside its guest, which a reproducer script does not: rerun the job's two commits "
            "with kbisect try"
        )
    spec = manifest.metrics.get(metric)
    exact = spec is not None and spec.exact
    reps = found.repetitions or manifest.repetitions_for(metric)
    warmup = 0 if exact else manifest.warmup
    host_root = manifest.userland == "host"
    prof = runner.profile(found.profile or manifest.profile)
    disks = [Disk(d.name, d.size_mib, prof) for d in manifest.disks]
    machine = QemuMachine(accel=settings.accel)
    guest = GuestImage(_SLOT_OF["INITRD"], tuple(sorted(set(manifest.tools))), host_root)
    kernel = Artifact(found.new.commit, "", "", _SLOT_OF["KERNEL"], "", "")
    run = Path(_SLOT_OF["RUN"])
    return ScriptPlan(
        job=found.job,
        old=found.old.commit,
        new=found.new.commit,
        names=(found.old.name, found.new.name),
        adjacent=found.adjacent,
        metric=metric,
        pass_fail=found.pass_fail,
        boots=_boots(found, exact),
        warmup=warmup,
        timeout=math.ceil(manifest.timeout_for(reps + warmup)),
        tools=guest.tools,
        host_root=host_root,
        disks=tuple((d.name, d.size_mib) for d in disks),
        fragments=len(kconfig.fragments_for(runner.build_spec(manifest))),
        accel=settings.accel or "",
        argv={
            **{a: machine.boot_argv(run, a, kernel, guest, disks) for a in ACCELS},
            PROBE: machine.boot_argv(run, "kvm", kernel, guest, [], PROBE_CMDLINE),
        },
    )


def files(found: Found, settings: Settings) -> dict[str, tuple[bytes, int]]:
    """Every file to write in DIR: its path there -> (its bytes, its mode)."""
    manifest = found.manifest
    p = plan(found, manifest, settings)
    reps = found.repetitions or manifest.repetitions_for(p.metric)
    sides = f"{found.new.name} {found.new.commit}\n{found.old.name} {found.old.commit}\n"
    out: dict[str, tuple[bytes, int]] = {
        "reproduce.sh": (script(p).encode(), 0o755),
        "commits": (sides.encode(), 0o644),
    }
    for i, fragment in enumerate(kconfig.fragments_for(runner.build_spec(manifest))):
        out[f"config/fragment-{i}.config"] = (fragment.encode(), 0o644)
    for name, config in found.configs.items():
        out[f"config/{name}.config"] = (config.encode(), 0o644)
    # the guest's files, as initramfs.build_image puts them in the image
    for path, own in GUEST_FILES.items():
        out[f"guest/{path}"] = (guest_file(own), 0o755 if path == "init" else 0o644)
    out["guest/kbisect/testcase.sh"] = (manifest.script, 0o755)
    params = runner.guest_params(manifest, reps + p.warmup)
    out["guest/kbisect/params.sh"] = (params_file(params), 0o644)
    for name, data in manifest.files.items():
        out[f"guest/kbisect/{name}"] = (data, 0o644)
    if p.host_root:  # empty: the host's root over 9p, as kbisect's kernels have it
        out["guest/kbisect/host-root"] = (b"", 0o644)
    for f in sorted(manifest.folder.iterdir()):
        if f.is_file() and not f.is_symlink() and f.stat().st_size <= MAX_FILE:
            out[f"testcase/{f.name}"] = (f.read_bytes(), 0o644)
    out["README.md"] = (readme(found, manifest, p, reps).encode(), 0o644)
    return out


def _figures_row(side: Side) -> str:
    if not side.scores:
        return f"| {side.label} | `{side.commit[:12]}` | not booted by the job | | |"
    scores = ", ".join(figure(v) for v in side.scores[:SCORES_SHOWN])
    if len(side.scores) > SCORES_SHOWN:
        scores += ", …"
    median = figure(statistics.median(side.scores))
    return f"| {side.label} | `{side.commit[:12]}` | {median} | {side.boots} | {scores} |"


def readme(found: Found, manifest: manifests.Manifest, p: ScriptPlan, reps: int) -> str:
    old, new = found.old, found.new
    metric = md_text(text(p.metric, NAME_CAP))
    spec = manifest.metrics.get(p.metric)
    unit = (
        f" (in {md_text(text(spec.unit, NAME_CAP))}, {spec.better.value} is better)" if spec else ""
    )
    tools = ", ".join(p.tools) or "none"
    build = max(found.build_seconds, default=300.0)
    boot = statistics.median(found.boot_seconds) if found.boot_seconds else float(p.timeout) / 4
    minutes = math.ceil((2 * build + 2 * p.boots * boot) / 60) + 2
    configs = (
        f"`config/{new.name}.config` and `config/{old.name}.config`: the `.config` kbisect "
        "built each with; the script starts from them (`make olddefconfig`), and says if its "
        "own differs. "
        if len(found.configs) == 2
        else ""
    )
    relation = (
        f"Its parent is `{old.commit}`."
        if found.adjacent
        else f"The {old.name} kernel is `{old.commit}`."
    )
    lines = [
        f"# Reproducing kbisect job {md_text(text(found.job, 120))}, without kbisect",
        "",
        f"{found.claim}, on the metric {metric}{unit}. {relation} This folder builds both "
        "and boots each in QEMU as kbisect did, with nothing of kbisect's installed.",
        "",
        "## What is here",
        "",
        "- `reproduce.sh`: builds both kernels (`git archive` of each commit: your "
        "checkout is not touched), makes the guest's initramfs, boots each kernel in turn "
        "with kbisect's QEMU command line and prints the metric of every boot side by side, "
        "then each kernel's mean.",
        "- `commits`: the two full hashes.",
        f"- `config/`: {configs}`fragment-N.config`, kbisect's fragments (the base, the "
        "testcase's, in order), merged over `make tinyconfig` by "
        "`scripts/kconfig/merge_config.sh -m`, then `make olddefconfig`: the `.config` "
        "kbisect makes (`FROM_FRAGMENTS=1` makes the script take this way).",
        f"- `guest/`: the guest's init, its helpers and the testcase's script with its "
        f"parameters ({reps} repetitions a boot, {p.warmup} warm-up first).",
        "- `testcase/`: the testcase's folder as kbisect ran it.",
        "",
        "## What it needs",
        "",
        "Debian 12 (x86-64) with these packages (from kbisect's `infra/install.sh`):",
        "",
        f"    sudo apt-get install {' '.join(packages(list(p.tools)))}",
        "",
        f"The testcase's guest tools must be on the host: {tools}"
        + (" (they run from the host's root, shared read-only over 9p)." if p.host_root else "."),
        "KVM (`/dev/kvm`) if you can: without it QEMU emulates the CPU (TCG), much slower.",
        "About 3 GB of disk in the work folder for each kernel's sources.",
        "",
        "## Run it",
        "",
        "    ./reproduce.sh LINUX",
        "",
        "LINUX is a git repository of the kernel that holds both commits. "
        f"`BOOTS=N` boots each kernel N times ({p.boots} by default), `ACCEL=kvm|tcg` "
        "chooses QEMU's accelerator, `JOBS=N` make's jobs, `WORK=DIR` the work folder (a new "
        "one under /tmp by default; each boot's console is kept there).",
        "",
        f"It takes about {minutes} minutes here (two builds, the job's took up to "
        f"{build:.0f} s each with a warm ccache; {2 * p.boots} boots of about {boot:.0f} s); "
        "a build without ccache, or under TCG, takes longer.",
        "",
        "## The job's figures, to compare with",
        "",
        f"{metric} of each kernel as the job measured it (each boot's figure: the median of "
        "its scored repetitions, or their mean in a sweep):",
        "",
        "| kernel | commit | median | boots | each boot |",
        "|---|---|---|---|---|",
        _figures_row(old),
        _figures_row(new),
        "",
        found.effect,
        "",
        "## With kbisect",
        "",
        f"The same, with kbisect (for job {md_text(text(found.job, 120))}):",
        "",
        *md_code("\n".join(found.with_kbisect)),
    ]
    return "\n".join(lines) + "\n"
