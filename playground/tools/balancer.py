"""Copies of the app behind a load balancer, as docs/deploying.md documents them: N copies of `python app.py`, each on
its own localhost port, and nginx in front with the documentation's own configuration (only its ports changed). The
bench's follow-me rows across copies (tools/bench_follow.py) and tests/test_deploy.py start them through here.

    with BalancedCopies(2, env={"DATABASE_URL": url}) as (front_url, copies): ...

nginx keeps each client on one copy by its address (`hash $remote_addr consistent`), so a driver that wants to reach
both copies sends its clients from different local addresses (any 127.x.y.z reaches localhost on Linux).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()),
                                      None)
TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")   # nginx's own folders, kept in ours
DEBIAN_EVENTS = "events {\n\tworker_connections 768;\n}\n"     # Debian's nginx.conf's events block, before the edit


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def documented_config() -> str:
    """The nginx block of docs/deploying.md, the one after its test marker (conf.d/playground.conf)."""
    return documented("nginx")


def documented(marker: str, language: str = "nginx") -> str:
    """The code block of docs/deploying.md after its `<!-- marker: ... -->` comment."""
    text = (ROOT / "docs" / "deploying.md").read_text(encoding="utf-8")
    return re.search(rf"<!-- {marker}:.*?-->\s*```{language}\n(.*?)```", text, re.S)[1]


def main_config(stock: str) -> str:
    """An nginx.conf's text (`stock`) with docs/deploying.md's edit applied: its sed line as written, on a copy."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "nginx.conf"
        path.write_text(stock)
        edit = documented("nginx-main", "sh").replace("sudo ", "").replace("/etc/nginx/nginx.conf", str(path))
        subprocess.run(["sh", "-c", edit], check=True)
        return path.read_text()


def wait_for(url: str, process: subprocess.Popen, seconds: float = 300) -> None:
    """Until `url` answers (below 500); an error if `process` exits first or the time runs out."""
    import httpx

    end = time.monotonic() + seconds
    with httpx.Client(timeout=2) as client:  # one client: httpx builds a TLS context for each (22 ms of CPU)
        while time.monotonic() < end:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args} exited with {process.returncode}")
            try:
                if client.get(url).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer within {seconds:.0f} s")


class BalancedCopies:
    """`copies` copies of `python app.py` (with `env` added to this process's environment) and nginx in front; the
    context gives (nginx's URL, the copies' "127.0.0.1:<port>" addresses) and stops everything on leaving."""

    def __init__(self, copies: int = 2, env: dict | None = None):
        if NGINX is None:
            raise FileNotFoundError("nginx is not installed (apt-get install -y nginx-light)")
        self.ports = [free_port() for _ in range(copies)]
        self.env = env or {}
        self.processes: list[subprocess.Popen] = []

    def _config(self, folder: Path, front: int) -> Path:
        events = main_config(DEBIAN_EVENTS)             # nginx.conf's events block, as the documented edit leaves it
        upstream = "".join(f"    server 127.0.0.1:{port};\n" for port in self.ports)
        config = re.sub(r"(?m)^    server 127\.0\.0\.1:\d+;\n(?:    server 127\.0\.0\.1:\d+;\n)*", upstream,
                        documented_config(), count=1).replace("listen 80;", f"listen 127.0.0.1:{front};")
        temp = "".join(f"{kind}_temp_path {folder}/{kind};\n" for kind in TEMP_PATHS)
        path = folder / "nginx.conf"
        path.write_text(f"pid {folder}/nginx.pid;\nerror_log {folder}/error.log;\ndaemon off;\n{events}\n"
                        f"http {{\naccess_log off;\n{temp}{config}\n}}\n")
        return path

    def __enter__(self) -> tuple[str, list[str]]:
        self.folder = tempfile.mkdtemp(prefix="nginx-")
        self.processes = [subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                           env={**os.environ, **self.env, "GRADIO_SERVER_NAME": "127.0.0.1",
                                                "GRADIO_SERVER_PORT": str(port)})
                          for port in self.ports]
        front = free_port()
        config = self._config(Path(self.folder), front)
        self.processes.append(subprocess.Popen([NGINX, "-p", self.folder, "-c", str(config),
                                                "-e", f"{self.folder}/error.log"]))
        try:
            for port, copy in zip(self.ports, self.processes):
                wait_for(f"http://127.0.0.1:{port}/config", copy)
            url = f"http://127.0.0.1:{front}/"
            wait_for(url + "config", self.processes[-1], 30)
        except BaseException:
            self.__exit__()
            raise
        return url, [f"127.0.0.1:{port}" for port in self.ports]

    def __exit__(self, *exc) -> None:
        for process in reversed(self.processes):     # nginx first
            process.terminate()
        for process in self.processes:
            process.wait(timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)
