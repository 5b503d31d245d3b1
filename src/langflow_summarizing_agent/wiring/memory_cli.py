"""`langflow summarizing-agent memory ...`: read, edit, seed and roll back a session's memory on a running Langflow
server, through its session summary API (`api`, `memory_api`) with a Langflow API key, so the server's ownership
rules hold as they do for the API.

    langflow summarizing-agent memory show --flow-id F --session-id S
    langflow summarizing-agent memory edit --flow-id F --session-id S --pin cluster=eu-3 [--unpin region]
        [--summary "- ..."] [--seed]
    langflow summarizing-agent memory versions --flow-id F --session-id S
    langflow summarizing-agent memory rollback --flow-id F --session-id S --version 3

The server is `--url` (or `LANGFLOW_URL`, default `http://127.0.0.1:7860`); the key is `--api-key` (or
`LANGFLOW_API_KEY`). An edit or rollback reads the summary first and sends its ETag as `If-Match`: a fold or another
edit in between makes the server refuse it (412), and the command says so and exits 1 without writing.
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import quote
from uuid import UUID

import httpx
import typer

from langflow_summarizing_agent.wiring.api import ROUTE_PREFIX

DEFAULT_URL = "http://127.0.0.1:7860"
TIMEOUT_SECONDS = 150.0
"""Longer than a read's wait for a running fold (`after_reply.FOLD_WAIT_SECONDS`)."""

memory = typer.Typer(
    help="Read, edit, seed and roll back a session's memory on a running server.", no_args_is_help=True
)

Url = typer.Option(DEFAULT_URL, "--url", envvar="LANGFLOW_URL", help="The Langflow server.")
ApiKey = typer.Option(..., "--api-key", envvar="LANGFLOW_API_KEY", help="A Langflow API key of the flow's owner.")
FlowId = typer.Option(..., "--flow-id", help="UUID of the flow the session belongs to.")
SessionId = typer.Option(..., "--session-id", help="The session.")
ContextId = typer.Option(None, "--context-id", help="The context; left out: no context.")
UserId = typer.Option(None, "--user-id", help="Owner of the session's messages; default: the flow's owner.")


@memory.command("show")
def show(
    url: str = Url,
    api_key: str = ApiKey,
    flow_id: str = FlowId,
    session_id: str = SessionId,
    context_id: str = ContextId,
) -> None:
    """Print the session's summaries (text, pinned facts, version) as JSON."""
    answer = _call("GET", url, api_key, session_id, "", _params(flow_id, context_id, None))
    typer.echo(json.dumps(answer.json()["summaries"], indent=2))


@memory.command("versions")
def versions(
    url: str = Url,
    api_key: str = ApiKey,
    flow_id: str = FlowId,
    session_id: str = SessionId,
    context_id: str = ContextId,
    user_id: str = UserId,
) -> None:
    """Print each kept version, newest first: what made it, what it cost, and its text."""
    answer = _call("GET", url, api_key, session_id, "/versions", _params(flow_id, context_id, user_id))
    for summary in answer.json()["summaries"]:
        typer.echo(f"context {summary['context_id']!r}, owner {summary['user_id']}: version {summary['version']}")
        for version in summary["versions"]:
            typer.echo(_version_line(version))


@memory.command("edit")
def edit(
    url: str = Url,
    api_key: str = ApiKey,
    flow_id: str = FlowId,
    session_id: str = SessionId,
    context_id: str = ContextId,
    user_id: str = UserId,
    summary: Annotated[str | None, typer.Option("--summary", help="The new summary text.")] = None,
    pin: Annotated[list[str] | None, typer.Option("--pin", help="A pinned fact to set, KEY=VALUE; repeat.")] = None,
    unpin: Annotated[list[str] | None, typer.Option("--unpin", help="A pinned fact to clear, KEY; repeat.")] = None,
    seed: Annotated[bool, typer.Option("--seed", help="Seed a session that has no summary yet.")] = False,
) -> None:
    """Edit the summary text and pinned facts, or seed them with --seed."""
    pinned: dict[str, str | None] = dict.fromkeys(unpin or [])
    for item in pin or []:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise typer.BadParameter(f"--pin takes KEY=VALUE, got {item!r}", param_hint="--pin")
        pinned[key.strip()] = value
    body: dict[str, Any] = {"pinned": pinned}
    if summary is not None:
        body["summary"] = summary
    params = _params(flow_id, context_id, user_id)
    headers = {"If-None-Match": "*"} if seed else {"If-Match": _etag(url, api_key, session_id, params)}
    answer = _call("PATCH", url, api_key, session_id, "", params, json=body, headers=headers)
    typer.echo(f"version {answer.json()['version']} saved")


