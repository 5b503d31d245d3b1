pytest_plugins = ["tests.server_fixtures"]
