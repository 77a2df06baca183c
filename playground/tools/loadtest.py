"""Many users at once: `gradio_client` sessions against a running app, for the load and soak tests.

Every named endpoint the app exposes is called, found through the API description, so a new endpoint
is covered without a change here. Each call passes the values the UI shows by default (the API
description carries them), except where those would take seconds (`CHEAP`). An endpoint that needs a
result of another in the same session (`NEEDS`) gets it first. A request that ends in an error, a
rejection included, counts as an error: the defaults are valid input.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

# Arguments that keep the slow endpoints to a fraction of a second (their full cost has its own tests).
CHEAP = {
    "/memory_experiment": {"max_k": 5, "steps": 10, "hidden_size": 8},  # trains three networks live
    "/seq2seq_evaluate": {"per_length": 5},                              # every model on 5 lengths x 5 sources
    "/generate": {"max_new_tokens": 40},
    "/compare_generate": {"max_new_tokens": 40},
}
NEEDS = {"/seq2seq_step": "/seq2seq"}  # shows a step of this session's last translation (gr.State)


@dataclass
class LoadResult:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # seconds, per endpoint
    errors: list[tuple[str, str]] = field(default_factory=list)                          # (endpoint, message)
    wall: float = 0.0

    @property
    def requests(self) -> int:
        return sum(map(len, self.latencies.values())) + len(self.errors)

    def percentiles(self) -> dict[str, tuple[float, float]]:
        """Per endpoint: (p50, p95) in seconds."""
        out = {}
        for name, samples in sorted(self.latencies.items()):
            ordered = sorted(samples)
            p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
            out[name] = (statistics.median(ordered), p95)
        return out


def endpoint_arguments(url: str) -> dict[str, dict]:
    """Every named endpoint of the app at `url` with the keyword arguments to call it with."""
    from gradio_client import Client

    api = Client(url, verbose=False).view_api(return_format="dict", print_info=False)["named_endpoints"]
    calls = {}
    for name, endpoint in api.items():
        defaults = {p["parameter_name"]: p["parameter_default"] for p in endpoint["parameters"]}
        calls[name] = {**defaults, **CHEAP.get(name, {})}
    return calls


def run(url: str, users: int, requests_per_user: int, seed: int = 0) -> LoadResult:
    """`users` sessions at once, each sending `requests_per_user` requests one after another, over every
    endpoint in equal shares (in a seeded random order per user)."""
    from gradio_client import Client

    calls = endpoint_arguments(url)
    names = sorted(calls)
    result, lock = LoadResult(), threading.Lock()

    def call(client, name: str) -> None:
        started = time.perf_counter()
        try:
            client.predict(api_name=name, **calls[name])
        except Exception as err:  # noqa: BLE001 - every failure is the finding
            with lock:
                result.errors.append((name, f"{type(err).__name__}: {str(err)[:300]}"))
            return
        with lock:
            result.latencies[name].append(time.perf_counter() - started)

    def user(u: int) -> None:
        client = Client(url, verbose=False)
        order = [names[(u * requests_per_user + j) % len(names)] for j in range(requests_per_user)]
        random.Random(seed + u).shuffle(order)
        done: set[str] = set()
        for name in order:
            if name in NEEDS and NEEDS[name] not in done:
                call(client, NEEDS[name])
                done.add(NEEDS[name])
            call(client, name)
            done.add(name)

    started = time.perf_counter()
    with ThreadPoolExecutor(users) as pool:
        list(pool.map(user, range(users)))
    result.wall = time.perf_counter() - started
    return result
