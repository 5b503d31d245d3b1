"""The `summarizing_agent` bundle: the Summarizing Agent component."""
