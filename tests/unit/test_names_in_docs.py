"""The names the docs and docstrings quote exist: a backticked `module.name` whose first part is a module of this
package (by its dotted path, or the end of it: `fold.catch_up`, `engine.turn.compact`, `wiring.timing`) resolves to
a module or an attribute, by import and getattr, in at least one module that path can mean. File names (`plan.py`)
and names of other packages (`langflow.plugins`) are not checked."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import langflow_summarizing_agent

# lfx imports its components' base first, as Langflow does at start: `lfx.io` imported before it leaves that base
# half-initialized (lfx's own import cycle), and the names here are resolved in the docs' order.
importlib.import_module("lfx.custom.custom_component.component")

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = langflow_summarizing_agent.__name__
DOTTED = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")
FILE_SUFFIXES = {"py", "md", "json", "txt", "toml", "sh", "yml", "yaml", "png", "mako"}
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _modules_by_ending() -> dict[str, list[str]]:
    """Each module of the package under every dotted ending of its path: `fold` names both `fold` modules."""
    modules = [PACKAGE, *(m.name for m in pkgutil.walk_packages(langflow_summarizing_agent.__path__, f"{PACKAGE}."))]
    endings: dict[str, list[str]] = {}
    for module in modules:
        parts = module.split(".")
        for start in range(len(parts)):
            endings.setdefault(".".join(parts[start:]), []).append(module)
    return endings


def _docstrings(path: Path) -> list[str]:
    """Every string standing as a statement: the module's, the classes' and functions', and attribute docstrings."""
    return [
        node.value.value
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    ]


def _texts() -> list[tuple[str, str]]:
    sources = sorted((ROOT / "src" / PACKAGE).rglob("*.py"))
    return [
        *((str(path.relative_to(ROOT)), text) for path in sources for text in _docstrings(path)),
        *((str(page.relative_to(ROOT)), page.read_text(encoding="utf-8")) for page in PAGES),
    ]


def _resolves(module: str, attributes: list[str]) -> bool:
    found: object = importlib.import_module(module)
    for attribute in attributes:
        if not hasattr(found, attribute):
            return False
        found = getattr(found, attribute)
    return True


def _unresolved(name: str, endings: dict[str, list[str]]) -> bool:
    """`name` starts with a module of this package and names nothing in any module it can mean."""
    parts = name.split(".")
    if parts[-1] in FILE_SUFFIXES:
        return False
    for split in range(len(parts), 0, -1):
        modules = endings.get(".".join(parts[:split]))
        if modules:
            return not any(_resolves(module, parts[split:]) for module in modules)
    return False


def test_every_dotted_name_quoted_from_this_package_exists() -> None:
    endings = _modules_by_ending()
    missing = sorted(
        {f"{where}: {name}" for where, text in _texts() for name in DOTTED.findall(text) if _unresolved(name, endings)}
    )
    assert missing == []


def test_a_name_that_is_gone_is_reported() -> None:
    endings = _modules_by_ending()

    assert _unresolved("fold.fold", endings)
    assert _unresolved("storage.DatabaseStore", endings)
    assert not _unresolved("fold.catch_up", endings)
    assert not _unresolved("engine.turn.compact", endings)
    assert not _unresolved("plan.py", endings)
    assert not _unresolved("langflow.plugins", endings)
