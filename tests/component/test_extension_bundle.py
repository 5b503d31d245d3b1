"""The package is a valid Langflow Extension Bundle (`lfx extension validate` on the installed package)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

EXTENSION_ID = "langflow-summarizing-agent"
BUNDLE_NAME = "summarizing_agent"


def _installed_package_dir() -> Path:
    return Path(str(files("langflow_summarizing_agent")))


def test_lfx_extension_validate_passes_on_the_installed_bundle() -> None:
    lfx = Path(sys.executable).with_name("lfx")
    result = subprocess.run(
        [str(lfx), "extension", "validate", str(_installed_package_dir()), "--format", "json", "--execute-imports"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"], report
    assert report["errors"] == []
    assert report["manifest"]["id"] == EXTENSION_ID
    assert [bundle["name"] for bundle in report["manifest"]["bundles"]] == [BUNDLE_NAME]
