"""One store, two engines: SQLite, embedded, the default (`python app.py` needs nothing else), and PostgreSQL
through psycopg 3 when `DATABASE_URL=postgresql://...` is set, so that several copies of the app share a class.

Everything above this module (polls.py, follow.py, the migrations) writes one SQL, with `?` placeholders, through
`Database.read()` and `Database.write()`; everything in which the engines differ is here, in the two engine classes:
- placeholders: `?` (sqlite3) or `%s` (psycopg);
- how writers are serialised: SQLite has one writer at a time (`BEGIN IMMEDIATE` takes the file's write lock, so
  `lock()` has nothing left to do); PostgreSQL runs writers side by side, so a transaction that checks before it
  writes (a room's answer limit, a reveal) takes a transaction-level advisory lock on its room (`lock(name)`);
- the catalogue the migrations read (`tables()`, `columns()`): `sqlite_master` and `PRAGMA table_info`, or
  `information_schema`;
- connections: SQLite opens one per call (cheap, and nothing is shared between threads); PostgreSQL keeps a few open
  per process and opens no more than `POOL_SIZE` at once (a connection costs a process on the server and
  milliseconds to open: 200 students opening one each took seconds), the others waiting for one.
The types need no translation: `TEXT`, `INTEGER` and `DOUBLE PRECISION` are PostgreSQL's, and SQLite reads
`DOUBLE PRECISION` as REAL (its type affinity), so the migrations' DDL is the same for both. So is the upsert
(`INSERT ... ON CONFLICT (...) DO UPDATE SET x = excluded.x`, SQLite since 3.24).

Durable before acknowledged: `write()` commits before it returns, and both engines make a commit durable before
reporting it (SQLite in WAL mode with `synchronous=FULL`, PostgreSQL with its default `synchronous_commit=on`), so an
answer the page was told about survives the app's process being killed (tests/test_rooms_durability.py).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Iterator

DEFAULT_DB = Path(__file__).resolve().parents[2] / "polls.sqlite3"
POOL_SIZE = 12           # PostgreSQL connections per process, kept open; a request waits for a free one
BUSY_SECONDS = 10        # how long a writer waits for another before the request is refused with a message


class RoomError(ValueError):
    """What a room refuses or the store cannot do, said plainly (unknown or expired room, full room, database
    unreachable, ...): the page shows its text, never a traceback."""


def configured() -> str:
    """Where the class's data lives: `DATABASE_URL` (a postgresql:// URL) when set, else the SQLite file `POLLS_DB`
    (beside the app by default)."""
    url = os.environ.get("DATABASE_URL", "").strip()
    return url or str(os.environ.get("POLLS_DB", DEFAULT_DB))


def is_postgres(where: str) -> bool:
    return where.startswith(("postgresql://", "postgres://"))


class Tx:
    """One connection's statements, in one SQL for both engines (`?` placeholders)."""

    def __init__(self, con, engine):
        self.con, self.engine = con, engine

    def run(self, sql: str, params: tuple = ()):
        return self.con.execute(self.engine.sql(sql), params)

    def one(self, sql: str, params: tuple = ()) -> tuple | None:
        return self.run(sql, params).fetchone()

    def all(self, sql: str, params: tuple = ()) -> list[tuple]:
        return list(self.run(sql, params).fetchall())

    def lock(self, name: str) -> None:
        """Serialise, until this transaction ends, the writers that lock the same name (a room, the room list)."""
        self.engine.lock(self, name)

    def tables(self) -> set[str]:
        return self.engine.tables(self)

    def columns(self, table: str) -> set[str]:
        return self.engine.columns(self, table)


