"""Bad input: one clear line on stderr, a distinct exit code, nothing built."""

import subprocess
from pathlib import Path

import pytest

from kbisect.errors import CannotTestError, UserError
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.main import error_line, exit_code, main
from tests.conftest import git


@pytest.fixture
def lab(tmp_path: Path, tiny_tarball: Path) -> Path:
    create_lab(tmp_path / "lab", LabOptions(commits=4, seed=1))
    return tmp_path / "lab"


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert err.startswith("kbisect: error: ")
    return err


@pytest.mark.parametrize("rev", ["no-such-branch", "deadbeef" * 5, "--output=/tmp/x", "HEAD~99"])
def test_unknown_revision(
    lab: Path, cache: Path, rev: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["try", "--repo", str(lab), "--testcase", "nvme-snapshot-read", "--", rev])
    assert code == 2
    assert "revision" in _error_line(capsys)
    assert not (cache / "artifacts").exists()


def test_trace_needs_disks_and_is_refused_before_a_build(
    lab: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["try", "--repo", str(lab), "HEAD", "--testcase", "sched-pipe", "--trace"])
    assert code == 2
    assert "has no disks to trace" in _error_line(capsys)
    assert not (cache / "artifacts").exists()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("--- a/nope.c\n+++ b/nope.c\n@@ -1 +1 @@\n-x\n+y\n", "p.diff does not apply to HEAD ("),
        ("a mail without a diff\n", "p.diff holds no diff"),
    ],
)
def test_a_patch_that_does_not_apply_is_one_line_before_a_build(
    lab: Path, cache: Path, tmp_path: Path, text: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.diff").write_text(text)
    args = ["try", "--repo", str(lab), "HEAD", "--testcase", "nvme-snapshot-read"]
    assert main([*args, "--patch", str(tmp_path / "p.diff")]) == 2
    assert says in _error_line(capsys)
    assert not (cache / "artifacts").exists()


def test_unknown_testcase(lab: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["try", "--repo", str(lab), "HEAD", "--testcase", "nvme-snapshot"])
    assert code == 2
    assert "unknown testcase 'nvme-snapshot'" in _error_line(capsys)


def test_malformed_manifest(
    lab: Path,
    tmp_path: Path,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "tc" / "broken"
    folder.mkdir(parents=True)
    (folder / "manifest.toml").write_text('name = "broken"\nprimary = "x"\n')
    monkeypatch.setenv("KBISECT_TESTCASES", str(tmp_path / "tc"))
    assert main(["try", "--repo", str(lab), "HEAD", "--testcase", "broken"]) == 2
    assert "missing required field 'metrics'" in _error_line(capsys)


def test_unknown_profile(lab: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["try", "--repo", str(lab), "HEAD", "--testcase", "nvme-snapshot-read"]
    assert main([*args, "--profile", "floppy"]) == 2
    assert "ebs-gp2" in _error_line(capsys)


def test_not_a_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["try", "--repo", str(tmp_path), "HEAD", "--testcase", "nvme-snapshot-read"]
    assert main(args) == 2
    assert "not a git repository" in _error_line(capsys)


def test_lab_create_bad_span(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "create", str(tmp_path / "l"), "--broken-build", "x"]) == 2
    assert "bad breakage" in _error_line(capsys)
    assert not (tmp_path / "l").exists()


def test_lab_create_prints_where_the_truth_is(
    tmp_path: Path, tiny_tarball: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lab", "create", str(tmp_path / "l"), "--commits", "5", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "l.truth.json" in out
    assert git(tmp_path / "l", "rev-list", "--count", "HEAD").strip() == "6"


def test_parallel_must_be_positive(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bisect", "--repo", str(lab), "--good", "lab-good", "--bad", "lab-bad"]
    code = main([*args, "--testcase", "nvme-snapshot-read", "--parallel", "0", "--no-start"])
    assert code == 2
    assert "--parallel" in _error_line(capsys)


def _dead_address() -> str:
    """A local address where nothing listens (never the default 7233)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("KBISECT_TEMPORAL_ADDRESS", "localhost"),
        ("KBISECT_TEMPORAL_ADDRESS", "a:b:c"),
        ("KBISECT_JOBS", "0"),
        ("KBISECT_JOBS", "x"),
        ("KBISECT_TEMPORAL_TLS", "maybe"),
        ("KBISECT_STORE", "ftp://host/kernels"),
        ("KBISECT_CCACHE_REMOTE", "s3://bucket/ccache"),
        ("KBISECT_HOST_NAME", "vm a"),
    ],
)
@pytest.mark.parametrize(
    "command", [["status"], ["watch", "some-job"], ["down"], ["testcases"], ["status", "--json"]]
)
def test_a_malformed_setting_is_one_line_for_any_command(
    name: str,
    value: str,
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KBISECT_DATA", str(tmp_path / "data"))
    monkeypatch.setenv(name, value)
    assert main(command) == 2
    line = _error_line(capsys)
    assert f"{name}={value!r}" in line  # quoted as given (no emoji for ':b:')


def test_cancel_an_empty_id(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KBISECT_TEMPORAL_ADDRESS", _dead_address())
    assert main(["cancel", ""]) == 2
    assert "job id" in _error_line(capsys)


def test_lab_create_onto_a_file(
    tmp_path: Path, tiny_tarball: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f").write_text("precious")
    assert main(["lab", "create", str(tmp_path / "f"), "--commits", "4", "--quiet"]) == 2
    assert "not a directory" in _error_line(capsys)
    assert (tmp_path / "f").read_text() == "precious"


@pytest.mark.parametrize("where", ["/proc/x", "/proc/self/status/lab"])
def test_lab_create_where_nothing_can_be_written(
    where: str, tiny_tarball: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lab", "create", where, "--commits", "4", "--quiet"]) == 2
    assert f"cannot create the lab in {where}" in _error_line(capsys)


def test_lab_create_again_after_a_failed_one(
    tmp_path: Path, tiny_tarball: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patch = tmp_path / "bad.patch"
    patch.write_text("--- a/nope.c\n+++ b/nope.c\n@@ -1 +1 @@\n-a\n+b\n")
    lab = str(tmp_path / "lab")
    args = ["lab", "create", lab, "--commits", "4", "--quiet", "--seed", "1"]
    assert main([*args, "--culprit-patch", str(patch)]) == 2
    assert "does not apply" in _error_line(capsys)
    assert main(args) == 0, capsys.readouterr().err
    assert "lab.truth.json" in capsys.readouterr().out


@pytest.fixture
def no_service(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the command looks for (and so may start) a local service."""
    from kbisect.infra import temporal_server

    def boom(*_: object) -> bool:
        raise AssertionError("a service was looked for before the input was checked")

    monkeypatch.setenv("KBISECT_TEMPORAL_ADDRESS", _dead_address())
    monkeypatch.setattr(temporal_server, "listening", boom)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--testcase", "no-such-test"], "unknown testcase 'no-such-test'"),
        (["--profile", "floppy"], "unknown device profile 'floppy'"),
        (["--repetitions", "0"], "--repetitions"),
        (["--repetitions", "1000"], "--repetitions"),
        (["--parallel", "0"], "--parallel"),
        (["--max-boots", "99999999999999999999"], "--max-boots 99999999999999999999: give 3"),
        (["--testcase", "boots", "--signature", "(a)\\1"], "not a regular expression in RE2"),
        (["--testcase", "sched-pipe", "--trace"], "has no disks to trace"),
        (["--testcase", "boots", "--duets"], "--duets pairs timings, and boots is pass/fail"),
        (["--good", "lab-bad"], "the same commit"),
        (["--bad", "lab-bad^{commit}", "--good", "lab-bad"], "the same commit"),
        (["--fixup", "/nonexistent.diff"], "--fixup /nonexistent.diff: cannot read it"),
        (["--fixup", "/etc/hostname"], "holds no diff"),
        (["--fixup", "/etc/hostname", "--kernels", "a.deb,b.deb"], "--fixup patches the commits"),
    ],
)
def test_bisect_checks_its_input_before_a_service_or_a_job(
    lab: Path,
    no_service: None,
    extra: list[str],
    expected: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["bisect", "--repo", str(lab), "--testcase", "nvme-snapshot-read"]
    if "--good" not in extra:
        args += ["--good", "lab-good"]
    if "--bad" not in extra:
        args += ["--bad", "lab-bad"]
    assert main([*args, *extra]) == 2
    assert expected in _error_line(capsys)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "give the series"),
        (["lab-good"], "a sweep takes 2 to 50 kernels, oldest first (1 given)"),
        # 500 revisions, none of which exists: refused for their number before any is resolved
        ([f"no-such-{i}" for i in range(500)], "2 to 50 kernels, oldest first (500 given)"),
        (["lab-good", "no-such-tag"], "revision"),
        (["lab-good", "lab-bad", "--boots", "2"], "--boots 2: give 3 to 5000"),
        (["lab-good", "lab-bad", "--boots", "99999999999999999999"], "give 3 to 5000"),
        (["lab-good", "lab-bad", "--testcase", "boots"], "boots passes or fails"),
        (["lab-good", "lab-bad", "--metric", "nope"], "has no metric 'nope'"),
        (["lab-good", "--kernels", "a.deb,b.deb"], "drop the revisions"),
        (["--kernels", "a.deb,b.deb", "--patch", "1=x.diff"], "--patch applies to a revision"),
        (["lab-good", "lab-bad", "--patch", "0=x.diff"], "the series has 2 kernels"),
        (["--kernels", "linux-image-a,linux-image-b"], "needs K=REV for each kernel"),
        (["--kernels", "linux-image-a=lab-good,linux-image-b"], "map every kernel"),
        (["--kernels", "linux-image-a=lab-good,linux-image-b=nope"], "revision"),
    ],
)
def test_sweep_checks_its_input_before_a_service_or_a_job(
    lab: Path,
    no_service: None,
    args: list[str],
    expected: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = ["sweep", "--repo", str(lab), "--testcase", "nvme-snapshot-read", *args]
    assert main(command) == 2
    assert expected in _error_line(capsys)


def test_sweep_bisect_over_prebuilt_kernels_needs_their_revisions(
    no_service: None, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kernels = ["--kernels", "linux-image-a,linux-image-b"]
    assert main(["sweep", *kernels, "--testcase", "nvme-snapshot-read", "--bisect"]) == 2
    assert "needs their source revisions" in _error_line(capsys)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["Bad Name", "--tree", "lab"], "invalid watch name 'Bad Name'"),
        (["w"], "give what to watch: --tree NAME"),
        (["w", "--apt", "linux-image-*", "--tags", "v*"], "--tags needs --tree"),
        (["w", "--tree", "lab", "--tags", "$(id)"], "give a glob"),
        (["w", "--apt", "bash*"], "a glob of linux-image-* package names"),
        (["w", "--tree", "nope"], "no tree 'nope': add it with"),
        (["w", "--tree", "lab", "--every", "5"], "--every '5': give minutes, hours or days"),
        (["w", "--tree", "lab", "--boots", "2"], "--boots 2: give 3 to 5000"),
        (["w", "--tree", "lab", "--boots", "5001"], "--boots 5001: give 3 to 5000"),
        (["w", "--tree", "lab", "--testcase", "boots"], "boots passes or fails"),
        (["w", "--tree", "lab", "--metric", "nope"], "has no metric 'nope'"),
    ],
)
def test_series_watch_checks_its_input_before_a_service(
    no_service: None,
    cache: Path,
    args: list[str],
    expected: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (cache / "trees" / "lab.git").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--bare", str(cache / "trees" / "lab.git")], check=True)
    command = ["series", "watch", *args, "--testcase", "nvme-snapshot-read"]
    assert main(command) == 2
    assert expected in _error_line(capsys)


def test_a_malformed_testcase_is_caught_before_a_service(
    lab: Path,
    tmp_path: Path,
    no_service: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "tc" / "broken"
    folder.mkdir(parents=True)
    (folder / "manifest.toml").write_text('name = "broken"\nprimary = "x"\n')
    monkeypatch.setenv("KBISECT_TESTCASES", str(tmp_path / "tc"))
    args = ["bisect", "--repo", str(lab), "--good", "lab-good", "--bad", "lab-bad"]
    assert main([*args, "--testcase", "broken"]) == 2
    assert "missing required field 'metrics'" in _error_line(capsys)


def test_every_option_has_help_and_every_table_has_json() -> None:
    import argparse

    from kbisect.cli.help_pages import subcommands
    from kbisect.main import build_parser

    parser = build_parser()
    for prog, p in [(parser.prog, parser), *((s.prog, s) for _, s, _ in subcommands(parser))]:
        for action in p._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            assert action.help, f"{prog} {action.dest} has no help text"
        tables = (
            "status",
            "testcases",
            "try",
            "watch",
            "bisect",
            "report",
            "sweep",
            "list",
            "show",
        )
        if prog.split()[-1] in tables:
            assert any("--json" in a.option_strings for a in p._actions), prog


def test_every_command_s_help_has_a_description_and_an_example_that_parses() -> None:
    import shlex

    from kbisect.cli.help_pages import EXAMPLES, subcommands
    from kbisect.main import build_parser

    parser = build_parser()
    named = subcommands(parser)
    assert {name for name, _, _ in named} == set(EXAMPLES)  # one each, none left over
    for name, sub, _ in named:
        text = sub.format_help()
        assert sub.description and sub.description in text, name
        example = EXAMPLES[name]
        assert f"example:\n  {example}" in text, name
        argv = shlex.split(example)
        assert argv[0] == "kbisect" and " ".join(argv[1:]).startswith(name.split()[0]), example
        args = parser.parse_args(argv[1:])  # exits (SystemExit) on a stale example
        assert callable(args.func), example


def test_the_help_names_each_option_s_value_as_the_synopsis_does() -> None:
    """`--repo REPO` in --help, `--repo DIR` in docs/usage.md: one placeholder each."""
    import re

    from kbisect.cli.help_pages import subcommands
    from kbisect.main import build_parser

    usage = (Path(__file__).parents[2] / "docs" / "usage.md").read_text()
    synopsis = usage.split("## Synopsis", 1)[1].split("\n## ", 1)[0]
    written: dict[str, set[str]] = {}
    for m in re.finditer(r"(--[a-z][a-z-]*) ([A-Z][A-Z0-9_]*)(?=[\]\s.]|$)", synopsis):
        written.setdefault(m.group(1), set()).add(m.group(2))
    shown: dict[str, set[str]] = {}
    for _, sub, _ in subcommands(build_parser()):
        for action in sub._actions:
            if action.nargs != 0:
                for option in action.option_strings:
                    shown.setdefault(option, set()).add(str(action.metavar or action.dest.upper()))
    assert len(written) > 30
    unlike = {o: (w, shown.get(o)) for o, w in written.items() if not w & shown.get(o, set())}
    assert not unlike, unlike


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["report", "--plot", "/proc/x.png"], "--plot /proc/x.png: cannot write in /proc"),
        (["report", "--plot", "/dev/full"], "--plot /dev/full is not a regular file"),
        (["report", "--bisect-log", "/proc/x"], "--bisect-log /proc/x: cannot write in /proc"),
        (["report", "--bisect-log", "{tmp}"], "is a folder: give a file name"),
        (["report", "--plot", "/dev/null"], "--plot /dev/null is not a regular file"),
        (["report", "--plot", "{tmp}/no/such/x.png"], "there is no folder"),
        (["report", "--sru", "--bug", "-5"], "--bug -5: give a Launchpad bug number"),
    ],
)
def test_report_checks_where_it_writes_before_a_service(
    no_service: None,
    tmp_path: Path,
    args: list[str],
    expected: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = [a.format(tmp=tmp_path) for a in args] + ["bisect-x-12345678"]
    assert main(command) == 2
    assert expected in _error_line(capsys)


def test_sweep_checks_its_plot_path_before_the_sweep(
    lab: Path, no_service: None, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["sweep", "--repo", str(lab), "lab-good", "lab-bad", "--testcase", "sched-pipe"]
    assert main([*command, "--plot", "/proc/x.png"]) == 2
    assert "--plot /proc/x.png: cannot write in /proc" in _error_line(capsys)


def test_gc_refuses_a_repo_that_is_not_one(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gc", "--dry-run", "--repo", "/proc"]) == 2
    assert "/proc is not a git repository" in _error_line(capsys)


@pytest.mark.parametrize(
    ("kernel", "expected"),
    [
        (["nope.deb"], "--kernel nope.deb: no such file"),
        (["bad name!"], "is not a file and not a Debian package name"),
        (["/etc/hostname", "--modules", "/nonexistent"], "--modules /nonexistent is not a folder"),
        (["/etc/hostname", "--repetitions=-1"], "--repetitions -1: give 1 to"),
    ],
)
def test_try_kernel_refuses_bad_input_before_it_says_fetching(
    cache: Path, kernel: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["try", "--kernel", *kernel, "--testcase", "boots"]) == 2
    err = capsys.readouterr().err
    assert "fetching" not in err and err.count("\n") == 1 and expected in err, err


def test_a_bisect_log_may_go_to_a_stream(tmp_path: Path) -> None:
    from kbisect.cli.output_files import checked_output, writing
    from kbisect.errors import UserError

    assert checked_output("/dev/null", "--bisect-log", streams=True) == Path("/dev/null")
    with pytest.raises(UserError, match="--bisect-log /dev/full: cannot write it"):
        with writing(Path("/dev/full"), "--bisect-log"):
            Path("/dev/full").write_text("x" * 100_000)


def test_a_kernel_the_testcase_cannot_test_has_its_own_exit_code() -> None:
    # a UserError too (one line, no traceback), but not bad input: a script tells them apart
    cannot = CannotTestError("cannot test: the guest could not run the testcase: no bfq", "c.log")
    assert exit_code(cannot) == 7 and exit_code(UserError("--boots 0: give 1 or more")) == 2
    assert error_line(cannot).endswith("no bfq (log: c.log)")
