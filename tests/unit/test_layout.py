"""The layout shows the architecture: the engine below storage, storage below the Langflow wiring, the component on
top, and no module importing one above its layer or importing itself back through others. The test layers say what
they are: the unit layer starts no process."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "langflow_summarizing_agent"
PACKAGE_DIR = Path(__file__).resolve().parents[2] / "src" / PACKAGE
LAYERS = ["engine", "storage", "wiring", "components"]
"""Bottom to top: a module may import its own layer and the layers below it."""
SAVED_FLOW_NAMES = {f"{PACKAGE}.agent_memory", f"{PACKAGE}.fold"}
"""Modules that only re-export names for component code saved by 0.1.0: they sit above every layer."""
OUTSIDE_THE_ENGINE = ("lfx", "langflow", "sqlalchemy", "sqlmodel", "fastapi", "alembic")
UNIT_DIR = Path(__file__).resolve().parent
PROCESS_MODULES = {"subprocess", "multiprocessing"}
PROCESS_CALLS = {"asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell", "os.system", "os.popen"}
"""How a module starts a process: a test that does belongs to a layer that says so (tests/gates, tests/component)."""


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: {i for i in _imports(path) if i in modules and i != name} for name, path in modules.items()}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_no_module_imports_a_layer_above_its_own():
    upward = []
    for module, imported in _graph().items():
        here = _layer(module)
        if here is None:
            continue
        upward += [
            (module, target) for target in imported if target in SAVED_FLOW_NAMES or (_layer(target) or 0) > here
        ]
    assert upward == []


def test_the_imports_have_no_cycle():
    graph = _graph()
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(graph[module]):
            if target in path:
                cycles.append([*path[path.index(target) :], target])
            elif target not in done:
                visit(target, [*path, target])
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert cycles == []


@pytest.mark.parametrize("module", sorted(m for m in _modules() if _layer(m) == 0))
def test_the_engine_uses_no_database_and_no_langflow(module):
    imported = _imports(_modules()[module])
    assert [i for i in imported if i.split(".")[0] in OUTSIDE_THE_ENGINE] == []


def test_every_module_says_what_it_is():
    missing = [name for name, path in _modules().items() if not ast.get_docstring(ast.parse(path.read_text()))]
    assert missing == []


def _process_starts(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            names = [f"{node.value.id}.{node.attr}"]
        else:
            continue
        if any(name.split(".")[0] in PROCESS_MODULES or name in PROCESS_CALLS for name in names):
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_unit_test_starts_a_process():
    assert [start for path in sorted(UNIT_DIR.rglob("*.py")) for start in _process_starts(path)] == []
