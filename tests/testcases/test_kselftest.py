"""The kselftest:TARGET[:TEST] kind: its names, the selftests built from a tiny git tree
of our own (real git, real make) once per (tree, target), the target's config as the
testcase's fragment, and the testcase folder a pinned name loads as."""

import argparse
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbisect.builders import kernel_list, selftests
from kbisect.cli import testcases as testcases_cli
from kbisect.errors import UnknownTestcaseError, UserError
from kbisect.jobs.request import JobOptions, checked_request
from kbisect.model import Outcome
from kbisect.settings import Settings
from kbisect.testcases import kinds, kselftest, ktap, manifest, pass_fail
from kbisect.workers.validation import validate
from kbisect.workflows.bisect_types import BisectRequest
from tests.conftest import git
from tests.testcases import test_ktap

SELF = "tools/testing/selftests"
# The runner's top Makefile, as 6.1's does it for one target: the runner, the target's
# install, the list of its tests.
TOP_MAKEFILE = """\
install:
\tmkdir -p $(KSFT_INSTALL_PATH)/kselftest
\tcp run_kselftest.sh $(KSFT_INSTALL_PATH)/
\t$(MAKE) -C $(TARGETS) INSTALL_PATH=$(KSFT_INSTALL_PATH)/$(TARGETS) install
\tprintf '$(TARGETS):hello\\n$(TARGETS):bye\\n' > $(KSFT_INSTALL_PATH)/kselftest-list.txt
"""
TARGET_MAKEFILE = """\
install:
\techo built >> $(KSFT_TEST_COUNT)
\tmkdir -p $(INSTALL_PATH)
\tprintf '#!/bin/sh\\necho hello\\n' > $(INSTALL_PATH)/hello
\tcp data.txt $(INSTALL_PATH)/
"""
CONFIG = "CONFIG_POSIX_TIMERS=y\nCONFIG_HIGH_RES_TIMERS=y\n"
# The runner stand-in: says how it was run, prints what the test asks, exits as asked.
RUNNER = '#!/bin/sh\necho "runner: $*"\ncat "$FAKE_OUTPUT"\nexit "${FAKE_RC:-0}"\n'


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git tree with a selftests folder: target `tiny` (a config), `plain` (none) and
    `broken` (its make fails)."""
    repo = tmp_path / "linux"
    files = {
        f"{SELF}/Makefile": TOP_MAKEFILE,
        f"{SELF}/run_kselftest.sh": RUNNER,
        f"{SELF}/tiny/Makefile": TARGET_MAKEFILE,
        f"{SELF}/tiny/data.txt": "x\n",
        f"{SELF}/tiny/config": CONFIG,
        f"{SELF}/plain/Makefile": TARGET_MAKEFILE,
        f"{SELF}/plain/data.txt": "y\n",
        f"{SELF}/broken/Makefile": "install:\n\t@echo 'error: no compiler for this'; false\n",
        "Makefile": "VERSION = 6\n",
        "drivers/big.c": "/* not archived: the selftests need none of it */\n",
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(tmp_path, "init", "-q", str(repo))
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "selftests")
    git(repo, "tag", "v1")
    monkeypatch.setenv("KSFT_TEST_COUNT", str(tmp_path / "makes"))
    return repo


def makes(tree: Path) -> int:
    count = tree.parent / "makes"
    return len(count.read_text().splitlines()) if count.exists() else 0


def test_names_parse_and_refuse() -> None:
    assert kselftest.parse(["timers"]) == kselftest.Spec("timers")
    assert kselftest.parse(["timers", "posix_timers"]) == kselftest.Spec("timers", "posix_timers")
    pinned = kselftest.parse(["size", "get_size", "a" * 40])
    assert (pinned.selection, pinned.commit) == ("size:get_size", "a" * 40)
    with pytest.raises(UserError, match="name a selftests target"):
        kselftest.parse([])
    with pytest.raises(UserError, match="too many arguments"):
        kselftest.parse(["a", "b", "c"])
    with pytest.raises(UnknownTestcaseError, match="no selftests target or test name"):
        kselftest.parse(["-rf"])
    with pytest.raises(UnknownTestcaseError):  # `$` would match before the newline
        kselftest.parse(["timers\n"])
    for hostile in ("kselftest:timers;reboot", "kselftest:$(id)", "kselftest:a b", "kselftest:a/b"):
        with pytest.raises(UserError):
            kinds.materialize(hostile, Path("/nonexistent"))
    # a job id's and a folder's slug leaves the pinned revision out
    assert (
        kinds.slug("kselftest:timers:posix_timers:" + "b" * 40) == "kselftest-timers-posix-timers"
    )


def test_a_name_is_pinned_to_a_full_hash(tree: Path) -> None:
    head = git(tree, "rev-parse", "HEAD").strip()
    assert kselftest.pin("kselftest:tiny:hello", tree, "v1") == f"kselftest:tiny:hello:{head}"
    assert kselftest.pin(f"kselftest:tiny:{head}", tree) == f"kselftest:tiny:{head}"
    with pytest.raises(UserError, match="unknown revision"):
        kselftest.pin("kselftest:tiny", tree, "nope")
    with pytest.raises(UserError, match="give the revision"):
        kselftest.pin("kselftest:tiny", tree)


def test_the_build_is_cached_by_tree_and_target(tree: Path, cache: Path) -> None:
    first = selftests.build(tree, "v1", "tiny", cache)
    assert (first.cached, makes(tree)) == (False, 1)
    assert first.config == CONFIG
    assert first.tests == ["tiny:hello", "tiny:bye"]
    listed = subprocess.run(
        ["tar", "-tzf", str(first.tarball)], capture_output=True, text=True, check=True
    ).stdout.split()
    assert {"./run_kselftest.sh", "./tiny/hello", "./tiny/data.txt"} <= set(listed)
    again = selftests.build(tree, "HEAD", "tiny", cache)
    assert (again.cached, again.folder, makes(tree)) == (True, first.folder, 1)
    # another target is another entry, with no config of its own
    plain = selftests.build(tree, "v1", "plain", cache)
    assert (plain.cached, plain.config, makes(tree)) == (False, "", 2)
    # the user's checkout is untouched: no build output in it
    assert git(tree, "status", "--porcelain", "--ignored") == ""


def test_an_unknown_or_broken_target_is_one_line(tree: Path, cache: Path) -> None:
    with pytest.raises(UserError, match=r"no selftests target .nope. at"):
        selftests.build(tree, "v1", "nope", cache)
    with pytest.raises(UserError, match=r"does not build at .*: error: no compiler for this"):
        selftests.build(tree, "v1", "broken", cache)
    assert not any((cache / "selftests").glob("*-broken"))  # a failure is not cached


def test_a_pinned_name_loads_as_a_pass_fail_testcase(tree: Path, cache: Path) -> None:
    name = kselftest.pin("kselftest:tiny:hello", tree, "v1")
    m = manifest.load(name, tree)
    assert (m.name, m.verdict, m.userland) == (name, manifest.PASS_FAIL, "host")
    assert m.config_fragment == CONFIG  # the target's config is the testcase's fragment
    assert set(m.files) == {selftests.TARBALL, kselftest.KTAP_FILE}
    assert m.files[kselftest.KTAP_FILE] == Path(ktap.__file__).read_bytes()
    assert m.params["KSELFTEST_TARGET"] == "tiny" and m.params["KSELFTEST_TEST"] == "hello"
    assert b"bash ./run_kselftest.sh" in m.script
    # a host without the tree loads it from the cache; a whole target has the default
    assert manifest.load(name).folder == m.folder
    plain = manifest.load(kselftest.pin("kselftest:plain", tree, "v1"), tree)
    assert plain.config_fragment == kselftest.FRAGMENT and plain.params["KSELFTEST_TEST"] == ""
    assert kselftest.FRAGMENT == kinds.FRAGMENT  # the other kinds' kernels, no new build


def test_refusals_of_a_name_that_cannot_be_built(tree: Path, cache: Path) -> None:
    with pytest.raises(UnknownTestcaseError, match="no test 'nope' in selftests target 'tiny'"):
        manifest.load(kselftest.pin("kselftest:tiny:nope", tree, "v1"), tree)
    with pytest.raises(UserError, match="takes its selftests from a kernel tree"):
        manifest.load("kselftest:tiny")
    with pytest.raises(UserError, match="not built on this host and no tree was given"):
        manifest.load(kselftest.pin("kselftest:plain", tree, "v1"))
    with pytest.raises(UserError, match="no selftests target 'gone'"):
        manifest.load(kselftest.pin("kselftest:gone", tree, "v1"), tree)
    with pytest.raises(UserError, match="built from a kernel tree"):
        kinds.render("kselftest:tiny")  # testcase new --from has no template of it


def test_a_failed_boots_reason_is_its_failing_tests_lines(tree: Path, cache: Path) -> None:
    """What the guest printed is untrusted: the reason is read back from the console, each
    line printable and bounded, the kernel's own lines left out."""
    m = manifest.load(kselftest.pin("kselftest:tiny:hello", tree, "v1"), tree)
    console = (
        "[    1.0] Linux version 6.1\nTAP version 13\n1..1\n# selftests: tiny: hello\n"
        "# not ok 1 sub\x1b[31m failed\n"
        "not ok 1 selftests: tiny: hello # exit=1\nkselftest: bad: 0 passed, 1 failed\n"
        "kbisect: testcase exited with 1\n"
    )
    judged = pass_fail.judge(m, Outcome.TESTCASE_FAILED, "exit 1", console)
    assert judged.bad == manifest.FAILS
    assert judged.excerpt == "# not ok 1 sub [31m failed\nnot ok 1 selftests: tiny: hello # exit=1"
    # a panic keeps the kernel's own report
    panic = "[    1.3] Kernel panic - not syncing: x\n[    1.4] ---[ end Kernel panic ]---\n"
    assert "Kernel panic" in pass_fail.judge(m, Outcome.PANIC, "panic", panic).excerpt


