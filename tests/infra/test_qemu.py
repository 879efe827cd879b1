from pathlib import Path

import pytest

from kbisect.errors import InfraError
from kbisect.infra import qemu
from kbisect.infra.qemu import PROFILES, classify_run, nvme_args, parse_records, serial_args
from kbisect.model import Disk, Outcome

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
