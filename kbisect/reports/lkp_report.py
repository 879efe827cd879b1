"""An Intel 0-day/LKP regression report read into a bisection's fields
(`kbisect bisect --from-report MAIL`): the testcase and metric its test maps to, the good
and bad revisions, the reported change, and the named tree its repository is; each field
with the lines of the mail it came from.

LKP's published layout (a mail from the kernel test robot, or its text pasted):

    Subject: [linus:master] [sched/fair]  1234abcd56: hackbench.throughput -10.2% regression
    kernel test robot noticed a -10.2% regression of hackbench.throughput on:
    commit: <40 hex digits> ("its subject")
    <repository URL> <branch>            (a patch's: url: https://github.com/OWNER/REPO/commits/BRANCH)
    testcase: hackbench
    parameters:
    <TAB>ipc: pipe                       (one a line, indented)
    ======================...            (then the comparison)
    commit:
      <base: a short hash or a tag> ("its subject")
      <the commit, short> ("its subject")
    <base, longer> <the commit, longer>
    ...
       12345  -10.2%   11089   hackbench.throughput

A mail is text only, and bounded: at most MAX_MAIL bytes, lines over MAX_LINE characters
matched by nothing. It is never run and never reaches a shell; what of it is printed is
one printable line. Newer reports give the headline's change unsigned ("a 10.2%
regression"): the comparison row's sign, or the metric's direction, says which way.
"""

import email.errors
import email.policy
import os
import re
import sys
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from email.message import EmailMessage
from email.parser import BytesParser

from kbisect.builders.trees import Tree
from kbisect.contract import Mode
from kbisect.errors import UserError
from kbisect.infra import user_file
from kbisect.infra.printable import one_line
from kbisect.testcases import kinds

MAX_MAIL = 1 << 20  # an LKP report is some 30 to 300 KiB; a mailbox or an archive is not one
MAX_LINE = 4096  # no line of LKP's is this long: longer ones are matched by nothing
MAX_PARAMS = 64
SHOWN = 90  # characters of a quoted line

HEADER = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,75}:")
MAIL_HEADERS = ("from:", "subject:", "date:", "message-id:", "return-path:", "received:", "to:")
QUOTE = re.compile(r"(?:>[ \t]?)+")  # a reply's or a forward's quoting
SUBJECT = re.compile(
    r"(?:Subject:\s*)?(?:(?:Re|Fwd?|AW|WG):\s*)*(?:\[[^\]\n]{0,80}\]\s*){1,4}"
    r"([0-9a-f]{7,40}):\s+(\S+)\s+([-+]?\d{1,6}(?:\.\d{1,3})?)%\s+(regression|improvement)\s*",
    re.I,
)
HEADLINE = re.compile(
    r".*?\bnoticed an? ([-+]?\d{1,6}(?:\.\d{1,3})?)% (regression|improvement) of (\S+?)"
    r"(?::|\s+(?:on|due to)\b.*)?\s*"
)
COMMIT = re.compile(r"\s*commit:\s+([0-9a-f]{40})(?:\s+\(\"(.*)\"\))?\s*")
REPOSITORY = re.compile(r"\s*((?:https?|git)://\S+|file:///\S+|/\S+)\s+([A-Za-z0-9._/-]{1,200})\s*")
PATCH_URL = re.compile(r"\s*url:\s+(https://github\.com/[^/\s]+/[^/\s]+)/commits/(\S{1,200})\s*")
TESTCASE = re.compile(r"\s*(?:in )?testcase:\s*([A-Za-z0-9][A-Za-z0-9_.+-]{0,63})\s*")
PARAMETERS = re.compile(r"\s*(?:with following )?parameters:\s*")
PARAM = re.compile(r"[ \t]+([A-Za-z_][A-Za-z0-9_.-]{0,63}):[ \t]*(.{0,200}?)\s*")
RULE = re.compile(r"\s*(?:={20,}|\*{20,})\s*")
BLOCK_COMMIT = re.compile(r"\s*commit:\s*")
BLOCK_LINE = re.compile(r"\s+([A-Za-z0-9][A-Za-z0-9._/+-]{0,99})(?:\s+\(\"(.*)\"\))?\s*")
# a comparison row: the base's value [± its stddev], the change, the commit's value [± ...],
# the metric
NUMBER = r"[-+]?\d[\d.]*(?:e[-+]?\d+)?"
SPREAD = r"(?:\s+\S{1,3}\s*\d+%)?"  # "± 19%"; "±" mis-decoded too
ROW = re.compile(
    rf"\s*({NUMBER}){SPREAD}\s+([-+]\d{{1,6}}(?:\.\d{{1,3}})?)%\s+({NUMBER}){SPREAD}\s+(\S+)\s*"
)
HEX = re.compile(r"[0-9a-f]{7,40}")


