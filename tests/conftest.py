"""Shared fixtures: every test's own cache, data and host-lock folders, and tiny stand-ins
for a kernel source tree."""

import os
import subprocess
import tarfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs
import pytest
import pytest_asyncio

from kbisect import settings
from kbisect.builders.trees import Trees
from kbisect.infra import lab, lab_culprits

if TYPE_CHECKING:
    from temporalio.testing import WorkflowEnvironment

    from tests.chat.homeserver import Synapse

NVME_CORE_TEXT = (
    "static void nvme_alloc_ns(struct nvme_ctrl *ctrl)\n{\n"
    + lab_culprits.NONROT_LINE
    + lab_culprits.P2PDMA_CHECK
    + "\t\tblk_queue_flag_set(QUEUE_FLAG_PCI_P2PDMA, ns->queue);\n"
    + "\treturn;\n}\n\n"
    + lab_culprits.SETUP_HEAD
    + "\tblk_status_t ret = BLK_STS_OK;\n\n"
    + lab_culprits.SETUP_SWITCH
    + "\tdefault:\n\t\tbreak;\n\t}\n\treturn ret;\n}\n"
)


# The end-to-end tests' cache: kernels and ccache kept warm from run to run, apart from the
# user's own (~/.cache/kbisect), which no test reads or writes.
E2E_CACHE = Path(
    os.environ.get("KBISECT_TEST_CACHE") or platformdirs.user_cache_dir("kbisect-tests")
)
# Their host lock, shared by every end-to-end test (the tier runs two at a time): a timed
# guest of one waits while the other builds or boots, as on a host kbisect shares.
E2E_LOCKS = E2E_CACHE / "locks"
STATE_VARIABLES = ("KBISECT_CACHE", "KBISECT_DATA", "KBISECT_LOCK_DIR")


@pytest.fixture(scope="session", autouse=True)
def _session_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Session fixtures (the real lab, Synapse) and what they start see the test folders."""
    saved = {k: os.environ.get(k) for k in STATE_VARIABLES}
    base = tmp_path_factory.mktemp("session-state")
    os.environ.update(
        KBISECT_CACHE=str(E2E_CACHE),
        KBISECT_DATA=str(base / "data"),
        KBISECT_LOCK_DIR=str(base / "locks"),
    )
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(autouse=True)
def _test_state(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test its own data folder, and (unless it builds and boots real kernels) its own
    cache and host lock."""
    state = tmp_path / "kbisect-state"
    e2e = request.node.get_closest_marker("e2e") is not None
    if not e2e:
        monkeypatch.setenv("KBISECT_CACHE", str(state / "cache"))
    monkeypatch.setenv("KBISECT_DATA", str(state / "data"))
    monkeypatch.setenv("KBISECT_LOCK_DIR", str(E2E_LOCKS if e2e else state / "locks"))


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


@pytest.fixture
def distro_lab(tmp_path: Path, tiny_tarball: Path) -> tuple[Path, dict[str, Any]]:
    """A fix-mode lab of the tiny tree with a distro branch of 6 commits that lacks the
    fix's prerequisite: (repository, truth)."""
    from kbisect.infra.lab import LabOptions, create_lab

    dest = tmp_path / "lab"
    options = LabOptions(
        commits=12, mode="fix", culprit_at=8, seed=3, distro=6, fix_needs_prereq=True
    )
    return dest, create_lab(dest, options)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture(scope="session")
def server() -> None:
    """Requested by every fixture (or test) that starts a local server: a Temporal dev
    server, Synapse, libvirtd, nginx, a git daemon, versitygw. The tests that need it, even
    through another fixture, are marked `server` (pytest_collection_modifyitems), so the
    unit tier, `pytest -m "not e2e and not server"`, runs none of them."""


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory, server: None) -> Iterator["Synapse"]:
    """A real Synapse homeserver on 127.0.0.1 for the chat tests (tests/chat/homeserver.py)."""
    from tests.chat.homeserver import Synapse

    server = Synapse(tmp_path_factory.mktemp("synapse"))
    try:
        yield server
    finally:
        server.stop()


# seconds: a test's own builds and boots (the chain, warm, about 7 minutes) and its waits
# for the other worker's cold builds on a fresh machine (the chain waited out 30 minutes)
E2E_TIMEOUT = 2400
# The end-to-end files handed out first (`--dist loadfile --no-loadscope-reorder`; the rest
# follow in their order): first a test that builds each config's first kernel (the block
# stack's, the host userland's), so on a fresh machine those cold builds start at once
# and later tests find ccache warm; then the longest (docs/measurements.md), so none starts
# last while the other worker idles. xdist's own order, by number of tests, did neither.
E2E_FIRST = (
    "test_try_real_kernel.py",
    "test_host_userland.py",
    "test_backport_lab.py",
    "test_readme_job.py",
)


def _e2e_rank(item: pytest.Item) -> int:
    name = item.path.name
    return E2E_FIRST.index(name) if name in E2E_FIRST else len(E2E_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs a local server (the `server` fixture, even through another one) is
    marked `server`. End-to-end tests run last, in the order E2E_FIRST begins,
    each with the long timeout (the rest keep the short one)."""
    for item in items:
        if "server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.server)
        if item.get_closest_marker("e2e") is not None:
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT))
    items.sort(key=lambda item: (item.get_closest_marker("e2e") is not None, _e2e_rank(item)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """A skipped end-to-end test fails: the feature it checks would go unchecked."""
    report: pytest.TestReport = yield
    if report.skipped and item.get_closest_marker("e2e") is not None:
        report.outcome = "failed"
        report.longrepr = f"end-to-end test skipped, which CI does not accept: {report.longrepr}"
    return report


def tree_lab(tmp_path: Path, cache: Path) -> tuple[Path, settings.Settings]:
    """A three-commit upstream (tag v1 on the first) added as the named tree "lab", and the
    settings whose cache holds its mirror: what the doors' tests bisect."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "master")
    for name in ("a", "b", "c"):
        (upstream / name).write_text(name)
        git(upstream, "add", name)
        git(upstream, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"add {name}")
    git(upstream, "tag", "v1", "HEAD~2")
    s = settings.Settings.from_env(
        {"KBISECT_CACHE": str(cache), "KBISECT_DATA": str(tmp_path / "d")}
    )
    Trees(s).add("lab", str(upstream))
    return upstream, s


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(server: None) -> "AsyncIterator[WorkflowEnvironment]":
    """A local Temporal dev server for the test module, with kbisect's search attributes."""
    from temporalio.testing import WorkflowEnvironment

    from kbisect.infra.temporal_server import temporal_binary
    from kbisect.workflows.search_attributes import SEARCH_ATTRIBUTES

    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()),
        search_attributes=list(SEARCH_ATTRIBUTES),
    ) as env:
        yield env


def one_queue_env(env: "WorkflowEnvironment", queue: str) -> dict[str, str]:
    """The environment of a kbisect process whose three task queues are `queue`, on the
    dev server of `env`."""
    return {
        **os.environ,
        "KBISECT_TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "KBISECT_CONTROL_QUEUE": queue,
        "KBISECT_BUILD_QUEUE": queue,
        "KBISECT_VM_QUEUE": queue,
    }
