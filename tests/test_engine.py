"""The generation engine (playground/serving/engine.py) and its arithmetic (nets/int8.py): a row is the same bits
alone and beside any others, the ragged step is the model's own forward, the int8 twin stays next to the exact
model, and a class's requests join, share prefixes, leave and are refused as they should."""

from __future__ import annotations

import random
import time

import pytest
import torch

from playground.nets.int8 import Int8Linear, LEVELS, quantize_rows, split
from playground.nets.llama import Llama, LlamaConfig
from playground.serving.engine import CHUNK, Engine, Refused

GREEDY = dict(temperature=0, top_k=0, top_p=1.0)
SAMPLED = dict(temperature=0.8, top_k=10, top_p=1.0)


def tiny(seed: int = 0) -> Llama:
    torch.manual_seed(seed)
    model = Llama(LlamaConfig(vocab_size=97, n_positions=512, n_layer=2, n_head=6, n_kv_head=2, n_embd=48,
                              n_inner=96))
    return model.eval().requires_grad_(False)


@pytest.fixture(scope="module")
def smol():
    from playground.nets import smollm2
    from tests.smollm2_reference import require_smollm2

    require_smollm2()
    return smollm2.load(half=True)


@pytest.fixture(scope="module")
def one_thread():
    """On one of torch's threads, as the app's compute processes run (two threads' teams spinning beside a loaded
    machine's other work made each step seconds)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def twin14(smol, one_thread):
    """SmolLM2's 14-bit twin (PLAYGROUND_ENGINE_BITS=14): two weight planes."""
    return smol.model.int8(planes=2)


@pytest.fixture(scope="module")
def twin8(smol, one_thread):
    """SmolLM2's twin as the engine serves it (serving/engine.weight_bits): 8-bit weights in one int8 plane."""
    return smol.model.int8(planes=1)


def others(rng: random.Random, k: int, vocab: int) -> list[tuple]:
    """k requests of random prompts (3 to 150 tokens), lengths, rules and seeds."""
    rules = (GREEDY, SAMPLED, dict(temperature=1.0, top_k=0, top_p=0.9), dict(temperature=1.3, top_k=0, top_p=1.0))
    return [([rng.randrange(vocab) for _ in range(rng.randint(3, 150))], rng.randint(1, 40), rng.choice(rules),
             rng.randrange(1000)) for _ in range(k)]


# ---- the arithmetic


def test_a_14_bit_integer_is_its_two_7_bit_halves():
    q = torch.arange(-LEVELS, LEVELS + 1)
    hi, lo = split(q)
    assert torch.equal(hi * 128 + lo, q) and hi.abs().max() <= 64 and lo.min() >= -64 and lo.max() <= 63


@pytest.mark.parametrize("planes", [1, 2])
def test_an_int8_product_is_the_integer_product_and_a_row_ignores_its_neighbours(planes):
    torch.manual_seed(0)
    w, x = torch.randn(300, 1536), torch.randn(7, 1536) * 3
    linear = Int8Linear(w, planes)
    y = linear(x)
    rows, s_x = quantize_rows(x)
    X = (rows[:7].long() - 64) * 128 + (rows[7:].long() - 64)              # the rows as integers, exactly
    W = torch.round(w / linear.scale[:300, None]).long()
    exact = (X @ W.t()).double() * s_x.double() * linear.scale[:300].double()
    assert (y.double() - exact).abs().max() / exact.abs().max() < 1e-6   # float32's rounding of exact sums
    assert (y - x @ w.t()).abs().max() / (x @ w.t()).abs().max() < (2e-2 if planes == 1 else 5e-4)
    for i in range(7):  # each row alone, and among huge ones: the same bits
        assert torch.equal(linear(x[i:i + 1]), y[i:i + 1])
        assert torch.equal(linear(torch.cat([torch.randn(40, 1536) * 1e3, x[i:i + 1]]))[-1:], y[i:i + 1])


