"""Shared fixtures: an isolated cache, and tiny stand-ins for a kernel source tree."""

import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kbisect import settings
from kbisect.infra import lab, lab_culprits

if TYPE_CHECKING:
    from tests.chat.homeserver import Synapse

NVME_CORE_TEXT = (
    "static void nvme_alloc_ns(void)\n{\n"
    + lab_culprits.NONROT_LINE
    + "\treturn;\n}\n\n"
    + lab_culprits.SETUP_HEAD
    + "\tblk_status_t ret = BLK_STS_OK;\n\n"
    + lab_culprits.SETUP_SWITCH
    + "\tdefault:\n\t\tbreak;\n\t}\n\treturn ret;\n}\n"
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("KBISECT_CACHE", str(path))
    return path


def _write_tiny_tree(root: Path) -> None:
    files = {
        "Makefile": "VERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 999\nEXTRAVERSION =\n",
        lab_culprits.NVME_CORE: NVME_CORE_TEXT,
        lab_culprits.BLK_WBT: "u64 wbt_default_latency_nsec(struct request_queue *q)\n{\n"
        + lab_culprits.WBT_DEFAULT
        + "}\n",
        lab_culprits.BLK_FOPS: "static ssize_t blkdev_write_iter(void)\n{\n\t} else {\n"
        + lab_culprits.WRITE_SHARED
        + "\t}\n}\n",
        ".gitignore": "/*\n",  # as Debian's tarball has: the import must not honour it
    }
    for p in (*lab.BUILT_FILES, *lab.BUILD_BREAK_FILES, *lab.BOOT_BREAK_FILES):
        files.setdefault(p, f"/* {p} */\nint x_{abs(hash(p))};\n")
    for d in lab.UNBUILT_DIRS:
        for i in range(30):
            files[f"{d}/unbuilt_{i}.c"] = f"/* unbuilt {i} */\n"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.fixture
def tiny_tarball(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A stand-in for linux-source-6.1.tar.xz with the files the lab edits."""
    top = tmp_path / "tarsrc" / "linux-source-6.1"
    _write_tiny_tree(top)
    tarball = tmp_path / "linux-source-6.1.tar.xz"
    with tarfile.open(tarball, "w:xz") as tf:
        tf.add(top, arcname="linux-source-6.1")
    monkeypatch.setattr(settings, "KERNEL_SOURCE_TARBALL", tarball)
    yield tarball


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator["Synapse"]:
    """A real Synapse homeserver on 127.0.0.1 for the chat tests (tests/chat/homeserver.py)."""
    from tests.chat.homeserver import Synapse

    server = Synapse(tmp_path_factory.mktemp("synapse"))
    try:
        yield server
    finally:
        server.stop()
