"""Where Langflow calls in: the component's turn (`agent_turn`), the summary model, folds after the reply
(`background`), the HTTP API, the delete and rename listeners (`lifecycle`), the plugin entry point and the CLI."""
