"""Summarizing Agent: a Langflow Agent with a rolling per-session summary and pinned key facts."""

__version__ = "0.1.0"
