"""The store's tests: each backend in turn, migrations, Postgres notices, a server on Postgres and its restarts."""
