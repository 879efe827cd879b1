"""Prebuilt kernels for real: Debian's own cloud kernel fetched with apt, its dm modules
loaded in the guest; and `bisect --kernels` over lab images mapped to their revisions,
narrowing over the builds and then bisecting the commits between them."""

import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from benchmarks.nginx import free_port
from kbisect.infra import guest_modules, temporal_server
from kbisect.main import main
from kbisect.settings import Settings
from tests.e2e.service import KBISECT, SEED, service_env, start_worker, try_lab

pytestmark = pytest.mark.e2e
CLOUD_KERNELS = r"^linux-image-6\.1\.0-[0-9]+-cloud-amd64$"  # NVMe built in, dm as modules
# bookworm-backports' 6.12 cloud kernels: no 9p modules; squashfs, virtio_blk, overlay ones
NO_9P_KERNELS = r"^linux-image-6\.12\.[0-9]+\+deb12-cloud-amd64-unsigned$"


def newest_cloud_kernel(pattern: str = CLOUD_KERNELS) -> str:
    """The newest Debian 12 cloud kernel apt offers: the archive drops old ABIs, so the
    test reads which one from apt instead of pinning one."""
    found = subprocess.run(
        ["apt-cache", "search", "--names-only", pattern],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = [line.split(" ", 1)[0] for line in found.splitlines()]
    if not names:
        pytest.fail(f"apt offers no package matching {pattern}: run apt-get update")
    return max(names, key=lambda name: [int(n) for n in re.findall(r"[0-9]+", name)])


def test_debians_cloud_kernel_runs_the_seed_with_its_own_modules(
    capsys: pytest.CaptureFixture[str],
) -> None:
    kernel = newest_cloud_kernel()
    code = main(
        [
            "try",
            "--kernel",
            kernel,
            "--testcase",
            SEED,
            "--json",
            "--repetitions",
            "1",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert result["commit"]["hash"] == kernel and result["build"]["prebuilt"]
    assert result["build"]["modules"] == ["dm_mod", "dm_bufio", "dm_snapshot"]
    # A kernel with request merging: 256 MiB through the snapshot in 512-sector reads.
    assert result["metrics"]["avg_read_sectors"]["value"] >= 256
    # modinfo reads a real module's dependencies (the guest's load order is made of them).
    unpacked = Settings.from_env().cache / "prebuilt" / "unpacked"
    real = sorted(unpacked.glob("*/lib/modules/*/kernel/drivers/md/dm-snapshot.ko*"))
    assert real, f"no dm-snapshot module under {unpacked}"
    assert "dm_mod" in guest_modules.modinfo_depends(real[0])


def test_a_kernel_without_9p_runs_a_host_userland_testcase_from_the_image(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """sched-pipe runs perf from the host's userland; Debian's 6.12 cloud kernel cannot
    mount it over 9p, so the guest mounts the squashfs image of the host's packages. The
    kernel itself sometimes oopses at boot under TCG (an int3 while patching its static
    calls, before init runs: seen 1 boot in 4), so a panic is booted again, twice at most."""
    kernel = newest_cloud_kernel(NO_9P_KERNELS)
    argv = ["try", "--kernel", kernel, "--testcase", "sched-pipe", "--json", "--repetitions", "1"]
    for _ in range(3):
        code = main(argv)
        out = capsys.readouterr()
        if code == 0 or "panic" not in out.err:
            break
    assert code == 0, out.err
    result = json.loads(out.out)
    assert result["userland"] == "squashfs"
    assert {"virtio_blk", "squashfs", "overlay"} <= set(result["build"]["modules"])
    assert result["metrics"]["usecs_per_op"]["value"] > 0  # perf ran, from the image
    images = list((Settings.from_env().cache / "images").glob("*.squashfs"))
    assert images, "no userland image in the test cache"


def _image(lab: Path, rev: str, dest: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A lab kernel's image, copied out as a user's own prebuilt kernel would be."""
    code, result, err = try_lab(lab, rev, capsys)
    assert code == 0, err
    shutil.copy(result["build"]["kernel"], dest)  # type: ignore[index]
    return dest


def test_kernels_then_commits_name_the_culprit(
    real_lab: tuple[Path, dict[str, object]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lab, truth = real_lab
    culprit = str(truth["culprit"])
    revs = [f"{culprit}~1", culprit, str(truth["bad"])]
    images = [_image(lab, r, tmp_path / f"bzImage-{i}", capsys) for i, r in enumerate(revs)]
    port, ui_port = free_port(), free_port()
    server = temporal_server.start(port=port, ui_port=ui_port, db=tmp_path / "t.db")
    env = {**os.environ, **service_env(tmp_path, port, ui_port, uuid.uuid4().hex[:8])}
    worker = start_worker(env, tmp_path / "worker.log")
    try:
        kernels = ",".join(f"{img}={rev}" for img, rev in zip(images, revs, strict=True))
        proc = subprocess.run(
            [
                *KBISECT,
                "bisect",
                "--kernels",
                kernels,
                "--repo",
                str(lab),
                "--testcase",
                SEED,
                "--no-verify",
                "--no-start",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=1500,
        )
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        server.terminate()
        server.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr + (tmp_path / "worker.log").read_text()[-3000:]
    lines = proc.stdout.splitlines()
    # The builds first: the culprit's image is the first bad one, its parent's the last good.
    assert lines[0] == f"last good build: {images[0].name}; first bad build: {images[1].name}"
    # Then the commits between them: only the culprit is left, its answer a part a line.
    answers = [ln for ln in lines[1:] if ln.startswith("first bad commit: ")]
    assert len(answers) == 1 and answers[0].startswith(f"first bad commit: {culprit}"), lines