@dataclass(frozen=True)
class Line:
    """A line of the mail's text: its number (1 is the first) and what it says."""

    number: int
    text: str

    def __str__(self) -> str:
        return f'line {self.number} "{one_line(self.text.strip(), SHOWN)}"'


@dataclass(frozen=True)
class Field:
    """One of the job's fields as the report gives it, and where from."""

    value: str
    lines: tuple[Line, ...]
    how: str = ""  # what the value means, or how it was mapped from LKP's

    def source(self) -> str:
        where = "; ".join(str(line) for line in self.lines)
        return f"{where}: {self.how}" if where and self.how else where or self.how


@dataclass(frozen=True)
class LkpReport:
    """What a report says, in kbisect's words. A field the report cannot give is None, with
    why in `missing` (one line: what is missing, and the option that gives it instead)."""

    test: str  # LKP's testcase ("hackbench")
    lkp_metric: str  # "hackbench.throughput"
    testcase: Field | None  # kbisect's ("hackbench:pipe")
    metric: Field | None  # the testcase's metric ("seconds")
    mode: Field  # regression; an improvement is found as a fix
    commit: Field | None  # the reported commit, 40 hex digits
    base: Field | None  # what LKP compared it with: a short hash or a tag
    change: Field | None  # "-10.2%": the LKP metric's change, as reported
    change_pct: float | None  # the same, signed (None: the sign is not known)
    url: str = ""  # the report's repository and branch ("" if it names none)
    branch: str = ""
    repository: Field | None = None
    tree: Field | None = None  # the named tree that is that repository (with_tree)
    params: tuple[tuple[str, str], ...] = ()
    not_carried: Field | None = None  # the parameters kbisect's testcase does not take
    missing: dict[str, str] = field(default_factory=dict)

    @property
    def good(self) -> Field | None:
        return self.ends(self.mode.value)[0]

    @property
    def bad(self) -> Field | None:
        return self.ends(self.mode.value)[1]

    def ends(self, mode: str) -> tuple[Field | None, Field | None]:
        """(good, bad) in `mode`: a regression's good is the base; a fix's the commit."""
        if mode == Mode.FIX.value:
            return self.commit, self.base
        return self.base, self.commit


# --- reading -------------------------------------------------------------------------
def read_mail(path: str) -> str:
    """The text of the mail in `path` ('-': standard input), bounded and checked."""
    where = "standard input" if path == "-" else path
    if path == "-":
        raw = sys.stdin.buffer.read(MAX_MAIL + 1)
    else:
        raw = user_file.read_regular(path, MAX_MAIL + 1, "--from-report", "give the mail's file")
    return mail_text(raw, where)


def mail_text(raw: bytes, where: str = "the mail") -> str:
    """A mail's text: a whole mail (headers, then its body) as its Subject line and its
    decoded text body; a report's text pasted on its own as it is."""
    if len(raw) > MAX_MAIL:
        raise UserError(
            f"--from-report {where}: over {MAX_MAIL >> 20} MiB, not one report mail (LKP's "
            "are some 30 to 300 KiB): give the one mail, not a mailbox or an archive"
        )
    if b"\0" in raw:
        raise UserError(f"--from-report {where}: binary data, not a mail: give the mail's text")
    if not _has_headers(raw):
        return _decode(raw)
    try:
        msg = BytesParser(policy=email.policy.default).parsebytes(raw)
        subject = one_line(msg.get("subject", "") or "", 300)
        part = msg.get_body(preferencelist=("plain",)) if isinstance(msg, EmailMessage) else None
        payload = part.get_payload(decode=True) if part is not None else None
        charset = part.get_content_charset() if part is not None else None
    except (LookupError, ValueError, TypeError, email.errors.MessageError) as exc:
        why = one_line(exc, 80)
        raise UserError(f"--from-report {where}: cannot read the mail ({why})") from exc
    if not isinstance(payload, bytes):
        raise UserError(f"--from-report {where}: the mail has no text part (LKP's are plain text)")
    return (f"Subject: {subject}\n\n" if subject else "") + _decode(payload, charset)


