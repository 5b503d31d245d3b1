"""Langflow wiring: the turn runner both components enter through (`runner`), their parts (`agent_turn`,
`history_turn`), the runtime and its fold timing (`runtime`, `timing`), the HTTP API, the delete and rename listeners
(`lifecycle`), the plugin entry point and the CLI."""
