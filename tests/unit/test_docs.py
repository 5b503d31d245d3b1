"""The docs say what the code and the benchmarks say: each guarantee names a test that exists, and the benchmark
tables are the saved results."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_REFERENCE = re.compile(r"`(test_\w+\.py)(?:::(test_\w+))?`")
README_MOST_LINES = 150
DOCS_MOST_BYTES = 60_000
PARAGRAPH_MOST_WORDS = 150
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

GENERATED_BLOCK = re.compile(r"<!-- tables:([\w-]+) -->.*?<!-- /tables:\1 -->", re.S)
CODE = re.compile(r"```.*?```|`[^`]+`", re.S)
LIST_NUMBER = re.compile(r"^\s*\d+\. ", re.M)
PARAGRAPH_BREAK = re.compile(r"\n\s*\n|\n(?=- )")
"""A blank line, or the next item of a list (`_prose` turns numbered items into bullets)."""
LINK = re.compile(r"\]\(([^)\s]*)\)")
FIGURE = re.compile(r"(?<![\w.\-/])\d+(?:,\d{3})*(?:\.\d+)?(?![\w\-])")
# Figures that are no measurement: the Python and Langflow versions supported and Langflow's default port.
NOT_MEASURED = {"3.10", "3.13", "1.13", "7860"}
# The modules whose constants the docs may quote (a default, a limit, a back-off).
SETTING_MODULES = [
    "langflow_summarizing_agent.engine.settings",
    "langflow_summarizing_agent.engine.fold",
    "langflow_summarizing_agent.engine.prompt",
    "langflow_summarizing_agent.engine.tokens",
    "langflow_summarizing_agent.engine.tool_results",
    "langflow_summarizing_agent.storage.versions",
    "langflow_summarizing_agent.wiring.timing",
]


def _test_files() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        found.setdefault(path.name, []).append(path)
    return found


def test_every_test_the_docs_name_exists():
    files = _test_files()
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for file_name, test_name in TEST_REFERENCE.findall(page.read_text(encoding="utf-8")):
            paths = files.get(file_name, [])
            if not paths:
                missing.append(f"{page.name}: {file_name}")
            elif test_name and not any(re.search(rf"def {test_name}\(", p.read_text()) for p in paths):
                missing.append(f"{page.name}: {file_name}::{test_name}")
    assert missing == []


def test_the_guarantees_are_a_table_and_each_row_names_its_test():
    guarantees = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8")
    rows = [line for line in guarantees.splitlines() if line.startswith("| ") and not line.startswith("| Guarantee")]
    assert len(rows) >= 20
    assert [row for row in rows if not TEST_REFERENCE.search(row.rsplit(" | ", 1)[-1])] == []
    assert [line for line in guarantees.splitlines() if line.startswith("- ")] == []


def test_the_benchmark_tables_are_the_saved_results(capsys: pytest.CaptureFixture[str]) -> None:
    """What `python -m benchmarks.tables --check` checks, in this process."""
    from benchmarks import tables

    assert tables.main(["--check"]) == 0, capsys.readouterr().out


def _settings_figures() -> set[str]:
    import importlib
    from datetime import timedelta

    figures = set(NOT_MEASURED)
    for module in map(importlib.import_module, SETTING_MODULES):
        for name, value in vars(module).items():
            if not name.isupper() or isinstance(value, bool):
                continue
            values = value.values() if isinstance(value, dict) else [value]
            for number in (v.total_seconds() if isinstance(v, timedelta) else v for v in values):
                if isinstance(number, (int, float)) and not isinstance(number, bool):
                    figures |= {f"{number:g}", f"{number:,g}", f"{number * 100:g}"}
    return figures


def _prose(page: str) -> str:
    return LIST_NUMBER.sub("- ", LINK.sub("]()", CODE.sub("", GENERATED_BLOCK.sub("", page))))


def test_every_figure_outside_a_generated_block_is_a_setting_the_code_states():
    """Measured numbers live only in generated blocks, which `benchmarks.tables --check` compares with the saved
    results; the prose may quote a default or a limit, and only as the code states it."""
    allowed = _settings_figures()
    stray = [
        f"{page.relative_to(ROOT)}: {figure}"
        for page in PAGES
        for figure in FIGURE.findall(_prose(page.read_text(encoding="utf-8")))
        if figure not in allowed
    ]
    assert stray == []


def test_the_docs_fit_in_their_budget_and_no_paragraph_runs_on():
    assert sum(page.stat().st_size for page in PAGES) <= DOCS_MOST_BYTES
    long_paragraphs = [
        f"{page.name}: {paragraph[:60]}"
        for page in PAGES
        for paragraph in PARAGRAPH_BREAK.split(_prose(page.read_text(encoding="utf-8")))
        if not paragraph.lstrip().startswith("|") and len(paragraph.split()) > PARAGRAPH_MOST_WORDS
    ]
    assert long_paragraphs == []


def test_every_link_between_the_docs_reaches_a_heading():
    def anchors(page: Path) -> set[str]:
        headings = re.findall(r"^#+ (.*)$", CODE.sub("", page.read_text(encoding="utf-8")), flags=re.M)
        return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}

    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            path, _, anchor = target.partition("#")
            if target.startswith("http") or not (path.endswith(".md") or not path):
                continue
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists() or (anchor and anchor not in anchors(linked)):
                broken.append(f"{page.name}: {target}")
    assert broken == []


def test_the_readme_is_a_page():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= README_MOST_LINES