def _has_headers(raw: bytes) -> bool:
    """Whether the text begins with a mail's header block (a line 'From: ...', 'Subject:
    ...', each line a header or its continuation, up to the first empty line)."""
    head = raw[: 64 << 10].replace(b"\r\n", b"\n").split(b"\n\n", 1)[0]
    lines = _decode(head).split("\n")
    if lines and lines[0].startswith("From "):  # an mbox's separator line
        lines = lines[1:]
    if not lines or not all(HEADER.match(x) or x[:1] in (" ", "\t") for x in lines):
        return False
    return any(x.lower().startswith(MAIL_HEADERS) for x in lines)


def _decode(raw: bytes, charset: str | None = None) -> str:
    """Text in its declared charset, else UTF-8, else ISO 8859-1 (LKP's ± in it; every
    byte is a character of it, so it always decodes)."""
    for name in (charset, "utf-8"):
        if name:
            try:
                return raw.decode(name)
            except (LookupError, UnicodeDecodeError):
                continue
    return raw.decode("latin-1")


# --- parsing -------------------------------------------------------------------------
def parse(text: str) -> LkpReport:
    """The report's fields; UserError (one line) if the text is no LKP report at all."""
    if len(text) > MAX_MAIL:
        raise UserError(f"the report is over {MAX_MAIL >> 20} MiB: give the one mail")
    lines = [
        Line(n, QUOTE.sub("", raw, count=1) if raw.startswith(">") else raw)
        for n, raw in enumerate(text.splitlines(), 1)
    ]
    missing: dict[str, str] = {}
    commit_at, commit = _commit(lines)
    test_at = _first(lines, TESTCASE)
    if commit_at is None and test_at is None:
        raise UserError(
            "not an LKP report: no 'commit: <40 hex digits>' line and no 'testcase:' line "
            "(give the kernel test robot's mail as it was sent)"
        )
    subject = _subject(lines, commit_at)
    headline = _first(lines, HEADLINE)
    words = _headline_words(headline, subject)
    if commit is None:
        missing["commit"] = (
            "the report has no 'commit: <40 hex digits> (\"subject\")' line: it names no commit"
        )
    elif subject is not None and not commit.value.startswith(subject[1].group(1).lower()):
        missing["commit"] = (
            f"the subject names commit {subject[1].group(1)}, the 'commit:' line "
            f"{commit.value[:12]}: two reports in one mail?"
        )
        commit = None
    lkp_metric, metric_lines = words.get("metric", ("", ()))
    test_match = _match(TESTCASE, test_at.text) if test_at else None
    test = test_match.group(1) if test_match else ""
    params, param_lines = _params(lines, test_at)
    block = _comparison(lines, test_at.number if test_at else 0, commit)
    base = block[0] if block else None
    if base is None:
        missing["base"] = (
            "the report has no comparison ('commit:' then the base and the commit under the "
            "'=====' line): it names no base to compare with"
        )
    row = _row(lines, block[1] if block else 0, lkp_metric) if lkp_metric else None
    mapped = _map(test, params, param_lines, lkp_metric, test_at, metric_lines, row)
    missing.update(mapped.missing)
    if not lkp_metric:
        missing.setdefault(
            "metric",
            "the report names no metric: no 'noticed a N% regression of METRIC' line and no "
            "LKP subject (give --metric M)",
        )
    if test_at is None:
        missing["testcase"] = "the report has no 'testcase: NAME' line (give --testcase NAME)"
    mode = _mode(words)
    change, pct = _change(words, row, lkp_metric, mapped.lkp_better)
    metric = mapped.metric
    if metric is not None and mapped.inverted and pct is not None:
        seen = f"{pct:+.1f}% {lkp_metric} is about {inverted_pct(pct):+.1f}% {metric.value}"
        metric = replace(metric, how=f"{metric.how}: {seen}")
    url, branch, repository = _repository(lines, commit_at)
    return LkpReport(
        test=test,
        lkp_metric=lkp_metric,
        testcase=mapped.testcase,
        metric=metric,
        mode=mode,
        commit=commit,
        base=base,
        change=change,
        change_pct=pct,
        url=url,
        branch=branch,
        repository=repository,
        params=tuple(params.items()),
        not_carried=mapped.not_carried,
        missing=missing,
    )


