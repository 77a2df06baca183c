"""`python -m playground.tools.held_out MODEL [--corpus FILE ...]`: a shipped model's figures over its whole
held-out split, with the protocol, written into its card.json as `held_out`.

- language models (gpt, rnn, lstm, gru): the loss over every window of the held-out split (training/lm.py);
- bert-english: masked-token loss, top-1/top-5 and NSP accuracy with every held-out sentence starting a pair once
  (training/bert.py);
- minilm-mlm: masked-token loss and top-1/top-5 over every held-out window (training/minilm_mlm.py); with
  `--outside TEXT [--fraction 0.1] [--title T]`, the same over the last part of a text outside its corpora, a file
  or a folder of .txt files read in name order (card: `outside`, one entry per text); with `--capitals`, where
  *capital* ranks in '{Capital} is the [MASK] of {Country}.' for 14 countries (card: `capitals`);
- elmo: the perplexity of each direction (forward, backward) over every word of the held-out word stream
  (training/elmo.py);
- seq2seq: exact match over a fixed sample of held-out sources of every length (training/seq2seq.py; no corpus).
The corpus must be the one the card names (checked by sha256); each model uses its own tokenizer and split."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from playground import checkpoints
from playground.training import data, lm

LM_KINDS = {"gpt", "rnn", "lstm", "gru", "recurrent"}


def _check_corpus(ckpt, corpus: list[Path]) -> None:
    recorded = [c["sha256"] for c in ckpt.card.get("corpus", [])]
    given = [checkpoints.sha256_file(p) for p in corpus]
    if recorded and given != recorded:
        raise SystemExit(f"{', '.join(map(str, corpus)) or 'no corpus'} is not the corpus {ckpt.name}'s card names "
                         f"({', '.join(c['name'] for c in ckpt.card['corpus'])}): pass --corpus with those files")


def held_out(name: str, corpus: list[Path]) -> dict:
    ckpt = checkpoints.load(name)
    kind, train_config = ckpt.card.get("kind"), ckpt.card.get("train_config", {})
    if kind == "seq2seq":
        from playground.training import seq2seq

        return seq2seq.held_out(ckpt.model.eval())
    _check_corpus(ckpt, corpus)
    if kind == "minilm-mlm":
        from playground.training import minilm_mlm

        split = minilm_mlm.load_corpus(corpus, ckpt.tokenizer, train_config["val_fraction"])
        return minilm_mlm.held_out(ckpt.model.eval(), split, train_config["seq_len"])
    if kind == "bert":
        from playground.training import bert

        _, _, val_s, val_d, _ = bert.read_corpus(corpus, train_config["val_fraction"])
        pairs = bert._pair_corpus(ckpt.tokenizer, val_s, val_d)
        return bert.held_out(ckpt.model.eval(), ckpt.tokenizer, pairs, train_config["n_positions"],
                             train_config.get("prob", 0.15))
    if kind == "elmo":
        from playground.training import elmo

        return elmo.held_out_of_checkpoint(ckpt, corpus)
    text = data.load_text(corpus, tokenizer=ckpt.tokenizer)
    return lm.held_out_loss(ckpt.model, text.val, train_config["block_size"])


def _outside_file(text: Path, tmp: Path) -> tuple[Path, str]:
    """`text` as one file: itself, or a folder's .txt files in name order, each ending with one newline."""
    if not text.is_dir():
        return text, f"{text.name}'s"
    files = sorted(text.glob("*.txt"))
    if not files:
        raise SystemExit(f"{text} has no .txt file")
    joined = tmp / f"{text.name}.txt"
    joined.write_text("".join(f.read_text(encoding="utf-8").rstrip("\n") + "\n" for f in files), encoding="utf-8")
    return joined, f"{text.name}/*.txt's ({len(files)} files joined in name order)"


def _minilm_mlm(name: str, option: str):
    """The checkpoint `name`, which `option` can only measure if it is a minilm-mlm."""
    ckpt = checkpoints.load(name)
    if ckpt.card.get("kind") != "minilm-mlm":
        raise SystemExit(f"{option} measures a minilm-mlm checkpoint, not {ckpt.card.get('kind')!r}")
    return ckpt