def second_commit(tree: Path) -> tuple[str, str]:
    """v1 and a v2 above it: the (old, new) ends of a job."""
    (tree / "Makefile").write_text("VERSION = 7\n")
    git(tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "v2")
    git(tree, "tag", "v2")
    return git(tree, "rev-parse", "v1").strip(), git(tree, "rev-parse", "v2").strip()


def test_a_job_takes_its_selftests_from_its_new_end_or_selftests_from(
    tree: Path, cache: Path
) -> None:
    old, new = second_commit(tree)
    opts = JobOptions(good=["v1"], bad="v2", testcase="kselftest:tiny:hello", repo=str(tree))
    settings = Settings.from_env()
    assert checked_request(opts, settings).testcase == f"kselftest:tiny:hello:{new}"
    fix = dataclasses.replace(opts, good=["v2"], bad="v1", mode="fix")
    assert checked_request(fix, settings).testcase.endswith(new)  # fix mode's new end: good
    pinned = dataclasses.replace(opts, selftests_from="v1")
    assert checked_request(pinned, settings).testcase == f"kselftest:tiny:hello:{old}"
    with pytest.raises(UserError, match="no selftests target 'gone'"):
        checked_request(dataclasses.replace(opts, testcase="kselftest:gone"), settings)
    with pytest.raises(UserError, match="unknown revision 'nope'"):
        checked_request(dataclasses.replace(opts, selftests_from="nope"), settings)
    with pytest.raises(UserError, match="--selftests-from is for kselftest"):
        checked_request(dataclasses.replace(pinned, testcase="boots"), settings)
    # the workflow's validation pins a door's unpinned name to the new end as well
    job = validate(BisectRequest(repo=str(tree), good=["v1"], bad="v2", testcase=opts.testcase))
    assert job.testcase == f"kselftest:tiny:hello:{new}" and job.pass_fail


