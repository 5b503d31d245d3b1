"""The engine: the rolling summary of older messages, with no database and no Langflow service.

A turn is three steps (`turn`):

- *read* (`read.read_turn`): one store call returns a frozen `TurnRead`, the session's summary and the messages
  the plan needs;
- *plan* (`plan.plan_turn`): pure; the verbatim policy decides what goes word for word (the window) and what is
  folded;
- *fold* (`fold.fold`): at most Max Folds per Turn summary calls and one compare-and-swap save; it returns a
  `CatchUp` rather than changing anything it was given.

The engine sees storage only through `store.SessionStore` and the summary model only as a `fold.Summarizer`, so
it is tested with fakes and runs unchanged on SQLite and PostgreSQL. `settings` holds every default and check,
`prompt` the texts the models read and the parsing of the summary model's answer, `tokens` the counting, and
`report` the status, the memory step and the `/compact` reply.

Words: *summary* is what is stored per session (the summary text, the pinned facts, the cursor); to *fold* is to
fold older messages into it with one summary call; the *window* is what goes word for word, as the stock Agent at
the same Number of Chat History Messages sends it; the *cursor* is the last folded message, `(timestamp, id)`.
"""
