"""Cache files written by several writers at once: whole, no leftovers, the usual mode."""

import os
import threading
from pathlib import Path

from kbisect.infra import atomic_write


def test_writers_at_once_leave_one_whole_file_with_the_umask_s_mode(tmp_path: Path) -> None:
    dst = tmp_path / "image.cpio"
    data = os.urandom(1 << 20)
    start = threading.Barrier(8)

    def write() -> None:
        start.wait()
        atomic_write.write_bytes(dst, data)

    writers = [threading.Thread(target=write) for _ in range(8)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    assert dst.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir()] == ["image.cpio"]
    umask = os.umask(0)
    os.umask(umask)
    assert dst.stat().st_mode & 0o777 == 0o666 & ~umask