@memory.command("rollback")
def rollback(
    url: str = Url,
    api_key: str = ApiKey,
    flow_id: str = FlowId,
    session_id: str = SessionId,
    context_id: str = ContextId,
    user_id: str = UserId,
    version: Annotated[int, typer.Option("--version", help="The version to restore (see `versions`).")] = 0,
) -> None:
    """Restore a kept version's summary text and pinned facts, as a new version."""
    if version < 1:
        raise typer.BadParameter("name the version to restore, from `versions`", param_hint="--version")
    params = _params(flow_id, context_id, user_id)
    headers = {"If-Match": _etag(url, api_key, session_id, params)}
    answer = _call("POST", url, api_key, session_id, "/rollback", params, json={"version": version}, headers=headers)
    typer.echo(f"version {answer.json()['version']} saved, restoring version {version}")


def _params(flow_id: str, context_id: str | None, user_id: str | None) -> dict[str, str]:
    params = {"flow_id": flow_id, "context_id": context_id or ""}
    if user_id:
        params["user_id"] = user_id
    return params


def _etag(url: str, api_key: str, session_id: str, params: dict[str, str]) -> str:
    """The ETag of the one summary the params name; the params then name its owner, so the write goes to the
    summary read."""
    read = {key: value for key, value in params.items() if key != "user_id"}
    summaries = _call("GET", url, api_key, session_id, "", read).json()["summaries"]
    owner = params.get("user_id")
    mine = [one for one in summaries if owner is None or UUID(one["user_id"]) == UUID(owner)]
    if len(mine) != 1:
        typer.echo(f"{len(mine)} summaries match; name the owner with --user-id", err=True)
        raise typer.Exit(1)
    params["user_id"] = str(mine[0]["user_id"])
    return str(mine[0]["etag"])


def _call(
    method: str, url: str, api_key: str, session_id: str, tail: str, params: dict[str, str], **kwargs: Any
) -> httpx.Response:
    """One request to the session summary API; an error answer is printed with its detail, and the command exits 1."""
    target = f"{url.rstrip('/')}{ROUTE_PREFIX}/sessions/{quote(session_id, safe='')}/summary{tail}"
    headers = {"x-api-key": api_key, **kwargs.pop("headers", {})}
    try:
        answer = httpx.request(method, target, params=params, headers=headers, timeout=TIMEOUT_SECONDS, **kwargs)
    except httpx.HTTPError as exc:
        typer.echo(f"Could not reach {url}: {exc}", err=True)
        raise typer.Exit(1) from exc
    if answer.is_success:
        return answer
    try:
        detail = answer.json().get("detail", answer.text)
    except ValueError:
        detail = answer.text
    if isinstance(detail, dict):
        detail = detail.get("message", detail)
    typer.echo(f"{answer.status_code}: {detail}", err=True)
    raise typer.Exit(1)


def _version_line(version: dict[str, Any]) -> str:
    change = version["change"]
    if change == "fold":
        cost = (
            f"{version['folded_messages']} messages, {version['fold_calls']} calls, {version['fold_input_tokens']} in"
        )
        cost += f" / {version['fold_output_tokens']} out tokens"
        what = f"fold ({cost})"
    elif change == "rollback":
        what = f"rollback to version {version['rolled_back_to']}"
    else:
        what = change
    return f"  {version['version']:>4}  {version['created_at'][:19]}  {what}: {version['summary'][:60]!r}"
