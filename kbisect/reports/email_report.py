"""A finished bisection as a mail in the Linux kernel community's form, for the engineer to
send: kbisect writes it, it sends nothing (`kbisect report ID --email`, and `report JOB
email=yes` in the doors).

A regression is a report to the culprit's people with regressions@lists.linux.dev in Cc:
"[REGRESSION][BISECTED] <subsystem>: <metric> <change>% (<testcase>)", the culprit and
the endpoints, the measured effect with its interval and boots, explain's Why lines, the
verification, regzbot's `#regzbot introduced: <hash>` in a paragraph of its own (regzbot
takes the regression's title from the subject, so no `#regzbot title:`), how to reproduce
it with kbisect, and `Reported-by:` / `Closes:` tags for the fix, left for the sender to
fill. A fix (fix mode) is a request to stable@vger.kernel.org instead, in the stable rules'
form: "Please backport <hash> ("<subject>") to <X.Y>.y", why (the same figures), and no
regzbot line or tags (nothing regressed; the fix carries its own).

Whatever a guest, a testcase or a repository wrote (metric names, Why lines, console
lines, subjects) goes in as one printable line of bounded length (infra.printable), numbers
only when finite: a header is one line, so none adds a header, and a body line that would
start like a header field (or mbox's "From ") is indented a space, so none reads as one
(git send-email takes a body's "Cc:" lines as recipients). Pure but for git, read for the
culprit's author where the repository is readable here.
"""

import math
import re
import shlex
import textwrap
from pathlib import Path

from kbisect.builders.kernel_list import is_kernel_list
from kbisect.contract import Mode
from kbisect.errors import KbisectError, UserError
from kbisect.infra.printable import one_line
from kbisect.reports.answer import commit_info
from kbisect.testcases import manifest as manifests
from kbisect.workflows.bisect_types import BisectResult, Step, StepSource

REGRESSIONS_LIST = "regressions@lists.linux.dev"
STABLE_LIST = "stable@vger.kernel.org"
WIDTH = 72  # prose is wrapped here; data lines (commands, figures) are not
SUBJECT_CAP = 200  # the whole Subject line's text
NAME_CAP = 60  # a metric's, a testcase's or a subsystem's name
LINE_CAP = 200  # a Why line, a console line, a repository's subject, a kbisect message
WHY_LINES = 12
CONSOLE_LINES = 20
# The tags of the fix, for the sender to fill (LKP's "| " keeps them off this mail's own
# trailers: git send-email would take a Reported-by: line as a recipient).
REPORTED_BY = "| Reported-by: <your name> <your address>"
CLOSES = "| Closes: <this report's link on lore.kernel.org, once it is there>"
STABLE_SERIES = "<X.Y>.y"  # the stable series the fix should go to, for the sender to fill
# A body line that a reader of the mail, or git send-email, could take for a header
# field (a name of printable characters but the colon, then a colon) or mbox's From line.
_HEADERISH = re.compile(r"[\x21-\x39\x3b-\x7e]+:|>*From ")
_HEX = re.compile(r"[0-9a-f]{12,64}")
_PERCENT = re.compile(r"\s*([+-]?\d{1,12}(?:\.\d{1,9})?)%")
# A kernel subject's subsystem prefix: "nvme: ", "x86/fpu: ", "net: ipv4: " (three levels
# at most); 'Revert "nvme: x"' is the reverted commit's.
_PREFIX = re.compile(r"(?:[\w.,/+*{}-]{1,40}: ){1,3}")
_NOT_FINITE = re.compile(r"[+-]?\b(?:nan|inf(?:inity)?)\b", re.IGNORECASE)
_KERNEL_WORDS = ("panic", "hang")  # a pass/fail job's bad boot: these, or the test fails


def text(value: object, cap: int = LINE_CAP) -> str:
    """Others' words (a guest's, a testcase's, a repository's) as one printable line."""
    return one_line(value, cap)


def figures(value: object, cap: int = LINE_CAP) -> str:
    """kbisect's words with figures in them (an effect, a verification, a Why line) as one
    printable line, a figure that is not a finite number shown as "?"."""
    return _NOT_FINITE.sub("?", text(value, cap))


