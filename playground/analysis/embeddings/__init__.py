"""What the Embeddings tab shows, as plain data: text in, dicts and numpy arrays out; no gradio, no plotly.

    words.py        word spaces (our word2vec and GloVe, MiniLM's and our BERT's input embeddings, our GPT's
                    characters), lookup, neighbours, analogies, and the word-space view (points and neighbours)
    projection.py   PCA, t-SNE, UMAP to 2D or 3D
    encoders.py     the BERT encoders the contextual and sentence views run, their batches and SBERT pooling
    contextual.py   one word's vector in several sentences at one layer; how well each layer separates senses
    sentences.py    sentence embeddings, their similarity, semantic search
    sbert.py        the sentence-transformers library: our BERT wrapped as a SentenceTransformer, and
                    all-MiniLM-L6-v2 through the library as the reference (imported on first use only)
    classic.py      one-hot, bag of words, TF-IDF
    bias.py         a gender direction and projections on it (Bolukbasi et al. 2016), the WEAT (Caliskan et al. 2017)
    unshown_neighbours.txt  the reviewed slurs and vulgar words the app's own words' neighbour lists leave out

Each view function takes the checked inputs and a list of notices (it appends what the user should know),
returns the endpoint's JSON as `data` with the arrays the figures need, and raises EmbeddingError when the
input cannot be shown (its message is for the user).
"""


class EmbeddingError(ValueError):
    """The input cannot be shown (too few known words, no sentence with the word, ...): the message says why."""