@pytest.mark.parametrize("planes", [1, 2])
def test_every_way_to_the_integer_product_gives_the_same_bits(planes, monkeypatch):
    """Our kernel with AMX's tiles and with VNNI's vectors (nets/csrc/int8.cpp), oneDNN's int8 product and the float32
    product of the integers: one (rows, outputs) matrix, bit for bit, for every row count and an output count that
    is no multiple of 16. The elementwise kernels give their Python versions' bits."""
    from playground.nets import int8, kernels

    ops = kernels.kernel()
    torch.manual_seed(2)
    w = torch.randn(301, 576)
    paths = {}
    for name, caps in (("amx", {"vnni": True, "amx": True}), ("vnni", {"vnni": True, "amx": False}),
                       ("onednn", {"vnni": False, "amx": False})):
        if ops is None and name != "onednn" or (ops is not None and not int8.capabilities()[name]
                                                 if name != "onednn" else not int8.onednn()):
            continue
        monkeypatch.setattr(int8, "capabilities", lambda caps=caps: caps)
        paths[name] = Int8Linear(w, planes)
    monkeypatch.setattr(int8, "onednn", lambda: False)
    monkeypatch.setattr(int8, "capabilities", lambda: {"vnni": False, "amx": False})
    paths["int_mm"] = Int8Linear(w, planes)
    assert paths["int_mm"].path == "int_mm" and len(paths) >= 2
    for M in (1, 2, 5, 16, 33):
        x = torch.randn(M, 576) * 3
        rows, s_x = quantize_rows(x)
        products = {name: linear._product(rows) for name, linear in paths.items()}
        for name, p in products.items():
            assert torch.equal(p, products["int_mm"]), (name, M)
        outputs = {name: linear(x) for name, linear in paths.items()}     # one plane's kernels: product and combine
        for name, y in outputs.items():                                   # in one pass (product_rows)
            assert torch.equal(y, outputs["int_mm"]), (name, M)
        if ops is not None:
            assert all(torch.equal(a, b) for a, b in zip(ops.quantize_rows(x), (rows, s_x)))
            assert torch.equal(ops.combine(products["int_mm"], s_x, planes),
                               int8.combine(products["int_mm"].clone(), s_x, planes))


def test_the_twins_norm_and_rotation_kernels_are_the_models_own_equations():
    """nets/csrc: RowNorm is RMSNorm within float rounding and each row's own bits alone or among others; rope_qkv
    is nets/llama.rotate's rotation (and the queries' 1/sqrt(d_k)) bit for bit, the keys and values laid out as a
    cache keeps them."""
    from playground.nets import kernels
    from playground.nets.llama import RMSNorm, RowNorm, rope_angles, rotate

    ops = kernels.kernel()
    if ops is None:
        pytest.skip("no C++ compiler here: the model's own modules serve")
    torch.manual_seed(5)
    norm = RMSNorm(576, 1e-5)
    norm.weight.data = torch.randn(576)
    x = torch.randn(9, 576) * 7
    with torch.no_grad():
        ours, theirs = RowNorm(norm)(x), norm(x)
        assert (ours - theirs).abs().max() <= 1e-6 * theirs.abs().max()
        assert torch.equal(RowNorm(norm)(x[3:4]), ours[3:4])
    N, nh, nkv, hs = 11, 9, 3, 64
    qkv = torch.randn(N, (nh + 2 * nkv) * hs) * 3
    cos, sin = rope_angles(torch.arange(40, 40 + N), hs, 1e5)
    q, k, v = qkv.split([nh * hs, nkv * hs, nkv * hs], dim=-1)
    rq = rotate(q.reshape(N, nh, hs), cos[:, None], sin[:, None]) * (1 / 8)
    rk = rotate(k.reshape(N, nkv, hs), cos[:, None], sin[:, None])
    got_q, got_kv = ops.rope_qkv(qkv, cos, sin, nh, nkv, 1 / 8)
    assert torch.equal(got_q, rq) and torch.equal(got_kv, torch.stack([rk, v.reshape(N, nkv, hs)]).transpose(1, 2))