def figure(value: float | None) -> str:
    """A measured value, or "?" when there is none or it is not a finite number."""
    return f"{value:g}" if value is not None and math.isfinite(value) else "?"


def subsystem(subject: str) -> str:
    """The subsystem prefix of a kernel commit's subject ("nvme: set X" -> "nvme"), or ""."""
    s = text(subject)
    reverted = re.fullmatch(r'Revert "(.+)"', s)
    found = _PREFIX.match(reverted[1] if reverted else s)
    return text(found[0].rstrip().rstrip(":"), NAME_CAP) if found else ""


def change(result: BisectResult) -> float | None:
    """The new endpoint against the old one in percent: the effect's, as the engine said
    it ("-98.4% (95% CI ...)"), else the endpoints' medians; None where neither is finite."""
    said = _PERCENT.match(result.effect)
    if said is not None:
        value = float(said[1])
        return value if math.isfinite(value) else None
    old, new = _endpoint(result, result.old[0] if result.old else ""), _endpoint(result, result.new)
    if old is None or new is None or old.value is None or new.value is None:
        return None
    if not old.value or not (math.isfinite(old.value) and math.isfinite(new.value)):
        return None
    ratio = (new.value - old.value) / abs(old.value) * 100
    return ratio if math.isfinite(ratio) else None


def _endpoint(result: BisectResult, commit: str) -> Step | None:
    return next(
        (s for s in result.steps if s.source == StepSource.ENDPOINT and s.commit == commit), None
    )


def _check(result: BisectResult, job_id: str) -> str:
    """The culprit's full hash; UserError when the job named none a mail can name."""
    if not result.culprit:
        raise UserError(
            f"job {job_id} did not name one commit ({result.status}): a mail to the lists "
            "names one; narrow the candidates with 'kbisect mark' in a new job"
        )
    if is_kernel_list(Path(result.repo)):
        raise UserError(
            f"job {job_id} bisected prebuilt kernels: its answer is two builds, not a commit; "
            "report the bisection of the commits between them (kbisect bisect --kernels "
            "K=REV,... bisects them next)"
        )
    if not _HEX.fullmatch(result.culprit):
        raise UserError(f"job {job_id} named {text(result.culprit, 80)!r}, not a commit hash")
    return result.culprit


def subject_line(result: BisectResult, job_id: str) -> str:
    """The Subject's text, one line: the regression in the lists' habit, or the stable
    request of a fix."""
    culprit = _check(result, job_id)
    named = result.subjects.get(culprit, "")
    if result.mode == Mode.FIX:
        return text(
            f'Please backport {culprit[:12]} ("{text(named, 120)}") to {STABLE_SERIES}',
            SUBJECT_CAP,
        )
    prefix = subsystem(named)
    testcase = text(result.testcase, NAME_CAP)
    if result.pass_fail:  # "kernel panic (boots)", "disk-read fails"
        how = result.bad_boot.bad if result.bad_boot else ""
        what = f"kernel {how} ({testcase})" if how in _KERNEL_WORDS else f"{testcase} fails"
    else:
        moved = change(result)
        metric = text(result.metric or "score", NAME_CAP)
        what = (
            f"{metric} {moved:+.1f}% ({testcase})"
            if moved is not None
            else f"{metric} ({testcase})"
        )
    return text(f"[REGRESSION][BISECTED] {prefix + ': ' if prefix else ''}{what}", SUBJECT_CAP)


def mail(result: BisectResult, job_id: str, why: list[str] | None = None) -> str:
    """The whole mail: its headers (Subject, To, Cc), a blank line, the body. `why`: the
    Why lines of the job's explain job, if it has them."""
    subject = subject_line(result, job_id)
    fix = result.mode == Mode.FIX
    people = "<the {}'s author and maintainers: scripts/get_maintainer.pl on its files>"
    headers = (
        [f"Subject: {subject}", f"To: {STABLE_LIST}", f"Cc: {people.format('fix')}"]
        if fix
        else [f"Subject: {subject}", f"To: {people.format('culprit')}", f"Cc: {REGRESSIONS_LIST}"]
    )
    body = _fix_body(result, job_id, why) if fix else _regression_body(result, job_id, why)
    return "\n".join([*headers, "", *(_unheadered(line) for line in body)]) + "\n"


