"""Storage on Langflow's database: `database.DatabaseStore` (the engine's `SessionStore`), `database.StateRows` (the
synchronous row layer the listeners use inside Langflow's flush), the table model and its migrations."""
