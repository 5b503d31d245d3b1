"""Keep session summaries in step with Langflow's chat history when messages are deleted or renamed.

Langflow has no "messages deleted" event, so this module listens on `sqlalchemy.orm.Session` (which Langflow's
`AsyncSession` runs on) and acts inside the transaction that changes the `message` table:

- a bulk `delete(MessageTable)` (every monitor delete route, `cascade_delete_flow`, `adelete_messages`) and a
  unit-of-work delete of a `MessageTable` object (`langflow.memory.delete_message`) delete a summary row when a
  deleted message was folded into it (at or before its cursor: the summary no longer matches the stored
  history and may hold text the user wanted gone), or when its session has no message left. A summary whose
  deleted messages were all still unfolded is kept;
- a bulk `delete(Flow)` deletes every summary row of the deleted flows;
- a change of `message.session_id` (the monitor rename routes set it on loaded objects and flush; a bulk
  `update(MessageTable)` works the same way) moves the summary rows to the new session id when the whole session
  moved into a session without messages of its own. A partial move or a merge deletes the summary rows of both
  sessions instead: they are rebuilt from the stored messages on the next turn.

A deleted summary takes with it what this process keeps of its scope (`runtime.Runtime.forget`: the usage scale,
the back-off of a failed save).

Message rows are never changed here, and summary rows only through `storage.summaries.SummaryRows`. The listeners read
what a statement will touch before it runs, on the same connection, and write after it ran, in the same
transaction, so a rolled-back delete keeps its summaries. If this module's part fails, the error is logged and
Langflow's statement goes on: on Postgres our statements run in a savepoint; on SQLite a failed statement leaves
the transaction usable. What no listener sees (raw SQL, another process) is caught only by the lazy check of the
store, which ignores a summary whose cursor message is no longer in its session (or, without a cursor, whose
session has no message left); a summary that keeps its cursor message stays in use.

`install_listeners()` is called once per worker by the `langflow.plugins` registrar
(`plugin.install_routes_and_listeners`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from uuid import UUID

from sqlalchemy import Connection, Table, and_, case, event, func, select
from sqlalchemy.orm import ORMExecuteState, Session, UOWTransaction, attributes
from sqlalchemy.sql.elements import BindParameter, ColumnElement

from langflow_summarizing_agent.engine.records import ScopeKey
from langflow_summarizing_agent.storage.summaries import Rename, SummaryRows
from langflow_summarizing_agent.wiring import runtime

__all__ = ["install_listeners", "listeners_installed"]

logger = logging.getLogger(__name__)

_PLAN_KEY = "langflow_summarizing_agent.lifecycle"

_T = TypeVar("_T")


def install_listeners() -> None:
    """Listen on every ORM session of the process; calling it again changes nothing."""
    for name, listener in _LISTENERS:
        if not event.contains(Session, name, listener):
            event.listen(Session, name, listener)


def listeners_installed() -> bool:
    return all(event.contains(Session, name, listener) for name, listener in _LISTENERS)


def _remove_listeners() -> None:
    """For tests: undo `install_listeners()`."""
    for name, listener in _LISTENERS:
        if event.contains(Session, name, listener):
            event.remove(Session, name, listener)


def _on_orm_execute(orm_state: ORMExecuteState) -> Any:
    statement: Any = orm_state.statement
    if orm_state.is_delete:
        if _is_table(statement.table, _message_table()):
            return _delete_messages(orm_state)
        if _is_table(statement.table, _flow_table()):
            return _delete_flows(orm_state)
    elif orm_state.is_update and _is_table(statement.table, _message_table()):
        new_session_id = _assigned_session_id(statement)
        if new_session_id is not _NOT_ASSIGNED:
            return _rename_messages(orm_state, new_session_id)
    return None


def _delete_messages(orm_state: ORMExecuteState) -> Any:
    connection = orm_state.session.connection()
    where = _where(orm_state)
    plan = _guarded(
        connection, "read the summaries of deleted messages", lambda: SummaryRows(connection).plan_message_delete(where)
    )
    result = orm_state.invoke_statement()
    if plan:
        _forget(
            _guarded(
                connection,
                "delete the summaries of deleted messages",
                lambda: SummaryRows(connection).apply_message_delete(plan),
            )
        )
    return result


def _delete_flows(orm_state: ORMExecuteState) -> Any:
    connection = orm_state.session.connection()
    flows = _flow_table()
    where = _where(orm_state)

    def deleted_flow_ids() -> list[UUID]:
        if not SummaryRows(connection).exists():
            return []
        return list(connection.execute(_where_applied(select(flows.c.id), where)).scalars())

    flow_ids = _guarded(connection, "read deleted flows", deleted_flow_ids) or []
    result = orm_state.invoke_statement()
    if flow_ids:
        _forget(
            _guarded(
                connection,
                "delete the summaries of deleted flows",
                lambda: SummaryRows(connection).purge_flows(flow_ids),
            )
        )
    return result


def _rename_messages(orm_state: ORMExecuteState, new_session_id: str | None) -> Any:
    connection = orm_state.session.connection()
    where = _where(orm_state)
    renames = _guarded(
        connection,
        "read renamed sessions",
        lambda: _plan_bulk_rename(connection, where, new_session_id),
    )
    result = orm_state.invoke_statement()
    if renames:
        _guarded(
            connection, "move the summaries of renamed sessions", lambda: SummaryRows(connection).apply_renames(renames)
        )
    return result


def _before_flush(session: Session, flush_context: UOWTransaction, _instances: Any) -> None:
    message_class = _message_class()
    deleted: list[Any] = [obj for obj in session.deleted if isinstance(obj, message_class)]
    moved = [obj for obj in session.dirty if isinstance(obj, message_class) and _session_id_change(obj)]
    if not deleted and not moved:
        return
    connection = session.connection()
    plans: dict[str, Any] = {}
    if deleted:
        ids = [obj.id for obj in deleted]
        plans["delete"] = _guarded(
            connection,
            "read the summaries of deleted messages",
            lambda: SummaryRows(connection).plan_message_delete(_message_table().c.id.in_(ids)),
        )
    if moved:
        plans["renames"] = _guarded(
            connection, "read renamed sessions", lambda: _plan_object_renames(connection, moved)
        )
    flush_context.attributes[_PLAN_KEY] = plans


def _after_flush(session: Session, flush_context: UOWTransaction) -> None:
    plans = flush_context.attributes.pop(_PLAN_KEY, None)
    if not plans:
        return
    connection = session.connection()
    delete_plan = plans.get("delete")
    if delete_plan:
        _forget(
            _guarded(
                connection,
                "delete the summaries of deleted messages",
                lambda: SummaryRows(connection).apply_message_delete(delete_plan),
            )
        )
    renames = plans.get("renames")
    if renames:
        _guarded(
            connection, "move the summaries of renamed sessions", lambda: SummaryRows(connection).apply_renames(renames)
        )


def _forget(deleted: Sequence[ScopeKey] | None) -> None:
    """Drop what this process keeps of the scopes whose summary was deleted."""
    for key in deleted or ():
        runtime.current().forget(key)


_LISTENERS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("do_orm_execute", _on_orm_execute),
    ("before_flush", _before_flush),
    ("after_flush", _after_flush),
)


def _plan_object_renames(connection: Connection, moved: Sequence[Any]) -> list[Rename]:
    """Renames of flushed `MessageTable` objects, grouped by (flow, owner, old session, new session)."""
    if not SummaryRows(connection).exists():
        return []
    groups: dict[tuple[UUID, UUID, str, str], list[UUID]] = defaultdict(list)
    for obj in moved:
        old_session_id = _old_session_id(connection, obj)
        if obj.flow_id is None or obj.user_id is None or old_session_id is None:
            continue  # No summary row can belong to a message without flow or owner.
        groups[(obj.flow_id, obj.user_id, old_session_id, obj.session_id)].append(obj.id)
    messages = _message_table()
    renames = []
    for (flow_id, user_id, old, new), ids in groups.items():
        whole = _moves_whole_session(connection, flow_id, user_id, old, new, messages.c.id.in_(ids))
        renames.append(Rename(flow_id, user_id, old, new, whole))
    return renames


def _plan_bulk_rename(
    connection: Connection, where: ColumnElement[bool] | None, new_session_id: str | None
) -> list[Rename]:
    if not SummaryRows(connection).exists():
        return []
    messages = _message_table()
    scopes = connection.execute(
        _where_applied(
            select(messages.c.flow_id, messages.c.user_id, messages.c.session_id)
            .distinct()
            .where(messages.c.flow_id.is_not(None), messages.c.user_id.is_not(None)),
            where,
        )
    ).all()
    moved = where if where is not None else messages.c.id.is_not(None)
    renames = []
    for flow_id, user_id, old_session_id in scopes:
        whole = new_session_id is not None and _moves_whole_session(
            connection, flow_id, user_id, old_session_id, new_session_id, moved
        )
        renames.append(Rename(flow_id, user_id, old_session_id, new_session_id, whole))
    return renames


def _moves_whole_session(
    connection: Connection, flow_id: UUID, user_id: UUID, old: str, new: str, moved: ColumnElement[bool]
) -> bool:
    """True when every message of `old` moves and `new` holds no message that stays."""
    messages = _message_table()

    def count(session_id: str, *where: ColumnElement[bool]) -> Any:
        return func.coalesce(func.sum(case((and_(messages.c.session_id == session_id, *where), 1), else_=0)), 0)

    stmt = select(count(old), count(old, moved), count(new), count(new, moved)).where(
        messages.c.flow_id == flow_id, messages.c.user_id == user_id, messages.c.session_id.in_([old, new])
    )
    old_total, old_moving, new_total, new_moving = connection.execute(stmt).one()
    return old_total == old_moving and new_total == new_moving


def _session_id_change(obj: Any) -> bool:
    return attributes.get_history(obj, "session_id", passive=attributes.PASSIVE_NO_INITIALIZE).has_changes()


def _old_session_id(connection: Connection, obj: Any) -> str | None:
    history = attributes.get_history(obj, "session_id", passive=attributes.PASSIVE_NO_INITIALIZE)
    if history.deleted:
        return history.deleted[0]
    # The old value was never loaded: the row still holds it until the flush.
    messages = _message_table()
    return connection.execute(select(messages.c.session_id).where(messages.c.id == obj.id)).scalar_one_or_none()


_NOT_ASSIGNED = object()


def _assigned_session_id(statement: Any) -> Any:
    """The plain value an UPDATE assigns to `session_id`, None for an expression, `_NOT_ASSIGNED` when unset."""
    for key, value in (getattr(statement, "_values", None) or {}).items():
        if getattr(key, "key", key) == "session_id":
            if isinstance(value, BindParameter) and isinstance(value.value, str):
                return value.value
            return None
    return _NOT_ASSIGNED


def _where(orm_state: ORMExecuteState) -> ColumnElement[bool] | None:
    statement: Any = orm_state.statement
    return statement.whereclause


def _where_applied(stmt: Any, where: ColumnElement[bool] | None) -> Any:
    return stmt if where is None else stmt.where(where)


def _guarded(connection: Connection, what: str, action: Callable[[], _T]) -> _T | None:
    """Run our part of Langflow's statement so that its failure cannot fail Langflow's statement."""
    try:
        if connection.dialect.name == "postgresql":
            # A failed statement aborts a Postgres transaction; the savepoint keeps Langflow's part alive.
            with connection.begin_nested():
                return action()
        # SQLite rolls back only the failed statement, and a SAVEPOINT there would open its own transaction.
        return action()
    except Exception:
        logger.exception(
            "Summarizing Agent: could not %s; the summary rows concerned are left as they were. On its next use a row "
            "is ignored and rebuilt only if its cursor message is no longer in its session (without a cursor: if "
            "the session has no message left); otherwise its summary stays in use, with all it folded, until reset "
            "with DELETE /api/v1/summarizing-agent/sessions/{session_id}/summary.",
            what,
        )
        return None


def _is_table(candidate: Any, table: Table) -> bool:
    return getattr(candidate, "name", None) == table.name and getattr(candidate, "schema", None) == table.schema


def _message_class() -> type:
    from langflow.services.database.models.message.model import MessageTable

    return MessageTable


def _message_table() -> Table:
    return _message_class().__table__  # type: ignore[attr-defined]


def _flow_table() -> Table:
    from langflow.services.database.models.flow.model import Flow

    return Flow.__table__  # type: ignore[attr-defined]
