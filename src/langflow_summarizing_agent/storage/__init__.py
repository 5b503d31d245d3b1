"""Storage on Langflow's database: `store.DatabaseStore` (the engine's `SessionStore`), `summaries.SummaryRows` (the
statements on the summary table, which the listeners also run inside Langflow's flush), `messages` (keyset reads of
Langflow's message table), the table model and its migrations."""
