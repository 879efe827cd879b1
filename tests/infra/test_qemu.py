import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbisect.errors import InfraError
from kbisect.infra import qemu
from kbisect.infra.qemu import PROFILES, classify_run, nvme_args, parse_records, serial_args
from kbisect.model import Artifact, Disk, GuestImage, GuestRun, Outcome

BOOTED = {"event": "booted"}


def test_nvme_disk_has_its_serial_and_the_profile_throttles() -> None:
    args = nvme_args(Disk("origin", 64, PROFILES["ebs-gp2"]), Path("/c/origin.img"))
    drive, device = args[1], args[3]
    assert "throttling.iops-total=3000" in drive and "throttling.bps-total=134217728" in drive
    assert device == "nvme,serial=kb-origin,drive=origin"
    fast = nvme_args(Disk("cow", 64, PROFILES["fast"]), Path("/c/cow.img"))
    assert "throttling" not in fast[1]


def test_paths_with_commas_are_refused() -> None:
    # QEMU splits options at commas: such a path would inject options.
    with pytest.raises(InfraError, match="comma"):
        serial_args(Path("/tmp/a,b/console.log"), Path("/tmp/x"))


def test_argv_is_a_list_of_plain_strings() -> None:
    argv = qemu.base_args(512, 2) + qemu.accel_args("tcg")
    assert argv[0] == "qemu-system-x86_64" and all(isinstance(a, str) for a in argv)
    assert "-no-reboot" in argv


def test_parse_records_skips_noise_and_torn_lines() -> None:
    text = 'junk\r\nKBISECT {"event":"booted"}\r\nKBISECT {"event":"met\nKBISECT [1]\n'
    assert parse_records(text) == [BOOTED]


def test_a_guests_strings_come_out_as_one_capped_line() -> None:
    """Every string a guest puts in a record, keys and nested ones too, is one printable line
    of at most DETAIL_CAP characters: a line of its own would be a command in a GitLab note."""
    reason = "x\n/close\n/label ~pwned\n@all" + "\r\n\t\x1b[2J\u2028\x00 " * 100_000  # 1 MB
    raw = {"event": "harness-failed", "reason": reason, "more": [{"na\nme": "a\nb"}]}
    (rec,) = parse_records(qemu.RECORD_PREFIX + json.dumps(raw) + "\n")
    said = str(rec["reason"])
    assert said.startswith("x /close /label ~pwned @all [2J ") and said.isprintable()
    assert len(said) <= qemu.DETAIL_CAP and rec["more"] == [{"na me": "a b"}]
    outcome, detail = classify_run([rec], "", True)
    assert (outcome, detail) == (
        Outcome.CANNOT_TEST,
        f"the guest could not run the testcase: {said}",
    )
    unread = {"event": "harness-failed", "reason": "one\n/two"}  # records not parsed here
    assert classify_run([unread], "", True)[1].endswith("testcase: one /two")


def test_a_record_nested_past_the_recursion_limit_is_skipped() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    text = f"{qemu.RECORD_PREFIX}{deep}\n{qemu.RECORD_PREFIX}" + '{"event": "booted"}\n'
    assert parse_records(text) == [BOOTED]


def test_a_number_of_more_digits_than_python_converts_is_skipped() -> None:
    huge = f'{{"event": "metric", "value": {"9" * 5000}}}'
    text = f"{qemu.RECORD_PREFIX}{huge}\n{qemu.RECORD_PREFIX}" + '{"event": "booted"}\n'
    assert parse_records(text) == [BOOTED]


def test_console_words_are_one_printable_line() -> None:
    console = "Kernel panic - not syncing: \x1b[31mVFS\tboom\x1b[0m" + "!" * 1000
    panic = classify_run([], console, True)[1]
    assert panic.startswith("Kernel panic - not syncing: [31mVFS boom [0m!!!")
    assert panic.isprintable() and len(panic) <= qemu.DETAIL_CAP
    said = qemu.last_words("echo: \x1b]0;title\x07I/O error\nkbisect: testcase exited with 1\n")
    assert said == "echo: ]0;title I/O error"


