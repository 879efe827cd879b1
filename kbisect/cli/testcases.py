"""`kbisect testcases`: the testcase library, a broken testcase listed with its error;
`kbisect testcase new|check`: a user's own testcase, written and tried."""

import argparse
from dataclasses import asdict
from pathlib import Path

from kbisect.cli.output import note, out, stages
from kbisect.contract import strict_json
from kbisect.errors import UserError
from kbisect.settings import Settings
from kbisect.testcases.manifest import Manifest
from kbisect.testcases.manifest import search_path as manifest_search_path

MAX_CHECK_BOOTS = 50  # a noise measurement's boots (ten make the docs' figures)


def cmd_testcases(args: argparse.Namespace, settings: Settings) -> int:
    from kbisect.testcases import kinds, manifest

    entries = manifest.catalog()
    if args.json:
        rows = [
            {"name": e.name, "folder": str(e.folder), "error": e.error}
            if e.manifest is None
            else {
                "name": e.name,
                "description": e.manifest.description,
                "primary": e.manifest.primary,
                "unit": e.manifest.metrics[e.manifest.primary].unit,
                "profile": e.manifest.profile,
                "repetitions": e.manifest.repetitions,
                "warmup": e.manifest.warmup,
                "metrics": {
                    name: {"unit": m.unit, "better": m.better.value, "exact": m.exact}
                    | ({"description": m.description} if m.description else {})
                    for name, m in e.manifest.metrics.items()
                },
                "folder": str(e.folder),
            }
            for e in entries
        ]
        rows += [
            {"kind": k.name, "usage": k.usage, "description": k.description}
            for k in kinds.KINDS.values()
        ]
        out(strict_json(rows, indent=2))
        return 0
    for e in entries:
        m = e.manifest
        if m is None:
            out(f"{e.name}: broken: {e.error}")
        else:
            out(f"{m.name}: {m.description} (primary: {m.primary}, profile: {m.profile})")
            metrics = (
                f"{k} ({v.unit}, {v.better.value} is better{', exact' if v.exact else ''})"
                for k, v in m.metrics.items()
            )
            out(f"  metrics: {', '.join(metrics)}")
    for k in kinds.KINDS.values():  # named with their arguments, as --testcase KIND:ARGS
        out(f"{k.usage}: {k.description} (a kind)")
    return 0


def cmd_testcase_new(args: argparse.Namespace, settings: Settings) -> int:
    from kbisect.testcases import skeleton

    root = (
        Path(args.dir) if args.dir else skeleton.default_dir(settings.data, settings.testcase_dirs)
    )
    folder = skeleton.write(args.name, root, args.kind or "")
    out(str(folder))
    searched = {p.resolve() for p in manifest_search_path()}
    if root.resolve() not in searched:
        note(f"{root} is not searched for testcases: export KBISECT_TESTCASES={root}")
    note(
        f"edit {folder}/guest.sh and manifest.toml, then: kbisect testcase check {args.name} "
        "--repo DIR --kernel-rev REV"
    )
    return 0


