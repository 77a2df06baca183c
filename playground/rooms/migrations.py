"""The class database's schema, as numbered migrations, each applied once and recorded in `schema_migrations`.

A migration is a few statements in the one SQL both engines read (database.py says why no type needs translating).
`migrate` applies the missing ones in order, inside one write transaction under one lock, so two copies of the app
starting at once apply each migration once, and a failed migration leaves the schema as it was. Never edit a
migration that has shipped: add the next number.

A SQLite file written before this table existed (polls.py's first two formats) is migrated in place: `_adopt`
records the migrations its tables show were applied (the rooms table: 1; its `question` column: 2), and the
rest run as for any database. Its rooms and answers are kept.
"""

from __future__ import annotations

import time

# (number, what it does, statements)
MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (1, "rooms, their revealed questions, and one answer per session and question", [
        """CREATE TABLE rooms (code TEXT PRIMARY KEY, key TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)""",
        """CREATE TABLE revealed (code TEXT NOT NULL, question TEXT NOT NULL, PRIMARY KEY (code, question))""",
        """CREATE TABLE answers (code TEXT NOT NULL, question TEXT NOT NULL, session TEXT NOT NULL,
                                 answer TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,
                                 PRIMARY KEY (code, question, session))""",
    ]),
    (2, "a room carries its lecturer's current question ('' until one is chosen)", [
        """ALTER TABLE rooms ADD COLUMN question TEXT NOT NULL DEFAULT ''""",
    ]),
    (3, "follow me: the lecturer's published view (a link's query string), its version, when last seen", [
        """ALTER TABLE rooms ADD COLUMN view TEXT NOT NULL DEFAULT ''""",
        """ALTER TABLE rooms ADD COLUMN view_version INTEGER NOT NULL DEFAULT 0""",
        """ALTER TABLE rooms ADD COLUMN lead_at DOUBLE PRECISION NOT NULL DEFAULT 0""",
    ]),
    (4, "workshop progress: each student's nickname and step, the steps they reached, their last answer per step, "
        "the hints they asked for, and the steps whose answer the lecturer revealed", [
        """CREATE TABLE students (code TEXT NOT NULL, session TEXT NOT NULL, nickname TEXT NOT NULL,
                                  workshop TEXT NOT NULL DEFAULT '', step INTEGER NOT NULL DEFAULT 0,
                                  joined DOUBLE PRECISION NOT NULL, seen DOUBLE PRECISION NOT NULL,
                                  PRIMARY KEY (code, session))""",
        """CREATE TABLE reached (code TEXT NOT NULL, session TEXT NOT NULL, workshop TEXT NOT NULL,
                                 step INTEGER NOT NULL, at DOUBLE PRECISION NOT NULL,
                                 PRIMARY KEY (code, session, workshop, step))""",
        """CREATE TABLE step_answers (code TEXT NOT NULL, session TEXT NOT NULL, workshop TEXT NOT NULL,
                                      step INTEGER NOT NULL, answer TEXT NOT NULL, correct INTEGER NOT NULL,
                                      at DOUBLE PRECISION NOT NULL, PRIMARY KEY (code, session, workshop, step))""",
        """CREATE TABLE hints (code TEXT NOT NULL, session TEXT NOT NULL, workshop TEXT NOT NULL,
                               step INTEGER NOT NULL, shown INTEGER NOT NULL, at DOUBLE PRECISION NOT NULL,
                               PRIMARY KEY (code, session, workshop, step))""",
        """CREATE TABLE step_revealed (code TEXT NOT NULL, workshop TEXT NOT NULL, step INTEGER NOT NULL,
                                       PRIMARY KEY (code, workshop, step))""",
    ]),
    (5, "a room's workshop: the text of the workshop file its lecturer gave the room ('' for none), which its "
        "students walk on whichever copy of the app serves them", [
        """ALTER TABLE rooms ADD COLUMN workshop TEXT NOT NULL DEFAULT ''""",
    ]),
]
# Every table holding a room's rows (by its `code`), rooms last: what expiry and "delete this room's data" remove
ROOM_TABLES = ("answers", "revealed", "students", "reached", "step_answers", "hints", "step_revealed", "rooms")
LATEST = MIGRATIONS[-1][0]

BOOKKEEPING = """CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
                                                                applied DOUBLE PRECISION NOT NULL)"""


def _adopt(tx) -> set[int]:
    """The migrations a database from before `schema_migrations` already has, read from its tables."""
    tables = tx.tables()
    if "rooms" not in tables:
        return set()
    done = {1}
    if "question" in tx.columns("rooms"):
        done.add(2)
    return done


def migrate(engine) -> list[int]:
    """Apply the migrations `engine`'s database lacks, in order, in one transaction; returns their numbers."""
    with engine.write() as tx:
        tx.lock("schema_migrations")        # PostgreSQL: one copy migrates, the others wait and find it done
        fresh = "schema_migrations" not in tx.tables()
        tx.run(BOOKKEEPING)
        done = {v for (v,) in tx.all("SELECT version FROM schema_migrations")}
        if fresh:
            done |= _adopt(tx)
            for version, name, _ in MIGRATIONS:
                if version in done:
                    tx.run("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, time.time()))
        applied = []
        for version, name, statements in MIGRATIONS:
            if version in done:
                continue
            for statement in statements:
                tx.run(statement)
            tx.run("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, time.time()))
            applied.append(version)
    return applied
