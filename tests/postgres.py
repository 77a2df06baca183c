"""A PostgreSQL server for the tests: Debian's `postgresql` package (`.ci/run` installs it), started on a free port
with its socket in a private folder, once per test session (tests/conftest.py's `postgres` fixture); each test gets
its own schema (`fresh_url`), so tests share the server but never a table. The server refuses to run as root, so as
root it runs as the `postgres` user (runuser)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile

from tests.conftest import free_port


def bindir() -> str | None:
    """The newest installed PostgreSQL's bin folder, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return os.path.dirname(found[-1]) if found else None


class Server:
    """initdb + pg_ctl start on 127.0.0.1:<free port>; `stop()` stops it and removes its folder."""

    def __init__(self):
        self.bin = bindir()
        if self.bin is None:
            raise FileNotFoundError("PostgreSQL is not installed (apt-get install -y postgresql)")
        self.dir = tempfile.mkdtemp(prefix="pg-")      # in /tmp itself: the postgres user must reach it
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.dir, "postgres")
        self._run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=300"
        self._run("pg_ctl", "-D", self.data, "-o", options, "-l", os.path.join(self.dir, "log"), "-w", "start")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._schemas = 0

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self.as_user, os.path.join(self.bin, tool), *args], check=True, cwd=self.dir,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def fresh_url(self) -> str:
        """A URL whose connections work in a new, empty schema of their own (as a new database would be)."""
        import psycopg

        self._schemas += 1
        name = f"t{os.getpid()}_{self._schemas}"
        with psycopg.connect(self.url, autocommit=True) as con:
            con.execute(f"CREATE SCHEMA {name}")
        return f"{self.url}?options=-csearch_path%3D{name}"

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
