"""Files a command writes for its user (--plot, --bisect-log): checked before a job or a
service starts, so a path that cannot be written is one line, not a traceback after the
work (a sweep's plot came only once the sweep had run)."""

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kbisect.errors import UserError


def checked_output(text: str | None, option: str, streams: bool = False) -> Path | None:
    """The path, if a regular file can be written there (None when not given); with
    `streams`, also /dev/stdout, /dev/null or a pipe (not for a plot: matplotlib says
    nothing when such a write fails)."""
    if not text:
        return None
    path = Path(text)
    if path.is_dir():
        raise UserError(f"{option} {text} is a folder: give a file name")
    stream = streams and (path.is_char_device() or path.is_fifo())
    if path.exists() and not (path.is_file() or stream):
        raise UserError(f"{option} {text} is not a regular file: give a file in a folder")
    if stream:  # a write that fails (/dev/full) is one line: `writing`
        return path
    if not path.parent.is_dir():
        raise UserError(f"{option} {text}: there is no folder {path.parent}: make it first")
    try:  # a file made and gone at once: a folder of /proc or a read-only disk says no here
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        raise UserError(
            f"{option} {text}: cannot write in {path.parent} ({exc.strerror}): give another path"
        ) from exc
    return path


@contextmanager
def writing(path: Path, option: str) -> Iterator[None]:
    """A write that fails all the same (a full disk) is one line."""
    try:
        yield
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot write it ({exc.strerror})") from exc