class SQLite:
    """The embedded engine: one file, one connection per call, WAL (readers never wait for the writer)."""

    name = "sqlite"
    errors = (sqlite3.OperationalError,)     # busy past BUSY_SECONDS, a folder that does not exist, a full disk

    def __init__(self, path: str):
        self.path = path
        self._wal = False
        # This process's writers queue here, in order, before they ask SQLite for its write lock: SQLite's own
        # wait (busy_timeout) sleeps and retries, and 200 threads retrying left the lock idle between sleeps (200
        # answers at once took 12 s, and some waited past the timeout). Other processes still meet busy_timeout.
        self._writer = threading.Lock()

    @staticmethod
    def sql(sql: str) -> str:
        return sql

    def connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None)   # autocommit; BEGIN below
        if not self._wal:                           # the journal mode is kept in the file: set once per process
            con.execute("PRAGMA journal_mode=WAL")
            self._wal = True
        con.execute("PRAGMA synchronous=FULL")      # a commit is on disk before it returns (WAL's default is too)
        return con

    @contextmanager
    def read(self) -> Iterator[Tx]:
        with closing(self.connect()) as con:
            yield Tx(con, self)

    @contextmanager
    def write(self) -> Iterator[Tx]:
        with self._writer, closing(self.connect()) as con:
            con.execute("BEGIN IMMEDIATE")          # the file's one writer from here: checks and writes are atomic
            try:
                yield Tx(con, self)
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    @staticmethod
    def lock(tx: Tx, name: str) -> None:
        """Nothing to do: BEGIN IMMEDIATE already holds the only write lock."""

    @staticmethod
    def tables(tx: Tx) -> set[str]:
        return {name for (name,) in tx.all("SELECT name FROM sqlite_master WHERE type = 'table'")}

    @staticmethod
    def columns(tx: Tx, table: str) -> set[str]:
        return {row[1] for row in tx.all(f"PRAGMA table_info({table})")}


class Postgres:
    """The shared engine: PostgreSQL through psycopg 3, a few autocommit connections kept per process."""

    name = "postgresql"

    def __init__(self, url: str):
        import psycopg   # only when a DATABASE_URL asks for it: the embedded default needs no driver

        self.psycopg, self.url = psycopg, url
        self.errors = (psycopg.OperationalError,)
        self._idle: list = []
        self._pid = os.getpid()
        self._guard = threading.Lock()
        self._free = threading.BoundedSemaphore(POOL_SIZE)   # connections this process may have open at once

    @staticmethod
    def sql(sql: str) -> str:
        return sql.replace("?", "%s")   # our SQL has no literal ? or %

    def _get(self):
        if not self._free.acquire(timeout=BUSY_SECONDS):
            raise self.psycopg.OperationalError(f"no free connection within {BUSY_SECONDS} s")
        try:
            return self._reuse() or self.psycopg.connect(self.url, autocommit=True, connect_timeout=BUSY_SECONDS)
        except BaseException:
            self._free.release()
            raise

    def _reuse(self):
        with self._guard:
            if self._pid != os.getpid():    # a forked child never uses its parent's sockets
                self._idle, self._pid = [], os.getpid()
            while self._idle:
                con = self._idle.pop()
                if not con.closed and not con.broken:
                    return con
        return None

    def _put(self, con) -> None:
        idle = self.psycopg.pq.TransactionStatus.IDLE
        try:
            with self._guard:
                if (not con.closed and not con.broken and con.info.transaction_status == idle
                        and self._pid == os.getpid()):
                    self._idle.append(con)
                    return
            con.close()
        finally:
            self._free.release()

    @contextmanager
    def read(self) -> Iterator[Tx]:
        con = self._get()
        try:
            yield Tx(con, self)
        finally:
            self._put(con)

    @contextmanager
    def write(self) -> Iterator[Tx]:
        con = self._get()
        try:
            with con.transaction():             # COMMIT on leaving (durable: synchronous_commit), ROLLBACK on error
                con.execute(f"SET LOCAL lock_timeout = '{BUSY_SECONDS}s'")
                yield Tx(con, self)
        finally:
            self._put(con)

    @staticmethod
    def lock(tx: Tx, name: str) -> None:
        tx.run("SELECT pg_advisory_xact_lock(hashtext(?))", (name,))   # released at COMMIT or ROLLBACK

    @staticmethod
    def tables(tx: Tx) -> set[str]:
        return {name for (name,) in tx.all("SELECT table_name FROM information_schema.tables "
                                           "WHERE table_schema = current_schema()")}

    @staticmethod
    def columns(tx: Tx, table: str) -> set[str]:
        return {name for (name,) in tx.all("SELECT column_name FROM information_schema.columns "
                                           "WHERE table_schema = current_schema() AND table_name = ?", (table,))}