def test_prebuilt_kernels_have_no_tree_to_take_selftests_from(tmp_path: Path) -> None:
    kernels = tmp_path / "kernels.git"
    kernels.mkdir()
    (kernels / "description").write_text(kernel_list.MARKER + "\n")
    with pytest.raises(UserError, match=r"prebuilt, with no tree .* --selftests-from REV"):
        kselftest.job_testcase("kselftest:timers", kernels, "a" * 40)
    pinned = "kselftest:timers:" + "a" * 40
    assert kselftest.job_testcase(pinned, kernels, "b" * 40) == pinned


def kbisect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "kbisect"), *args], capture_output=True, text=True
    )


def test_the_commands_take_selftests_from(tree: Path, cache: Path) -> None:
    old, new = second_commit(tree)
    done = kbisect("testcase", "check", "kselftest:tiny:hello")
    assert done.returncode == 2, done.stderr
    assert "takes its selftests from a kernel tree" in done.stderr
    done = kbisect("testcase", "check", "kselftest:gone", "--repo", str(tree), "--kernel-rev", "v2")
    assert (done.returncode, len(done.stderr.splitlines())) == (2, 1), done.stderr
    assert "no selftests target 'gone'" in done.stderr
    # what check boots: the selftests from --selftests-from, else from --kernel-rev
    for given, want in (("v1", old), (None, new)):
        args = argparse.Namespace(
            name="kselftest:tiny:hello", repo=str(tree), kernel_rev="v2", selftests_from=given
        )
        assert testcases_cli._testcase(args).name == f"kselftest:tiny:hello:{want}"
    done = kbisect("try", "--kernel", "x", "--testcase", "kselftest:tiny", "--selftests-from", "v1")
    assert done.returncode == 2 and "not with --kernel" in done.stderr
    assert "--selftests-from" in kbisect("bisect", "--help").stdout


