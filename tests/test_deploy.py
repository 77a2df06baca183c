"""A university's server from docs/deploying.md, its steps taken from the docs as written (only ports, paths and
example addresses changed).

nginx: the documented edit of Debian's own nginx.conf and the documented site (plain, and with TLS) pass `nginx -t`
under the 1024 open files of Debian's unit, without its warning; two local copies of the app behind nginx with that
configuration: each client's requests stay on one copy (an API call's POST and GET, a gradio_client session, a
download), different clients reach both copies, the answers' links name the balancer's address, and the copies share
a class through PostgreSQL (DATABASE_URL): a student on one copy follows a lecturer on the other and every answer,
from either copy, is counted once. systemd: the documented unit passes `systemd-analyze verify`. PostgreSQL: the
documented createuser, createdb, password encoding, listen_addresses and pg_hba.conf line let the app's own role
connect over TCP with its password and run the migrations. Each part is skipped where its program is missing,
except in CI (`.ci/run` installs nginx and PostgreSQL)."""

from __future__ import annotations

import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from playground.tools.balancer import NGINX, BalancedCopies, documented, documented_config, main_config

pytestmark = pytest.mark.process  # nginx, PostgreSQL, systemd-analyze

ROOT = Path(__file__).resolve().parent.parent
DEBIAN_NGINX = Path("/etc/nginx")


def need(program, what: str) -> None:
    if not program:
        if os.environ.get("CI"):
            pytest.fail(f"{what} is missing: .ci/run installs it", pytrace=False)
        pytest.skip(f"{what} is not installed")


@pytest.fixture(scope="module")
def nginx() -> str:
    need(NGINX, "nginx (apt-get install -y nginx-light)")
    return NGINX


def debian_nginx(folder: Path) -> Path:
    """A copy of Debian's /etc/nginx in `folder`, its absolute paths (its own files, the pid, the logs) moved there,
    and nginx's temporary folders there too (a conf.d file of the test's: Debian's are in /var/lib/nginx)."""
    if not (DEBIAN_NGINX / "nginx.conf").is_file():
        need(None, "Debian's /etc/nginx/nginx.conf (apt-get install -y nginx-light)")
    shutil.copytree(DEBIAN_NGINX, folder / "etc", symlinks=True)
    conf = folder / "etc" / "nginx.conf"
    conf.write_text(conf.read_text().replace("/etc/nginx/", f"{folder}/etc/").replace("/run/", f"{folder}/")
                    .replace("/var/log/nginx/", f"{folder}/"))
    for site in (folder / "etc" / "sites-enabled").iterdir():      # Debian's default site: its logs, its root
        site.resolve().write_text(site.resolve().read_text().replace("/var/www/html", str(folder)))
    (folder / "etc" / "conf.d" / "test-temp-paths.conf").write_text(
        "".join(f"{kind}_temp_path {folder}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")))
    return conf


def nginx_t(nginx: str, conf: Path) -> subprocess.CompletedProcess:
    """`nginx -t` on `conf` with 1024 open files, as Debian's nginx unit leaves the master."""
    def debian_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    return subprocess.run([nginx, "-t", "-c", str(conf), "-e", str(conf.parent.parent / "error.log")],
                          capture_output=True, text=True, preexec_fn=debian_limit)


def test_the_documented_edit_of_debians_nginx_conf_and_the_site_pass_nginx_t(nginx, tmp_path):
    conf = debian_nginx(tmp_path)
    conf.write_text(main_config(conf.read_text()))
    assert conf.read_text().count("events {") == 1 and "worker_rlimit_nofile 8192;" in conf.read_text()
    (conf.parent / "conf.d" / "playground.conf").write_text(documented_config())
    checked = nginx_t(nginx, conf)
    assert checked.returncode == 0 and "test is successful" in checked.stderr, checked.stderr
    assert "exceed open file resource limit" not in checked.stderr     # each worker may hold its 4096 connections
    assert "[warn]" not in checked.stderr.replace("the \"user\" directive makes sense only", ""), checked.stderr


