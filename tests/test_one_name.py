"""Each file loads as one module object under one name: the design card's top-level
folders are packages of kbisect (kbisect/workflows links to workflows/), never bare ones."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("workflows", "workers", "builders", "testcases", "infra")


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_top_level_folder_cannot_be_imported_bare(folder: str) -> None:
    run = subprocess.run(
        [sys.executable, "-c", f"import {folder}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0
    assert f"ImportError: import kbisect.{folder}, not {folder}" in run.stderr


def test_every_module_is_loaded_under_kbisect_only() -> None:
    import kbisect.main  # the whole program, as the kbisect script loads it
    import kbisect.workers.worker  # noqa: F401

    bare = sorted(m for m in sys.modules if m.split(".")[0] in FOLDERS)
    assert bare == []
    assert sys.modules["kbisect.decide.engine"].__name__ == "kbisect.decide.engine"
