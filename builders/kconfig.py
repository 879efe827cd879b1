"""Config: `make tinyconfig`, then the base and the testcase's fragments, then olddefconfig."""

import hashlib
from pathlib import Path

from kbisect.model import BuildSpec


def base_config() -> str:
    return (Path(__file__).parent / "base.config").read_text()


def host_userland_config() -> str:
    """What a guest needs to run on the host's root filesystem (9p, overlay, tools)."""
    return (Path(__file__).parent / "host_userland.config").read_text()


def fragments_for(spec: BuildSpec) -> list[str]:
    return [base_config(), *spec.fragments]


def config_hash(spec: BuildSpec, compiler: str) -> str:
    """Key of the build inputs other than the tree: fragments, arch, target, compiler."""
    h = hashlib.sha256()
    for part in (*fragments_for(spec), spec.arch, spec.target, compiler):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def wanted_options(fragments: list[str]) -> dict[str, str]:
    """CONFIG_X -> value as requested (later fragments win)."""
    wanted: dict[str, str] = {}
    for text in fragments:
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("CONFIG_") and "=" in line:
                key, _, value = line.partition("=")
                wanted[key] = value
            elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
                wanted[line[2:].split()[0]] = "n"
    return wanted


def missing_options(fragments: list[str], resolved_config: str) -> list[str]:
    """Requested options the resolved .config does not have (unknown or unmet deps)."""
    have: dict[str, str] = {}
    for line in resolved_config.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            key, _, value = line.partition("=")
            have[key] = value
    return [f"{k}={v}" for k, v in wanted_options(fragments).items() if have.get(k, "n") != v]
