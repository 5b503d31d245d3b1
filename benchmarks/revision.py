"""The commit a benchmark ran at, recorded in its results so the tables built from them can name it."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = "benchmarks/results"
"""The benchmarks' own outputs: a results file another run just wrote leaves the code as it was."""


def commit(root: Path = ROOT) -> str:
    """`git rev-parse --short HEAD`, plus "-dirty" when tracked files outside `benchmarks/results` differ from it;
    "unknown" outside a checkout."""
    try:
        head = _git(root, "rev-parse", "--short", "HEAD")
        changes = _git(root, "status", "--porcelain", "--untracked-files=no", "--", ".", f":(exclude){RESULTS}")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}-dirty" if changes else head


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
