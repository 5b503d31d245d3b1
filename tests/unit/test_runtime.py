"""One runtime per process, built where the process starts: what a turn does never hangs on a module's mutable state
or on a flag read on each turn."""

from __future__ import annotations

import ast
from pathlib import Path

from langflow_summarizing_agent.wiring import runtime
from langflow_summarizing_agent.wiring.after_reply import AfterReply
from langflow_summarizing_agent.wiring.timing import Inline

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "src" / "langflow_summarizing_agent"
STATEFUL = {"SessionUsage", "SaveFailures", "HeldScopes", "AfterReply", "Inline", "Runtime", "OrderedDict", "set"}
"""Classes whose instances keep what a process learns across turns: they belong to a `Runtime`."""
RUNTIME_MODULE = PACKAGE_DIR / "wiring" / "runtime.py"


def _sources() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in PACKAGE_DIR.rglob("*.py")}


def test_no_module_but_the_runtime_keeps_state_across_turns() -> None:
    found = []
    for path, tree in _sources().items():
        for node in tree.body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if "__all__" in ast.unparse(node).split("=", 1)[0]:
                continue
            if isinstance(value, ast.Call) and getattr(value.func, "id", None) in STATEFUL:
                found.append(f"{path.name}:{node.lineno}")
            if isinstance(value, ast.Set | ast.List) or (isinstance(value, ast.Dict) and not value.keys):
                found.append(f"{path.name}:{node.lineno}")
        found += [
            f"{path.name}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Global) and path != RUNTIME_MODULE
        ]
    assert found == [], "module-level state outside wiring/runtime.py"


def test_nothing_changes_the_environment_at_run_time() -> None:
    writes = []
    for path, tree in _sources().items():
        for node in ast.walk(tree):
            target = node.targets[0] if isinstance(node, ast.Assign) else None
            if (
                isinstance(node, ast.Assign)
                and isinstance(target, ast.Subscript)
                and "environ" in ast.unparse(target.value)
            ):
                writes.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Call) and ast.unparse(node.func).startswith("os.environ."):
                method = ast.unparse(node.func).rsplit(".", 1)[-1]
                if method in {"pop", "update", "setdefault", "clear", "__setitem__"}:
                    writes.append(f"{path.name}:{node.lineno}")
    assert writes == []


def test_a_process_without_a_server_folds_inline() -> None:
    assert isinstance(runtime.current().timing, Inline)


def test_a_runtime_made_current_for_a_block_is_the_one_turns_get() -> None:
    made = runtime.Runtime(timing=AfterReply())
    with runtime.using(made):
        assert runtime.current() is made
    assert runtime.current() is not made
