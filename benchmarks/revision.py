"""The commit a benchmark ran at, recorded in its results so the tables built from them can name it."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def commit() -> str:
    """`git rev-parse --short HEAD`, plus "-dirty" when tracked files differ from it; "unknown" outside a checkout."""
    try:
        head = _git("rev-parse", "--short", "HEAD")
        changes = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}-dirty" if changes else head


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
