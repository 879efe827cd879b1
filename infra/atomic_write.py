"""Cache files written whole or not at all, by any number of writers at once."""

import os
import tempfile
from pathlib import Path


def write_bytes(dst: Path, data: bytes) -> None:
    """`dst` holds `data` once this returns; a reader never sees half of it, and two
    writers (a duet's two guests making the same image) never write into one file."""
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, dst)
    finally:
        Path(tmp).unlink(missing_ok=True)
