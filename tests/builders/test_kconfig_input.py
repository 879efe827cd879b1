"""`--config` is read only from a regular file of at most 4 MiB: a device, a FIFO or a
huge file is one UserError line, never a read that does not end."""

import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kbisect.builders.kconfig import read_config
from kbisect.errors import UserError


def _limited() -> None:
    limit = 1 << 30  # the old code read /dev/zero until memory ran out: stop it at 1 GiB
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_dev_zero_is_refused() -> None:
    code = (
        "from kbisect.builders.kconfig import read_config\n"
        "try:\n    read_config('/dev/zero')\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limited,
    )
    assert proc.stdout.startswith("UserError --config /dev/zero: not a regular file"), proc


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "config"
    os.mkfifo(fifo)
    seen: list[str] = []

    def read() -> None:
        try:
            read_config(str(fifo))
        except UserError as exc:
            seen.append(str(exc))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    waited = reader.is_alive()
    if waited:  # the old code blocks in open(): be its writer, so the thread ends
        os.close(os.open(fifo, os.O_WRONLY))
        reader.join(10)
    assert not waited, "read_config waited for a writer on a FIFO"
    assert seen == [f"--config {fifo}: not a regular file: give a .config or /boot/config-*"]


def test_a_file_over_4_mib_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "config"
    big.write_text("CONFIG_X=y\n" * ((4 << 20) // 11 + 1))
    with pytest.raises(UserError, match="over 4 MiB"):
        read_config(str(big))


def test_a_kernel_config_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("CONFIG_X=y\n# CONFIG_Y is not set\n")
    assert read_config(str(path)) == "CONFIG_X=y\n# CONFIG_Y is not set\n"