@pytest.mark.parametrize("edited", [True, False])
def test_nginx_started_with_the_documented_edit_under_debians_limit_does_not_warn(nginx, tmp_path, edited):
    """nginx -t does not look at the open files; a started nginx does: with Debian's 1024 and `worker_connections
    4096` alone it warns that the connections exceed the limit (each worker then holds about 500). The edit's
    `worker_rlimit_nofile` raises the limit instead (the case without it shows that the check can see the warning)."""
    from playground.tools.balancer import DEBIAN_EVENTS, free_port

    events = main_config(DEBIAN_EVENTS) if edited else DEBIAN_EVENTS.replace("768", "4096")
    conf = tmp_path / "nginx.conf"
    temp = "".join(f"{kind}_temp_path {tmp_path}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                            "scgi"))
    conf.write_text(f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log warn;\nworker_processes 1;\n{events}"
                    f"http {{\naccess_log off;\n{temp}server {{ listen 127.0.0.1:{free_port()}; return 204; }}\n}}\n")
    started = subprocess.run([nginx, "-c", str(conf), "-e", str(tmp_path / "error.log")], capture_output=True, text=True,
                             preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(
                                 resource.RLIMIT_NOFILE)[1])))
    pid = tmp_path / "nginx.pid"
    try:
        assert started.returncode == 0, started.stderr
        for _ in range(100):                   # the daemon writes its pid once it runs, after nginx has returned
            if pid.is_file() and pid.read_text().strip():
                break
            time.sleep(0.05)
        log = (tmp_path / "error.log").read_text()
    finally:
        if pid.is_file() and pid.read_text().strip():
            os.kill(int(pid.read_text()), signal.SIGTERM)
    assert ("exceed open file resource limit" in log) != edited, log


def test_the_documented_https_site_passes_nginx_t(nginx, tmp_path):
    conf = debian_nginx(tmp_path)
    conf.write_text(main_config(conf.read_text()))
    certificate, key = tmp_path / "fullchain.pem", tmp_path / "privkey.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", str(key),
                    "-out", str(certificate), "-subj", "/CN=playground.example.edu"], check=True, capture_output=True)
    tls = (documented("nginx-tls").replace("/etc/letsencrypt/live/playground.example.edu/fullchain.pem", str(certificate))
           .replace("/etc/letsencrypt/live/playground.example.edu/privkey.pem", str(key)))
    site = documented_config()
    assert site.count("    listen 80;\n") == 1
    (conf.parent / "conf.d" / "playground.conf").write_text(site.replace("    listen 80;\n", tls)
                                                            + documented("nginx-redirect"))
    checked = nginx_t(nginx, conf)
    assert checked.returncode == 0 and "test is successful" in checked.stderr, checked.stderr


