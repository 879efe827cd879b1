"""What end-to-end tests share: `kbisect try` on a lab revision, and a Temporal dev
server's worth of kbisect for one test (its own ports, task queues and data folder, and a
worker process on them)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbisect.main import main

KBISECT = [sys.executable, "-m", "kbisect"]
TRY_SEED = ["--testcase", "nvme-snapshot-read", "--repetitions", "1", "--json"]


def try_lab(
    lab: Path, rev: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, dict[str, object], str]:
    """`kbisect try` of the seed's testcase (one repetition) on a lab revision: the exit
    code, the JSON result (empty when it failed) and stderr."""
    code = main(["try", "--repo", str(lab), *TRY_SEED, *extra, "--", rev])
    out = capsys.readouterr()
    return code, json.loads(out.out) if code == 0 else {}, out.err


def service_env(tmp_path: Path, port: int, ui_port: int, tag: str) -> dict[str, str]:
    """The KBISECT_* settings of a test's own service (queues named by `tag`)."""
    return {
        "KBISECT_TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
        "KBISECT_TEMPORAL_UI": f"http://127.0.0.1:{ui_port}",
        "KBISECT_CONTROL_QUEUE": f"kb-{tag}",
        "KBISECT_BUILD_QUEUE": f"kb-build-{tag}",
        "KBISECT_VM_QUEUE": f"kb-vm-{tag}",
        "KBISECT_DATA": str(tmp_path / "data"),
    }


def start_worker(env: dict[str, str], log: Path) -> "subprocess.Popen[bytes]":
    with open(log, "ab") as out:
        return subprocess.Popen(
            [*KBISECT, "worker"],
            env={**os.environ, **env},
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
