"""A file a user names (a --config, a report mail, a fio job), read as untrusted: only a
regular file (a FIFO would wait for a writer, a device never end), at most a bounded
number of bytes."""

import os
import stat

from kbisect.errors import UserError


def read_regular(path: str, limit: int, what: str, hint: str) -> bytes:
    """At most `limit` bytes of the regular file `path`; UserError, one line naming `what`
    (the option, "fio job") and saying what to give (`hint`), otherwise. O_NONBLOCK opens
    a FIFO without waiting and is a no-op on a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot read it ({exc.strerror}): {hint}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserError(f"{what} {path}: not a regular file: {hint}")
        with open(fd, "rb", closefd=False) as fh:
            return fh.read(limit)
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot read it ({exc.strerror}): {hint}") from exc
    finally:
        os.close(fd)


def read_text(path: str, limit: int, what: str, hint: str) -> str:
    """The text of the regular file `path`: at most `limit` bytes of UTF-8 without NUL;
    UserError, one line, otherwise (read_regular's words)."""
    return text_of(read_regular(path, limit + 1, what, hint), limit, f"{what} {path}", hint)


def text_of(raw: bytes, limit: int, what: str, hint: str) -> str:
    """`raw` as text, read as untrusted (a file's, a chat upload's): at most `limit` bytes
    of UTF-8 without NUL; UserError, one line naming `what`, otherwise."""
    size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
    if len(raw) > limit:
        raise UserError(f"{what}: over {size}: {hint}")
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise UserError(f"{what}: not UTF-8 text: {hint}") from exc
    if "\0" in text:
        raise UserError(f"{what}: holds NUL bytes: {hint}")
    return text
