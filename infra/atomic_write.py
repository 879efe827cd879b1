"""Cache files written whole or not at all, by any number of writers at once."""

import os
import threading
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