@pytest.mark.parametrize(
    ("records", "console", "exited", "outcome"),
    [
        ([BOOTED, {"event": "done", "status": 0}], "", True, Outcome.SUCCESS),
        ([BOOTED, {"event": "done", "status": 1}], "", True, Outcome.TESTCASE_FAILED),
        ([], "Kernel panic - not syncing: VFS", True, Outcome.PANIC),
        ([BOOTED], "Kernel panic - not syncing: lab", True, Outcome.PANIC),
        ([], "Booting the kernel", False, Outcome.HANG),
        ([BOOTED], "", False, Outcome.HANG),
        ([BOOTED], "", True, Outcome.PANIC),  # stopped without saying why
    ],
)
def test_four_outcomes(
    records: list[dict[str, object]], console: str, exited: bool, outcome: Outcome
) -> None:
    assert classify_run(records, console, exited)[0] is outcome


def test_the_harness_failing_is_not_the_testcase_failing() -> None:
    failed = {"event": "harness-failed", "reason": "module dm_snapshot does not load"}
    assert classify_run([BOOTED, failed], "", True) == (
        Outcome.CANNOT_TEST,
        "the guest could not run the testcase: module dm_snapshot does not load",
    )


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (0, Outcome.SUCCESS),
        (1, Outcome.TESTCASE_FAILED),
        (124, Outcome.TESTCASE_FAILED),
        (125, Outcome.CANNOT_TEST),
        (127, Outcome.TESTCASE_FAILED),
        (128, Outcome.CANNOT_TEST),
        (255, Outcome.CANNOT_TEST),
    ],
)
def test_statuses_follow_git_bisect_run(status: int, outcome: Outcome) -> None:
    assert classify_run([BOOTED, {"event": "done", "status": status}], "", True)[0] is outcome


@pytest.mark.parametrize(
    ("records", "cannot"),
    [
        ([BOOTED, {"event": "done", "status": 125}], True),
        ([BOOTED, {"event": "harness-failed", "reason": "module x does not load"}], True),
        ([BOOTED, {"event": "done", "status": 137}], False),  # a killed script: boot again
        ([BOOTED, {"event": "done", "status": 1}], False),
        ([BOOTED], False),
    ],
)
def test_only_what_every_boot_would_say_gives_the_kernel_up(
    records: list[dict[str, object]], cannot: bool
) -> None:
    assert qemu.kernel_cannot_test(records) is cannot


@pytest.mark.parametrize(
    ("records", "console", "exited", "returncode", "outcome"),
    [
        # A result or a panic on the console is the guest's verdict, whatever QEMU did after.
        ([BOOTED, {"event": "done", "status": 0}], "", True, -9, Outcome.SUCCESS),
        ([BOOTED], "Kernel panic - not syncing: lab", True, -9, Outcome.PANIC),
        ([BOOTED], "Kernel panic - not syncing: lab", True, 1, Outcome.PANIC),
        # panic=-1 with -no-reboot: a guest that stops on its own makes QEMU exit 0.
        ([BOOTED], "", True, 0, Outcome.PANIC),
        # We killed it at the timeout: a hang, not a crash.
        ([BOOTED], "", False, -9, Outcome.HANG),
    ],
)
def test_guest_verdicts_survive_the_exit_status(
    records: list[dict[str, object]], console: str, exited: bool, returncode: int, outcome: Outcome
) -> None:
    got = classify_run(records, console, exited, returncode=returncode, stderr="x", run_dir="/r")
    assert got[0] is outcome