def test_the_top_k_kernel_is_the_stable_sorts_first_k():
    """nets/csrc/top.cpp: the k most probable ids, ties the lower id first, as the first k of a stable descending
    argsort, on distributions with many ties; and a draw over the kept ids only is the draw over the vocabulary."""
    from playground.analysis import sampling
    from playground.nets import kernels

    ops = kernels.kernel()
    if ops is None:
        pytest.skip("no C++ compiler here: torch's topk serves")
    torch.manual_seed(4)
    for trial in range(60):
        V = (49_152, 100, 7)[trial % 3]
        p = torch.softmax(torch.randn(V) * (trial % 5), -1)
        if trial % 2:
            p = torch.round(p * 40) / 40                                  # ties, zeros included
        for k in (1, 3, 10, 50):
            if k < V:
                assert torch.equal(ops.top_order(p, k), torch.argsort(p, descending=True, stable=True)[:k])
        kept = torch.zeros(V)
        kept[torch.randperm(V)[:5]] = torch.rand(5)
        cdf = torch.cumsum(kept, 0, dtype=torch.float64)
        u = torch.rand((), generator=torch.Generator().manual_seed(trial), dtype=torch.float64) * cdf[-1]
        whole = min(int(torch.searchsorted(cdf, u, right=True)), int(kept.nonzero()[-1]))
        assert sampling.draw(kept, torch.Generator().manual_seed(trial)) == whole


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_attention_kernel_is_each_rows_own_and_the_python_loops_mathematics(dtype):
    """nets/kernels: a row's attention is the same bits alone and beside others (a prefill row's two chunks in
    one call included), and within float rounding of the Python loop it replaces (grouped_attention)."""
    from playground.nets import kernels
    from playground.nets.llama import grouped_attention

    if kernels.kernel() is None:
        pytest.skip("no C++ compiler here: the Python loop serves")
    torch.manual_seed(3)
    nkv, nh, hs, pieces = 3, 9, 64, [(0, 40), (40, 24), (130, 1), (7, 1), (300, 1)]   # (start, length); 2 chunks
    caches = [torch.randn(2, nkv, 400, hs).to(dtype) for _ in range(4)]
    caches = [caches[0], caches[0], caches[1], caches[2], caches[3]]                    # of the first row
    N = sum(n for _, n in pieces)
    q, kv = torch.randn(N, nh, hs), torch.randn(2, nkv, N, hs)
    starts, lengths = [s for s, _ in pieces], [n for _, n in pieces]
    clones = {id(c): c.clone() for c in caches}
    expected = [clones[id(c)] for c in caches]                   # the first row's two chunks share its cache
    out = kernels.attention(q, kv, caches, starts, lengths)
    row = 0
    for (start, n), c in zip(pieces, expected):
        c[:, :, start:start + n] = kv[:, :, row:row + n]
        ours = grouped_attention(q[row:row + n], c[0, :, :start + n].float(), c[1, :, :start + n].float(), start)
        assert (out[row:row + n] - ours).abs().max() < 1e-5
        if c is not expected[0]:             # a generating row alone, in a call of its own: the same bits
            alone = kernels.attention(q[row:row + n], kv[:, :, row:row + n], [c.clone()], [start], [n])
            assert torch.equal(alone, out[row:row + n])
        row += n


def test_the_ragged_step_is_the_models_own_forward():
    """Rows of several lengths through step_rows, prompts in chunks and then token by token, give the logits of
    each row's own plain forward (float weights: the written-out attention against SDPA's)."""
    model = tiny()
    rng = random.Random(1)
    prompts = [[rng.randrange(97) for _ in range(n)] for n in (5, 70, 1, 33)]
    caches = [model.row_cache(len(p) + 4) for p in prompts]
    logits = model.step_rows([torch.tensor(p[:3]) for p in prompts if len(p) >= 3], [c for c, p in
                                                                                      zip(caches, prompts)
                                                                                      if len(p) >= 3])
    pieces = [torch.tensor(p[3:] if len(p) >= 3 else p) for p in prompts]
    logits = model.step_rows(pieces, caches)
    for row, p in zip(logits, prompts):
        expected = model(torch.tensor([p]))[0][0, -1]
        torch.testing.assert_close(row, expected, atol=1e-5, rtol=1e-5)
    nxt = [int(r.argmax()) for r in logits]
    logits = model.step_rows([torch.tensor([t]) for t in nxt], caches)
    for row, p, t in zip(logits, prompts, nxt):
        torch.testing.assert_close(row, model(torch.tensor([p + [t]]))[0][0, -1], atol=1e-5, rtol=1e-5)


