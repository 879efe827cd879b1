"""`pip install .` (not editable) gives a working kbisect and nothing generic at the top
of site-packages: the design card's folders live inside the kbisect namespace."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOT_SOURCE = (".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", "tests")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # A copy, so setuptools' build/ folder never lands in the checkout (a stale build/lib
    # would put deleted modules into later wheels).
    src = out / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "-w", str(out), str(src)], check=True, capture_output=True)
    (path,) = out.glob("kbisect-*.whl")
    return path


def test_wheel_has_one_top_level_package_and_its_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"kbisect"}
    for data in (
        "kbisect/builders/base.config",
        "kbisect/infra/guest_init.sh",
        "kbisect/infra/guest_lib.sh",
        "kbisect/testcases/nvme-snapshot-read/manifest.toml",
        "kbisect/testcases/nvme-snapshot-read/guest.sh",
        "kbisect/testcases/nvme-snapshot-read/config.fragment",
        "kbisect/testcases/fio-read-latency/readers.fio",
        "kbisect/builders/host_userland.config",
        "kbisect/workflows/bisect_workflow.py",
    ):
        assert data in names


def test_installed_wheel_runs_outside_the_source_tree(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), wheel],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "PYTHONPATH": str(site), "KBISECT_CACHE": str(tmp_path / "c")}
    code = (
        "import kbisect.builders.kconfig as k, kbisect.infra.initramfs as i, sys;"
        "assert k.base_config().startswith('#') or 'CONFIG_' in k.base_config();"
        "assert k.__file__.startswith(sys.argv[1]), k.__file__;"
        "from kbisect.cli import main; sys.exit(main(['testcases']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(site)],
        cwd=tmp_path,  # not the source tree: only the installed copy can be found
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    listed = [line.split(":")[0] for line in out.stdout.splitlines() if not line.startswith(" ")]
    assert listed == ["fio-read-latency", "nvme-snapshot-read", "sched-pipe"], out.stdout
    assert "broken" not in out.stdout  # every folder's files (fio's job too) came along
