"""Backups of the one database file: timed snapshots while serving, and putting one back.

The whole network is one SQLite file, so a controller survives its machine only through copies
of that file kept elsewhere. This package holds what ziti-lite itself does about it:

* ``schedule.py``: ``serve --snapshot-every``: consistent snapshots (``Store.snapshot``, the
  online backup API on a connection of its own, in a worker thread) named by time in a folder,
  the oldest beyond ``--snapshot-keep`` removed, failures logged once and counted;
* ``restore.py``: ``ziti-lite restore``: a snapshot checked (a ziti-lite database, SQLite's
  integrity check, not from a newer ziti-lite) and put in place of a stopped server's file, the
  replaced file kept aside.

Continuous replication is Litestream's job (README, "Backups and disaster recovery"); the WAL
checkpointer (``db/checkpoint.py``) never restarts the log while serving, so it leaves
Litestream's work alone. The package sits just above ``db/``: it uses the store and the serving
lock and nothing of the controller; the app starts a ``Snapshotter`` in its lifespan and
``observe.py`` reports it.
"""
