"""The lecture's picture as numbers: held-out accuracy against the number of labelled examples, per method.

    python -m playground.tools.classify_curve [--sizes=16,64,256,0] [--methods=lstm,bilstm,probe-cls,probe-mean]
                                              [--seeds=0,1,2] [--out assets/classify/curve.json]

Every point is one run of training/classify.py's recipe (the same as `python -m playground.train classifier`) on
`n` examples drawn evenly per class from the training split (0: all 3,500), measured on the whole held-out split
(1,000 sentences) that no run trains on or selects by; each size is run with every seed (each seed draws other
examples and starts from another initialisation; the probes take a second a run, so they get more seeds than the
runs that train a network) and the mean and each run are recorded. MiniLM's features are
computed once for the probes (the encoder is frozen: every probe run would compute the same numbers).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from playground import checkpoints
from playground.nets.classifier import RECURRENT
from playground.training import classify as tc

OUT = checkpoints.ROOT / "assets" / "classify" / "curve.json"


def probe_points(data: dict, sizes: list[int], seeds: list[int], cfg: tc.ClassifyTrainConfig) -> dict:
    """Accuracy of the [CLS] and mean probes for every size and seed, on features computed once."""
    from playground.nets.classifier import minilm_base

    encoder, _ = minilm_base()
    tok = checkpoints.read_hf_tokenizer(checkpoints.minilm_dir())
    classes = list(dict.fromkeys(e["label"] for e in data["train"]))
    feats = {split: tc.features(encoder, tok, [e["text"] for e in data[split]], cfg.max_len) for split in data}
    gold = {split: torch.tensor([classes.index(e["label"]) for e in data[split]]) for split in data}
    index = {id(e): i for i, e in enumerate(data["train"])}
    points: dict[str, list] = {"probe-cls": [], "probe-mean": []}
    for method, which in (("probe-cls", 0), ("probe-mean", 1)):
        steps, lr, _ = tc.DEFAULTS[method]
        for n in sizes:
            runs = []
            for seed in seeds:
                rows = [index[id(e)] for e in tc.draw(data["train"], n, seed)]
                head = torch.nn.Linear(encoder.config.n_embd, len(classes))
                with torch.no_grad():   # as build_transfer starts a probe's head: N(0, 0.02), zero bias, from the seed
                    head.weight.normal_(0.0, 0.02, generator=torch.Generator().manual_seed(seed))
                    head.bias.zero_()
                tc.train_head(head, feats["train"][which][rows], gold["train"][rows], steps, lr, cfg.weight_decay)
                with torch.no_grad():
                    runs.append(tc.evaluate(head(feats["held_out"][which]), gold["held_out"])["accuracy"])
            points[method].append(_point(n, len(data["train"]), runs, seeds))
            print(method, points[method][-1], flush=True)
    return points


def _point(n: int, total: int, runs: list[float], seeds: list[int]) -> dict:
    return {"n": n or total, "accuracy": round(sum(runs) / len(runs), 4), "runs": runs, "seeds": seeds}


def run_points(method: str, data: dict, sizes: list[int], seeds: list[int]) -> list[dict]:
    points = []
    for n in sizes:
        runs = [tc.run(method, tc.ClassifyTrainConfig(n_train=n), seed, data)["held_out"]["accuracy"] for seed in seeds]
        points.append(_point(n, len(data["train"]), runs, seeds))
        print(method, points[-1], flush=True)
    return points


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="16,64,256,0")
    parser.add_argument("--methods", default="lstm,bilstm,probe-cls,probe-mean")
    parser.add_argument("--seeds", default="0,1,2", help="the probes' seeds (a probe run takes a second)")
    parser.add_argument("--scratch_seeds", default="0", help="the LSTMs' and LoRA's seeds (a run takes minutes)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    methods = [m.strip() for m in args.methods.split(",")]
    started = time.perf_counter()
    data = tc.load_examples()
    curves: dict[str, list] = {}
    if {"probe-cls", "probe-mean"} & set(methods):
        probes = probe_points(data, sizes, seeds, tc.ClassifyTrainConfig())
        curves.update({m: probes[m] for m in ("probe-cls", "probe-mean") if m in methods})
    for method in methods:
        if method in RECURRENT or method == "lora":
            curves[method] = run_points(method, data, sizes, [int(x) for x in args.scratch_seeds.split(",")])
    result = {"protocol": "held-out accuracy over the whole held-out split of assets/classify (1,000 sentences, "
                          "200 per class, never trained on); n labelled training examples drawn evenly per class; "
                          "each point the mean of one run per seed; the recipe of each method is "
                          "training/classify.py's defaults (DEFAULTS)",
              "chance": round(1 / len({e['label'] for e in data['train']}), 4),
              "recipes": {m: dict(zip(("steps", "lr", "batch_size"), tc.DEFAULTS[m])) for m in methods},
              "curves": curves, "seconds": round(time.perf_counter() - started, 1),
              "command": "python -m playground.tools.classify_curve " + shlex.join(argv if argv else sys.argv[1:])}
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