class Database:
    """The class's data in one engine, migrated to the current schema on first use (migrations.py)."""

    def __init__(self, where: str):
        self.where = where
        self.engine = Postgres(where) if is_postgres(where) else SQLite(where)
        self._migrated = False
        self._guard = threading.Lock()

    @contextmanager
    def read(self) -> Iterator[Tx]:
        """Statements outside a transaction (each one sees what is committed)."""
        self._ready()
        with self._plainly(), self.engine.read() as tx:
            yield tx

    @contextmanager
    def write(self) -> Iterator[Tx]:
        """One transaction, committed (and durable) before the `with` block's caller goes on, rolled back on error."""
        self._ready()
        with self._plainly(), self.engine.write() as tx:
            yield tx

    def batched(self, fn, order: str = ""):
        """fn(tx) run in a transaction shared with the other writes waiting at this moment, one commit for all
        (group commit: ~9 ms per commit on this machine's disk made 200 answers at once take 2 s one by one);
        returns fn's result, or raises its RoomError, once that commit is durable. A RoomError leaves the others'
        writes in place (fn raises it before it writes); any other error rolls the whole group back, and each
        waiter gets it: nothing of that group was acknowledged. A group runs its writes sorted by `order` (the
        room), arrival order within one: the locks a group takes (tx.lock) are taken in one order by every copy of
        the app, so two copies' groups never wait for each other in a circle."""
        self._ready()
        return self._group().run(fn, order)

    def _group(self) -> "GroupCommit":
        with self._guard:
            if getattr(self, "_committer", None) is None or self._committer.pid != os.getpid():
                self._committer = GroupCommit(self)
            return self._committer

    @contextmanager
    def _plainly(self):
        """The engine's own failures (unreachable, busy, out of disk) as a message a page can show."""
        try:
            yield
        except self.engine.errors as err:
            raise RoomError(f"The class's database cannot be reached just now ({type(err).__name__}); "
                            "try again in a moment.") from err

    def _ready(self) -> None:
        if self._migrated:
            return
        from playground.rooms import migrations

        with self._guard:
            if not self._migrated:
                with self._plainly():
                    migrations.migrate(self.engine)
                self._migrated = True


class _Waiting:
    __slots__ = ("fn", "order", "done", "result", "error")

    def __init__(self, fn, order: str):
        self.fn, self.order, self.done, self.result, self.error = fn, order, threading.Event(), None, None


class GroupCommit:
    """The writes of `Database.batched`, taken by one thread in groups: everything that arrived while the last
    group was committing goes into the next transaction."""

    def __init__(self, db: Database):
        self.db, self.pid = db, os.getpid()
        self._waiting: list[_Waiting] = []
        self._arrived = threading.Condition()
        threading.Thread(target=self._commit_forever, name="rooms-group-commit", daemon=True).start()

    def run(self, fn, order: str = ""):
        item = _Waiting(fn, order)
        with self._arrived:
            self._waiting.append(item)
            self._arrived.notify()
        item.done.wait()
        if item.error is not None:
            raise item.error
        return item.result

    def _commit_forever(self) -> None:
        while True:
            with self._arrived:
                while not self._waiting:
                    self._arrived.wait()
                group, self._waiting = self._waiting, []
            self._commit(sorted(group, key=lambda item: item.order))   # stable: arrival order within a room

    def _commit(self, group: list[_Waiting]) -> None:
        try:
            with self.db.write() as tx:
                for item in group:
                    try:
                        item.result = item.fn(tx)
                    except RoomError as err:
                        item.error = err
        except BaseException as err:       # noqa: BLE001 (handed to every waiter: none of the group was committed)
            for item in group:
                item.result, item.error = None, item.error if isinstance(item.error, RoomError) else err
        for item in group:
            item.done.set()


_open: dict[str, Database] = {}
_open_guard = threading.Lock()


def database(where=None) -> Database:
    """The store at `where` (a SQLite file's path, or a postgresql:// URL; default: `configured()`), one object per
    place and process (its PostgreSQL connections are reused; its migrations checked once)."""
    where = str(where) if where is not None else configured()
    with _open_guard:
        if where not in _open:
            _open[where] = Database(where)
        return _open[where]
