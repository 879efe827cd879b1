"""An LKP report's fields as a bisection's options, for every door that takes one
(`kbisect bisect --from-report MAIL`, chat's `bisect from-report`): what the person gave
wins, the report fills the rest, and each field is one printed line with the mail's lines
it came from. A field neither gives is one line (lkp_report.check) that says what is
missing, in the words of the door that asked (`Given.option`)."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kbisect.builders.trees import Tree
from kbisect.infra.printable import one_line
from kbisect.reports import lkp_report
from kbisect.reports.lkp_report import Field, LkpReport


def cli_option(name: str) -> str:
    """The command line's name of a field: --testcase."""
    return f"--{name}"


@dataclass(frozen=True)
class Given:
    """What the person gave themselves (None or empty: not given), and how their door
    names each field's option (`--testcase` on the command line, `testcase=` in chat)."""

    testcase: str | None = None
    metric: str | None = None
    good: tuple[str, ...] = ()
    bad: str | None = None
    mode: str | None = None
    tree: str | None = None  # a named tree
    repo: str | None = None  # a local repository (the command line's --repo)
    option: Callable[[str], str] = cli_option

    def names(self) -> set[str]:
        """The fields given: testcase, metric, good, bad, mode, tree."""
        found = {
            name
            for name, value in (
                ("testcase", self.testcase),
                ("metric", self.metric),
                ("good", self.good),
                ("bad", self.bad),
                ("mode", self.mode),
            )
            if value
        }
        return found | ({"tree"} if self.repo or self.tree else set())


@dataclass(frozen=True)
class Filled:
    """The bisection's options, the person's or the report's; `lines`: each field and where
    it came from, one printable line each."""

    testcase: str
    metric: str | None
    mode: str
    good: list[str]
    bad: str
    tree: str | None  # None with a repo given
    lines: list[str] = field(default_factory=list)


def fill(report: LkpReport, given: Given, trees: Iterable[Tree]) -> Filled:
    """The options from `report` where `given` has none; UserError (one line) for a field
    neither gives. `trees`: the named trees, one of which may be the report's repository."""
    mine = given.names()
    if "tree" not in mine:
        report = lkp_report.with_tree(report, trees)
    mode = given.mode or report.mode.value
    lkp_report.check(report, mine, mode)
    good, bad = report.ends(mode)
    testcase = given.testcase or _value(report.testcase)
    own = report.testcase is not None and testcase == report.testcase.value
    lines = [
        _shown(given, "testcase", given.testcase, report.testcase),
        _metric(given, report, testcase, own),
        _shown(given, "mode", given.mode, report.mode),
        _shown(given, "good", " ".join(given.good), good),
        _shown(given, "bad", given.bad, bad),
    ]
    if report.change is not None:
        lines.append(_line("change", report.change))
    lines.append(_where(given, report))
    if report.not_carried is not None:
        lines.append(_line("not carried", report.not_carried))
    metric = given.metric or (report.metric.value if own and report.metric is not None else None)
    tree = given.tree or (None if given.repo else _value(report.tree))
    return Filled(
        testcase=testcase,
        metric=metric,
        mode=mode,
        good=list(given.good) or [_value(good)],
        bad=given.bad or _value(bad),
        tree=tree,
        lines=lines,
    )


def _value(found: Field | None) -> str:
    assert found is not None  # lkp_report.check: the report gives what is not given
    return found.value


def _line(name: str, found: Field) -> str:
    return f"{name}: {one_line(found.value, 200)} ({found.source()})"


def _shown(given: Given, name: str, mine: str | None, found: Field | None) -> str:
    """A field the person gave (and what the report said), or the report's."""
    if mine:
        theirs = f"; the report's: {one_line(found.value, 60)}" if found is not None else ""
        return f"{name}: {one_line(mine, 200)} ({given.option(name)}{theirs})"
    assert found is not None
    return _line(name, found)


def _metric(given: Given, report: LkpReport, testcase: str, own: bool) -> str:
    if given.metric or own:
        return _shown(given, "metric", given.metric, report.metric)
    if report.testcase is None:  # the report's test has no testcase; the person gave one
        return "metric: the testcase's primary"
    theirs = report.metric.value if report.metric is not None else "none"
    return (
        f"metric: the testcase's primary (the report's {theirs} is "
        f"{report.testcase.value}'s, not {testcase}'s)"
    )


def _where(given: Given, report: LkpReport) -> str:
    theirs = f"; the report's: {one_line(report.url, 120)} {report.branch}" if report.url else ""
    if given.repo:
        return f"repository: {given.repo} ({given.option('repo')}{theirs})"
    if given.tree:
        return f"tree: {given.tree} ({given.option('tree')}{theirs})"
    assert report.tree is not None
    return _line("tree", report.tree)
