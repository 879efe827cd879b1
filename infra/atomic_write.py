"""Cache files written whole or not at all, by any number of writers at once."""

import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path


def write_bytes(dst: Path, data: bytes) -> None:
    """`dst` holds `data` once this returns; a reader never sees half of it, and two
    writers (a duet's two guests making the same image) never write into one file. The
    file gets the mode any new file gets (the umask's), as before it was atomic."""
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)


def publish_folder(folder: Path, fill: Callable[[Path], None], marker: str) -> Path:
    """`folder`, filled by `fill` in a folder beside it and renamed into place: a reader
    (or a second writer, which then keeps the first's) never sees half of it. `marker`:
    the file whose presence says the folder is whole."""
    if (folder / marker).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".partial-"))
    try:
        fill(partial)
        partial.rename(folder)
    except OSError:
        if not (folder / marker).is_file():
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return folder
