"""FastText: skip-gram over character n-grams (the model; training/fasttext.py trains it).

Written from Bojanowski, Grave, Joulin & Mikolov 2017, "Enriching Word Vectors with Subword Information"
(TACL 5). It is word2vec's skip-gram with negative sampling (nets/word2vec.py; Mikolov et al. 2013b), with
one change: a word is no longer one row of a table but the bag of its character n-grams.

    G_w     the n-grams of `<w>` (the word between the boundary symbols < and >), n = minn..maxn
            (3..6), plus the whole word `<w>` as its own special sequence when w is in the vocabulary.
            "where", n = 3: <wh, whe, her, ere, re>, and the sequence <where> (§3.2).
    z_g     the vector of n-gram g: row g of the input matrix. Words of the vocabulary have a row each;
            an n-gram has the row of its bucket, FNV-1a(g) mod K (K buckets shared by all n-grams: the
            hashing trick of the paper's code, so memory is bounded whatever the corpus).
    u_w     = (1/|G_w|) Σ_{g ∈ G_w} z_g   the word's vector. The paper writes the sum, Σ_g z_g (§3.2);
            we take the mean, as the paper's released code does (computeHidden), so u_w lives on
            word2vec's scale whatever the word's length and word2vec's learning rate carries over. The
            mean differs from the sum only by the factor 1/|G_w|: every cosine (neighbours, analogies) is
            the same either way.
    s(w, c) = u_w · v_c                   the score of context word c (v_c: its output vector); with
            the sum it is the paper's Σ_g z_g · v_c.
    loss    = -log σ(s(w, c)) - Σ_{i=1..k} log σ(-s(w, n_i)),   n_i ~ P_n  (negative sampling, as word2vec)

A word the model never saw (a misspelling, a rare form) gets u_w from its n-grams alone: that is what the
Embeddings tab shows. A string with no n-gram in range (only the empty string for minn = 3, since `<a>`
already has 3 characters) and no word row gets the zero vector: defined, of the right shape, and with no
direction (its cosine with anything is taken as 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

BOW, EOW = "<", ">"   # the boundary symbols of §3.2, so prefixes and suffixes differ from inner n-grams


# ---------------------------------------------------------------------------------------------
# Hashing n-grams into buckets


FNV_OFFSET = 0x811C9DC5   # FNV-1a 32-bit offset basis (the hash of the empty string)
FNV_PRIME = 0x01000193    # 16777619


def fnv1a(text: str) -> int:
    """FNV-1a, 32 bits, over the UTF-8 bytes of `text` (Fowler, Noll & Vo): for each byte, xor it in,
    then multiply by the prime, modulo 2^32. The paper's code hashes its n-grams with it. (That code
    sign-extends bytes >= 0x80 before the xor; we xor the plain byte, so non-ASCII n-grams land in other
    buckets than theirs. Our vocabulary is the letters a-z, where the two agree.)"""
    h = FNV_OFFSET
    for byte in text.encode("utf-8", errors="surrogatepass"):   # any str hashes, a lone surrogate too
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFF
    return h


def char_ngrams(word: str, minn: int = 3, maxn: int = 6) -> list[str]:
    """The character n-grams of `<word>`, n = minn..maxn, by length, then in order (the paper lists "where"'s
    3-grams so). The whole `<word>` is among them when its length is in range (the paper's code keeps it as an
    n-gram too)."""
    s = BOW + word + EOW
    return [s[i:i + n] for n in range(minn, maxn + 1) for i in range(len(s) - n + 1)]


# ---------------------------------------------------------------------------------------------
# The model


@dataclass
class FastTextConfig:
    """The config.json of a FastText checkpoint."""

    vocab_size: int = 20_001   # words + [UNK] (id 0, never trained); set from the corpus
    buckets: int = 30_000      # K rows shared by all n-grams (the paper: 2M; ours must fit 8 MB in fp16)
    dim: int = 64              # vector width; (20k words + 30k buckets) x 64 in fp16 = 6.4 MB
    minn: int = 3              # shortest n-gram (§3.2: "all the n-grams for n greater or equal to 3")
    maxn: int = 6              # longest n-gram ("and smaller or equal to 6")
    window: int = 5            # context words on each side (the window actually used is drawn in 1..window)

    def __post_init__(self):
        assert self.vocab_size >= 2 and self.dim >= 1, f"vocab_size={self.vocab_size} and dim={self.dim} too small"
        assert self.buckets >= 1, f"buckets={self.buckets} must be at least 1"
        assert 1 <= self.minn <= self.maxn, f"need 1 <= minn <= maxn, got minn={self.minn} maxn={self.maxn}"
        assert self.window >= 1, f"window={self.window} must be at least 1"


class FastText(nn.Module):
    """Skip-gram with negative sampling over n-gram bags (Bojanowski et al. 2017, §3.1-3.2):

        u_w  = mean_{g ∈ G_w} z_g                  rows of Z = W_in: V word rows, then K bucket rows
        loss = -log σ(v_c · u_w) - Σ_i log σ(-v_{n_i} · u_w)      v = W_out: one output vector per word

    `vocab` (word -> id, set by the trainer or the checkpoint's tokenizer) decides which strings have a
    word row; every other string is its n-grams only.
    """

    def __init__(self, config: FastTextConfig, vocab: dict[str, int] | None = None):
        super().__init__()
        self.config = config
        V, K, d = config.vocab_size, config.buckets, config.dim
        self.W_in = nn.Embedding(V + K, d)    # z: word rows 0..V-1, n-gram bucket rows V..V+K-1
        self.W_out = nn.Embedding(V, d)       # v_c: the output vectors (training only; not shipped)
        # the code's init: input rows uniform in ±1/d, output zero (so every σ starts at 1/2)
        nn.init.uniform_(self.W_in.weight, -1.0 / d, 1.0 / d)
        nn.init.zeros_(self.W_out.weight)
        self.vocab: dict[str, int] = {}
        self.set_vocabulary(vocab or {})

    def set_vocabulary(self, vocab: dict[str, int]) -> None:
        """word -> id of its row (checkpoints.load passes the tokenizer's); ids must lie below vocab_size."""
        assert all(0 <= i < self.config.vocab_size for i in vocab.values()), "a word id is outside vocab_size"
        self.vocab = dict(vocab)

    # -- n-grams -----------------------------------------------------------------------------

    def bucket(self, ngram: str) -> int:
        """The row of an n-gram: V + FNV-1a(g) mod K."""
        return self.config.vocab_size + fnv1a(ngram) % self.config.buckets

    def ngrams(self, word: str) -> tuple[list[str], list[int]]:
        """G_w as strings and as rows of W_in: the word itself (`<word>`, its own row) first when it is in
        the vocabulary (id 0, [UNK], is not a word), then its character n-grams (bucket rows)."""
        grams = char_ngrams(word, self.config.minn, self.config.maxn)
        rows = [self.bucket(g) for g in grams]
        wid = self.vocab.get(word, 0)
        if wid > 0:
            grams, rows = [BOW + word + EOW] + grams, [wid] + rows
        return grams, rows

    def padded_ngrams(self, words: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """For a list of words: rows (W, L) of W_in padded with 0, and a mask (W, L) of the real ones; L the
        longest |G_w|. The trainer builds this once for the vocabulary, so a batch is an index and a sum."""
        lists = [self.ngrams(w)[1] for w in words]
        L = max([len(r) for r in lists] + [1])
        rows = torch.zeros(len(words), L, dtype=torch.long)
        mask = torch.zeros(len(words), L, dtype=torch.bool)
        for i, r in enumerate(lists):
            rows[i, :len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, :len(r)] = True
        return rows, mask

    # -- vectors ------------------------------------------------------------------------------

    def hidden(self, rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """rows, mask (B, L) -> u (B, d): the mean of each word's n-gram rows (zero for an empty bag)."""
        z = self.W_in(rows)                                           # (B, L, d)
        m = mask.to(z.dtype).unsqueeze(-1)                            # (B, L, 1)
        return (z * m).sum(1) / m.sum(1).clamp(min=1.0)               # (B, d)

    @torch.no_grad()
    def word_vector(self, word: str) -> torch.Tensor:
        """u_w (d,) float32 for ANY string: a vocabulary word from its row and its n-grams, an unseen one
        from its n-grams alone, a string with neither (e.g. "") as the zero vector."""
        _, rows = self.ngrams(word)
        if not rows:
            return torch.zeros(self.config.dim)
        return self.W_in.weight[torch.tensor(rows)].float().mean(0)

    @torch.no_grad()
    def vectors(self, words: list[str]) -> torch.Tensor:
        """(len(words), d) float32: u_w of each word, in batches."""
        out = []
        for s in range(0, len(words), 2048):
            rows, mask = self.padded_ngrams(words[s:s + 2048])
            out.append(self.hidden(rows, mask).float())
        return torch.cat(out) if out else torch.zeros(0, self.config.dim)

    # -- the objective ------------------------------------------------------------------------

    def forward(self, rows: torch.Tensor, mask: torch.Tensor, targets: torch.Tensor,
                negatives: torch.Tensor) -> torch.Tensor:
        """rows, mask (B, L): the centres' n-gram rows; targets (B,) context words; negatives (B, k).
        Returns the mean negative-sampling loss."""
        u = self.hidden(rows, mask)                                   # (B, d)
        pos = (self.W_out(targets) * u).sum(-1)                       # (B,)   v_c · u_w
        neg = torch.bmm(self.W_out(negatives), u.unsqueeze(-1)).squeeze(-1)  # (B, k) v_{n_i} · u_w
        return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(-1)).mean()

    @torch.no_grad()
    def sgd_step(self, rows: torch.Tensor, mask: torch.Tensor, targets: torch.Tensor, negatives: torch.Tensor,
                 lr: float, average_repeats: bool = True) -> float:
        """One SGD step with the gradients written out, the pairs' updates summed (as Word2Vec.sgd_step).
        With s = v · u and σ the logistic function, ∂loss/∂s = σ(s_c) - 1 for the context word and σ(s_i)
        for each noise word, so

            v_c -= lr (σ(s_c) - 1) u,   v_{n_i} -= lr σ(s_i) u,
            g    = (σ(s_c) - 1) v_c + Σ_i σ(s_i) v_{n_i}                  (∂loss/∂u)
            z_g -= lr g   for every g ∈ G_w

        The exact gradient of the mean u would give each z_g only g / |G_w|; like the paper's code
        (Model::update), every n-gram row takes the whole g, as if it alone were u (a learning rate
        |G_w| times larger on the input side, so a word of 25 n-grams learns as fast as word2vec's one
        row).

        average_repeats: a batch is our deviation from the code's one pair at a time, and n-grams are shared
        by many words: `ing>` can sit in hundreds of the batch's pairs, and the sum of hundreds of updates
        computed from the same stale rows overshoots (on the English corpus the largest bucket rows grew to
        10x the mean one's norm, two random words met at cosine 0.68, and the analogies fell to 16%; on a toy
        corpus at lr 0.05 the loss went to NaN). So each input row moves by the MEAN of the updates it gets
        in the batch (the sum divided by its number of uses): one step per batch, however many words share
        it. The output side keeps the sum, as word2vec's.
        `tests/test_fasttext.py` checks both sides against autograd. Returns the batch's mean loss (before
        the update)."""
        W_in, W_out = self.W_in.weight, self.W_out.weight
        u = self.hidden(rows, mask)                                   # (B, d)
        v_c, v_n = W_out[targets], W_out[negatives]                   # (B, d), (B, k, d)
        s_c = (v_c * u).sum(-1)                                       # (B,)
        s_n = torch.bmm(v_n, u.unsqueeze(-1)).squeeze(-1)             # (B, k)
        loss = -(F.logsigmoid(s_c) + F.logsigmoid(-s_n).sum(-1)).mean()
        g_c = torch.sigmoid(s_c) - 1.0                                # (B,)   ∂loss/∂s_c
        g_n = torch.sigmoid(s_n)                                      # (B, k) ∂loss/∂s_i
        g = g_c.unsqueeze(-1) * v_c + (g_n.unsqueeze(-1) * v_n).sum(1)   # (B, d) ∂loss/∂u
        d = u.size(1)
        W_out.index_add_(0, targets, g_c.unsqueeze(-1) * u, alpha=-lr)
        W_out.index_add_(0, negatives.reshape(-1), (g_n.unsqueeze(-1) * u.unsqueeze(1)).reshape(-1, d), alpha=-lr)
        real = mask.reshape(-1)                                       # (B*L,) the real n-grams, not the padding
        grads = g.unsqueeze(1).expand(-1, rows.size(1), -1).reshape(-1, d)   # (B*L, d) g for each n-gram slot
        flat = rows.reshape(-1)[real]                                 # (n,) the rows of W_in the batch uses
        if average_repeats:   # a row used k times in the batch moves by the mean of its k updates
            counts = torch.bincount(flat, minlength=W_in.size(0)).clamp(min=1).to(grads.dtype)   # (V + K,)
            W_in.index_add_(0, flat, grads[real] / counts[flat].unsqueeze(1), alpha=-lr)
        else:
            W_in.index_add_(0, flat, grads[real], alpha=-lr)
        return float(loss)


def trained_state(model: FastText) -> dict[str, torch.Tensor]:
    """What a checkpoint stores (checkpoints.save calls this): the input rows z only, words and buckets.
    The output vectors v_c serve only the training objective; the app never reads them."""
    return {"W_in.weight": model.W_in.weight}


def load_model(config: FastTextConfig, state: dict[str, torch.Tensor]) -> FastText:
    """A FastText from a checkpoint's tensors (checkpoints.KINDS names this loader): the input rows; the
    output vectors, not shipped, stay zero. checkpoints.load then gives it the tokenizer's vocabulary
    (`set_vocabulary`)."""
    model = FastText(config)
    expected = (config.vocab_size + config.buckets, config.dim)
    got = tuple(state.get("W_in.weight", torch.zeros(0)).shape)
    if set(state) != {"W_in.weight"} or got != expected:
        raise RuntimeError(f"expected only W_in.weight of shape {expected}, got {sorted(state)} {got}")
    model.W_in.weight.data.copy_(state["W_in.weight"].float())
    return model
