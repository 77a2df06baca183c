"""Copies behind a load balancer (docs/deploying.md): two local copies of the app and nginx with the documented
configuration, taken from the docs as they stand (only the ports changed). Each client's requests stay on one copy
(an API call's POST and GET, a gradio_client session, a download), different clients reach both copies, and the
answers' links name the balancer's address, and the copies share a class through PostgreSQL (DATABASE_URL): a student
on one copy follows a lecturer on the other and every answer, from either copy, is counted once. Skipped without
nginx, except in CI (`.ci/run` installs it and PostgreSQL)."""

from __future__ import annotations

import os
import re

import httpx
import pytest

from playground.tools.balancer import NGINX, BalancedCopies

if NGINX is None:
    if os.environ.get("CI"):
        pytest.fail("nginx is missing: .ci/run installs it (apt-get install -y nginx-light)", pytrace=False)
    pytest.skip("nginx is not installed (apt-get install -y nginx-light)", allow_module_level=True)


@pytest.fixture(scope="module")
def class_database(request) -> str | None:
    """The copies' shared rooms: a fresh schema of the session's PostgreSQL (tests/postgres.py), or None where
    PostgreSQL is not installed (then each copy keeps its own SQLite file, and the shared-class test is skipped)."""
    try:
        return request.getfixturevalue("postgres").fresh_url()
    except pytest.skip.Exception:
        return None


@pytest.fixture(scope="module")
def balancer(class_database):
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
