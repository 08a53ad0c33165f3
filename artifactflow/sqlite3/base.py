"""Django's SQLite backend, with the SQL function the search triggers and
views call (artifactflow.textsearch.cjk_split) on every connection it opens,
as Django registers its own functions: no connection can write a message
without it."""

from django.db.backends.sqlite3 import base

from artifactflow.textsearch import cjk_split


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        connection.create_function("cjk_split", 1, cjk_split, deterministic=True)
        return connection
