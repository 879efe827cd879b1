"""Layers go one way (docs/architecture.md): every import of every module, lazy ones and
type-only ones included, goes to its own layer or any below; the decisions import the
vocabulary only, and no backend imports them.

    entry         kbisect.main                  (the program: both doors' commands)
    front doors   kbisect.cli, kbisect.doors    (never import each other)
    application   kbisect.jobs, kbisect.reports
    workers       kbisect.workers
    backends      kbisect.testcases > kbisect.builders > kbisect.infra
    workflows     kbisect.workflows             (sandboxed: the decisions and vocabulary only)
    decisions     kbisect.decide, kbisect.explain  (the vocabulary only: pure, no Temporal)
    vocabulary    kbisect.contract, settings, errors, model, words, summaries, backends,
                  kbisect.workflows.*_types  (each workflow's requests and results)

A module no layer names fails too: a new module gets placed on purpose. Two packages of
one rank (kbisect.jobs and kbisect.reports) may import each other's modules one way only:
a circle of them fails. An import by name, `importlib.import_module("kbisect.x")` with
the name written out, counts as an import.
"""

import ast
import functools
import itertools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# (prefix, rank, group): a module belongs to the longest prefix that names it.
LAYERS = (
    ("kbisect", 0, "vocabulary"),  # the package itself: only its own __init__
    ("kbisect.contract", 0, "vocabulary"),
    ("kbisect.settings", 0, "vocabulary"),
    ("kbisect.errors", 0, "vocabulary"),
    ("kbisect.model", 0, "vocabulary"),
    ("kbisect.words", 0, "vocabulary"),
    ("kbisect.summaries", 0, "vocabulary"),
    ("kbisect.backends", 0, "vocabulary"),
    ("kbisect.evidence", 0, "vocabulary"),  # where a boot's and a build's files are, by name
    # what each workflow is asked and answers, beside it: plain data the doors, the
    # decisions and the reports read too (the longest prefix wins over kbisect.workflows)
    ("kbisect.workflows.bisect_types", 0, "vocabulary"),
    ("kbisect.workflows.sweep_types", 0, "vocabulary"),
    ("kbisect.workflows.series_types", 0, "vocabulary"),
    ("kbisect.workflows.explain_types", 0, "vocabulary"),
    ("kbisect.workflows.backport_types", 0, "vocabulary"),
    ("kbisect.workflows.investigation_types", 0, "vocabulary"),
    ("kbisect.decide", 1, "decisions"),
    ("kbisect.explain", 1, "decisions"),  # why a culprit changed the metric: pure figures
    ("kbisect.workflows", 1, "workflows"),
    ("kbisect.infra", 1, "infra"),
    ("kbisect.builders", 2, "builders"),
    ("kbisect.testcases", 3, "testcases"),
    ("kbisect.workers", 4, "workers"),
    ("kbisect.jobs", 5, "application"),
    ("kbisect.reports", 5, "application"),
    ("kbisect.cli", 6, "cli"),
    ("kbisect.doors", 6, "doors"),
    ("kbisect.main", 7, "entry"),  # the program: the CLI's commands and the doors'
    ("kbisect.__main__", 7, "entry"),
)
BACKENDS = {"infra", "builders", "testcases"}
FOLDERS = {"workflows", "workers", "builders", "testcases", "infra"}  # linked into kbisect/


def layer(module: str) -> tuple[int, str] | None:
    best = None
    for prefix, rank, group in LAYERS:
        if module == prefix or (module.startswith(prefix + ".") and prefix != "kbisect"):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, rank, group)
    return None if best is None else (best[1], best[2])


def modules() -> dict[str, Path]:
    """Every module of the package by its one name (the linked folders under kbisect.*)."""
    found = {}
    for top in ("kbisect", *FOLDERS):
        for path in (ROOT / top).rglob("*.py"):
            if any(p.is_symlink() for p in (path, *path.parents)):
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join(parts if parts[0] == "kbisect" else ("kbisect", *parts))
            found[name] = path
    return found


