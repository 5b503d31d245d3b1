"""Langflow's private names: the installed Langflow has every one this package uses, the check names one that is gone,
and no module but `langflow_private` reaches them."""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil
import re
import tokenize
from pathlib import Path
from typing import Any

import pytest
from lfx.custom.custom_component.component import Component

from langflow_summarizing_agent import components as components_package
from langflow_summarizing_agent import langflow_private
from langflow_summarizing_agent.langflow_private import Private

PACKAGE = Path(langflow_private.__file__).resolve().parent

PENDING: set[str] = set()
"""Modules that still reach a private name themselves, until they call `langflow_private` instead."""

WRAPPED = sorted({symbol.attribute.split(".")[-1] for symbol in langflow_private.REQUIRED})
PRIVATE_IMPORT = re.compile(r"\bfrom\s+(?:langflow|lfx)(?:\.\w+)*\s+import\s+\(?[^)\n]*?\b(_[a-z]\w*)")
PRIVATE_PATH = re.compile(r"\b(?:langflow|lfx)(?:\.\w+)*\._[a-z]\w*")
PRIVATE_SLOT = re.compile(r"""__dict__\s*(?:\[|\.get\()\s*["'](_\w*)""")


def _components() -> list[type]:
    """Every component class of the package's bundles, found by walking them."""
    found = []
    for info in pkgutil.walk_packages(components_package.__path__, f"{components_package.__name__}."):
        for _, cls in inspect.getmembers(importlib.import_module(info.name), inspect.isclass):
            if issubclass(cls, Component) and cls.__module__ == info.name:
                found.append(cls)
    return found


COMPONENTS = _components()


def test_the_installed_langflow_has_every_private_name_this_package_uses() -> None:
    gone = langflow_private.missing(COMPONENTS)
    assert gone == [], "\n".join(gone)


def test_every_private_method_a_component_overrides_is_checked() -> None:
    checked = {symbol.user for component in COMPONENTS for symbol in langflow_private.overridden(component)}

    assert {
        "SummarizingAgentComponent._get_shared_callbacks",
        "SummarizingAgentComponent._build_middleware",
    } <= checked
    assert sorted(langflow_private.OWN_HELPERS - {f"{c.__name__}.{n}" for c in COMPONENTS for n in vars(c)}) == []


def test_a_new_private_method_on_a_component_is_checked_against_langflow() -> None:
    from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import SummarizingAgentComponent

    def _no_such_hook(self: Any) -> None:
        return None

    overriding = type("SummarizingAgentComponent", (SummarizingAgentComponent,), {"_no_such_hook": _no_such_hook})

    assert langflow_private.missing([overriding]) == [
        "Langflow no longer has AgentComponent._no_such_hook in lfx.components.models_and_agents.agent; "
        "update SummarizingAgentComponent._no_such_hook"
    ]


@pytest.mark.parametrize(
    ("module", "attribute"),
    [
        pytest.param("langflow.memory", "_message_scope", id="module-function"),
        pytest.param("lfx.components.models_and_agents.agent.AgentComponent", "_resolve_selected_model", id="method"),
    ],
)
def test_a_private_name_langflow_dropped_is_reported_with_what_needs_it(
    monkeypatch: pytest.MonkeyPatch, module: str, attribute: str
) -> None:
    monkeypatch.delattr(f"{module}.{attribute}")

    gone = langflow_private.missing(COMPONENTS)

    assert len(gone) == 1
    assert gone[0].startswith("Langflow no longer has ")
    assert attribute in gone[0]
    assert "langflow_private." in gone[0]


def test_an_instance_attribute_no_langflow_code_sets_or_reads_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    renamed = Private(
        langflow_private.COMPONENT, "Component._no_such_slot", "langflow_private.vertex_of", instance=True
    )
    monkeypatch.setattr(langflow_private, "REQUIRED", (*langflow_private.REQUIRED, renamed))

    assert langflow_private.missing(COMPONENTS) == [
        "Langflow no longer has Component._no_such_slot in lfx.custom.custom_component.component; "
        "update langflow_private.vertex_of"
    ]


def test_pending_modules_still_exist() -> None:
    assert sorted(name for name in PENDING if not (PACKAGE / name).is_file()) == []


def test_no_module_but_langflow_private_reaches_a_private_langflow_name() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name == "langflow_private.py" or name in PENDING:
            continue
        code = _code_without_prose(path.read_text(encoding="utf-8"))
        found = [
            *PRIVATE_IMPORT.findall(code),
            *PRIVATE_PATH.findall(code),
            *PRIVATE_SLOT.findall(code),
            *(wrapped for wrapped in WRAPPED if re.search(rf"\b{wrapped}\b", code)),
        ]
        if found:
            offenders.append(f"{name}: {sorted(set(found))}")
    assert offenders == [], "call langflow_private instead:\n" + "\n".join(offenders)


def _code_without_prose(source: str) -> str:
    """The source with comments and docstrings blanked out: a name in prose reaches nothing."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    text = list(source)
    statement_start = True
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL):
            statement_start = statement_start or token.type != tokenize.NL
            continue
        prose = token.type == tokenize.COMMENT or (token.type == tokenize.STRING and statement_start)
        if prose:
            begin = starts[token.start[0] - 1] + token.start[1]
            end = starts[token.end[0] - 1] + token.end[1]
            text[begin:end] = [" " if char != "\n" else char for char in text[begin:end]]
        if token.type != tokenize.COMMENT:
            statement_start = False
    return "".join(text)
