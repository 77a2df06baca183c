"""The app as `python app.py` serves it computes in its two compute processes (playground/ui/compute.py), and every
event answers there exactly as in the server's own process: each named event that may cross on its defaults, and the
lecture hall's main views on a new sentence too, through the served app against the tests' in-process app
(tests/conftest.py's `client`)."""

from __future__ import annotations

import orjson
import psutil
import pytest

pytestmark = pytest.mark.xdist_group("served")   # with the lecture hall's test: one served app (warm_served)
NEW = "A sentence nobody has asked about before, 42 times."
OWN = {"/tokenize": {"text": NEW}, "/attention": {"text": NEW}, "/fill_mask": {"text": "A [MASK] nobody has seen."},
       "/gradient_flow": {"text": NEW}, "/generate": {"prompt": NEW[:30]}, "/contextual": {"sentences": NEW}}


@pytest.fixture(scope="module")
def served(warm_served):
    """`python app.py`'s serve(), its compute processes started and the page's defaults answered (the lanes compute
    nothing in the background while a test measures them): a client of it and its pid."""
    from playground.tools.client import session

    url, pid = warm_served
    return session(url, timeout=None), pid


def test_the_served_app_computes_in_two_processes_of_its_own(served):
    _, pid = served
    children = psutil.Process(pid).children()
    assert len(children) == 2
    assert {child.nice() for child in children} == {psutil.Process(pid).nice()}  # slow computations: their threads


def test_smollm2_loaded_by_the_server_is_one_copy_shared_by_both_compute_processes(served):
    """SmolLM2 on this machine is loaded by the server before it forks (analysis/models.preload): a new sentence's
    attention (the quick lane) and a generation (the slow lane) read the same copy, and neither process makes a copy
    of its own (276 MB as float16; a process that loaded its own grew by more than that)."""
    from playground.nets import smollm2

    if not smollm2.available():
        pytest.skip(f"SmolLM2 is not installed ({smollm2.INSTALL})")
    remote, pid = served
    lanes = psutil.Process(pid).children()
    before = [lane.memory_full_info().uss for lane in lanes]
    remote.predict("Who reads the one copy of these weights, and where?", "", "smollm2-135m-instruct", 0, "mean",
                   False, "head", False, api_name="/attention")
    remote.predict("The weights are shared", "smollm2-135m-instruct", 8, "greedy", 1.0, 10, 0.9, 0, 1, False,
                   api_name="/generate")
    grown = [(lane.memory_full_info().uss - was) / 2**20 for lane, was in zip(lanes, before)]
    assert max(grown) < 150, f"the compute processes' own memory grew by {grown} MB"


# Answers that are measurements of the machine as it is now: the KV cache view's are compared without their times and
# the float noise it reports (what it computes, the bytes, tokens and reuse, must be the same there); the engine views
# not at all (a live engine, an experiment's timings): test_the_engine_views_read_the_engine_where_generations_run
# checks where they compute, tests/test_inference_batching.py what
MEASURED = {"prompt_ms", "ms_cached", "ms_uncached", "ms_reused", "ms_full", "max_logit_diff"}
LIVE = {"engine_batch", "batching", "quantization", "speculative"}  # and the Inference tab's timed measurements


def _events(client) -> dict[str, dict]:
    """The named events that compute in the compute processes (no per-session state in, not a live training run,
    not a live measurement), with their API defaults."""
    import app
    from playground.ui.demo import LONG_RUNNING

    crossing = {f"/{fn.api_name}" for fn in app.demo.fns.values()
                if fn.api_name and getattr(fn.fn, "cacheable", False) and fn.api_name not in LONG_RUNNING | LIVE}
    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    return {name: {p["parameter_name"]: p["parameter_default"] for p in endpoint["parameters"]}
            for name, endpoint in api.items()
            if name in crossing and all(p["parameter_has_default"] for p in endpoint["parameters"])}


def _data(answer):
    """An answer's data (its last output, the JSON), as plain JSON; a live measurement's own duration left out
    (`seconds`: the engine's cost, measured now in each process; MEASURED: the KV cache view's times)."""
    last = answer[-1] if isinstance(answer, (tuple, list)) else answer
    data = orjson.loads(orjson.dumps(last, option=orjson.OPT_SERIALIZE_NUMPY))
    return _unmeasured({k: v for k, v in data.items() if k != "seconds"}) if isinstance(data, dict) else data


def _unmeasured(data):
    if isinstance(data, dict):
        return {k: _unmeasured(v) for k, v in data.items() if k not in MEASURED}
    return [_unmeasured(v) for v in data] if isinstance(data, list) else data


def test_the_engine_views_read_the_engine_where_generations_run(served):
    """The Inference tab's engine views (ui/demo.ENGINE_VIEWS) compute in the slow lane, where the engine serving
    SmolLM2 is: after a generation, the live view finds it there, in a compute process, not the server's."""
    import time

    from playground.nets import smollm2

    if not smollm2.available():
        pytest.skip(f"SmolLM2 is not installed ({smollm2.INSTALL})")
    remote, pid = served
    remote.predict("Where does the engine run?", "smollm2-135m-instruct", 4, "greedy", 1.0, 10, 0.9, 0, 1, False,
                   api_name="/generate")
    data = remote.predict(time.time(), api_name="/engine_batch")[-1]
    assert data["serving"] and data["totals"]["tokens"] >= 4
    assert data["pid"] in {child.pid for child in psutil.Process(pid).children()}


@pytest.mark.timeout(900)
def test_every_event_answers_in_the_compute_processes_as_in_the_servers_own(served, client):
    remote, _ = served
    events = _events(client)
    assert len(events) >= 20, sorted(events)
    differ = []
    for name, defaults in sorted(events.items()):
        for inputs in (defaults, {**defaults, **OWN[name]}) if name in OWN else (defaults,):
            try:
                here = _data(client.predict(api_name=name, **inputs))
            except Exception as err:  # noqa: BLE001 - a refusal must be the same refusal there
                with pytest.raises(type(err)):
                    remote.predict(api_name=name, **inputs)
                continue
            if _data(remote.predict(api_name=name, **inputs)) != here:
                differ.append(name)
    assert not differ, f"answered otherwise in the compute processes: {differ}"