def check(report: LkpReport, given: Collection[str] = (), mode: str = "") -> None:
    """UserError, one line, for the first field the report cannot give and the command line
    does not (`given`: the fields given there: testcase, metric, good, bad, tree), in
    `mode` (default: the report's)."""
    fix = (mode or report.mode.value) == Mode.FIX.value
    ends = {"base": "bad" if fix else "good", "commit": "good" if fix else "bad"}
    for name in ("testcase", "metric", "base", "commit", "tree"):
        option = ends.get(name, name)
        if name in report.missing and option not in given:
            why = report.missing[name]
            raise UserError(f"{why} (give --{option} REV)" if name in ends else why)


def _first(lines: Sequence[Line], pattern: re.Pattern[str], start: int = 0) -> Line | None:
    return next((x for x in lines[start:] if _match(pattern, x.text)), None)


def _match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    return pattern.fullmatch(text) if len(text) <= MAX_LINE else None


def _commit(lines: Sequence[Line]) -> tuple[Line | None, Field | None]:
    for line in lines:
        if (m := _match(COMMIT, line.text)) is not None:
            return line, Field(m.group(1), (line,), "the reported commit")
    return None, None


def _subject(lines: Sequence[Line], commit_at: Line | None) -> tuple[Line, re.Match[str]] | None:
    """LKP's subject: the mail's Subject header, or its text pasted above the commit."""
    end = commit_at.number if commit_at else len(lines)
    for line in lines[:end]:
        if (m := _match(SUBJECT, line.text)) is not None:
            return line, m
    return None


def _headline_words(
    headline: Line | None, subject: tuple[Line, re.Match[str]] | None
) -> dict[str, tuple[str, tuple[Line, ...]]]:
    """The change, its word (regression or improvement) and the metric, with the line that
    says each: the body's 'noticed a ...' line first, the subject else."""
    found: dict[str, tuple[str, tuple[Line, ...]]] = {}
    if headline is not None:
        m = HEADLINE.fullmatch(headline.text)
        assert m is not None
        metric = m.group(3).rstrip(":")
        found = {"change": (m.group(1), (headline,)), "word": (m.group(2), (headline,))}
        found["metric"] = (metric, (headline,))
    if subject is not None:
        line, m = subject
        found.setdefault("change", (m.group(3), (line,)))
        found.setdefault("word", (m.group(4).lower(), (line,)))
        found.setdefault("metric", (m.group(2), (line,)))
    return found


def _params(lines: Sequence[Line], test_at: Line | None) -> tuple[dict[str, str], list[Line]]:
    """The test's parameters: the indented 'name: value' lines after 'parameters:'."""
    params: dict[str, str] = {}
    used: list[Line] = []
    if test_at is None:
        return params, used
    start = _first(lines, PARAMETERS, test_at.number)
    if start is None or start.number - test_at.number > 8:
        return params, used
    for line in lines[start.number :]:
        if not line.text.strip() and not params:
            continue
        m = _match(PARAM, line.text)
        if m is None or len(params) >= MAX_PARAMS:
            break
        params.setdefault(m.group(1), m.group(2))
        used.append(line)
    return params, used


def _comparison(
    lines: Sequence[Line], after: int, commit: Field | None
) -> tuple[Field, int] | None:
    """The base LKP compared the commit with, and the index of the line after the block's
    header: the first 'commit:' block under a rule, its second line the commit's."""
    rule = _first(lines, RULE, after)
    if rule is None:
        return None
    at = next(
        (x for x in lines[rule.number : rule.number + 6] if _match(BLOCK_COMMIT, x.text)), None
    )
    if at is None:
        return None
    rest = [x for x in lines[at.number : at.number + 8] if x.text.strip()]
    if len(rest) < 3:
        return None
    first, second, header = rest[0], rest[1], rest[2]
    m_base, m_new = _match(BLOCK_LINE, first.text), _match(BLOCK_LINE, second.text)
    if m_base is None or m_new is None:
        return None
    base, new = m_base.group(1), m_new.group(1)
    if base.startswith("-") or ".." in base:
        return None
    if commit is not None and not (HEX.fullmatch(new) and commit.value.startswith(new)):
        return None  # another commit's comparison
    used = [first]
    tokens = header.text.split()
    if len(tokens) == 2 and HEX.fullmatch(tokens[0]) and tokens[0].startswith(base):
        base = tokens[0]  # the header's longer hash
        used.append(header)
    return Field(base, tuple(used), "the base LKP compared with"), header.number


