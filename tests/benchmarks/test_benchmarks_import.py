"""Every benchmark module imports: they run by hand, so nothing else notices when one rots
(benchmarks.strategy imported a name that had moved)."""

import importlib
import pkgutil

import pytest

import benchmarks

MODULES = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__))


def test_there_are_benchmarks() -> None:
    assert {"accuracy", "strategy", "vs_git_bisect"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_benchmark_imports(name: str) -> None:
    module = importlib.import_module(f"benchmarks.{name}")
    assert module.__doc__, f"benchmarks.{name} says what it measures"