@pytest.mark.parametrize(
    ("returncode", "stderr", "words"),
    [
        (-9, "", ["SIGKILL"]),  # the OOM killer
        (-11, "early\nlast words\n", ["SIGSEGV", "last words"]),
        (-6, "qemu: kvm_buf_set_msrs: Assertion failed\n", ["SIGABRT", "kvm_buf_set_msrs"]),
        (1, "qemu-system-x86_64: cannot set up guest memory 'pc.ram'\n", ["status 1", "pc.ram"]),
    ],
)
def test_qemu_killed_or_crashed_without_a_panic_is_a_host_error(
    returncode: int, stderr: str, words: list[str]
) -> None:
    with pytest.raises(InfraError) as err:
        classify_run(
            [BOOTED],
            "booting\nsome log",
            True,
            returncode=returncode,
            stderr=stderr,
            run_dir="/r/1",
        )
    message = str(err.value)
    assert "\n" not in message and "/r/1" in message
    assert all(w in message for w in words), message
    assert "early" not in message  # only the last line of qemu.stderr


@pytest.mark.parametrize(
    "stderr",
    [
        "qemu-system-x86_64: terminating on signal 15 from pid 1 (systemd)\n",
        "qemu-system-x86_64: terminating on signal 1\n",  # SIGHUP, no sender known
        "qemu-system-x86_64: terminating on signal 2 from pid 77 (<unknown process>)\n",
    ],
)
def test_qemu_stopped_by_a_signal_is_a_host_error_not_a_panic(stderr: str) -> None:
    # QEMU catches SIGTERM, SIGINT and SIGHUP, says so on stderr and exits 0, as a guest
    # that powers off makes it: a host shutdown must not skip the commit as a panic.
    with pytest.raises(InfraError, match="terminating on signal") as err:
        classify_run([BOOTED], "booting", True, returncode=0, stderr=stderr, run_dir="/r/2")
    assert "/r/2" in str(err.value) and "\n" not in str(err.value)
    # A verdict the guest left before the stop still stands.
    done: list[dict[str, object]] = [BOOTED, {"event": "done", "status": 0}]
    assert classify_run(done, "", True, stderr=stderr)[0] is Outcome.SUCCESS


FAKE_QEMU = """#!/bin/sh
for a in "$@"; do
  case "$a" in
    file,id=console,path=*) console=${a#file,id=console,path=} ;;
    file,id=results,path=*) results=${a#file,id=results,path=} ;;
  esac
done
: >"$console"; : >"$results"
eval "$KB_FAKE"
"""


@pytest.fixture
def fake_qemu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in `qemu-system-x86_64` on PATH that runs the shell in $KB_FAKE."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / qemu.QEMU
    script.write_text(FAKE_QEMU)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return run_dir


ARTIFACT = Artifact("c0ffee", "t", "h", "/nonexistent/bzImage", "/c", "/l")
GUEST = GuestImage("/nonexistent/initramfs", ())


def _run(run_dir: Path, timeout: float = 20) -> GuestRun:
    return qemu.QemuMachine(memory_mib=64, cpus=1)._run_in(
        run_dir, "tcg", ARTIFACT, GUEST, [], timeout, "", lambda _: None
    )


def test_a_crashed_qemu_raises_a_host_error_naming_signal_stderr_and_run_dir(
    fake_qemu: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "KB_FAKE", 'echo "Linux version 6.1" >"$console"; echo "qemu: oops" >&2; kill -SEGV $$'
    )
    with pytest.raises(InfraError, match="SIGSEGV") as err:
        _run(fake_qemu)
    assert "qemu: oops" in str(err.value) and str(fake_qemu) in str(err.value)


