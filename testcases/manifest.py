"""Testcase manifests: a folder with manifest.toml, a guest script and a config fragment.

A new testcase is a new folder, not new Python. Every problem with a manifest is one
ManifestError line that names the file and the field.
"""

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kbisect.errors import ManifestError, UnknownTestcaseError
from kbisect.model import Direction

BUILTIN_DIR = Path(__file__).resolve().parent
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
PARAM_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
T = TypeVar("T")
DISK_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,15}$")


@dataclass(frozen=True)
class MetricSpec:
    name: str
    unit: str
    better: Direction
    description: str = ""


@dataclass(frozen=True)
class DiskSpec:
    name: str
    size_mib: int


@dataclass(frozen=True)
class Manifest:
    name: str
    description: str
    folder: Path
    primary: str
    metrics: dict[str, MetricSpec]
    disks: list[DiskSpec]
    tools: list[str]
    config_fragment: str
    script: bytes
    profile: str = "fast"
    repetitions: int = 3
    timeout: float = 600.0
    params: dict[str, str] = field(default_factory=dict)

    def timeout_for(self, repetitions: int) -> float:
        """`timeout` covers one boot with the default repetitions; more take longer."""
        return self.timeout * max(1.0, repetitions / max(1, self.repetitions))


def search_path() -> list[Path]:
    """Built-in testcases, then folders listed in KBISECT_TESTCASES (colon-separated)."""
    extra = [Path(p) for p in os.environ.get("KBISECT_TESTCASES", "").split(":") if p]
    return [BUILTIN_DIR, *extra]


def available() -> list[str]:
    names: set[str] = set()
    for root in search_path():
        if root.is_dir():
            names.update(p.parent.name for p in root.glob("*/manifest.toml"))
    return sorted(names)


def find(name: str) -> Path:
    if not NAME_RE.match(name):
        raise UnknownTestcaseError(
            f"invalid testcase name {name!r}: use lowercase letters, digits and dashes"
        )
    for root in search_path():
        folder = root / name
        if (folder / "manifest.toml").is_file():
            return folder
    raise UnknownTestcaseError(
        f"unknown testcase {name!r}: known are {', '.join(available()) or 'none'}"
    )


def load(name: str) -> Manifest:
    return load_folder(find(name))


def _req(data: dict[str, Any], key: str, typ: type[T], where: str) -> T:
    if key not in data:
        raise ManifestError(f"{where}: missing required field '{key}'")
    value = data[key]
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise ManifestError(f"{where}: field '{key}' must be a {typ.__name__}")
    return value


def load_folder(folder: Path) -> Manifest:
    path = folder / "manifest.toml"
    where = str(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{where}: not valid TOML ({exc})") from exc
    except OSError as exc:
        raise ManifestError(f"{where}: cannot read ({exc.strerror})") from exc
    name = _req(data, "name", str, where)
    if name != folder.name:
        raise ManifestError(f"{where}: name '{name}' must match its folder '{folder.name}'")
    metrics_raw = _req(data, "metrics", dict, where)
    metrics = {}
    for mname, spec in metrics_raw.items():
        mwhere = f"{where} [metrics.{mname}]"
        if not isinstance(spec, dict):
            raise ManifestError(f"{mwhere}: must be a table with unit and better")
        better = _req(spec, "better", str, mwhere)
        if better not in ("higher", "lower"):
            raise ManifestError(f"{mwhere}: better must be 'higher' or 'lower', not '{better}'")
        metrics[mname] = MetricSpec(
            mname,
            _req(spec, "unit", str, mwhere),
            Direction(better),
            str(spec.get("description", "")),
        )
    primary = _req(data, "primary", str, where)
    if primary not in metrics:
        raise ManifestError(f"{where}: primary metric '{primary}' is not among [metrics]")
    disks = []
    for i, d in enumerate(data.get("disks", [])):
        dwhere = f"{where} [[disks]] #{i + 1}"
        if not isinstance(d, dict):
            raise ManifestError(f"{dwhere}: must be a table with name and size_mib")
        dname = _req(d, "name", str, dwhere)
        if not DISK_NAME_RE.match(dname):
            raise ManifestError(f"{dwhere}: disk name '{dname}' must be lowercase letters/digits")
        size = _req(d, "size_mib", int, dwhere)
        if not 1 <= size <= 65536:
            raise ManifestError(f"{dwhere}: size_mib must be within 1..65536")
        disks.append(DiskSpec(dname, size))
    tools = data.get("tools", [])
    if not isinstance(tools, list) or not all(
        isinstance(t, str) and re.fullmatch(r"[a-z0-9][a-z0-9._+-]*", t) for t in tools
    ):
        raise ManifestError(f"{where}: tools must be a list of command names")
    params = data.get("params", {})
    if not isinstance(params, dict) or not all(
        PARAM_NAME_RE.match(k) and isinstance(v, str) for k, v in params.items()
    ):
        raise ManifestError(f"{where}: [params] must map UPPER_CASE names to strings")
    script = _file(folder, _req(data, "script", str, where), where)
    fragment = _file(folder, str(data.get("config", "")), where) if data.get("config") else b""
    repetitions = int(data.get("repetitions", 3))
    timeout = float(data.get("timeout", 600))
    if repetitions < 1 or timeout <= 0:
        raise ManifestError(f"{where}: repetitions and timeout must be positive")
    return Manifest(
        name=name,
        description=str(data.get("description", "")),
        folder=folder,
        primary=primary,
        metrics=metrics,
        disks=disks,
        tools=list(tools),
        config_fragment=fragment.decode(),
        script=script,
        profile=str(data.get("profile", "fast")),
        repetitions=repetitions,
        timeout=timeout,
        params=dict(params),
    )


def _file(folder: Path, rel: str, where: str) -> bytes:
    path = (folder / rel).resolve()
    if folder.resolve() not in path.parents:
        raise ManifestError(f"{where}: '{rel}' must be a file inside the testcase folder")
    if not path.is_file():
        raise ManifestError(f"{where}: '{rel}' does not exist in {folder}")
    return path.read_bytes()
