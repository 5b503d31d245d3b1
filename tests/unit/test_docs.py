"""The docs say what the code and the benchmarks say: each guarantee names a test that exists, and the benchmark
tables are the saved results."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_REFERENCE = re.compile(r"`(test_\w+\.py)(?:::(test_\w+))?`")
README_MOST_LINES = 150


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


def test_each_guarantee_names_its_test():
    guarantees = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8")
    bullets = re.findall(r"^- .*(?:\n(?!- |\n).*)*", guarantees, flags=re.M)
    assert bullets
    assert [bullet for bullet in bullets if not TEST_REFERENCE.search(bullet)] == []


def test_the_benchmark_tables_are_the_saved_results():
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.tables", "--check"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_readme_is_a_page():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= README_MOST_LINES
