"""A door's small JSON state (logins, followed jobs, handled notes), written atomically and
private: a crash between two writes leaves the older whole file, never half of one."""

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from kbisect.errors import UserError


def load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is not a kbisect state file ({exc}): move it away") from exc
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a kbisect state file: move it away")
    return data


def save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state-")  # 0600: tokens live here
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)