def outside(name: str, text: Path, fraction: float, title: str | None = None) -> dict:
    """minilm-mlm on English outside its corpora: its held-out protocol applied to the last `fraction` of `text`."""
    from playground.training import minilm_mlm

    ckpt = _minilm_mlm(name, "--outside")
    with tempfile.TemporaryDirectory() as tmp:
        path, whose = _outside_file(text, Path(tmp))
        digest = checkpoints.sha256_file(path)
        if digest in [c["sha256"] for c in ckpt.card.get("corpus", [])]:
            raise SystemExit(f"{text} is one of {ckpt.name}'s corpora: --outside wants a text it was not trained on")
        split = minilm_mlm.load_corpus([path], ckpt.tokenizer, fraction)
    result = minilm_mlm.held_out(ckpt.model.eval(), split, ckpt.card["train_config"]["seq_len"])
    return {"text": text.name, "title": title or text.name, "sha256": digest, "fraction": fraction, **result,
            "protocol": result["protocol"].replace("the last val_fraction of each file's",
                                                   f"the last {fraction:.0%} of {whose}")}


CAPITALS_PROTOCOL = ("'{Capital} is the [MASK] of {Country}.' for each of the 14 country-capital pairs of "
                     "word2vec's analogy questions (training/word2vec.py), capitalised: the rank of 'capital' "
                     "among all the model's guesses at the mask (1: its first guess)")


def capitals(name: str) -> dict:
    """minilm-mlm on a fact of today's world, asked 14 ways: where *capital* ranks in '{Capital} is the [MASK] of
    {Country}.' (the Masked-LM tab's first example is Paris's)."""
    from playground.analysis import fill_mask
    from playground.training.word2vec import ANALOGY_PAIRS

    ckpt = _minilm_mlm(name, "--capitals")
    model, vocab, word = ckpt.model.eval(), ckpt.tokenizer.get_vocab_size(), ckpt.tokenizer.token_to_id("capital")
    if word is None:
        raise SystemExit(f"{ckpt.name}'s vocabulary has no token 'capital'")
    ranks = {}
    for country, city in ANALOGY_PAIRS["country-capital"]:
        sentence = f"{city.title()} is the [MASK] of {country.title()}."
        guesses = fill_mask.predict(model, ckpt.tokenizer, sentence, top_k=vocab).tokens[0].tolist()
        ranks[sentence] = guesses.index(word) + 1
    return {"protocol": CAPITALS_PROTOCOL, "first": sum(r == 1 for r in ranks.values()),
            "top5": sum(r <= 5 for r in ranks.values()), "of": len(ranks), "ranks": ranks}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m playground.tools.held_out", description=__doc__)
    parser.add_argument("model", help="a checkpoint name in models/ or a folder")
    parser.add_argument("--corpus", nargs="*", type=Path, default=[])
    parser.add_argument("--outside", type=Path,
                        help="minilm-mlm: a text outside its corpora (a file, or a folder of .txt files), "
                             "written into `outside`")
    parser.add_argument("--fraction", type=float, default=0.1, help="with --outside: the share of the text measured")
    parser.add_argument("--title", help="with --outside: the text's name as the app shows it")
    parser.add_argument("--capitals", action="store_true",
                        help="minilm-mlm: where 'capital' ranks in '{Capital} is the [MASK] of {Country}.' for 14 "
                             "countries, written into `capitals`")
    args = parser.parse_args(argv)
    if args.outside:
        key, result = "outside", outside(args.model, args.outside, args.fraction, args.title)
    elif args.capitals:
        key, result = "capitals", capitals(args.model)
    else:
        key, result = "held_out", held_out(args.model, args.corpus)
    card_path = checkpoints.resolve(args.model) / "card.json"
    card = json.loads(card_path.read_text(encoding="utf-8"))   # read after the minutes of measuring, not before
    card[key] = ([e for e in checkpoints.outside(card) if e.get("sha256") != result["sha256"]] + [result]
                 if key == "outside" else result)              # one entry per text: a new one replaces its own
    card_path.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{args.model}: {json.dumps({k: v for k, v in result.items() if k != 'protocol'})}")
    return result


if __name__ == "__main__":
    main()
