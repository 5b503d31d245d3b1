"""Shared fixtures of the component tests."""

from __future__ import annotations

import pytest

from tests.component.drop_in_agents import VARIANTS, Variant
from tests.support.langflow_db import LangflowDatabase


# The Agent a port of Langflow's Agent tests (`test_drop_in.py`, `test_drop_in_context.py`) runs on: the stock one
# (the control), or ours with the switch off or on.
@pytest.fixture(params=VARIANTS, ids=[v.name for v in VARIANTS])
def variant(request: pytest.FixtureRequest, langflow_db: LangflowDatabase) -> Variant:
    return request.param
