"""The Embeddings tab: from one-hot and counts to learned dense vectors, to vectors that depend on context,
to sentence vectors you can search with.

Word space (our word2vec, GloVe and FastText, MiniLM's input embeddings, our BERT's, our GPT's characters:
PCA / t-SNE / UMAP in 2D or 3D, neighbours, analogies, the same words in another embedding), contextual
embeddings (one word in several sentences at a chosen MiniLM layer, or ELMo's mix of its biLM's layers),
sentence space (SBERT pooling, similarity, semantic search), and the classic representations (one-hot,
bag of words, TF-IDF). Nothing is loaded at import: word2vec's
8 MB loads on first use, MiniLM is the encoder the Attention tab already loaded.

One module per sub-tab: embeddings_words.py, embeddings_context.py, embeddings_sentences.py (with the classic
representations), embeddings_bias.py; this one lays them out.
"""

from __future__ import annotations

import gradio as gr

from playground.ui import embeddings_bias, embeddings_context, embeddings_sentences, embeddings_words
from playground.ui.common import LATEX, Shared

INTRO_MD = r"""**From counts to learned vectors.** One-hot vectors make every word equally far from every other.
**word2vec** (Mikolov et al. 2013) learns a dense vector $v_w$ per word by predicting its neighbours: skip-gram with
negative sampling minimises $-\log\sigma(v'_{o}\cdot v_{w}) - \sum_{i=1}^{k}\log\sigma(-v'_{n_i}\cdot v_{w})$ over
(word, context) pairs, with $k$ noise words drawn from $U(w)^{3/4}$ and frequent words subsampled. Words used
alike end up close (cosine), and some relations become directions: *king − man + woman ≈ queen*. Our word2vec was
trained here on the English corpus (Austen, the Bible, WordNet glosses, the Jargon File, Shakespeare; see its card).
**GloVe** (Pennington et al. 2014) learns the same kind of table from the corpus's co-occurrence counts $X_{ij}$
instead: it fits $w_i\cdot\tilde w_j + b_i + \tilde b_j \approx \log X_{ij}$ by weighted least squares,
$J=\sum_{ij} f(X_{ij})\,(w_i\cdot\tilde w_j + b_i + \tilde b_j - \log X_{ij})^2$ with $f(x)=\min(1,(x/x_{max})^{3/4})$,
and shows $W+\tilde W$. Ours has word2vec's vocabulary and corpus.
**FastText** (Bojanowski et al. 2017) trains the same objective with $v_w$ replaced by the mean of the vectors
of the word's character n-grams (`<wh, whe, her, ere, re>` ... for *where*, n = 3 to 6, hashed into buckets),
so any string, a misspelling included, gets a vector. A BERT's input embeddings are a table of the same kind as
word2vec's, over WordPiece tokens."""


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The tab's components and events, one sub-tab after the other; `shared.text` (the sentence every tab
    shares) can be added to the sentence list with a button."""
    gr.Markdown(INTRO_MD, latex_delimiters=LATEX)
    with gr.Tabs():
        embeddings_words.build(demo, shared)
        embeddings_context.build()
        sentences = embeddings_sentences.build(shared)
        embeddings_sentences.build_classic(sentences)
        embeddings_bias.build(demo)