def _unheadered(line: str) -> str:
    """A body line that would start like a header field, indented a space."""
    return " " + line if _HEADERISH.match(line) else line


def _wrap(paragraph: str) -> list[str]:
    return textwrap.wrap(paragraph, WIDTH, break_long_words=False, break_on_hyphens=False)


def _quoted_commit(result: BisectResult, commit: str) -> str:
    return f'{commit[:12]} ("{text(result.subjects.get(commit, ""))}")'


def _what(result: BisectResult) -> tuple[str, str]:
    """The metric and the testcase in the testcase's own words, where it is known here:
    ("avg_read_sectors (in sectors, higher is better)", "the testcase T (its description)");
    a pass/fail job's metric is its boots."""
    testcase, metric = text(result.testcase, NAME_CAP), text(result.metric or "score", NAME_CAP)
    if result.pass_fail:
        metric = "its boots"
    try:
        m = manifests.load(result.testcase)
    except KbisectError:
        return metric, f"the testcase {testcase}"
    spec = None if result.pass_fail else m.metrics.get(result.metric)
    if spec is not None:
        unit = f"in {text(spec.unit, NAME_CAP)}, " if spec.unit else ""
        metric = f"{metric} ({unit}{spec.better.value} is better)"
    return metric, f"the testcase {testcase} ({text(m.description)})"


def _culprit_lines(result: BisectResult, culprit: str) -> list[str]:
    lines = [f'  commit {culprit} ("{text(result.subjects.get(culprit, ""))}")']
    info = commit_info(result.repo, culprit)  # None: the repository is not readable here
    if info is not None:
        lines.append(f"  author {text(info.author)}, {text(info.date, NAME_CAP)}")
    return lines


def _effect_lines(result: BisectResult, old: str, new: str, words: tuple[str, str]) -> list[str]:
    """The measured effect: the new kernel against the old one, its interval and boots,
    each endpoint's median and the boots behind the answer."""
    old_w, new_w = words
    if result.pass_fail:
        lines = _wrap(f"The {new_w} kernel against the {old_w} one: {figures(result.effect)}.")
    else:
        effect = figures(result.effect) if result.effect else "not measured"
        lines = _wrap(f"The effect, the {new_w} kernel against the {old_w} one: {effect}")
        metric = text(result.metric or "score", NAME_CAP)
        unit = f" {text(result.unit, NAME_CAP)}" if result.unit else ""
        for commit, word in ((old, old_w), (new, new_w)):
            step = _endpoint(result, commit)
            if step is not None:
                boots = f" (median of {step.boots} boots)" if step.boots else ""
                lines.append(f"  {metric} on the {word} kernel: {figure(step.value)}{unit}{boots}")
    sure = ""
    if result.confidence is not None and math.isfinite(result.confidence):
        sure = f"; {result.confidence:.1%} sure of each verdict that named the commit"
    if result.boots:
        lines.append(f"  {result.boots} boots to bisect it{sure}")
    return lines


def _why_lines(why: list[str] | None) -> list[str]:
    if not why:
        return []
    shown = [f"  - {figures(w)}" for w in why[:WHY_LINES]]
    if len(why) > WHY_LINES:
        shown.append(f"  (and {len(why) - WHY_LINES} more lines: kbisect explain has them)")
    return [
        "",
        *_wrap(
            "Why, as kbisect explain measured it (the commit's boots against its parent's, "
            "under statistics and a CPU profile):"
        ),
        "",
        *shown,
    ]


def _verification_lines(result: BisectResult) -> list[str]:
    """The commit put to the test: reverted on the new kernel (a regression's) or applied
    to the old one (a fix's), with kbisect's verdict and its words."""
    v = result.verification
    if v is None:
        return []
    boots = f", {v.boots} boots" if v.boots else ""
    said = f"kbisect put it to the test ({text(v.kind, NAME_CAP)}{boots}): "
    return ["", *_wrap(f"{said}{text(v.status, NAME_CAP)}, {figures(v.message)}.")]