@dataclass(frozen=True)
class _Row:
    line: Line
    before: str
    change: str
    after: str


def _row(lines: Sequence[Line], start: int, metric: str) -> _Row | None:
    """The comparison's row of `metric`, up to the next section."""
    for line in lines[start:]:
        if _match(RULE, line.text):
            return None
        m = _match(ROW, line.text)
        if m is not None and m.group(4) == metric:
            return _Row(line, m.group(1), m.group(2), m.group(3))
    return None


def _mode(words: dict[str, tuple[str, tuple[Line, ...]]]) -> Field:
    word, lines = words.get("word", ("", ()))
    if word == "improvement":
        return Field(
            Mode.FIX.value, lines, "an improvement: the commit that made it, as a fix is found"
        )
    if word == "regression":
        return Field(Mode.REGRESSION.value, lines, "a regression")
    return Field(Mode.REGRESSION.value, (), "the report says neither regression nor improvement")


def _change(
    words: dict[str, tuple[str, tuple[Line, ...]]],
    row: _Row | None,
    metric: str,
    better: str,
) -> tuple[Field | None, float | None]:
    if row is not None:
        pct = float(row.change)
        return Field(f"{pct:+g}%", (row.line,), f"{metric} {row.before} -> {row.after}"), pct
    if "change" not in words:
        return None, None
    said, lines = words["change"]
    word = words.get("word", ("", ()))[0]
    if said[:1] in "+-":
        return Field(f"{float(said):+g}%", lines, f"{metric}, a {word}"), float(said)
    worse_down = better == "higher"  # a regression of a higher-is-better metric goes down
    if not better or not word:
        return Field(f"{said}% {word}".strip(), lines, metric), None
    sign = -1 if (word == "regression") == worse_down else 1
    pct = sign * float(said)
    how = f"{metric}, a {word} of a {better}-is-better metric"
    return Field(f"{pct:+g}%", lines, how), pct


def _repository(lines: Sequence[Line], commit_at: Line | None) -> tuple[str, str, Field | None]:
    """The repository and branch the report found the commit on: the line under its commit
    line ('URL BRANCH'), or a patch's 'url: https://github.com/OWNER/REPO/commits/BRANCH'."""
    if commit_at is None:
        return "", "", None
    for line in lines[commit_at.number : commit_at.number + 4]:
        m = _match(REPOSITORY, line.text) or _match(PATCH_URL, line.text)
        if m is not None:
            url, branch = m.group(1), m.group(2)
            return url, branch, Field(f"{url} {branch}", (line,), "the report's repository")
    return "", "", None


# --- LKP's tests as kbisect's testcases ----------------------------------------------------
class _NoKind(Exception):
    """This test (with these parameters) is no kbisect testcase: the message says why."""


@dataclass(frozen=True)
class _Metric:
    lkp: str  # LKP's metric, a regular expression (the whole name)
    metric: str  # kbisect's, on the testcase
    lkp_better: str  # higher or lower
    better: str


@dataclass(frozen=True)
class _Test:
    # the testcase's name from the parameters (and LKP's metric); the parameters it took
    name: Callable[[dict[str, str], str], tuple[str, tuple[str, ...]]]
    metrics: tuple[_Metric, ...]


def _fixed(name: str) -> Callable[[dict[str, str], str], tuple[str, tuple[str, ...]]]:
    return lambda _params, _metric: (name, ())


def _hackbench(params: dict[str, str], _metric: str) -> tuple[str, tuple[str, ...]]:
    ipc = params.get("ipc", "")
    if not ipc:
        return "hackbench", ()  # the kind's default, sockets
    if ipc not in ("pipe", "socket"):
        raise _NoKind(
            f"LKP's hackbench ipc {one_line(ipc, 20)!r} is no hackbench kind's (pipe, socket)"
        )
    return f"hackbench:{ipc}", ("ipc",)