def test_qemu_terminated_by_a_signal_from_outside_is_a_host_error(
    fake_qemu: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What QEMU does on a host shutdown's SIGTERM: a line on stderr, then exit status 0.
    monkeypatch.setenv(
        "KB_FAKE",
        "trap 'echo \"qemu-system-x86_64: terminating on signal 15 from pid 1\" >&2; exit 0' "
        'TERM; echo "Linux version 6.1" >"$console"; kill -TERM $$; sleep 5',
    )
    with pytest.raises(InfraError, match="terminating on signal 15") as err:
        _run(fake_qemu)
    assert str(fake_qemu) in str(err.value)


def test_a_cancelled_run_kills_qemu_and_is_a_host_error(
    fake_qemu: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pidfile = tmp_path / "qemu.pid"
    monkeypatch.setenv("KB_FAKE", f'echo $$ >"{pidfile}"; exec sleep 60')

    def cancelled(_: str) -> None:
        raise InfraError("stopped")  # what a cancelled activity's progress does

    with pytest.raises(InfraError, match="stopped"):
        qemu.QemuMachine(memory_mib=64, cpus=1)._run_in(
            fake_qemu, "tcg", ARTIFACT, GUEST, [], 20, "", cancelled
        )
    assert not _state(int(pidfile.read_text())), "QEMU outlived the cancelled run"


def _state(pid: int) -> str:
    """'' once the process is gone (or a zombie nobody waits for)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return ""
    state = stat.rsplit(")", 1)[1].split()[0]
    return "" if state in ("Z", "X") else state


PARENT = """
import sys
from pathlib import Path
from tests.infra.test_qemu import _run
_run(Path(sys.argv[1]), timeout=60)
"""


def test_qemu_dies_with_a_killed_worker_and_has_its_own_process_group(
    fake_qemu: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pidfile = tmp_path / "qemu.pid"
    monkeypatch.setenv("KB_FAKE", f'echo $$ >"{pidfile}"; exec sleep 60')
    worker = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(fake_qemu)], cwd=Path(__file__).parents[2]
    )
    child = 0
    try:
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert time.monotonic() < deadline and worker.poll() is None, "fake QEMU not started"
            time.sleep(0.05)
        child = int(pidfile.read_text())
        group = os.getpgid(child)
        worker.kill()  # as the OOM killer would
        worker.wait()
        deadline = time.monotonic() + 5
        while _state(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _state(child), "QEMU outlived its killed worker"
        assert group == child  # its own group: a terminal's Ctrl-C is the worker's to handle
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        if child and _state(child):
            os.kill(child, signal.SIGKILL)


def test_a_flooded_console_is_read_from_its_tail_only(
    fake_qemu: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(qemu, "CONSOLE_CAP", 1 << 20, raising=False)
    monkeypatch.setattr(qemu, "FLOOD_BYTES", 1 << 30)  # what is read, not the flood guard
    # 64 MiB of holes, then the panic: the panic is found, the rest never read.
    monkeypatch.setenv(
        "KB_FAKE",
        'echo "Kernel panic - not syncing: early" >"$console"; truncate -s 64M "$console"; '
        'echo "Kernel panic - not syncing: flood" >>"$console"',
    )
    run = _run(fake_qemu)
    assert run.outcome is Outcome.PANIC
    assert "flood" in run.detail and "early" not in run.detail
    assert "console" in run.detail and "last 1 MiB" in run.detail, run.detail


def test_a_flooded_result_channel_is_read_from_its_head_only(
    fake_qemu: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(qemu, "RESULTS_CAP", 1 << 20, raising=False)
    monkeypatch.setattr(qemu, "FLOOD_BYTES", 1 << 30)
    monkeypatch.setenv(
        "KB_FAKE",
        'echo \'KBISECT {"event":"booted"}\' >"$results"; truncate -s 64M "$results"; '
        'echo >>"$results"; echo \'KBISECT {"event":"done","status":0}\' >>"$results"',
    )
    run = _run(fake_qemu)
    assert run.records == [BOOTED]
    assert run.outcome is Outcome.PANIC  # its "done" was beyond what we read
    assert "results" in run.detail and "first 1 MiB" in run.detail, run.detail


def test_a_guest_that_floods_its_console_is_stopped_and_its_console_trimmed(
    fake_qemu: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(qemu, "FLOOD_BYTES", 4 << 20)
    monkeypatch.setattr(qemu, "CONSOLE_CAP", 1 << 20)
    monkeypatch.setattr(qemu, "FLOOD_HEAD", 64 << 10)
    # It boots, then a process of its own writes without end (a WARN storm), about
    # 10 MiB/s: a kill of QEMU alone would leave that writer going.
    writer = tmp_path / "writer.pid"
    storm = (
        r"""sh -c 'echo $$ >"$0"; while :; do head -c 524288 /dev/zero | tr "\0" w; """
        r"""echo " storm"; sleep 0.05; done' """
    )
    monkeypatch.setenv(
        "KB_FAKE",
        f"""echo 'KBISECT {{"event":"booted"}}' >"$results"; """
        f"""echo "Linux version 6.1" >"$console"; ( {storm} "{writer}" >>"$console" ) & wait""",
    )
    began = time.monotonic()
    try:
        run = _run(fake_qemu, timeout=120)
    finally:  # whatever the machine did, no writer is left filling the disk
        with contextlib.suppress(ValueError, OSError):
            leftover = int(writer.read_text())
            alive = bool(_state(leftover))
            time.sleep(0.5)
            if alive and _state(leftover):
                os.kill(leftover, signal.SIGKILL)
                raise AssertionError("the guest's writer outlived QEMU (its group was not killed)")
    assert time.monotonic() - began < 60, "the flood ran until the timeout"
    assert "floods its console" in run.detail and run.outcome is Outcome.HANG, run.detail
    console = Path(run.console)
    assert console.stat().st_size <= (64 << 10) + (1 << 20) + 200  # its head and its tail
    text = console.read_text()
    assert text.startswith("Linux version 6.1") and "console flooded" in text
    assert text.rstrip().endswith("storm") or "storm" in text[-(1 << 20) :]


def test_read_capped_reports_truncation(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"one\ntwo\nthree\n")
    assert qemu.read_tail(path, 100) == ("one\ntwo\nthree\n", False)
    assert qemu.read_tail(path, 8) == ("o\nthree\n", True)
    assert qemu.read_head(path, 9) == ("one\ntwo\n", True)  # no torn last line
    assert qemu.read_head(tmp_path / "missing", 9) == ("", False)


def test_a_host_root_guest_gets_the_host_root_read_only_over_9p(tmp_path: Path) -> None:
    machine = qemu.QemuMachine(accel="tcg")
    art = Artifact("c", "t", "h", "/k", "/c", "/l")
    plain = machine._argv(tmp_path, "tcg", art, GuestImage("/i", ()), "")
    assert "-fsdev" not in plain
    argv = machine._argv(tmp_path, "tcg", art, GuestImage("/i", (), host_root=True), "")
    fsdev = argv[argv.index("-fsdev") + 1].split(",")
    assert fsdev[0] == "local" and "path=/" in fsdev and "readonly=on" in fsdev
    assert "multidevs=remap" in fsdev
    assert argv[argv.index("-device", argv.index("-fsdev")) + 1].startswith("virtio-9p-pci,")


def test_a_failed_testcase_says_its_last_words_not_only_its_status() -> None:
    """The script's last line before init's "testcase exited" line, kernel messages
    skipped: "echo: I/O error" (a scheduler the kernel lacks), not just "status 1"."""
    console = (
        "kbisect: disk data is /dev/nvme0n1\n"
        "/bin/sh: 4: echo: echo: I/O error\n"
        "[    3.141592] nvme nvme0: 2/0/0 default/read/poll queues\n"
        "kbisect: testcase exited with 1\n"
        "[    3.2] reboot: Restarting system\n"
    )
    done = {"event": "done", "status": 1}
    assert classify_run([BOOTED, done], console, True) == (
        Outcome.TESTCASE_FAILED,
        "testcase exited with status 1: /bin/sh: 4: echo: echo: I/O error",
    )
    assert qemu.last_words("no exit line here\n") == ""
    said = classify_run(
        [BOOTED, {"event": "done", "status": 125}],
        "kbisect: no bfq\n" + console.split("\n", 3)[3],
        True,
    )
    assert said == (
        Outcome.CANNOT_TEST,
        "testcase exited with status 125 (git bisect's skip): kbisect: no bfq",
    )
