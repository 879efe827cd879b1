"""A job's input files (its --config, its --fixup patches), kept by content in the cache the
build hosts share: the job's request carries their paths, not their text (Temporal keeps a
request under about 2 MB). Each store and each read touches a file, so `kbisect gc` removes
only those no job has stored or read for N days."""

import hashlib
import os
import re
from contextlib import suppress
from pathlib import Path

from kbisect.errors import InfraError

# kind -> the cache folder and the file name's suffix
KINDS = {"config": ("configs", ".config"), "patch": ("patches", ".patch")}
KEPT_NAME = re.compile(r"^[0-9a-f]{24}\.(config|patch)$")


def keep(data: bytes, cache: Path, kind: str) -> str:
    """`data` kept in the cache under its content's hash; its path."""
    folder, suffix = KINDS[kind]
    path = cache / folder / f"{hashlib.sha256(data).hexdigest()[:24]}{suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        with suppress(OSError):  # stored again by a new job: `kbisect gc` keeps it
            os.utime(path)
    else:
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return str(path)


def read_kept(path: str, what: str) -> bytes:
    """A kept file's bytes; InfraError, naming `what` ("--config", "--fixup x.diff"), when
    this host cannot see it (the build hosts must share the cache)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InfraError(
            f"the job's {what} {path} is not readable on this build host: "
            "build hosts share KBISECT_CACHE"
        ) from exc
    with suppress(OSError):  # only a hint for `kbisect gc`: a running job builds with it
        os.utime(path)
    return data
