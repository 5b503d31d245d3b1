"""The `summarizing_agent` bundle: the Summarizing Agent and the Summarizing Message History components."""