@pytest.mark.parametrize(
    ("output", "rc", "status"),
    [
        (test_ktap.PASS, 0, 0),
        (test_ktap.FAIL, 0, 1),
        (test_ktap.SKIPPED, 4, 125),
        ("", 1, 125),  # no result: the runner found no such test
        ("TAP version 13\n1..1\n", 124, 125),  # the guest's timeout cut it short
    ],
)
def test_the_guest_script_exits_as_git_bisect_run_wants(
    tree: Path, cache: Path, tmp_path: Path, output: str, rc: int, status: int
) -> None:
    """The guest script on this host (its bash, tar, timeout, python3), /kbisect/ and /tmp/
    moved under the test's folder: the install unpacked, the runner run for the one test,
    the reader's status the script's."""
    m = manifest.load(kselftest.pin("kselftest:tiny:hello", tree, "v1"), tree)
    files, tmp = tmp_path / "kbisect", tmp_path / "tmp"
    files.mkdir()
    tmp.mkdir()
    for name, data in m.files.items():
        (files / name).write_bytes(data)
    script = m.script.decode().replace("/kbisect/", "@K@").replace("/tmp/", f"{tmp}/")
    script = script.replace("@K@", f"{files}/")  # tmp_path is under /tmp/ itself
    (tmp_path / "out.txt").write_text(output)
    env = {**os.environ, **m.params, "FAKE_OUTPUT": str(tmp_path / "out.txt"), "FAKE_RC": str(rc)}
    done = subprocess.run(["sh", "-e", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == status, done.stdout + done.stderr
    assert "runner: -t tiny:hello" in done.stdout
    assert (tmp / "kselftest" / "tiny" / "hello").is_file()
    assert done.stdout.splitlines()[-1 if status != 1 else -3].startswith("kselftest: ")