def _stress_ng(params: dict[str, str], metric: str) -> tuple[str, tuple[str, ...]]:
    stressor = params.get("test", "")
    taken: tuple[str, ...] = ("test",)
    if not stressor:  # older reports name a class: the stressor is the metric's
        parts = metric.split(".")
        stressor = parts[1] if len(parts) == 3 and parts[0] == "stress-ng" else ""
        taken = ()
    if not kinds.STRESSOR_RE.fullmatch(stressor):
        what = f"stressor {one_line(stressor, 40)!r}" if stressor else "no stressor (no 'test:')"
        raise _NoKind(f"LKP's stress-ng report names {what}: give --testcase stress-ng:STRESSOR")
    return f"stress-ng:{stressor}", taken


def _one_of(
    param: str, choices: dict[str, str], test: str
) -> Callable[[dict[str, str], str], tuple[str, tuple[str, ...]]]:
    def name(params: dict[str, str], _metric: str) -> tuple[str, tuple[str, ...]]:
        value = params.get(param, "")
        if value not in choices:
            known = ", ".join(f"{param}: {c}" for c in choices)
            raise _NoKind(
                f"LKP test {test!r} with {param}: {one_line(value, 30)!r} has no kbisect "
                f"testcase (only {known})"
            )
        return choices[value], (param,)

    return name


TESTS: dict[str, _Test] = {
    "hackbench": _Test(
        _hackbench,
        (_Metric(r"hackbench\.throughput(?:_avg|_best|_worst)?", "seconds", "higher", "lower"),),
    ),
    "stress-ng": _Test(
        _stress_ng,
        (
            _Metric(r"stress-ng\.[a-z0-9-]+\.ops_per_sec", "ops_per_sec", "higher", "higher"),
            _Metric(r"stress-ng\.[a-z0-9-]+\.ops", "ops_per_sec", "higher", "higher"),
        ),
    ),
    "perf-bench-sched-pipe": _Test(
        _fixed("perf-bench:sched-pipe"),
        (_Metric(r"perf-bench-sched-pipe\.ops_per_sec", "usecs_per_op", "higher", "lower"),),
    ),
    "perf-bench-sched-messaging": _Test(
        _fixed("perf-bench:sched-messaging"),
        (_Metric(r"perf-bench-sched-messaging\.total_time_sec", "seconds", "lower", "lower"),),
    ),
    "perf-bench-futex": _Test(
        _one_of("test", {"hash": "perf-bench:futex-hash"}, "perf-bench-futex"),
        (_Metric(r"perf-bench-futex\.ops/s", "ops_per_sec", "higher", "higher"),),
    ),
    "perf-bench-mem": _Test(
        _one_of("op", {"memcpy": "perf-bench:mem-memcpy"}, "perf-bench-mem"),
        (
            _Metric(
                r"perf-bench-mem\.memcpy\.[^.\s]+\.(?:bytes|KB|MB|GB)_per_sec",
                "gb_per_sec",
                "higher",
                "higher",
            ),
        ),
    ),
    "sysbench-cpu": _Test(
        _fixed("sysbench:cpu"),
        (_Metric(r"sysbench-cpu\.workload", "events_per_sec", "higher", "higher"),),
    ),
    "sysbench-memory": _Test(
        _fixed("sysbench:memory"),
        (_Metric(r"sysbench-memory\.throughput_(?:MB|ops)/s", "mib_per_sec", "higher", "higher"),),
    ),
    "sysbench-threads": _Test(
        _fixed("sysbench:threads"),
        (_Metric(r"sysbench-threads\.workload", "events_per_sec", "higher", "higher"),),
    ),
    "sysbench-mutex": _Test(_fixed("sysbench:mutex"), ()),
    "cyclictest": _Test(_fixed("cyclictest"), ()),
}


@dataclass(frozen=True)
class _Mapped:
    testcase: Field | None = None
    metric: Field | None = None
    lkp_better: str = ""
    not_carried: Field | None = None
    missing: dict[str, str] = field(default_factory=dict)
    inverted: bool = False  # LKP's metric and kbisect's go opposite ways (a rate, a time)


