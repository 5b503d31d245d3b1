"""The commit a benchmark records: "-dirty" for changed code, not for a results file another run just wrote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def recorded_commit(checkout: Path) -> str:
    """What `python -m benchmarks.revision CHECKOUT` prints."""
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.revision", str(checkout)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_a_changed_results_file_leaves_the_commit_clean_and_changed_code_does_not(tmp_path):
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "load.py").write_text("phases = 4\n")
    (tmp_path / "benchmarks" / "results" / "load.json").write_text("{}\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=b", "-c", "user.email=b@localhost", "commit", "-qm", "start")
    head = git(tmp_path, "rev-parse", "--short", "HEAD")

    (tmp_path / "benchmarks" / "results" / "load.json").write_text('{"runs": {}}\n')
    assert recorded_commit(tmp_path) == head

    (tmp_path / "benchmarks" / "load.py").write_text("phases = 6\n")
    assert recorded_commit(tmp_path) == f"{head}-dirty"


def test_outside_a_checkout_the_commit_is_unknown(tmp_path):
    assert recorded_commit(tmp_path) == "unknown"