def imports(name: str, path: Path) -> set[str]:
    """The kbisect modules this one imports (`from kbisect.x import y` counts y if it is a
    module, else x), by name too: `importlib.import_module("kbisect.x")`,
    `import_module(...)` or `__import__(...)` with the name as a string literal."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return set(_imports(package, path.read_text()))


@functools.cache  # each file parsed once for every check of the run
def _imports(package: str, text: str) -> frozenset[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.update(f"{base}.{a.name}" for a in node.names)
            found.add(base)
        elif isinstance(node, ast.Call) and _by_name(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
    return frozenset(m for m in found if m == "kbisect" or m.startswith("kbisect."))


def _by_name(func: ast.expr) -> bool:
    """An import by name: importlib.import_module, import_module, __import__."""
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


def package(module: str) -> str | None:
    """The LAYERS prefix a module belongs to (kbisect.jobs for kbisect.jobs.client)."""
    named = [p for p, _, _ in LAYERS if module == p or module.startswith(p + ".")]
    return max(named, key=len) if named else None


def package_imports(all_modules: dict[str, Path]) -> dict[tuple[str, str], list[str]]:
    """Which module imports which, between two packages of one rank:
    (importer's package, imported's package) -> "a imports b" lines."""
    found: dict[tuple[str, str], list[str]] = {}
    for name, path in sorted(all_modules.items()):
        mine, home = layer(name), package(name)
        targets = {
            t
            for t in imports(name, path)
            if t in all_modules or t.rpartition(".")[0] not in all_modules
        }
        for target in sorted(targets):
            if any(t.startswith(target + ".") for t in targets):
                continue  # `from kbisect.jobs import try_pipeline`: said once, as the module
            theirs = layer(target)
            if mine is None or theirs is None or target == "kbisect" or mine[0] != theirs[0]:
                continue
            edge = (home or "", package(target) or "")
            if edge[0] != edge[1]:
                found.setdefault(edge, []).append(f"{name} imports {target}")
    return found


def circles(all_modules: dict[str, Path]) -> list[str]:
    """Each circle of imports between packages of one rank, with the imports that make it
    (one line a circle, its packages in order from the smallest name)."""
    edges = package_imports(all_modules)
    after: dict[str, set[str]] = {}
    for a, b in edges:
        after.setdefault(a, set()).add(b)
    problems = []
    seen: set[tuple[str, ...]] = set()

    def walk(path: list[str]) -> None:
        for nxt in sorted(after.get(path[-1], ())):
            if nxt == path[0]:
                ring = (*path, nxt)
                if min(path) == path[0] and ring not in seen:
                    seen.add(ring)
                    why = "; ".join(w for a, b in itertools.pairwise(ring) for w in edges[a, b])
                    problems.append(f"circle {' -> '.join(ring)}: {why}")
            elif nxt not in path:
                walk([*path, nxt])

    for start in sorted(after):
        walk([start])
    return problems


def wrong_way(all_modules: dict[str, Path]) -> list[str]:
    problems = []
    for name, path in sorted(all_modules.items()):
        mine = layer(name)
        if mine is None:
            problems.append(f"{name}: no layer names it (tests/test_layers.py LAYERS)")
            continue
        for target in sorted(imports(name, path)):
            # `from kbisect.x import y` names y's module when y is one, else x itself.
            if target not in all_modules and target.rpartition(".")[0] in all_modules:
                continue
            theirs = layer(target)
            if theirs is None or target == name or target == "kbisect":
                continue
            doors_cross = {mine[1], theirs[1]} == {"cli", "doors"} and mine[1] != theirs[1]
            # Workflow code is deterministic and sandboxed: plain data and rules only; the
            # decisions are pure, below it.
            allowed = {"decisions": {"vocabulary"}, "workflows": {"vocabulary", "decisions"}}
            decisions = (
                mine[1] in allowed and theirs[1] != mine[1] and theirs[1] not in allowed[mine[1]]
            ) or (mine[1] in BACKENDS and theirs[1] in allowed)
            if theirs[0] > mine[0] or doors_cross or decisions:
                problems.append(f"{name} ({mine[1]}) imports {target} ({theirs[1]})")
    return problems


def test_layers_go_one_way() -> None:
    assert wrong_way(modules()) == []


def test_a_planted_wrong_way_import_is_caught(tmp_path: Path) -> None:
    planted = tmp_path / "engine.py"
    planted.write_text("from kbisect.cli import main\n")
    found = wrong_way(
        {"kbisect.decide.engine": planted, "kbisect.cli": ROOT / "kbisect/cli/__init__.py"}
    )
    assert found == ["kbisect.decide.engine (decisions) imports kbisect.cli (cli)"]
    planted.write_text("from kbisect.infra.git import Git\n")
    found = wrong_way({"kbisect.decide.engine": planted, "kbisect.infra.git": planted})
    assert found == ["kbisect.decide.engine (decisions) imports kbisect.infra.git (infra)"]
    backend = tmp_path / "qemu.py"
    backend.write_text("from kbisect.decide import engine\n")
    found = wrong_way({"kbisect.infra.qemu": backend, "kbisect.decide.engine": planted})
    assert "kbisect.infra.qemu (infra) imports kbisect.decide.engine (decisions)" in found
    planted.write_text("from kbisect.workflows.job_state import JobState\n")
    found = wrong_way({"kbisect.decide.engine": planted, "kbisect.workflows.job_state": backend})
    assert (
        "kbisect.decide.engine (decisions) imports kbisect.workflows.job_state (workflows)" in found
    )
    planted.write_text("def f() -> None:\n    from kbisect.doors import matrix\n")
    found = wrong_way({"kbisect.cli.chat": planted, "kbisect.doors.matrix": planted})
    assert "kbisect.cli.chat (cli) imports kbisect.doors.matrix (doors)" in found


def test_no_circle_between_packages_of_one_rank() -> None:
    assert circles(modules()) == []


def test_a_planted_circle_is_caught(tmp_path: Path) -> None:
    # the circle there was: each import alone goes to its own rank
    job, report = tmp_path / "investigation.py", tmp_path / "try_report.py"
    job.write_text("from kbisect.reports.investigation_report import Answers\n")
    report.write_text("def f() -> None:\n    from kbisect.jobs import try_pipeline\n")
    (tmp_path / "empty.py").write_text("")
    planted = {
        "kbisect.jobs.investigation": job,
        "kbisect.jobs.try_pipeline": tmp_path / "empty.py",
        "kbisect.reports.investigation_report": tmp_path / "empty.py",
        "kbisect.reports.try_report": report,
    }
    assert wrong_way(planted) == []
    assert circles(planted) == [
        "circle kbisect.jobs -> kbisect.reports -> kbisect.jobs: "
        "kbisect.jobs.investigation imports kbisect.reports.investigation_report; "
        "kbisect.reports.try_report imports kbisect.jobs.try_pipeline"
    ]
    report.write_text("")  # one way only: no circle
    assert circles(planted) == []
    # of three packages: said once, from the smallest name, whichever module starts it
    files = {n: tmp_path / f"{n}.py" for n in ("contract", "errors", "model")}
    files["model"].write_text("from kbisect.errors import KbisectError\n")
    files["errors"].write_text("import kbisect.contract\n")
    files["contract"].write_text("def f() -> None:\n    from kbisect import model\n")
    found = circles({f"kbisect.{n}": path for n, path in files.items()})
    assert found == [
        "circle kbisect.contract -> kbisect.model -> kbisect.errors -> kbisect.contract: "
        "kbisect.contract imports kbisect.model; kbisect.model imports kbisect.errors; "
        "kbisect.errors imports kbisect.contract"
    ]


def test_an_import_by_name_is_caught(tmp_path: Path) -> None:
    planted = tmp_path / "engine.py"
    for code in (
        'import importlib\nimportlib.import_module("kbisect.cli.output")\n',
        'from importlib import import_module\nimport_module("kbisect.cli.output")\n',
        'def f() -> object:\n    return __import__("kbisect.cli.output")\n',
    ):
        planted.write_text(code)
        assert imports("kbisect.decide.engine", planted) == {"kbisect.cli.output"}, code
        found = wrong_way({"kbisect.decide.engine": planted, "kbisect.cli.output": planted})
        assert found == ["kbisect.decide.engine (decisions) imports kbisect.cli.output (cli)"]
    # a name the code works out is not known here (the Web UI's mount, by name on purpose)
    planted.write_text("import importlib\nimportlib.import_module(NAME)\n")
    assert imports("kbisect.decide.engine", planted) == set()


def test_benchmarks_never_import_tests() -> None:
    # Tests may use the benchmarks' helpers (benchmarks/dags.py); never the other way.
    for path in (ROOT / "benchmarks").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(n == "tests" or n.startswith("tests.") for n in names), path


def test_the_decisions_never_import_temporal() -> None:
    # Replays read the recorded decisions; the code that makes them runs outside the sandbox.
    for name, path in modules().items():
        if name.startswith("kbisect.decide"):
            tree = ast.parse(path.read_text())
            names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
            names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
            assert not [n for n in names if n.split(".")[0] == "temporalio"], name