def _map(
    test: str,
    params: dict[str, str],
    param_lines: Sequence[Line],
    lkp_metric: str,
    test_at: Line | None,
    metric_lines: Iterable[Line],
    row: _Row | None,
) -> _Mapped:
    """LKP's test and metric as a kbisect testcase and its metric."""
    if test_at is None:
        return _Mapped()
    spec = TESTS.get(test)
    if spec is None:
        return _Mapped(
            missing={
                "testcase": (
                    f"LKP test {test!r} has no kbisect testcase: the kinds take "
                    f"{', '.join(TESTS)}; give --testcase NAME and --metric M (kbisect "
                    "testcases), or write one (kbisect testcase new NAME)"
                )
            }
        )
    try:
        name, taken = spec.name(params, lkp_metric)
        kinds.split(name)  # a kind's name, its arguments of the characters it takes
    except (_NoKind, UserError) as exc:
        return _Mapped(missing={"testcase": str(exc)})
    by_name = {line.text.split(":", 1)[0].strip(): line for line in param_lines}
    testcase = Field(name, (test_at, *(by_name[p] for p in taken if p in by_name)), f"LKP's {test}")
    left = [(k, v) for k, v in params.items() if k not in taken]
    carried = None
    if left:
        said = ", ".join(f"{k}: {one_line(v, 30)}" for k, v in left)
        numbers = [by_name[k].number for k, _ in left if k in by_name]
        span = f"lines {min(numbers)}-{max(numbers)}: " if numbers else ""
        carried = Field(
            said, (), f"{span}kbisect's testcase runs as its manifest says, in a VM, not LKP's"
        )
    found = next((m for m in spec.metrics if re.fullmatch(m.lkp, lkp_metric)), None)
    if found is None:
        why = (
            f"LKP metric {one_line(lkp_metric, 60)!r} has no counterpart in {name}: give "
            "--metric M (kbisect testcases --json lists its metrics)"
        )
        return _Mapped(testcase, None, "", carried, {"metric": why} if lkp_metric else {})
    lines = tuple(metric_lines) + ((row.line,) if row is not None else ())
    if found.lkp_better == found.better:
        how = f"LKP's {lkp_metric}; both {found.better} is better"
    else:
        how = (
            f"LKP's {lkp_metric} is {found.lkp_better}-is-better, kbisect's {found.metric} "
            f"{found.better}-is-better (a rate and its time)"
        )
    inverted = found.lkp_better != found.better
    metric = Field(found.metric, lines, how)
    return _Mapped(testcase, metric, found.lkp_better, carried, inverted=inverted)


def inverted_pct(pct: float) -> float:
    """A rate's change as the change of its time: -10% throughput is +11.1% seconds."""
    return (1 / (1 + pct / 100) - 1) * 100


# --- the named tree ------------------------------------------------------------------
def with_tree(report: LkpReport, trees: Iterable[Tree]) -> LkpReport:
    """The report with the named tree its repository and branch are (a tree that follows
    that branch, or every branch); or with why none is in `missing`."""
    if not report.url or report.repository is None:
        why = "the report names no repository (give --repo DIR or --tree NAME)"
        return replace(report, missing={**report.missing, "tree": why})
    where = _where(report.url)
    found = [t for t in trees if _where(t.url) == where and t.branch in (None, report.branch)]
    found.sort(key=lambda t: (t.branch != report.branch, t.name))
    if not found:
        url = one_line(report.url, 120)
        why = (
            f"the report's repository {url} ({one_line(report.branch, 40)}) is no named tree: "
            f"add it (kbisect tree add NAME {url} --branch {one_line(report.branch, 40)}), or "
            "give --repo DIR"
        )
        return replace(report, missing={**report.missing, "tree": why})
    tree = found[0]
    how = f"tree {tree.name} fetches {tree.shown_url} ({tree.branch or 'every branch'})"
    if len(found) > 1:
        how += f"; so do {', '.join(t.name for t in found[1:])}"
    return replace(report, tree=Field(tree.name, report.repository.lines, how))


def _where(url: str) -> str:
    """A repository's URL as a place, to compare: host and path, without a scheme, user,
    '.git', or git.kernel.org's /cgit and /pub/scm (cgit shows what /pub/scm serves)."""
    u = url.strip()
    if u.startswith("file://"):
        u = u[len("file://") :]
    if u.startswith("/"):
        return os.path.normpath(u).removesuffix(".git")
    m = re.fullmatch(r"(?:[A-Za-z][A-Za-z0-9+.-]*://)?(?:[^@/\s]*@)?([^/:\s]+)(?::\d+)?[:/](.*)", u)
    if m is None:
        return u
    path = m.group(2).strip("/").removesuffix(".git")
    for prefix in ("cgit/", "pub/scm/"):
        path = path.removeprefix(prefix)
    return f"{m.group(1).lower()}/{path}"
