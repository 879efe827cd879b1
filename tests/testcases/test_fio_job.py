"""`testcase new NAME --from fio:JOB.fio`: a fio job file imported as a testcase, its job
moved onto the testcase's disk, and its figures read from the host's real fio."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kbisect.errors import UserError
from kbisect.testcases import check, fio_job, kinds, manifest, skeleton

# An LKP-style job as people write them: a device of their machine, two readers.
LKP_JOB = """\
; 4k random reads, two jobs, psync
[global]
ioengine=psync
direct=1
bs=4k
filename=/dev/nvme1n1

[randread]
rw=randread
size=8m
numjobs=2
offset_increment=8m
"""


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KBISECT_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("KBISECT_TESTCASES", raising=False)
    return tmp_path / "data"


def _job(tmp_path: Path, text: str, name: str = "lkp-randread.fio") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_job_is_moved_onto_the_testcase_s_disk_and_says_what_it_replaced(
    tmp_path: Path,
) -> None:
    job = fio_job.read_job(_job(tmp_path, LKP_JOB))
    assert job.file_name == "lkp-randread.fio" and job.directions == ("read",)
    assert job.moved == ("filename=/dev/nvme1n1",)
    lines = job.text.splitlines()
    assert lines[lines.index("[global]") + 1].startswith("filename=${KB_DEV}")
    assert "filename=/dev/nvme1n1" not in [line.strip() for line in lines]
    assert fio_job.MIN_DISK_MIB == job.disk_mib  # 16 MiB of reach: the smallest disk
    big = fio_job.parse("[w]\nrw=write\nsize=2g\noffset=1g\n", "w.fio", "w.fio")
    assert big.disk_mib == 3072 + fio_job.SLACK_MIB and big.directions == ("write",)
    assert big.text.startswith("[global]\nfilename=${KB_DEV}")
    whole = fio_job.parse("[x]\nrw=randrw\n", "x.fio", "x.fio")  # the whole device
    assert whole.disk_mib == fio_job.DEFAULT_DISK_MIB and whole.directions == ("read", "write")
    unknown = fio_job.parse("[x]\nrw=${RW}\nsize=1m\n", "x.fio", "x.fio")
    assert unknown.directions == ("read", "write")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[a]\ninclude other.fio\n", "paste it into the job file"),
        ("[a]\nioengine=net\n", "needs a network"),
        ("[global]\nbs=4k\n", "no job section"),
        ("bs=4k\n[a]\n", r"before any \[section\]"),
        ("[a]\nsize=100t\n", "at most 65536"),
    ],
)
def test_a_job_that_cannot_run_in_a_guest_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(UserError, match=says) as info:
        fio_job.read_job(_job(tmp_path, text))
    assert "\n" not in str(info.value)


def test_what_is_no_job_file_is_one_line(tmp_path: Path) -> None:
    for raw, says in ((b"\xff\xfe[a]", "not UTF-8"), (b"x" * (65 << 10), "over 64 KiB")):
        path = tmp_path / "bad.fio"
        path.write_bytes(raw)
        with pytest.raises(UserError, match=says):
            fio_job.read_job(path)
    with pytest.raises(UserError, match=r"fio job .*: cannot read it"):
        fio_job.read_job(tmp_path / "absent.fio")
    fifo = tmp_path / "job.fifo"
    os.mkfifo(fifo)  # no writer: a plain read would wait for ever, /dev/zero never end
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(UserError, match="not a regular file: give a fio job file"):
            fio_job.read_job(path)


def test_a_job_file_is_imported_not_named(cache: Path) -> None:
    with pytest.raises(UserError, match=r"testcase new NAME --from fio:JOB\.fio"):
        manifest.load("fio:job.fio")
    with pytest.raises(UserError, match=r"--from fio:JOB\.fio"):
        kinds.render("fio:/etc/x.fio")


def _run_on_the_host(folder: Path, tmp_path: Path) -> dict[str, float]:
    """The imported testcase's guest script, one repetition, with the host's fio on a file
    standing in for the disk: its metrics."""
    m = manifest.load_folder(folder)
    target = tmp_path / "disk.img"
    target.write_bytes(b"\0" * (32 << 20))
    script = m.script.decode()
    script = script.replace("/kbisect/", f"{folder}/").replace("/tmp/kb-", f"{tmp_path}/kb-")
    script = script.replace("/proc/sys/vm/drop_caches", str(tmp_path / "drop_caches"))
    helpers = 'kb_metric() { echo "METRIC $2 $3"; }\n'
    (tmp_path / "guest.sh").write_text(helpers + script)
    env = {**os.environ, **m.params, "KB_REPETITIONS": "1", "KB_DISK_data": str(target)}
    done = subprocess.run(
        ["sh", "-e", str(tmp_path / "guest.sh")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {
        line.split()[1]: float(line.split()[2])
        for line in done.stdout.splitlines()
        if line.startswith("METRIC ")
    }


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is installed by infra/install.sh")
def test_an_imported_job_runs_on_real_fio_and_reports_lkp_s_figures(
    data: Path, tmp_path: Path
) -> None:
    job = LKP_JOB.replace("direct=1", "direct=0")  # a tmpfs file takes no O_DIRECT
    path = _job(tmp_path, job)
    folder = skeleton.write("my-randread", manifest.user_dir(data), f"fio:{path}")
    m = manifest.load("my-randread")
    assert m.folder == folder and m.primary == "read_bw_mbps" and check.check_host(m).ok
    assert list(m.files) == ["lkp-randread.fio"] and m.disks[0].size_mib == fio_job.MIN_DISK_MIB
    assert set(m.metrics) == {"read_bw_mbps", "read_iops", "read_clat_mean_us", "read_clat_p99_us"}
    got = _run_on_the_host(folder, tmp_path)
    assert set(got) == set(m.metrics)  # a read job reports no write figures
    # 4 KiB reads: the bandwidth is the IOPS times 4096 bytes (fio's own two figures)
    assert got["read_bw_mbps"] == pytest.approx(got["read_iops"] * 4096 / 1e6, rel=0.02)
    assert 0 < got["read_clat_mean_us"] <= got["read_clat_p99_us"]
    mixed = _job(tmp_path, job.replace("rw=randread", "rw=randrw"), "mixed.fio")
    both = skeleton.write("my-mixed", manifest.user_dir(data), f"fio:{mixed}")
    figures = _run_on_the_host(both, tmp_path)
    assert {"read_iops", "write_iops", "write_bw_mbps"} <= set(figures)
    assert manifest.load("my-mixed").primary == "read_bw_mbps"
