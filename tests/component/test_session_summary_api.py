"""The session summary API's flow check on Langflow's own database session (SQLite and PostgreSQL): it ends the
request's transaction, so a read or reset that then waits for a catch-up holds no pooled connection."""

from __future__ import annotations

import uuid

import pytest
from fastapi import HTTPException

from langflow_summarizing_agent.wiring import api
from tests.support.langflow_db import LangflowDatabase


async def _owner_and_flow() -> tuple[object, uuid.UUID]:
    from langflow.services.database.models.flow.model import Flow
    from langflow.services.database.models.user.model import User
    from langflow.services.deps import session_scope

    async with session_scope() as session:
        # Langflow gives optins a database default only, which the pydantic plugin takes for a required field.
        user = User(username=f"owner-{uuid.uuid4().hex[:8]}", password="not-used", is_active=True)  # type: ignore[call-arg]
        session.add(user)
        await session.flush()
        flow = Flow(name=f"flow-{uuid.uuid4().hex[:8]}", user_id=user.id, data={"nodes": [], "edges": []})
        session.add(flow)
        await session.commit()
        return user, flow.id


@pytest.mark.parametrize("write", [False, True], ids=["read", "reset"])
async def test_the_flow_check_leaves_no_transaction_open_for_the_wait_that_follows(
    langflow_db: LangflowDatabase, write: bool
) -> None:
    from langflow.services.deps import session_scope

    user, flow_id = await _owner_and_flow()
    async with session_scope() as session:
        await api.ensure_flow_or_404(session, flow_id, user, write=write)
        assert not session.in_transaction(), "the request's connection stays taken while the read waits"
        with pytest.raises(HTTPException) as missing:
            await api.ensure_flow_or_404(session, uuid.uuid4(), user, write=write)
        assert missing.value.status_code == 404
        assert not session.in_transaction()