def _console_lines(result: BisectResult) -> list[str]:
    """A pass/fail job's bad boot, as its console showed it: a few lines, indented."""
    b = result.bad_boot
    if b is None:
        return []
    shown = [ln for ln in b.excerpt.splitlines() if ln.strip()]
    lines = [
        "",
        f"The console of a bad boot of {text(b.commit[:12], 12)} ({text(b.bad, NAME_CAP)}):",
        "",
    ]
    lines += [f"    {text(ln)}" for ln in shown[:CONSOLE_LINES]] or ["    (it said nothing)"]
    if len(shown) > CONSOLE_LINES:
        lines.append(f"    (and {len(shown) - CONSOLE_LINES} more lines)")
    return lines


def reproduce_lines(result: BisectResult, culprit: str) -> list[str]:
    """How to reproduce it with kbisect: the bisection, and the commit against its parent
    (LINUX: a kernel repository that holds both endpoints; values quoted for a shell)."""

    def q(value: str) -> str:
        return shlex.quote(text(value))

    tuning = f" --profile {q(result.profile)}" if result.profile else ""
    tuning += f" --repetitions {result.repetitions}" if result.repetitions > 0 else ""
    testcase = f"--testcase {q(result.testcase)}"  # try scores every metric: no --metric
    metric = f" --metric {q(result.metric)}" if result.metric and not result.pass_fail else ""
    if result.mode == Mode.FIX:
        ends = f"--mode fix --good {q(result.new)} --bad {q(result.old[0] if result.old else '')}"
    else:
        ends = " ".join(f"--good {q(g)}" for g in result.old) + f" --bad {q(result.new)}"
    return [
        "",
        *_wrap(
            "How to reproduce it with kbisect, in LINUX, a git repository of the kernel that "
            "holds both endpoints: the bisection,"
        ),
        "",
        f"  kbisect bisect --repo LINUX {ends} {testcase}{metric}{tuning}",
        "",
        "or the commit against its parent, each built and booted alone:",
        "",
        f"  kbisect try --repo LINUX {q(culprit + '^')} {testcase}{tuning}",
        f"  kbisect try --repo LINUX {q(culprit)} {testcase}{tuning}",
    ]


def _regression_body(result: BisectResult, job_id: str, why: list[str] | None) -> list[str]:
    culprit = _check(result, job_id)
    good, bad = (result.old[0] if result.old else ""), result.new
    metric, testcase = _what(result)
    lines = [
        "Hello,",
        "",
        *_wrap(
            f"kbisect found a regression of {metric} in {testcase}, booting each kernel in a "
            "virtual machine, and bisected it to"
        ),
        "",
        *_culprit_lines(result, culprit),
        "",
        "between the good and the bad kernel:",
        "",
        *(f"  good {_quoted_commit(result, g)}" for g in result.old),
        f"  bad  {_quoted_commit(result, bad)}",
        "",
        *_effect_lines(result, good, bad, ("good", "bad")),
        *_console_lines(result),
        *_why_lines(why),
        *_verification_lines(result),
        "",
        f"#regzbot introduced: {culprit[:12]}",
        *reproduce_lines(result, culprit),
        "",
        "If you fix it, please add these tags to the fix:",
        REPORTED_BY,
        CLOSES,
        "",
        f"(kbisect job {text(job_id, NAME_CAP)}; 'kbisect report' of it shows every boot)",
    ]
    return lines


def _fix_body(result: BisectResult, job_id: str, why: list[str] | None) -> list[str]:
    culprit = _check(result, job_id)
    broken, fixed = (result.old[0] if result.old else ""), result.new
    named = text(result.subjects.get(culprit, ""))
    metric, testcase = _what(result)
    return [
        "Hello,",
        "",
        *_wrap(
            f'please backport commit {culprit} ("{named}") to {STABLE_SERIES}, the stable '
            f"series that lack it: it fixes {metric} in {testcase}, as kbisect measured it, "
            "booting each kernel in a virtual machine."
        ),
        "",
        "kbisect bisected the fix between the broken and the fixed kernel:",
        "",
        f"  broken {_quoted_commit(result, broken)}",
        f"  fixed  {_quoted_commit(result, fixed)}",
        "",
        *_effect_lines(result, broken, fixed, ("broken", "fixed")),
        *_console_lines(result),
        *_why_lines(why),
        *_verification_lines(result),
        *reproduce_lines(result, culprit),
        "",
        f"(kbisect job {text(job_id, NAME_CAP)}; 'kbisect report' of it shows every boot)",
    ]