def test_the_documented_systemd_unit_verifies(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    unit = documented("systemd", "ini").replace("/srv/nlp-playground/.venv/bin/python", sys.executable)
    unit = unit.replace("/srv/nlp-playground", str(ROOT)).replace("User=playground", "User=root")
    path = tmp_path / "nlp-playground@.service"
    path.write_text(unit)
    instance = tmp_path / "nlp-playground@7861.service"
    instance.symlink_to(path)
    done = subprocess.run([analyze, "verify", str(instance)], capture_output=True, text=True)
    problems = [line for line in done.stderr.splitlines() if "nlp-playground" in line]
    assert done.returncode == 0 and not problems, done.stderr


@pytest.fixture(scope="module")
def class_database(request) -> str | None:
    """The copies' shared rooms: a fresh schema of the session's PostgreSQL (tests/postgres.py), or None where
    PostgreSQL is not installed (then each copy keeps its own SQLite file, and the shared-class test is skipped)."""
    try:
        return request.getfixturevalue("postgres").fresh_url()
    except pytest.skip.Exception:
        return None


@pytest.fixture(scope="module")
def balancer(nginx, class_database):
    """http://127.0.0.1:<port>/ of nginx in front of two copies of `python app.py`; yields (url, copies)."""
    with BalancedCopies(2, env={"DATABASE_URL": class_database} if class_database else {}) as running:
        yield running


def client_from(address: str, url: str) -> httpx.Client:
    """A client whose requests leave from `address` (any 127.x.y.z reaches localhost on Linux)."""
    return httpx.Client(base_url=url, timeout=180, transport=httpx.HTTPTransport(local_address=address))


def test_each_client_stays_on_one_copy_and_the_clients_reach_both(balancer):
    url, copies = balancer
    steps = httpx.get(url + "gradio_api/info").json()["named_endpoints"]["/normalize"]["parameters"][1]
    reached = set()
    for i in range(1, 17):
        with client_from(f"127.0.0.{i}", url) as client:
            data = [f"Client number {i} types this.", steps["parameter_default"]]
            posted = client.post("gradio_api/call/normalize", json={"data": data})
            answer = client.get(f"gradio_api/call/normalize/{posted.json()['event_id']}")
            assert "event: complete" in answer.text, answer.text[-300:]
            assert posted.headers["x-upstream"] == answer.headers["x-upstream"] in copies
            reached.add(answer.headers["x-upstream"])
    assert reached == set(copies)


def test_an_answers_download_link_names_the_balancer_and_works_through_it(balancer):
    url, _ = balancer
    with client_from("127.0.0.3", url) as client:
        parameters = client.get("gradio_api/info").json()["named_endpoints"]["/tokenize"]["parameters"]
        data = ["Through the balancer.", *(p["parameter_default"] for p in parameters[1:])]
        event = client.post("gradio_api/call/tokenize", json={"data": data}).json()["event_id"]
        answer = client.get(f"gradio_api/call/tokenize/{event}").text
        link = re.search(r'"url": "([^"]+/gradio_api/file=[^"]+)"', answer)[1]
        assert link.startswith(url + "gradio_api/file=")
        download = client.get(link)
        assert download.status_code == 200 and "Through the balancer." in download.text


def test_a_gradio_client_session_works_through_the_balancer(balancer):
    from playground.tools.client import session

    url, _ = balancer
    client = session(url, timeout=None)
    tokens, *_, data = client.predict("Sticky sessions keep state.", api_name="/tokenize")
    assert data and "Sticky" in str(data)


def test_two_copies_share_a_class_a_student_on_one_follows_a_lecturer_on_the_other(balancer, class_database):
    """The lecturer's page is on copy B, students on both copies (each its own session, so its own answer): the
    follow-me view published on B reaches a student polling A, and the answers sent to both copies are counted once
    each, the student who answers twice (on A) by their last answer, in the tally the lecturer reveals on B."""
    from playground.tools.client import session

    if class_database is None:
        pytest.skip("PostgreSQL is not installed (apt-get install -y postgresql): the copies share no database")
    _, (copy_a, copy_b) = balancer
    lecturer = session(f"http://{copy_b}/", timeout=None)
    opened = lecturer.predict(api_name="/poll_open")[-1]
    room, key = opened["room"], opened["key"]
    led = lecturer.predict(room, key, "tab=attention&attention.layer=1", api_name="/follow_lead")
    on_a = [session(f"http://{copy_a}/", timeout=None) for _ in range(3)]
    on_b = [session(f"http://{copy_b}/", timeout=None) for _ in range(2)]
    seen = on_a[0].predict(room, -1, api_name="/follow_view")
    assert seen == {"room": room, "version": led["version"], "view": "tab=attention&attention.layer=1",
                    "lecturer_present": True}
    assert on_a[0].predict(room, seen["version"], api_name="/follow_view")["view"] is None   # nothing new
    for student, guess in zip(on_a + on_b, ["es", "es", "lo", "lo", "st"]):
        student.predict(room, "bpe-merge", guess, api_name="/poll_answer")
    on_a[2].predict(room, "bpe-merge", "es", api_name="/poll_answer")   # changes their mind
    tally = lecturer.predict(room, "bpe-merge", key, True, api_name="/poll_tally")[-1]
    assert tally["answers"] == 5 and tally["counts"] == {"es": 3, "lo": 1, "st": 1}


PASSWORD = "p@ss:w/rd %?#[é]"     # every character a URL gives a meaning to, a space and a non-ASCII one


def test_the_documented_postgresql_steps_let_the_apps_own_role_migrate_over_the_network(tmp_path):
    """A PostgreSQL server of the test's own (tests/postgres.py's programs): listening as the documented
    `listen_addresses` says and letting the app in by the documented pg_hba.conf line alone (the test's address and
    network in place of the examples'), the documented createuser (its password typed twice) and createdb run as
    the `postgres` user, the password %-encoded by the documented line: the app's migrations, as the app's own role
    over TCP with that password, create its tables (PostgreSQL 15 refuses them in a database the role does not own),
    and a wrong password is refused."""
    import tempfile

    import psycopg

    from playground import polls
    from playground.tools.balancer import free_port
    from tests.postgres import bindir

    need(bindir(), "PostgreSQL (apt-get install -y postgresql)")
    folder = tempfile.mkdtemp(prefix="pg-docs-")          # in /tmp itself: the postgres user must reach it
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(folder, "postgres")
    data, port = os.path.join(folder, "data"), free_port()

    def run(*command, **kwargs):
        return subprocess.run([*as_user, *command], check=True, capture_output=True, text=True, cwd=folder, **kwargs)

    try:
        run(os.path.join(bindir(), "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
        listen = documented("postgres-listen", "").strip().replace("192.0.2.10", "127.0.0.1")
        with open(os.path.join(data, "postgresql.conf"), "a") as conf:
            conf.write(f"\n{listen}\nport = {port}\nunix_socket_directories = '{folder}'\n")
        hba = documented("postgres-hba", "").strip().replace("192.0.2.0/24", "127.0.0.1/32")
        with open(os.path.join(data, "pg_hba.conf"), "w") as rules:    # the postgres user's socket, and that line
            rules.write(f"local all postgres trust\n{hba}\n")
        run(os.path.join(bindir(), "pg_ctl"), "-D", data, "-l", os.path.join(folder, "log"), "-w", "start")
        env = {**os.environ, "PGHOST": folder, "PGPORT": str(port), "PATH": f"{bindir()}:{os.environ['PATH']}"}
        for line in documented("postgres-setup", "sh").strip().splitlines():
            command = line.split("#")[0].strip().replace("sudo -u postgres ", " ".join(as_user) + " ")
            # no terminal: createuser's --pwprompt then reads the password, typed twice, from its input
            subprocess.run(["sh", "-c", command], check=True, env=env, input=f"{PASSWORD}\n{PASSWORD}\n", text=True,
                           start_new_session=True, capture_output=True, cwd=folder)
        encode = documented("postgres-password", "sh").strip().replace("'the password'", shlex.quote(PASSWORD))
        encoded = subprocess.run(["sh", "-c", encode], check=True, capture_output=True, text=True).stdout.strip()
        url = f"postgresql://playground:{encoded}@127.0.0.1:{port}/playground"
        code, _ = polls.open_room(url)                       # the migrations, then a room
        assert polls.status(code, url)["answers"] == 0       # read back through the same role
        with psycopg.connect(url) as con:
            owner = con.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'schema_migrations'").fetchone()
        assert owner == ("playground",)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(url.replace(encoded, "wrong"), connect_timeout=5).close()
    finally:
        if os.path.exists(os.path.join(data, "postmaster.pid")):
            run(os.path.join(bindir(), "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)