def cmd_testcase_check(args: argparse.Namespace, settings: Settings) -> int:
    from kbisect.testcases import check
    from kbisect.testcases.noise import Noise, noise

    m = _testcase(args)
    report = check.check_host(m)
    values: dict[str, list[float]] = {}
    scores: dict[str, list[float]] = {}  # each boot's score, by metric
    if not 1 <= args.boots <= MAX_CHECK_BOOTS:
        raise UserError(f"--boots {args.boots}: give 1 to {MAX_CHECK_BOOTS}")
    if args.repo or args.kernel_rev:
        if not (args.repo and args.kernel_rev):
            raise UserError("give both --repo and --kernel-rev to boot the testcase")
        if report.ok:
            from kbisect.jobs.try_pipeline import TryOptions, try_commit

            for boot in range(1, args.boots + 1):
                with stages(not args.json) as say:
                    opts = TryOptions(args.profile, on_stage=say, settings=settings)
                    result = try_commit(Path(args.repo), args.kernel_rev, m.name, opts)
                score = result.result.score
                check.check_score(m, score, report, result.result.bad)
                values = {k: v.samples for k, v in score.metrics.items()}
                for k, v in score.metrics.items():
                    scores.setdefault(k, []).append(v.value)
                report.notes.append(
                    f"boot {boot}: {result.commit.hash[:12]}, {result.result.run.seconds:.1f} s "
                    f"({result.result.run.accel}), console {result.result.run.console}"
                )
                if not report.ok:
                    break
    else:
        report.notes.append("not booted: give --repo DIR --kernel-rev REV to run it")
    measured = [noise(k, v) for k, v in scores.items() if len(v) >= 2 and not m.metrics[k].exact]
    noises: list[Noise] = [n for n in measured if n is not None]
    if args.json:
        extra = {"ok": report.ok, "metrics": values, "scores": scores}
        extra["noise"] = [asdict(n) | {"too_noisy": n.too_noisy} for n in noises]
        out(strict_json(asdict(report) | extra, indent=2))
    else:
        for line in report.notes:
            out(line)
        for name, samples in values.items():
            unit = m.metrics[name].unit
            out(f"  {name}: {' '.join(f'{v:g}' for v in samples)} {unit}")
        for n in noises:
            out(("noise: " if n.metric == m.primary else "noise (not primary): ")
                + n.line(m.metrics[n.metric].unit))  # fmt: skip
        for line in report.problems:
            out(f"problem: {line}")
        out(f"{m.name}: {'ok' if report.ok else 'not ready'}")
    return 0 if report.ok else 5


def _testcase(args: argparse.Namespace) -> Manifest:
    """The testcase checked; a kselftest's selftests built from --repo at --selftests-from
    (default: --kernel-rev)."""
    from kbisect.testcases import kselftest
    from kbisect.testcases import manifest as manifests

    name, repo = args.name, Path(args.repo) if args.repo else None
    if args.selftests_from and repo is None:
        raise UserError("--selftests-from REV is a revision of --repo DIR: give --repo")
    rev = args.selftests_from or args.kernel_rev or ""
    if repo is not None and kselftest.is_kselftest(name) and rev:
        name = kselftest.job_testcase(name, repo, rev, args.selftests_from or "")
    return manifests.load(name, repo)


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    tc = sub.add_parser("testcases", help="list the testcase library")
    tc.add_argument("--json", action="store_true", help="a JSON list on stdout")
    tc.set_defaults(func=cmd_testcases)

    tcs = sub.add_parser("testcase", help="write or check a testcase of your own")
    tsub = tcs.add_subparsers(dest="testcase_command", required=True, metavar="COMMAND")
    new = tsub.add_parser("new", help="write a working skeleton testcase folder")
    new.add_argument("name", help="the testcase name: lowercase letters, digits and dashes")
    new.add_argument(
        "--dir",
        help="where the folder goes (default: the first KBISECT_TESTCASES folder, else "
        "the user's testcases under KBISECT_DATA)",
    )
    new.add_argument(
        "--from",
        dest="kind",
        metavar="KIND",
        help="start from a testcase kind instead of the skeleton, e.g. stress-ng:switch, "
        "hackbench:pipe, or fio:JOB.fio (your fio job file, copied in) ('kbisect testcases' "
        "lists the kinds)",
    )
    new.set_defaults(func=cmd_testcase_new)
    chk = tsub.add_parser("check", help="check a testcase, and boot it once on a kernel")
    chk.add_argument("name", help="the testcase name ('kbisect testcases')")
    chk.add_argument("--repo", help="a kernel git repository to build --kernel-rev from")
    chk.add_argument("--kernel-rev", help="the revision whose kernel boots the testcase")
    chk.add_argument("--profile", help="device profile: fast or ebs-gp2 (default: the testcase's)")
    chk.add_argument(
        "--selftests-from",
        metavar="REV",
        help="a kselftest:TARGET[:TEST] testcase's selftests from this revision of the repository "
        "(default: --kernel-rev)",
    )
    chk.add_argument(
        "--boots",
        type=int,
        default=1,
        help="boot it this many times on the one kernel (2 or more: each metric's "
        "boot-to-boot CV, and the boots a 5%% and a 10%% step would need)",
    )
    chk.add_argument("--json", action="store_true", help="the findings as JSON on stdout")
    chk.set_defaults(func=cmd_testcase_check)
