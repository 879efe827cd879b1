"""`kbisect bisect --from-report MAIL`: an Intel 0-day/LKP report's fields as the
bisection's options, one printed line a field with the mail's lines it came from. An
option given on the command line wins over the report's; a field neither gives is one
line that says what is missing. The mail is read as text (kbisect.reports.lkp_report)."""

import argparse

from kbisect.builders.trees import Trees
from kbisect.errors import UserError
from kbisect.infra.printable import one_line
from kbisect.reports import lkp_report
from kbisect.reports.lkp_report import Field, LkpReport
from kbisect.settings import Settings


def given(args: argparse.Namespace) -> set[str]:
    """The fields the command line gives itself: testcase, metric, good, bad, mode, tree."""
    found = {
        name
        for name, value in (
            ("testcase", args.testcase),
            ("metric", args.metric),
            ("good", args.good),
            ("bad", args.bad),
            ("mode", args.mode),
        )
        if value
    }
    return found | ({"tree"} if args.repo or args.tree else set())


def fill(args: argparse.Namespace, settings: Settings) -> list[str]:
    """Set the bisection's options in `args` from the report in args.from_report (what the
    command line gives stays); the lines that say each field and where it came from."""
    if args.kernels:
        raise UserError("--from-report bisects the report's commits: drop --kernels")
    report = lkp_report.parse(lkp_report.read_mail(args.from_report))
    mine = given(args)
    if "tree" not in mine:
        report = lkp_report.with_tree(report, Trees(settings).all())
    mode = args.mode or report.mode.value
    lkp_report.check(report, mine, mode)
    good, bad = report.ends(mode)
    lines = [
        _testcase(args, report),
        _metric(args, report),
        _shown("mode", args.mode, "--mode", report.mode),
        _shown("good", " ".join(args.good or []), "--good", good),
        _shown("bad", args.bad, "--bad", bad),
    ]
    if report.change is not None:
        lines.append(_line("change", report.change))
    lines.append(_where(args, report))
    if report.not_carried is not None:
        lines.append(_line("not carried", report.not_carried))
    args.mode = mode
    args.testcase = args.testcase or _value(report.testcase)
    if not args.metric and report.metric is not None and _own_testcase(args, report):
        args.metric = report.metric.value
    args.good = args.good or [_value(good)]
    args.bad = args.bad or _value(bad)
    if not (args.repo or args.tree) and report.tree is not None:
        args.tree = report.tree.value
    return lines


def _value(found: Field | None) -> str:
    assert found is not None  # lkp_report.check: the report gives what is not given
    return found.value


def _own_testcase(args: argparse.Namespace, report: LkpReport) -> bool:
    """The testcase is the report's (its metric is that testcase's)."""
    return report.testcase is not None and args.testcase in (None, "", report.testcase.value)


def _line(name: str, found: Field) -> str:
    return f"{name}: {one_line(found.value, 200)} ({found.source()})"


def _shown(name: str, mine: str | None, option: str, found: Field | None) -> str:
    """A field given on the command line (and what the report said), or the report's."""
    if mine:
        theirs = f"; the report's: {one_line(found.value, 60)}" if found is not None else ""
        return f"{name}: {one_line(mine, 200)} ({option}{theirs})"
    assert found is not None
    return _line(name, found)


def _testcase(args: argparse.Namespace, report: LkpReport) -> str:
    return _shown("testcase", args.testcase, "--testcase", report.testcase)


def _metric(args: argparse.Namespace, report: LkpReport) -> str:
    if args.metric or _own_testcase(args, report):
        return _shown("metric", args.metric, "--metric", report.metric)
    theirs = report.metric.value if report.metric is not None else "none"
    return (
        f"metric: the testcase's primary (the report's {theirs} is "
        f"{_value(report.testcase)}'s, not {args.testcase}'s)"
    )


def _where(args: argparse.Namespace, report: LkpReport) -> str:
    theirs = f"; the report's: {one_line(report.url, 120)} {report.branch}" if report.url else ""
    if args.repo:
        return f"repository: {args.repo} (--repo{theirs})"
    if args.tree:
        return f"tree: {args.tree} (--tree{theirs})"
    assert report.tree is not None
    return _line("tree", report.tree)
