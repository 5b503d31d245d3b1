"""The engine: the rolling summary of older messages, with no database and no Langflow service.

A turn is three steps (`turn`):

- *read* (`read.read_turn`): one store call returns a frozen `TurnRead`, the session's summary and the messages
  the plan needs;
- *plan* (`plan.plan_turn`): pure; the verbatim policy decides what goes word for word (the window) and what is
  folded;
- *catch up* (`fold.catch_up`): at most Max Folds per Turn folds and one compare-and-swap save; it returns a
  `CatchUp` rather than changing anything it was given.

The engine sees storage only through `store.SessionStore` and the summary model only as a `fold.Summarizer`, so
it is tested with fakes and runs unchanged on SQLite and PostgreSQL. `settings` holds every default and check,
`prompt` the texts the models read and the parsing of the summary model's answer, `tokens` the counting, and
`report` the status, the memory step and the `/compact` reply.

The words (summary, fold, catch-up, backlog, window, cut, budget, cursor, pinned facts) mean what the glossary in
docs/architecture.md says, and only that.
"""
