"""`pip install .` (not editable) gives a working kbisect and nothing generic at the top
of site-packages: the design card's folders live inside the kbisect namespace. The wheel
declares every distribution it imports, and its `kbisect` script runs with only those."""

import ast
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
NOT_SOURCE = (".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", "tests")
# The installed wheel lists the same built-in testcases as the source tree holds.
TESTCASES = sorted(p.parent.name for p in (ROOT / "testcases").glob("*/manifest.toml"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # A copy, so setuptools' build/ folder never lands in the checkout (a stale build/lib
    # would put deleted modules into later wheels).
    src = out / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "-w", str(out), str(src)], check=True, capture_output=True)
    (path,) = out.glob("kbisect-*.whl")
    return path


def test_wheel_has_one_top_level_package_and_its_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"kbisect"}
    for data in (
        "kbisect/builders/base.config",
        "kbisect/infra/guest_init.sh",
        "kbisect/infra/guest_lib.sh",
        "kbisect/testcases/nvme-snapshot-read/manifest.toml",
        "kbisect/testcases/nvme-snapshot-read/guest.sh",
        "kbisect/testcases/nvme-snapshot-read/config.fragment",
        "kbisect/testcases/fio-read-latency/readers.fio",
        "kbisect/builders/host_userland.config",
        "kbisect/builders/c_functions.gitattributes",
        "kbisect/workflows/bisect_workflow.py",
    ):
        assert data in names


# --- what the wheel declares -----------------------------------------------------------
def _requires(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist lines (its METADATA, not pyproject.toml)."""
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(z.read(meta).decode()).get_all("Requires-Dist") or []


def _closure(requires: list[str], extras: set[str]) -> set[str]:
    """The distributions pip installs for these requirements (with these extras), read
    from the installed distributions' own metadata."""
    found: set[str] = set()
    todo = [(r, extras) for r in requires]
    while todo:
        line, wanted = todo.pop()
        req = Requirement(line)
        # evaluate() fills in this interpreter's environment (python_version, ...).
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in wanted | {""}):
            continue
        name = canonicalize_name(req.name)
        if name in found:
            continue
        found.add(name)
        try:
            todo += [(r, set(req.extras)) for r in md.requires(name) or []]
        except md.PackageNotFoundError:
            pass  # not installed here: its own requirements are unknown (the import check says)
    return found


def _imports(wheel: Path) -> tuple[set[str], set[str]]:
    """Top-level modules the wheel's code imports: (at import time, only inside functions)."""
    eager: set[str] = set()
    lazy: set[str] = set()
    with zipfile.ZipFile(wheel) as z:
        for name in (n for n in z.namelist() if n.endswith(".py")):
            tree = ast.parse(z.read(name), name)
            in_functions = {
                id(node)
                for f in ast.walk(tree)
                if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                for node in ast.walk(f)
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    modules = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                (lazy if id(node) in in_functions else eager).update(
                    m.split(".")[0] for m in modules
                )
    third_party = {m for m in eager | lazy if m not in sys.stdlib_module_names} - {"kbisect"}
    return eager & third_party, lazy & third_party - eager


def _distributions(modules: set[str]) -> dict[str, set[str]]:
    """Each module's distributions in this environment (none: nothing here provides it)."""
    owners = md.packages_distributions()
    return {m: {canonicalize_name(d) for d in owners.get(m, [])} for m in modules}


def _extras(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return set(Parser().parsestr(z.read(meta).decode()).get_all("Provides-Extra") or [])


def test_wheel_declares_every_distribution_its_code_imports(wheel: Path) -> None:
    # What `pip install kbisect` brings must cover each import: a module imported at import
    # time by a plain dependency (or one of its own), one imported only when a feature is
    # used (libvirt) at least by an extra.
    requires = _requires(wheel)
    plain = _closure(requires, set())
    with_extras = _closure(requires, _extras(wheel))
    eager, lazy = _imports(wheel)
    assert "temporalio" in eager and "libvirt" in lazy  # the scan sees both kinds
    missing = {m: d for m, d in _distributions(eager).items() if not d & plain}
    missing |= {m: d for m, d in _distributions(lazy).items() if not d & with_extras}
    assert not missing, f"imported but not in the wheel's Requires-Dist: {missing}; {requires}"


# --- the installed script -----------------------------------------------------------------
def _site_packages(prefix: Path) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": str(prefix)}))


def _only(dists: set[str], into: Path) -> Path:
    """A folder holding (links to) just these installed distributions' files."""
    into.mkdir()
    for name in dists:
        dist = md.distribution(name)
        for f in dist.files or []:
            top = f.parts[0]
            if top in ("..", "__pycache__") or (into / top).exists():
                continue
            (into / top).symlink_to(Path(str(dist.locate_file(top))))
    return into


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel installed and, behind it, only the distributions
    its metadata asks for (linked from this environment: no index, no download)."""
    base = tmp_path_factory.mktemp("venv")
    env = base / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", env], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install"]
    subprocess.run([*pip, "-q", "--no-deps", "--no-index", wheel], check=True, capture_output=True)
    deps = _only(_closure(_requires(wheel), set()), base / "deps")
    # After the venv's own site-packages: the wheel's kbisect is found first.
    (_site_packages(env) / "kbisect-test-deps.pth").write_text(f"{deps}\n")
    return env


def _run(venv: Path, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(KBISECT_CACHE=str(tmp_path / "c"), KBISECT_DATA=str(tmp_path / "d"))
    env.update(PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
    return subprocess.run(
        list(argv),
        cwd=tmp_path,  # not the source tree: only the installed copy can be found
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_installed_kbisect_script_runs_with_only_the_declared_dependencies(
    venv: Path, tmp_path: Path
) -> None:
    kbisect = str(venv / "bin" / "kbisect")
    out = _run(venv, tmp_path, kbisect, "--help")
    assert out.returncode == 0, out.stderr
    assert "testcases" in out.stdout
    out = _run(venv, tmp_path, kbisect, "testcases", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [t["name"] for t in rows if "name" in t] == TESTCASES
    assert "stress-ng" in [t["kind"] for t in rows if "kind" in t]  # the kinds came along
    out = _run(venv, tmp_path, kbisect, "testcases")
    assert "broken" not in out.stdout  # every folder's files (fio's job too) came along


def test_every_installed_module_imports_with_only_the_declared_dependencies(
    venv: Path, tmp_path: Path
) -> None:
    # The script's commands import little at start; the workers and workflows import the
    # rest (temporalio, aiohttp, ...). Each module, from the installed copy only.
    code = (
        "import importlib, importlib.util, pkgutil, sys, kbisect, kbisect.builders.kconfig as k;"
        "assert kbisect.__file__.startswith(sys.prefix), kbisect.__file__;"
        "assert 'CONFIG_' in k.base_config();"
        "assert importlib.util.find_spec('pytest') is None;"  # this environment's are not seen
        "names = [m.name for m in pkgutil.walk_packages(kbisect.__path__, 'kbisect.')];"
        "[importlib.import_module(n) for n in names if not n.endswith('__main__')];"
        "print(len(names))"
    )
    out = _run(venv, tmp_path, str(venv / "bin" / "python"), "-c", code)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 50, out.stdout
