"""The Embeddings tab's endpoints through gradio_client: embed_words, analogy, contextual, embed_sentences,
semantic_search, classic; and their messages for bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gradio_client.exceptions import AppError

from playground import checkpoints

HAS_WORD2VEC = "word2vec-english" in checkpoints.available("word2vec")


def embed_words(client, words, source="minilm", method="pca", dims=3):
    return client.predict(words, source, method, dims, api_name="/embed_words")[-1]


def test_embed_words_returns_points_and_neighbours(client):
    data = embed_words(client, "animals: dog, cat, horse\ncountries: france, italy, spain\nunbelievably, dog")
    assert [p["word"] for p in data["points"]] == ["dog", "cat", "horse", "france", "italy", "spain", "unbelievably"]
    assert all({"x", "y", "z"} <= set(p) for p in data["points"])
    assert data["points"][0]["set"] == "animals" and data["points"][3]["set"] == "countries"
    assert data["neighbours"]["dog"][0][0] == "dog" and data["neighbours"]["dog"][0][1] == pytest.approx(1.0, abs=1e-3)
    assert data["duplicates"] == ["dog"] and "unbelievably" in data["composed"]
    ratio = data["projection"]["explained_variance_ratio"]
    assert len(ratio) == 3 and ratio == sorted(ratio, reverse=True)


def test_embed_words_in_2d_with_tsne(client):
    data = embed_words(client, "one two three four five six seven eight", method="tsne", dims=2)
    assert len(data["points"]) == 8 and all("z" not in p for p in data["points"])
    assert data["projection"]["method"] == "tsne"


@pytest.mark.skipif(not HAS_WORD2VEC, reason="models/word2vec-english is not trained yet")
def test_word2vec_names_unknown_words_and_solves_an_analogy(client):
    data = embed_words(client, "king, queen, man, woman, qwertyuiop")   # MiniLM: built from WordPiece pieces
    assert data["unknown"] == [] and "qwertyuiop" in data["composed"]
    data = embed_words(client, "king, queen, man, woman, qwertyuiop", source="word2vec")
    assert data["unknown"] == ["qwertyuiop"] and len(data["points"]) == 4
    md, out = client.predict("king", "man", "woman", "word2vec", api_name="/analogy")
    assert len(out["answers"]) == 5 and not {"king", "man", "woman"} & {a["word"] for a in out["answers"]}


def test_embed_words_refuses_too_few_points_and_caps_a_huge_paste(client):
    with pytest.raises(AppError, match="at least three"):
        embed_words(client, "dog, dog, cat")
    with pytest.raises(AppError, match="Type some words"):
        embed_words(client, "   ")
    with pytest.raises(AppError, match="nope"):  # the dropdown itself refuses it
        embed_words(client, "a b c", source="nope")
    many = " ".join(f"w{i}" for i in range(12_000))
    data = embed_words(client, many, source="minilm", method="pca", dims=2)
    assert len(data["points"]) == 10_000 and any("first 10,000" in n for n in data["notices"])


def test_embed_sentences_similarity_and_points(client):
    sentences = "A man is eating food.\n\nSomeone is having a meal.\nThe stock market crashed."
    *_, data = client.predict(sentences, "minilm", "mean", api_name="/embed_sentences")
    S = np.array(data["similarity"])
    assert S.shape == (3, 3) and np.allclose(np.diag(S), 1, atol=1e-4) and S[0, 1] > S[0, 2]
    assert len(data["points"]) == 3 and {"sentence", "x", "y"} <= set(data["points"][0])
    *_, reference = client.predict(sentences, "sentence-transformers", "mean", api_name="/embed_sentences")
    np.testing.assert_allclose(np.array(reference["similarity"]), S, atol=1e-4)   # the library agrees with ours
    for pooling in ("max", "cls"):
        *_, other = client.predict(sentences, "minilm", pooling, api_name="/embed_sentences")
        assert other["pooling"] == pooling and not np.allclose(np.array(other["similarity"]), S)
    with pytest.raises(AppError, match="at least two sentences"):
        client.predict("\n \n", "minilm", "mean", api_name="/embed_sentences")
    with pytest.raises(AppError, match="median"):
        client.predict(sentences, "minilm", "median", api_name="/embed_sentences")


def test_semantic_search_ranks_the_paraphrase_first(client):
    _, data = client.predict("Where can I keep my savings?", "The cat sat.\nI put my money in the bank.\nIt rained.",
                             "minilm", "mean", api_name="/semantic_search")
    assert data["results"][0]["sentence"] == "I put my money in the bank."
    scores = [r["score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True)


def test_contextual_and_classic(client):
    sentences = "I went to the bank to get cash.\nThe river bank was muddy.\nNothing here."
    md, _, _, data = client.predict("bank", sentences, 4, "minilm", api_name="/contextual")
    assert len(data["similarity"]) == 2 and data["missing"] == ["Nothing here."]
    # bank's senses measured at every layer on the labelled sentences, whatever is typed; the chosen layer in bold
    assert "Does MiniLM tell *bank*'s senses apart?" in md and "| **4** |" in md and "16/16" in md
    assert data["senses"]["model"] == "minilm" and len(data["senses"]["layers"]) == 7
    assert "senses apart" not in client.predict("cash", "Cash is king.\nPay in cash.", 4, api_name="/contextual")[0]
    with pytest.raises(AppError, match="at least two sentences"):
        client.predict("bank", "Nothing here.", 4, "minilm", api_name="/contextual")
    with pytest.raises(AppError, match="one word"):
        client.predict("two words", sentences, 4, "minilm", api_name="/contextual")
    md, *_, data = client.predict("The dog bit the man.\nThe man bit the dog.", api_name="/classic")
    assert data["bag_of_words"][0] == data["bag_of_words"][1] and "word order" in md


@pytest.mark.skipif("bert-english" not in checkpoints.available(), reason="models/bert-english is not shipped")
def test_our_bert_as_a_sentence_encoder_and_a_contextual_model(client):
    *_, data = client.predict("A man eats.\nSomeone has a meal.\nMarkets fell.", "bert", "cls",
                              api_name="/embed_sentences")
    assert np.array(data["similarity"]).shape == (3, 3) and data["model"] == "bert"
    md, _, _, data = client.predict("bank", "The bank lends money.\nThe river bank is wet.", 6, "bert",
                                    api_name="/contextual")
    n_layer = json.loads((checkpoints.resolve("bert-english") / "config.json").read_text())["config"]["n_layer"]
    assert data["model"] == "bert" and data["layer"] == min(6, n_layer) and len(data["similarity"]) == 2


@pytest.mark.skipif("elmo-english" not in checkpoints.available(), reason="models/elmo-english is not shipped")
def test_elmo_as_a_contextual_model_with_its_mix(client):
    sentences = "I put money in the bank.\nThe river bank was muddy.\nHe robbed a bank."
    md, _, _, data = client.predict("bank", sentences, 4, "elmo", api_name="/contextual")   # the old inputs only
    assert data["model"] == "elmo" and data["layer"] == "mix" and len(data["similarity"]) == 3
    assert data["mix"] == {"s": [0.0, 0.0, 0.0], "softmax_s": [0.3333] * 3, "gamma": 1.0} and "eq. 1" in md
    *_, data = client.predict("bank", sentences, 0, "elmo", False, 1.0, 0, 0, 0, api_name="/contextual")
    assert data["layer"] == 0 and data["mix"] is None
    assert np.allclose(data["similarity"], 1.0, atol=1e-3)           # the token layer [x; x] ignores the context
    *_, data = client.predict("bank", sentences, 4, "elmo", True, 2.0, 0, 0, 3, api_name="/contextual")
    assert data["mix"]["gamma"] == 2.0 and data["mix"]["s"] == [0.0, 0.0, 3.0]
    assert data["mix"]["softmax_s"][2] > 0.9
    *_, data = client.predict("zyzzyva", "A zyzzyva sat.\nThe zyzzyva flew.", 4, "elmo", api_name="/contextual")
    assert data["unknown"] is True and len(data["similarity"]) == 2


def test_the_word_space_says_what_to_expect_with_the_cards_figures():
    from playground import checkpoints
    from playground.ui import embeddings_words

    card = checkpoints.read_card("word2vec-english")
    if card is None:
        pytest.skip("word2vec-english is not shipped")
    analogy = card["evaluation"]["analogy"]["all"]
    note = embeddings_words.word2vec_note()
    assert f"{analogy['accuracy']:.0%} of its {analogy['questions']} analogy questions" in note


def test_a_seeded_projection_is_the_same_for_everyone_and_says_its_settings():
    from playground.ui import embeddings_words as tab

    args = ("cat dog horse cow sheep pig goat mouse lion tiger", "word2vec", "umap", 2, 7, 30, 4, 0.2)
    fig, _, _, data = tab.embed_words(*args, progress=lambda *a, **k: None)
    assert data["projection"]["seed"] == 7 and data["projection"]["n_neighbors"] == 4
    assert "seed 7" in fig.layout.title.text
    again = tab.embed_words(*args, progress=lambda *a, **k: None)[-1]
    assert [p["x"] for p in again["points"]] == [p["x"] for p in data["points"]]
    other = tab.embed_words(*args[:4], 8, *args[5:], progress=lambda *a, **k: None)[-1]
    assert [p["x"] for p in other["points"]] != [p["x"] for p in data["points"]]