# ---- the engine on a tiny model: requests join, share, leave, are refused


@pytest.mark.slow
def test_an_engine_answers_each_request_as_it_would_alone_on_a_tiny_model():
    engine = Engine(tiny().int8(), 512)
    alone = list(engine.stream(list(range(1, 90)), 30, SAMPLED, 7))
    rng = random.Random(2)
    for k in (1, 7, 31):
        crowd = [engine.submit(p, n, rule, seed, frozenset()) for p, n, rule, seed in others(rng, k, 97)]
        assert list(engine.stream(list(range(1, 90)), 30, SAMPLED, 7)) == alone, k
        for request in crowd:  # every one of them finishes, with its own number of steps
            steps = list(iter(request.steps.get, engine_end()))
            assert len(steps) == request.n


def engine_end():
    from playground.serving import engine

    return engine._END


def test_a_shared_beginning_is_computed_once_and_changes_nothing():
    system = [i % 97 for i in range(1, 2 * CHUNK + 10)]  # two full chunks and a piece
    fresh = Engine(tiny().int8(), 512)
    expected = list(fresh.stream(system + [5, 6], 8, GREEDY, 0))
    engine = Engine(tiny().int8(), 512)
    list(engine.stream(system + [9], 3, GREEDY, 0))      # the class's first question keeps the system turn's chunks
    prefilled = engine.stats["prefilled"]
    assert list(engine.stream(system + [5, 6], 8, GREEDY, 0)) == expected
    assert engine.stats["prefix_hits"] == 2 and engine.stats["prefilled"] - prefilled == len(system) + 2 - 2 * CHUNK


def test_a_reader_who_leaves_frees_the_row_and_bad_requests_never_enter():
    engine = Engine(tiny().int8(), 512)
    steps = engine.stream([1, 2, 3], 400, SAMPLED, 0)
    next(steps)
    steps.close()                                        # the page was closed
    time.sleep(0.3)
    idle = engine.stats["busy_seconds"]
    time.sleep(0.3)                                      # its row is gone and the engine waits, not spinning
    assert engine.running == [] and engine.stats["busy_seconds"] == idle and engine.stats["tokens"] < 10
    list(engine.stream([4, 5], 2, GREEDY, 0))
    for ids, n, message in (([], 5, "no tokens"), ([1], 0, "at least one"), ([1] * 500, 20, "exceed")):
        with pytest.raises(Refused, match=message):
            engine.submit(ids, n, GREEDY, 0, frozenset())
    assert engine.waiting == deque_of() and engine.running == []


def deque_of():
    from collections import deque

    return deque()


@pytest.mark.parametrize("name", ["gpt-shakespeare", "lstm-shakespeare", "ngram-shakespeare"])
def test_a_model_decoded_row_by_row_answers_through_the_engine_as_alone(name):
    """Our GPT, the recurrent LMs and the n-gram go through the same door (serving/engine.Alone): each seeded answer
    is sampling.stream's, bit for bit, beside others of every length; the GPT's past its context (sliding window)."""
    from playground import checkpoints
    from playground.analysis import sampling
    from playground.serving.engine import Alone

    m = checkpoints.load(checkpoints.ROOT / "models" / name)
    ids = m.tokenizer.encode("ROMEO:\nBut soft, what light").ids
    n = 300 if name.startswith("gpt") else 40
    with torch.inference_mode():
        alone = list(sampling.stream(m.model, torch.tensor([ids]), n, seed=3, **SAMPLED))
    engine = Engine(Alone(m.model), None)
    rng = random.Random(4)
    crowd = [engine.submit(p, k, rule, seed, frozenset()) for p, k, rule, seed in others(rng, 7, m.config.vocab_size)]
    assert list(engine.stream(ids, n, SAMPLED, 3)) == alone
    assert all(len(list(iter(r.steps.get, engine_end()))) == r.n for r in crowd)


# ---- SmolLM2: the twin's quality, and the class's batch


