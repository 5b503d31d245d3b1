"""The commit a benchmark ran at: `git describe --always --dirty`, dirty only for changed code, not for results.

python -m benchmarks.revision [CHECKOUT]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def commit(root: Path = ROOT) -> str:
    """The short commit, "-dirty" when tracked files outside `benchmarks/results` differ; "unknown" outside git."""
    git = ["git", "-C", str(root)]
    try:
        head = subprocess.run([*git, "describe", "--always"], capture_output=True, text=True, check=True).stdout
        changed = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", ".", ":!benchmarks/results"], check=False)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.strip() + ("-dirty" if changed.returncode else "")


if __name__ == "__main__":
    print(commit(*map(Path, sys.argv[1:2])))
