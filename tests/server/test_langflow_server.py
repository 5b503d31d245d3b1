"""The shared `langflow run` test server: authentication on, users and API keys, data in the selected database."""

from __future__ import annotations

import sqlite3
from urllib.parse import urlsplit, urlunsplit

import psycopg

from tests.support.server_fixtures import SUPERUSER, LangflowServer, server_database_backend


def _whoami(server: LangflowServer, *, token: str | None = None, api_key: str | None = None) -> dict:
    with server.client(token=token, api_key=api_key) as client:
        response = client.get("/api/v1/users/whoami")
    response.raise_for_status()
    return response.json()


def _usernames_in_database(database_url: str) -> set[str]:
    url = urlsplit(database_url)
    if url.scheme.startswith("sqlite"):
        with sqlite3.connect(url.path.removeprefix("/")) as connection:
            return {row[0] for row in connection.execute('SELECT username FROM "user"')}
    with psycopg.connect(urlunsplit(url._replace(scheme="postgresql"))) as connection:
        return {row[0] for row in connection.execute('SELECT username FROM "user"')}


def test_server_refuses_requests_without_credentials(langflow_server: LangflowServer) -> None:
    with langflow_server.client() as client:
        assert client.get("/api/v1/users/whoami").status_code in {401, 403}


def test_superuser_logs_in_with_a_password(langflow_server: LangflowServer) -> None:
    me = _whoami(langflow_server, token=langflow_server.superuser_token)
    assert me["username"] == SUPERUSER
    assert me["is_superuser"] is True


def test_api_key_authenticates_as_its_owner(langflow_server: LangflowServer) -> None:
    assert _whoami(langflow_server, api_key=langflow_server.superuser_api_key)["username"] == SUPERUSER


def test_second_user_is_active_and_not_a_superuser(langflow_server: LangflowServer) -> None:
    user = langflow_server.create_user()
    me = _whoami(langflow_server, token=user.token)
    assert me["id"] == user.id
    assert me["is_active"] is True
    assert me["is_superuser"] is False
    assert _whoami(langflow_server, api_key=langflow_server.create_api_key(user.token))["id"] == user.id


def test_server_keeps_its_data_in_the_selected_database(langflow_server: LangflowServer) -> None:
    expected_scheme = "postgresql" if server_database_backend() == "postgres" else "sqlite"
    assert urlsplit(langflow_server.database_url).scheme.startswith(expected_scheme)
    assert SUPERUSER in _usernames_in_database(langflow_server.database_url)
