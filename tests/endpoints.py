"""What the tests that call every endpoint share: tests/test_fuzz_endpoints.py (each handler in this process) and
tests/space_app.py (the app started as a Space, over its API). Plain data, no test tool imported: space_app.py runs
in a Space's environment, which has requirements.txt only."""

# Inputs held to a cheap value, because any value is valid and a large one only takes longer (each has its own
# clamping test): the live training's size, the re-evaluation's sample, the generated length.
HELD = {("memory_experiment", "max_k"): 5, ("memory_experiment", "steps"): 10, ("memory_experiment", "hidden_size"): 8,
        ("seq2seq_evaluate", "per_length"): 5, ("generate", "max_new_tokens"): 20, ("compare_generate", "max_new_tokens"): 20,
        # the fine-tuning tab's live runs on the GPT, a few steps (SmolLM2's runs: tests/test_finetune.py)
        ("lora_finetune", "steps"): 2, ("sft", "steps"): 2, ("dpo", "steps"): 2, ("sft", "model"): "gpt-shakespeare",
        ("dpo", "model"): "gpt-shakespeare", ("lora_finetune", "model"): "gpt-shakespeare",
        # the causal lab on the GPT without its sanity checks (SmolLM2's and the checks: tests/test_causal_lab.py)
        **{(name, "model_name"): "gpt-shakespeare" for name in ("patch", "ablate", "head_sweep", "steer")},
        **{(name, "sanity"): False for name in ("patch", "ablate", "head_sweep")},
        # a live classifier run on our small BERT's probe (seconds; LoRA on MiniLM takes most of a minute: the bench)
        ("classify_train", "method"): "bert-probe-cls",
        # speculative decoding of a few tokens (its full length and its drafts: tests/test_speculative.py)
        ("speculative", "max_new"): 4,
        # the Inference tab: our GPT's cache and a short answer; the batching experiment to batch 2, 2 tokens a row
        # (SmolLM2's cache and the experiment to 32: tests/test_inference_kv.py, test_inference_batching.py)
        ("kv_cache", "model"): "gpt-shakespeare", ("kv_cache", "answer_tokens"): 2,
        ("batching", "largest_batch"): "2", ("batching", "new_tokens"): 2}
NEEDS_A_SESSION = {"seq2seq_step"}  # shows this session's last translation: refused without one, as it should
# API calls with no UI values of their own, which act on a room: refused without one, as they should
NEEDS_A_ROOM = {"follow_lead", "follow_view",
                "cockpit", "cockpit_export", "cockpit_reveal", "cockpit_workshop", "cockpit_delete"}
REFUSED_WITH_DEFAULTS = NEEDS_A_SESSION | NEEDS_A_ROOM
