"""How long the test suite takes as CI runs it: `.ci/run` on a clean clone of HEAD, install included.

    python -m benchmarks.suite

Writes `suite.json` to `benchmarks/results`: the wall time of the whole run (the install and the system packages
included), and each pytest pass's tests and seconds (pytest's own summary line); the two passes run side by side.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.revision import ROOT, commit

SUMMARY = re.compile(r"^=*\s*(?:\d+ failed, )?(\d+) passed(?:, \d+ \w+)* in ([\d.]+)s", re.M)
PASSES = ("the whole suite, SQLite server, two processes", "beside it, the shared server's tests on PostgreSQL")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="summarizing-agent-suite-") as temporary:
        clone = Path(temporary) / "checkout"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        started = time.monotonic()
        run = subprocess.run(["bash", ".ci/run"], cwd=clone, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - started
        revision = commit(clone)
    print(run.stdout[-3000:], run.stderr[-3000:], sep="\n")
    passes = [
        {"name": name, "tests": int(n), "seconds": float(s)}
        for name, (n, s) in zip(PASSES, SUMMARY.findall(run.stdout), strict=False)
    ]
    report: dict[str, object] = {
        "name": "suite",
        "command": "python -m benchmarks.suite",
        "commit": revision,
        "cpus": os.cpu_count(),
    }
    report |= {"passed": run.returncode == 0, "total_seconds": round(seconds, 1), "passes": passes}
    (ROOT / "benchmarks" / "results" / "suite.json").write_text(json.dumps(report, indent=2) + "\n")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
