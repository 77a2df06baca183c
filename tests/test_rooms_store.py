"""playground/rooms: one store over two engines. The migrations are numbered and recorded once (also when copies
start at once), 200 students answering at once from 200 threads are each counted once and the last answer wins,
an acknowledged answer survives the process that wrote it being killed mid-write, and an unreachable database is a
message, not a traceback. Each test runs on a SQLite file and on a fresh schema of the session's PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from playground import polls
from playground.rooms import migrations
from playground.rooms.database import Database, RoomError, database

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def where(rooms_db) -> str:
    return rooms_db



def test_migrations_are_numbered_and_recorded_once(where):
    versions = [v for v, _, _ in migrations.MIGRATIONS]
    assert versions == list(range(1, len(versions) + 1))
    polls.open_room(where)
    assert migrations.migrate(Database(where).engine) == []          # a second copy finds nothing to do
    with database(where).read() as tx:
        assert [v for (v,) in tx.all("SELECT version FROM schema_migrations ORDER BY version")] == versions
        assert {"view", "view_version", "lead_at", "question"} <= tx.columns("rooms")


def test_copies_starting_at_once_migrate_once(where):
    errors, applied = [], []

    def start():
        try:
            applied.append(migrations.migrate(Database(where).engine))
        except Exception as err:     # noqa: BLE001 (the test reports any)
            errors.append(err)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    versions = [v for v, _, _ in migrations.MIGRATIONS]
    assert not errors and sorted(applied, key=len)[-1] == versions and sum(map(len, applied)) == len(versions)


def test_two_hundred_sessions_at_once_each_counted_once_last_answer_wins(where):
    code, key = polls.open_room(where)
    go = threading.Barrier(200)

    def student(i: int) -> None:
        go.wait()                                            # all 200 answer at the same moment
        polls.answer(code, "q", f"s{i}", "first", where)
        polls.answer(code, "q", f"s{i}", str(i % 4), where)  # and change their mind: the last answer counts

    threads = [threading.Thread(target=student, args=(i,)) for i in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tally = polls.tally(code, "q", key, path=where)
    assert tally["answers"] == 200 and tally["counts"] == {str(v): 50 for v in range(4)}


WRITER = """
import sys
from playground import polls
where, code = sys.argv[1], sys.argv[2]
for i in range(100_000):
    polls.answer(code, "q", f"s{i}", str(i % 7), where)
    print(i, flush=True)        # acknowledged: answer() returned, so the answer was committed
"""


@pytest.mark.process
def test_a_process_killed_mid_write_loses_no_acknowledged_answer(where):
    code, key = polls.open_room(where)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, where, code], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    acknowledged = -1
    for line in writer.stdout:
        acknowledged = int(line)
        if acknowledged >= 40:
            writer.send_signal(signal.SIGKILL)               # while it writes the next answers
            break
    writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL, "the writer ended before it was killed"
    counts = polls.tally(code, "q", key, path=where)
    assert counts["answers"] >= acknowledged + 1             # every acknowledged answer is there ...
    with database(where).read() as tx:
        kept = dict(tx.all("SELECT session, answer FROM answers WHERE code = ?", (code,)))
    assert all(kept[f"s{i}"] == str(i % 7) for i in range(acknowledged + 1))   # ... as it was given
    assert polls.answer(code, "q", "after", "1", where) == counts["answers"] + 1   # and the store goes on


def test_an_unreachable_database_is_a_message(tmp_path):
    unreachable = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=2"
    with pytest.raises(RoomError, match="database cannot be reached"):
        polls.status("ABCDEF", unreachable)
    with pytest.raises(RoomError, match="database cannot be reached"):
        polls.open_room(tmp_path / "no-such-folder" / "rooms.sqlite3")


def test_a_group_commit_keeps_the_others_writes_when_one_is_refused_and_none_when_one_fails(where):
    from playground.rooms.database import _Waiting

    db = database(where)
    polls.open_room(where)                                   # migrated
    with db.write() as tx:
        tx.run("CREATE TABLE t (x INTEGER)")

    def insert(x):
        return lambda tx: tx.run("INSERT INTO t VALUES (?)", (x,)) and x

    def refuse(tx):
        raise RoomError("refused")

    def fail(tx):
        raise RuntimeError("a bug")

    committer = db._group()
    group = [_Waiting(insert(1), ""), _Waiting(refuse, ""), _Waiting(insert(2), "")]
    committer._commit(group)
    assert [g.result for g in group] == [1, None, 2] and str(group[1].error) == "refused"
    group = [_Waiting(insert(3), ""), _Waiting(fail, ""), _Waiting(refuse, "")]
    committer._commit(group)
    assert [type(g.error) for g in group] == [RuntimeError] * 3        # the group stopped at the bug
    with db.read() as tx:
        assert sorted(x for (x,) in tx.all("SELECT x FROM t")) == [1, 2]   # the failed group left nothing


def test_the_bench_rows_count_every_answer_and_every_delivery(tmp_path):
    """playground/tools/bench_rooms.py on a small class: every answer counted, every follower sees every change
    (the times themselves are the bench's to report, never a test's)."""
    from playground.tools import bench_rooms

    seconds, counted = bench_rooms.answers_at_once(str(tmp_path / "a.sqlite3"), students=20)
    assert counted == 20 and seconds > 0
    delays = bench_rooms.propagation(str(tmp_path / "b.sqlite3"), followers=4, changes=2, gap=0.9)
    assert len(delays) == 8 and delays == sorted(delays) and delays[0] >= 0