@pytest.mark.slow  # SmolLM2
@pytest.mark.parametrize("bits, kl, margin", [(14, 1e-3, 0.1), (8, 2e-2, 1.0)])
def test_smollm2s_int8_twins_stay_next_to_the_exact_model(smol, twin8, twin14, bits, kl, margin):
    """On a text it never saw, each twin's next-token distributions are within its KL bound of the fp16 model's and
    agree on the top token wherever the fp16 model's top two are `margin` apart (measured: 14 bits 2.5e-5, 8 bits
    5e-3 on the shipped corpus sample)."""
    text = ("The committee met on Tuesday to discuss the budget for the new library. After a long debate, "
            "they agreed to fund the children's section first, and to ask the city for the rest in spring.")
    ids = torch.tensor([smol.tokenizer.encode(text).ids])
    with torch.inference_mode():
        exact, ours = smol.model(ids)[0][0].float(), (twin14 if bits == 14 else twin8)(ids)[0][0].float()
    p, q = exact.log_softmax(-1), ours.log_softmax(-1)
    assert float((p.exp() * (p - q)).sum(-1).mean()) < kl
    top2 = exact.topk(2).values
    clear = top2[:, 0] - top2[:, 1] > margin
    assert torch.equal(exact.argmax(-1)[clear], ours.argmax(-1)[clear])


@pytest.mark.slow  # SmolLM2
@pytest.mark.parametrize("bits", [14, 8])
def test_a_seeded_smollm2_answer_is_the_same_bits_alone_and_beside_1_to_31_others(smol, twin14, twin8, bits):
    twin = twin14 if bits == 14 else twin8
    engine = Engine(twin, twin.config.n_positions)
    prompt = smol.tokenizer.encode(smol.chat_prompt([{"role": "user", "content": "Tell me about dragons."}])).ids
    alone = {name: list(engine.stream(prompt, 24, rule, 7)) for name, rule in (("greedy", GREEDY),
                                                                                 ("sampled", SAMPLED))}
    rng = random.Random(0)
    for k in (1, 31):
        for name, rule in (("greedy", GREEDY), ("sampled", SAMPLED)):
            crowd = [engine.submit(*o[:2], o[2], o[3], frozenset()) for o in others(rng, k, 49_152)]
            assert list(engine.stream(prompt, 24, rule, 7)) == alone[name], (k, name)
            for request in crowd:
                request.cancelled = True


@pytest.mark.slow  # SmolLM2
def test_smollm2s_greedy_answers_through_a_14_bit_engine_are_the_app_models(smol, twin14):
    """Five chat questions, 32 tokens each: the 14-bit engine's greedy text is the fp16 model's, token for token
    (whose logits equal transformers' LlamaForCausalLM's reading of the same file, tests/test_llama.py)."""
    from playground.analysis import sampling

    engine = Engine(twin14, twin14.config.n_positions)
    stop = frozenset({smol.eos_id})
    for question in ("What is the capital of France?", "Write a haiku about the sea.", "List three primary colours.",
                     "Explain photosynthesis in one sentence.", "Who wrote Romeo and Juliet?"):
        ids = smol.tokenizer.encode(smol.chat_prompt([{"role": "user", "content": question}])).ids
        ours = [s["token"] for s in engine.stream(ids, 32, GREEDY, 0, stop)]
        theirs = [s["token"] for s in sampling.stream(smol.model, torch.tensor([ids]), 32, temperature=0, stop=stop)]
        assert ours == theirs, question


@pytest.mark.slow  # SmolLM2
def test_the_engines_cost_is_measured_live_and_shown_with_its_protocol(smol):
    """The Generation tab's card measures the served twin against the model itself now (smollm2_engine_cost): the
    numbers in the text are the JSON's, the served format is named, and the 8-bit twin stays within its measured
    distance of the model (KL 4.8e-3, top-1 agreement 97.4% when this test was written)."""
    from playground.ui import smollm2_card

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        text, _, result = smollm2_card.measure_engine_cost()
    finally:
        torch.set_num_threads(threads)
    assert result["questions"] == 6 and result["kl"] < 1e-2 and result["top1_agreement"] > 0.95
    assert result["weights"].startswith("8-bit") and result["weights"] in text
    assert f"{result['identical_answers']} of {result['questions']} identical" in text and result["date"] in text
    assert "corpus_sample.txt" in result["protocol"]
    with pytest.raises(Exception, match="Only SmolLM2"):
        smollm2_card.measure_engine_cost("gpt-shakespeare")
