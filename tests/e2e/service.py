"""What end-to-end tests share: `kbisect try` on a lab revision, and a Temporal dev
server's worth of kbisect for one test (its own ports, task queues and data folder, and a
worker process on them)."""

import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbisect.builders import artifact_cache, kconfig
from kbisect.builders.kernel_build import compiler_version
from kbisect.infra.git import Git
from kbisect.infra.lab import LabOptions
from kbisect.main import main
from kbisect.testcases import manifest
from kbisect.testcases.runner import build_spec

KBISECT = [sys.executable, "-m", "kbisect"]
# A fix-mode lab, the same every run (so its kernels are the e2e cache's after the first):
# the SRU patch test's, and the fix mode test bisects it.
FIX_LAB = LabOptions(commits=8, mode="fix", culprit_at=4, seed=11)


E2E_SEED = 1  # every e2e lab's seed, unless KBISECT_E2E_SEED says otherwise


def lab_seed(what: str) -> int:
    """A lab's seed: E2E_SEED, the same every run, so a warm e2e cache holds every kernel
    its tests boot (a random lab built about 20 kernels each run); `KBISECT_E2E_SEED=N`
    replays or tries another lab, `KBISECT_E2E_SEED=random` a new one. The unit tier's
    simulated labs are the ones that move from run to run."""
    asked = os.environ.get("KBISECT_E2E_SEED", "")
    if asked == "random":
        seed = random.SystemRandom().randrange(2**31)
    else:
        seed = int(asked) if asked else E2E_SEED
    print(f"{what} lab seed {seed}")
    return seed


HELD = "meta.json.held"  # an entry uncache() set aside, for recache() to put back


def uncache(lab: Path, commits: list[str], testcase: str) -> list[tuple[str, str]]:
    """The testcase's kernels of these commits leave the e2e cache, so a job builds them
    for real (a build to watch or kill). Only that config's: the other tests' kernels of
    the same commits (explain's, aligned, host-userland ones) stay, or the next run
    rebuilds them all. Each entry's meta.json is set aside, not removed: the (tree,
    config) keys returned are what recache() may put back."""
    git = Git(lab)
    config = kconfig.config_hash(build_spec(manifest.load(testcase)), compiler_version())
    held = []
    for tree in dict.fromkeys(git.tree_of(c) for c in commits):
        adir = artifact_cache.entry_dir(tree, config)
        with contextlib.suppress(FileNotFoundError):
            (adir / "meta.json").rename(adir / HELD)
            held.append((tree, config))
    return held


def recache(held: list[tuple[str, str]], built: set[str]) -> int:
    """The entries uncache() set aside back in the cache, but for the trees in `built` (a
    build of them began: a killed one left its files half replaced) and the ones a build
    has written again since: under each entry's build lock, so never beside a build of it
    (a builder looks the cache up under that lock). How many came back."""
    back = 0
    for tree, config in held:
        adir = artifact_cache.entry_dir(tree, config)
        with artifact_cache.building(tree, config, lambda _: None):
            if tree not in built and not (adir / "meta.json").exists():
                with contextlib.suppress(FileNotFoundError):
                    (adir / HELD).rename(adir / "meta.json")
                    back += 1
            (adir / HELD).unlink(missing_ok=True)
    return back


# The seed's testcase as the end-to-end tests run it (tests/e2e/conftest.py writes it): a
# 32 MiB read, not 256. Its exact metric reads the same (8 sectors a read against 512) and
# a boot takes about 5 s under TCG, not 9 to 14. The README's job keeps the built-in one.
SEED = "nvme-snapshot-read-32m"
SEED_READ_MIB = "32"
TRY_SEED = ["--testcase", SEED, "--repetitions", "1", "--json"]


def write_seed(root: Path) -> Path:
    """SEED's folder under `root`: the built-in testcase with its read cut to SEED_READ_MIB
    (what each replacement finds is checked, so an edit of the built-in one fails here)."""
    builtin = manifest.BUILTIN_DIR / "nvme-snapshot-read"
    folder = root / SEED
    shutil.copytree(builtin, folder)
    text = (folder / "manifest.toml").read_text()
    for old, new in (('name = "nvme-snapshot-read"', f'name = "{SEED}"'),
                     ('READ_MIB = "256"', f'READ_MIB = "{SEED_READ_MIB}"')):  # fmt: skip
        assert text.count(old) == 1, f"{builtin}/manifest.toml no longer has {old!r}"
        text = text.replace(old, new)
    (folder / "manifest.toml").write_text(text)
    return folder


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


def bisect_on_own_service(
    tmp_path: Path, args: list[str], timeout: float, as_json: bool = True
) -> "subprocess.CompletedProcess[str]":
    return on_own_service(tmp_path, ["bisect", *args], timeout, as_json)


@contextlib.contextmanager
def own_service(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A dev server and a worker of the test's own, stopped afterwards: the environment
    of a kbisect command that talks to them."""
    import uuid

    from benchmarks.nginx import free_port
    from kbisect.infra import temporal_server

    port, ui_port = free_port(), free_port()
    server = temporal_server.start(port=port, ui_port=ui_port, db=tmp_path / "t.db")
    env = {**os.environ, **service_env(tmp_path, port, ui_port, uuid.uuid4().hex[:8])}
    worker = start_worker(env, tmp_path / "worker.log")
    try:
        yield env
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        server.terminate()
        server.wait(timeout=30)


def worker_log(tmp_path: Path) -> str:
    return (tmp_path / "worker.log").read_text()[-2000:]


def on_own_service(
    tmp_path: Path, args: list[str], timeout: float, as_json: bool = True
) -> "subprocess.CompletedProcess[str]":
    """`kbisect ARGS --json --no-start` (bisect or sweep; without --json unless `as_json`)
    against a dev server and a worker of the test's own, both stopped afterwards."""
    with own_service(tmp_path) as env:
        proc = subprocess.run(
            [*KBISECT, *args, *(["--json"] if as_json else []), "--no-start"],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    assert proc.returncode == 0, proc.stderr[-2000:] + worker_log(tmp_path)
    return proc


def watch_job(env: dict[str, str], job_id: str) -> dict[str, object]:
    """`kbisect watch ID --json` until the job ends: its result."""
    watched = subprocess.run(
        [*KBISECT, "watch", job_id, "--json", "--no-start"],
        env=env,
        capture_output=True,
        text=True,
        timeout=2400,
    )
    assert watched.returncode == 0, watched.stderr[-2000:]
    return json.loads(watched.stdout)  # type: ignore[no-any-return]
