"""The server's console: a turn's report follows `langflow run --log-level` (the test server runs at `warning`)."""

from __future__ import annotations

from tests.support.server_chat import ServerChat
from tests.support.server_fixtures import LangflowServer


def test_a_turns_report_stays_off_the_console_of_a_server_at_warning(langflow_server: LangflowServer) -> None:
    chat = ServerChat.create(langflow_server, langflow_server.superuser_token, langflow_server.superuser_api_key)
    chat.new_session()  # two turns, the second of them folding after its reply

    console = " ".join(langflow_server.log_path.read_text(encoding="utf-8", errors="replace").split())
    assert "The model got" not in console, "an INFO report of the Summarizing Agent reached a server at warning"
