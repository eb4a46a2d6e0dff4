# ---
# jupyter:
#   jupytext:
#     default_lexer: ipython3
#     formats: md:myst,py:percent
#     notebook_metadata_filter: tinybert
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
#   tinybert:
#     module: blocks.positional
# ---

# %% [markdown]
# (sec-pos)=
# # Positional encoding
#
# Attention, as the last two chapters built it, compares every query with every key and takes a
# weighted average of the values. Nothing in that computation looks at *where* a word stands: shuffle
# the words of a sentence and every word receives the same vector as before, only in the shuffled
# order. For a bag of words that would be fine; for language it is not, since "the boy hit the
# ball" and "the ball hit the boy" describe different events. A {term}`positional encoding` puts
# the order back. This chapter builds the four families in use today: the fixed sinusoids of the
# original Transformer, the learned position table of BERT, biases that depend on the distance
# between two words, and rotary embeddings, which rotate queries and keys.
#
# **What you will learn**
#
# - why self-attention without positions is *permutation-equivariant*, shown on "the boy hit the
#   ball" with the `MultiHeadAttention` of {doc}`04_multihead_attention`;
# - the sinusoidal encoding of the Transformer, and a check, for many positions and offsets, that
#   $\mathrm{PE}_{pos+k}$ is a fixed rotation of $\mathrm{PE}_{pos}$;
# - learned absolute positions (BERT's), and the clear error you get past their maximum length;
# - relative position biases, added to the attention scores, with a parity check against PyTorch's
#   fused attention;
# - {term}`rotary position embeddings <rotary position embedding>` (RoPE), and a check that the
#   rotated query–key product depends only on the distance $m - n$;
# - a small experiment that trains each scheme on a task that needs word order, and tests it on
#   sequences longer than any it was trained on;
# - which model uses which encoding.
#
# **Uses.** From {doc}`03_attention`: `masked_softmax`, `scaled_dot_product_attention` and
# `causal_mask`. From {doc}`04_multihead_attention`: `MultiHeadAttention`, `split_heads` and
# `merge_heads`. From {doc}`01_feedforward`: `count_parameters` and
# `check_positive_int`. Everything this chapter defines
# for later use is exported to `tinybert.blocks.positional`, except the rotary embedding, which
# has a module of its own, `tinybert.blocks.rotary`; the Transformer chapter adds its
# `SinusoidalPositionalEncoding` to the token embeddings, and BERT uses its
# `LearnedPositionalEmbedding`.
#
# (sec-pos-setup)=
# ## Setup
#
# The first cell holds the imports of the modules `tinybert.blocks.positional` and
# `tinybert.blocks.rotary`; the second, those of the teaching code.

# %% tags=["export", "export:blocks.rotary"]
from __future__ import annotations

import math

import torch
from torch import nn

from tinybert.blocks.checks import check_positive_int

# %%
import matplotlib.pyplot as plt
import torch.nn.functional as F

from tinybert.blocks.attention import (
    causal_mask,
    masked_softmax,
    scaled_dot_product_attention,
)
from tinybert.blocks.feedforward import count_parameters
from tinybert.blocks.multihead import MultiHeadAttention, merge_heads, split_heads
from tinybert.runtime import get_device, is_quick, pick, progress, seed_everything

device = get_device()
print(f"device: {device}, quick mode: {is_quick()}")

# %% [markdown]
# (sec-pos-order)=
# ## Order blindness
#
# Write the input sequence as the rows of $\mathbf X \in \mathbb R^{T\times D}$ and reorder its rows
# with a permutation matrix $\mathbf P$. The queries, keys and values are computed row by row, so
# they are reordered the same way: $\mathbf{PXW}^Q$, $\mathbf{PXW}^K$, $\mathbf{PXW}^V$. The
# scores become $\mathbf P\,\mathbf{QK}^\top\mathbf P^\top$, the same numbers with rows *and*
# columns reordered; the softmax works row by row and does not care in which order a row's entries
# come; and multiplying by the reordered values undoes the column reordering:
#
# $$
# \operatorname{softmax}\!\Bigl(\tfrac{\mathbf{P}\mathbf{Q}\mathbf{K}^\top\mathbf{P}^\top}{\sqrt{d_k}}\Bigr)\mathbf{P}\mathbf{V}
# = \mathbf{P}\,\operatorname{softmax}\!\Bigl(\tfrac{\mathbf{Q}\mathbf{K}^\top}{\sqrt{d_k}}\Bigr)\mathbf{V}.
# $$
#
# Self-attention is **permutation-equivariant**: permuting the input permutes the output, and
# nothing else changes. Every word gets the same vector wherever it stands. Multi-head attention
# inherits the property (each head has it, and $\mathbf W^O$ acts on each position alone), and so
# does the position-wise feed-forward block of {doc}`01_feedforward`. A whole Transformer encoder
# without positions is a function of a *bag* of words.
#
# An example from {ref}`Magnusson's lecture slides <sources-decks>` (Uppsala University, 2024)
# makes it concrete. The two sentences below contain the same five words;
# sentence 2 is sentence 1 with positions 1 and 4 swapped. We embed them with a small random
# embedding table and run them through one `MultiHeadAttention` layer ({numref}`sec-mha-module`):

# %%
seed_everything(0)
vocab = {"the": 0, "boy": 1, "hit": 2, "ball": 3}
D, H = 32, 4


def encode(sentence: str) -> torch.Tensor:
    # (1, T) token ids
    return torch.tensor([[vocab[word] for word in sentence.split()]])


# a vector per word
embed = nn.Embedding(len(vocab), D)
self_attention = MultiHeadAttention(d_model=D, n_heads=H).eval()

sentence_1, sentence_2 = "the boy hit the ball", "the ball hit the boy"
# sentence 2 = sentence 1 read in this order
swap = [0, 4, 2, 3, 1]
assert torch.equal(encode(sentence_2), encode(sentence_1)[:, swap])

with torch.no_grad():
    out_1, _ = self_attention(embed(encode(sentence_1)))  # (1, 5, D)
    out_2, _ = self_attention(embed(encode(sentence_2)))  # (1, 5, D)

# "hit" is word 2 in both
hit_difference = (out_1[0, 2] - out_2[0, 2]).abs().max().item()
print(f"largest difference between the two vectors of 'hit': {hit_difference:.1e}")
print(
    f"largest difference between out_2 and out_1 reordered: "
    f"{(out_2 - out_1[:, swap]).abs().max().item():.1e}"
)
# a permuted copy, nothing more
assert torch.allclose(out_2, out_1[:, swap], atol=1e-6)
# a pooled sentence vector: identical
assert torch.allclose(out_1.mean(1), out_2.mean(1), atol=1e-6)

# %% [markdown]
# The differences are rounding errors (adding the same numbers in another order). Whoever hit
# whom, "hit" receives the same vector, and a classifier on the averaged sentence vector could not
# tell the two sentences apart. The property does not depend on the sentence: on random inputs and
# a random permutation the layer again only permutes its output. A causal mask, by contrast, does
# break the symmetry, because position $t$ sees exactly $t + 1$ keys; decoders therefore carry a
# little order information even without an encoding, but an encoder such as BERT has none.

# %%
x = torch.randn(3, 9, D)  # (B, T, D)
# a random reordering of the positions
order = torch.randperm(9)
with torch.no_grad():
    out, _ = self_attention(x)
    out_permuted, _ = self_attention(x[:, order])
    causal, _ = self_attention(x, mask=causal_mask(9))
    causal_permuted, _ = self_attention(x[:, order], mask=causal_mask(9))
assert torch.allclose(out_permuted, out[:, order], atol=1e-5)  # equivariant
# the causal mask breaks it
assert not torch.allclose(causal_permuted, causal[:, order], atol=1e-3)
print(
    f"permutation {order.tolist()}: self-attention only permutes its output; with a "
    f"causal mask it does not"
)


# %% [markdown]
# There are two ways to put the order back. **Absolute** encodings give every position $0, 1, 2,
# \dots$ its own vector and add it to the word's embedding before the first layer, so that "boy at
# position 1" and "boy at position 4" are different inputs. **Relative** encodings leave the
# inputs alone and let the attention scores depend on the distance between the query's position
# and the key's. The next two sections build absolute encodings, the two after them relative ones.
#
# (sec-pos-sinusoidal)=
# ## Sinusoidal encodings
#
# The Transformer adds to the embedding of the word at position $pos$ a fixed vector
# $\mathrm{PE}_{pos}\in\mathbb R^{D}$ made of sines and cosines of geometrically spaced
# frequencies {cite}`vaswani2017attention`:
#
# $$
# \mathrm{PE}_{(pos,\,2i)} = \sin\!\bigl(pos \,/\, 10000^{2i/D}\bigr),\qquad
# \mathrm{PE}_{(pos,\,2i+1)} = \cos\!\bigl(pos \,/\, 10000^{2i/D}\bigr),\qquad i = 0, \dots, D/2 - 1 .
# $$
#
# Write $\omega_i = 10000^{-2i/D}$ for the frequency of pair $i$. Features $2i$ and $2i+1$ are then
# the point $(\sin pos\,\omega_i,\ \cos pos\,\omega_i)$ on the unit circle, which turns by
# $\omega_i$ radians from one position to the next. The first pair turns by one radian per position
# and repeats every $2\pi \approx 6.3$ positions; each later pair turns more slowly, down to the
# last one, whose wavelength is close to $2\pi\cdot 10000$. Like the hands of a clock, the fast
# pairs tell neighbouring positions apart and the slow pairs say roughly where in a long sequence
# we are. The table has no parameters, and it is defined for every position, including ones longer
# than any training sequence.
#
# `sinusoidal_encoding` builds the table; `SinusoidalPositionalEncoding` is the module that adds
# its first $T$ rows to a $(B, T, D)$ input. The table is a *buffer*, not a parameter: it moves to
# the GPU with the module and is never trained. It is also *non-persistent*, that is left out of
# the `state_dict`, because it can always be recomputed from `d_model` and `max_len`. The angles
# are computed in float64, because $pos\,\omega_0 = pos$ radians loses precision in float32 at
# large positions.

# %% tags=["export"]
def _check_length(T: int, max_len: int) -> None:
    if T > max_len:
        raise ValueError(
            f"got a sequence of length T = {T} but this model was built "
            f"for at most max_len = {max_len} positions; build it with a "
            f"larger max_len (or cut the sequence into pieces of at most "
            f"max_len tokens)"
        )


def _check_input(x, d_model: int) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != d_model:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x: expected shape (B, T, d_model={d_model}), got {got}")


def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The (max_len, D) table PE[pos, 2i] = sin(pos·ω_i), PE[pos, 2i+1] = cos(pos·ω_i).

    ω_i = 1 / 10000^(2i/D) for i = 0 ... D/2 - 1: each adjacent pair of features (2i,
    2i+1) is a point on a circle that turns by ω_i radians per position. Computed in
    float64 (so that far positions keep their accuracy) and returned as float32.
    """
    check_positive_int("max_len", max_len)
    check_positive_int("d_model", d_model)
    if d_model % 2 != 0:
        raise ValueError(
            f"d_model: expected an even number (features come in sin/cos pairs), "
            f"got {d_model}"
        )
    # (max_len, 1)
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    # (D/2,) = 0, 2, 4, ...
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    # (D/2,) 1 / 10000^(2i/D)
    omega = torch.exp(-two_i * math.log(10000.0) / d_model)
    # (max_len, D/2)
    angle = position * omega
    # (max_len, D/2, 2)
    pe = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1)
    # (max_len, D) sin, cos, sin, ...
    return pe.flatten(-2).float()


class SinusoidalPositionalEncoding(nn.Module):
    """x + PE[:T]: the fixed positions of the original Transformer; no parameters.

    x (B, T, D) -> (B, T, D). The table is a non-persistent buffer: it moves with
    ``.to(device)`` but is not saved in the state dict (it is recomputed from d_model
    and max_len). Scaling the token embeddings by √D, and dropout on the sum, are the
    caller's business.
    """

    def __init__(self, d_model: int, max_len: int = 5000):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        # (max_len, D)
        self.register_buffer(
            "pe", sinusoidal_encoding(max_len, d_model), persistent=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.d_model)
        T = x.shape[1]
        _check_length(T, self.max_len)
        # (B, T, D) + (T, D)
        return x + self.pe[:T].to(x.dtype)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"


# %% [markdown]
# Position 0 is $\sin 0 = 0$ and $\cos 0 = 1$ in every pair, and position 1 has
# $(\sin\omega_i, \cos\omega_i)$ in pair $i$:

# %%
pe = sinusoidal_encoding(max_len=1000, d_model=64)  # (1000, 64)
# (32,) the frequencies ω_i
omega = 10000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
print(f"table {tuple(pe.shape)}; PE[0, :8] = {pe[0, :8].tolist()}")
print(
    f"PE[1, :4] = {[round(v, 4) for v in pe[1, :4].tolist()]}  (sin 1, cos 1, sin "
    f"ω_1, cos ω_1)"
)
assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * 32))
expected_1 = torch.stack([torch.sin(omega), torch.cos(omega)], dim=-1).flatten().float()
assert torch.allclose(pe[1], expected_1, atol=1e-7)

# %% [markdown]
# Drawn as a heatmap, one row per position, the fast pairs on the left change from one row to the
# next and the slow pairs on the right barely move over the first hundred positions. The right panel
# plots the dot product $\mathrm{PE}_{pos}\cdot\mathrm{PE}_{pos'}$ of every two positions: it is
# largest on the diagonal, decreases (with ripples) away from it, and is constant along every
# diagonal, a first sign that the table encodes *distances*.

# %% tags=["hide-input"] mystnb={"image": {"alt": "Two heat maps: left, the sinusoidal encoding of the first 100 positions, fast features changing row to row on the left, slow ones barely moving on the right; right, the dot products of every two positions, largest on the diagonal and constant along each diagonal."}}
fig, (ax_pe, ax_dot) = plt.subplots(1, 2, figsize=(10, 3.8))
image = ax_pe.imshow(pe[:100], aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
ax_pe.set(
    xlabel="feature",
    ylabel="position",
    title="sinusoidal encoding PE (first 100 positions)",
)
fig.colorbar(image, ax=ax_pe)
similarity = pe[:100] @ pe[:100].T  # (100, 100)
image = ax_dot.imshow(similarity, cmap="viridis")
ax_dot.set(xlabel="position", ylabel="position", title="dot products PE_pos · PE_pos'")
fig.colorbar(image, ax=ax_dot)
plt.tight_layout()
plt.show()


# %% [markdown]
# (sec-pos-offsets)=
# ### A fixed offset is a fixed rotation
#
# The Transformer paper motivates the sinusoids with one property: for any fixed offset $k$,
# $\mathrm{PE}_{pos+k}$ is a *linear function* of $\mathrm{PE}_{pos}$, the same function for
# every $pos$. The addition formulas show it, pair by pair:
#
# $$
# \begin{pmatrix}\sin\,(pos+k)\,\omega_i \\ \cos\,(pos+k)\,\omega_i\end{pmatrix}
# =
# \begin{pmatrix}\cos k\omega_i & \sin k\omega_i \\ -\sin k\omega_i & \cos k\omega_i\end{pmatrix}
# \begin{pmatrix}\sin pos\,\omega_i \\ \cos pos\,\omega_i\end{pmatrix}.
# $$
#
# The $2\times2$ matrix is a rotation by $k\omega_i$ and depends on $k$, not on $pos$. Stacking one
# such block per pair gives a block-diagonal $D\times D$ matrix $\mathbf M_k$ with
# $\mathrm{PE}_{pos+k} = \mathbf M_k\,\mathrm{PE}_{pos}$ for all positions. A linear layer could
# therefore learn to "look $k$ positions back" once and for all. The cell builds $\mathbf M_k$ and
# checks the identity on all 1000 positions of the table for several offsets; it also checks that
# $\mathbf M_k$ is a rotation ($\mathbf M_k\mathbf M_k^\top = \mathbf I$) and that $k$ steps of one
# position are one step of $k$ positions, $\mathbf M_k = \mathbf M_1^k$.

# %%
def offset_matrix(k: int, d_model: int) -> torch.Tensor:
    """The block-diagonal (D, D) matrix M_k with PE[pos + k] = M_k PE[pos] for
    every pos."""
    # (D/2,)
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i, w in enumerate(omega.tolist()):
        c, s = math.cos(k * w), math.sin(k * w)
        M[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor(
            [[c, s], [-s, c]], dtype=torch.float64
        )
    return M


pe64 = pe.double()  # (1000, 64)
for k in [1, 2, 7, 50, 333, 999]:
    M_k = offset_matrix(k, 64)
    # row pos = M_k PE[pos], (1000 - k, 64)
    shifted = pe64[:-k] @ M_k.T
    error = (shifted - pe64[k:]).abs().max().item()
    print(
        f"k = {k:>3}: max |M_k PE[pos] - PE[pos + k]| over {1000 - k:>3} positions "
        f"= {error:.1e}"
    )
    assert error < 1e-5
    assert torch.allclose(M_k @ M_k.T, torch.eye(64, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(
        M_k, torch.linalg.matrix_power(offset_matrix(1, 64), k), atol=1e-9
    )

# %% [markdown]
# The dot products in the heatmap follow from the same formula. Each pair contributes
# $\sin a\sin b + \cos a\cos b = \cos(a - b)$, so
# $\mathrm{PE}_{pos}\cdot\mathrm{PE}_{pos+k} = \sum_i \cos k\omega_i$, a function of $k$ alone:

# %%
for k in [0, 1, 5, 40]:
    # (1000 - k,) one per pos
    dots = (pe64[: 1000 - k] * pe64[k:]).sum(-1)
    expected = torch.cos(k * omega).sum()
    assert torch.allclose(dots, expected.expand_as(dots), atol=1e-5)
    print(
        f"k = {k:>2}: PE_pos · PE_pos+k = {expected.item():7.3f} for all "
        f"{1000 - k} positions"
    )

# %% [markdown]
# In the Transformer the table is simply *added* to the token embeddings, which the paper
# multiplies by $\sqrt{D}$ first, so that the encoding does not drown the words; dropout then acts
# on the sum. `SinusoidalPositionalEncoding` does only the addition and leaves the scaling and the
# dropout to the model. With it, the two sentences of the previous section finally get different
# vectors for "hit":

# %%
positions = SinusoidalPositionalEncoding(d_model=D, max_len=64)
print(
    positions,
    "| parameters:",
    count_parameters(positions),
    "| state_dict keys:",
    list(positions.state_dict()),
)
with torch.no_grad():
    out_1, _ = self_attention(positions(embed(encode(sentence_1))))
    out_2, _ = self_attention(positions(embed(encode(sentence_2))))
hit_difference = (out_1[0, 2] - out_2[0, 2]).abs().max().item()
print(f"with positions, the two vectors of 'hit' differ by up to {hit_difference:.3f}")
assert not torch.allclose(out_2, out_1[:, swap], atol=1e-3)
assert count_parameters(positions) == 0 and len(positions.state_dict()) == 0


# %% [markdown]
# (sec-pos-learned)=
# ## Learned absolute positions
#
# The simpler alternative is to *learn* the position vectors: a table $\mathbf E$ with one
# trainable row per position, initialised at random and trained with the rest of the model, exactly
# like a word embedding. The Transformer paper tried it and found results nearly identical to the
# sinusoids (row (E) of its Table 3) {cite}`vaswani2017attention`. BERT uses learned positions, with
# room for 512 of them {cite}`devlin2019bert`, and adds them to the token and segment embeddings.
#
# `LearnedPositionalEmbedding` has the same interface as `SinusoidalPositionalEncoding`: it takes the
# $(B, T, D)$ embeddings and returns them plus rows $0, \dots, T-1$ of its table, so a model can
# switch from one to the other without other changes. Its table is an `nn.Embedding` called
# `embedding`, initialised from a normal distribution with standard deviation 0.02 as in BERT.

# %% tags=["export"]
class LearnedPositionalEmbedding(nn.Module):
    """x + E[:T] with a trained table E of max_len rows: BERT's absolute positions.

    x (B, T, D) -> (B, T, D), the same interface as
    :class:`SinusoidalPositionalEncoding`. Position t of every sequence gets row t of
    ``self.embedding``; a sequence longer than ``max_len`` is a ValueError (a table has
    no row for a position it never saw).
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        check_positive_int("max_len", max_len)
        check_positive_int("d_model", d_model)
        self.max_len, self.d_model = max_len, d_model
        # row t = the vector of position t
        self.embedding = nn.Embedding(max_len, d_model)
        # BERT's initialiser range
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.d_model)
        T = x.shape[1]
        _check_length(T, self.max_len)
        positions = torch.arange(T, device=x.device)  # (T,) 0, 1, ..., T-1
        return x + self.embedding(positions).to(x.dtype)  # (B, T, D) + (T, D)


# %% [markdown]
# BERT-base's table has 512 rows of width 768. That is a visible share of the model, and, more
# importantly, a hard limit: a table has no row for position 512. A bare `nn.Embedding` would fail
# with an indexing error that names neither the length nor the limit; the module checks first and
# says what went wrong:

# %%
bert_positions = LearnedPositionalEmbedding(max_len=512, d_model=768)
n_parameters = count_parameters(bert_positions)
print(
    f"BERT-base position table: {tuple(bert_positions.embedding.weight.shape)}, "
    f"{n_parameters:,} parameters"
)
assert n_parameters == 512 * 768

# (B, T, D) with T = 600 > 512
too_long = torch.zeros(1, 600, 768)
try:
    bert_positions(too_long)
except ValueError as error:
    message = str(error)
    print(f"ValueError: {message}")
assert "600" in message and "512" in message

# the bare table, for contrast
try:
    bert_positions.embedding(torch.arange(600))
except IndexError as error:
    print(f"the bare nn.Embedding instead says -- IndexError: {error}")


# %% [markdown]
# The usual remedies are to cut long texts into windows of at most 512 tokens, or to build a model
# with a longer table and train the new rows. Past its maximum length a learned table cannot even
# be *evaluated*; the sinusoids can, but the model has never seen those rows, which
# {ref}`sec-pos-experiment` puts to the test.
#
# (sec-pos-relative)=
# ## Relative position biases
#
# What a word usually needs is not its absolute position but *how far away* another word is: the
# previous word, the next one, a word three to the left. Shaw et al. proposed to give attention
# this information directly: the score between query $t$ and key $s$ gets a learned term that
# depends on the clipped distance $\operatorname{clip}(s - t, -K, K)$ {cite}`shaw2018relative`.
# Their version adds learned vectors to the keys (and values); the simplified form used here
# learns one *scalar* per head and distance, as T5 does {cite}`raffel2020exploring`, and adds it
# to the scores before the softmax:
#
# $$
# \alpha_{ts} = \operatorname{softmax}_s\!\Bigl(\frac{\mathbf q_t\cdot\mathbf k_s}{\sqrt{D_h}} + b_{h}\bigl(\operatorname{clip}(s - t, -K, K)\bigr)\Bigr).
# $$
#
# Each head has $2K + 1$ biases, whatever the sequence length. Every distance beyond $K$ shares
# one bias, so any length can be processed: the encoding extrapolates by construction. T5 differs
# in two ways. It does not clip but *buckets* the distances: 32 buckets, exact for small distances
# and logarithmically wider up to 128, beyond which all distances share the last bucket; and one
# set of biases, learned once, serves all of T5's layers. Nothing is added
# to the inputs; the information enters in every layer's attention.
#
# `relative_positions(T, S)` is the $(T, S)$ matrix of distances $s - t$ (for $S > T$ the queries
# are the last $T$ positions, as in `causal_mask`, {numref}`sec-attention-masks`), and
# `RelativePositionBias(n_heads,
# max_distance)` turns it into an $(H, T, S)$ float bias. It starts at zero, with no preference for
# any distance, and learns the rest.

# %% tags=["export"]
def relative_positions(T: int, S: int | None = None, device=None) -> torch.Tensor:
    """The (T, S) integer matrix of distances s - t from query t to key s.

    With S > T the queries are the *last* T of the S positions (as in ``causal_mask``),
    so the distance is s - (t + S - T) and the last query sits at distance 0 from
    the last key.
    """
    S = T if S is None else S
    check_positive_int("T", T)
    check_positive_int("S", S)
    t = torch.arange(T, device=device)[:, None] + (S - T)  # (T, 1) query positions
    s = torch.arange(S, device=device)[None, :]  # (1, S) key positions
    # (T, S) negative = key to the left
    return s - t


class RelativePositionBias(nn.Module):
    """A learned scalar per head and clipped distance, added to the attention scores.

    bias[h, t, s] = b[h, clip(s - t, -max_distance, max_distance)]: 2·max_distance + 1
    numbers per head, shared by all positions (a simplified Shaw et al. / T5 bias).
    ``forward(T, S)`` returns a float (H, T, S) tensor to add to q kᵀ/√Dh before the
    softmax. Starts at zero, that is with no preference for any distance.
    """

    def __init__(self, n_heads: int, max_distance: int):
        super().__init__()
        check_positive_int("n_heads", n_heads)
        check_positive_int("max_distance", max_distance)
        self.n_heads, self.max_distance = n_heads, max_distance
        # row = distance + max_distance
        self.bias = nn.Embedding(2 * max_distance + 1, n_heads)
        nn.init.zeros_(self.bias.weight)

    def forward(self, T: int, S: int | None = None) -> torch.Tensor:
        # (T, S)
        distance = relative_positions(T, S, device=self.bias.weight.device)
        bucket = (
            distance.clamp(-self.max_distance, self.max_distance) + self.max_distance
        )
        return self.bias(bucket).permute(2, 0, 1)  # (T, S, H) -> (H, T, S)

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, max_distance={self.max_distance}"


# %% [markdown]
# The distances for five positions, and a bias with four hand-set heads: head 0 prefers the
# previous word, head 1 its neighbourhood (the bias falls by 0.5 per step of distance), head 2 the
# next word, head 3 has no positional preference at all. Each head's bias is constant along the
# diagonals, which is exactly what "depends only on $s - t$" looks like.

# %%
print(f"relative_positions(5) = s - t:\n{relative_positions(5)}")

relative = RelativePositionBias(n_heads=4, max_distance=6)
# bucket j holds distance j - 6
distances = torch.arange(-6, 7, dtype=torch.float32)
with torch.no_grad():
    # head 0: the previous word
    relative.bias.weight[:, 0] = 4.0 * (distances == -1)
    # head 1: the neighbourhood
    relative.bias.weight[:, 1] = -0.5 * distances.abs()
    # head 2: the next word
    relative.bias.weight[:, 2] = 4.0 * (distances == 1)
    # head 3: content only
    relative.bias.weight[:, 3] = 0.0
# (H, T, S) = (4, 12, 12)
bias = relative(12).detach()
print(
    f"bias {tuple(bias.shape)}; {count_parameters(relative)} parameters for any length"
)
# constant along every diagonal
assert torch.equal(bias[:, 1:, 1:], bias[:, :-1, :-1])
# distance -1; distance 11 clipped to 6
assert bias[0, 5, 4] == 4.0 and bias[1, 0, 11] == -3.0

# %% tags=["hide-input"] mystnb={"image": {"alt": "Four heat maps of a hand-set relative position bias, query position down and key position across, for heads that prefer the previous word, the neighbourhood, the next word and nothing; each bias is constant along the diagonals."}}
titles = [
    "head 0: previous word",
    "head 1: neighbourhood",
    "head 2: next word",
    "head 3: none",
]
fig, axes = plt.subplots(1, 4, figsize=(13, 3.4))
for h, ax in enumerate(axes):
    image = ax.imshow(bias[h], cmap="RdBu", vmin=-4, vmax=4)
    ax.set_title(titles[h], fontsize=10)
    ax.set_xlabel("key position s")
axes[0].set_ylabel("query position t")
fig.colorbar(image, ax=axes, shrink=0.8)
plt.show()


# %% [markdown]
# Our attention function of {doc}`03_attention` accepts bool masks only, on purpose: one mask
# representation, applied once. A bias is a second, different input, so the chapter writes biased
# attention out as teaching code: the scores get the bias, then `masked_softmax` applies the mask.
# PyTorch's fused `F.scaled_dot_product_attention` accepts a *float* `attn_mask`, which it adds to
# the scores; that is a bias, and it serves as the reference. A bool mask combines with it by
# turning its False entries into $-\infty$.

# %%
def biased_attention(q, k, v, bias=None, mask=None):
    """softmax(q kᵀ/√Dh + bias) v, restricted by a bool mask (True = may attend).

    q (..., T, Dh), k and v (..., S, Dh); bias float, broadcastable to (..., T, S).
    Returns (output (..., T, Dh), weights (..., T, S)).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    if bias is not None:
        # (..., T, S) position enters here
        scores = scores + bias
    weights = masked_softmax(scores, mask)  # (..., T, S)
    return weights @ v, weights  # (..., T, Dh)


seed_everything(1)
q, k, v = (torch.randn(2, 4, 12, 8) for _ in range(3))  # (B, H, T, Dh)
plain, plain_weights = biased_attention(q, k, v)
# bias (H, T, S) broadcasts over B
biased, biased_weights = biased_attention(q, k, v, bias=bias)
reference = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
print(
    f"biased attention vs F.scaled_dot_product_attention(attn_mask=bias): "
    f"max difference {(biased - reference).abs().max().item():.1e}"
)
assert torch.allclose(biased, reference, atol=1e-5)
# no bias: chapter 3's attention
assert torch.allclose(plain, scaled_dot_product_attention(q, k, v)[0], atol=1e-6)

mask = causal_mask(12)  # (T, S) bool
masked, _ = biased_attention(q, k, v, bias=bias, mask=mask)
reference = F.scaled_dot_product_attention(
    q, k, v, attn_mask=bias.masked_fill(~mask, float("-inf"))
)
assert torch.allclose(masked, reference, atol=1e-5)
print(
    f"with a causal mask as well: max difference "
    f"{(masked - reference).abs().max().item():.1e}"
)

# %% [markdown]
# The effect on the weights of the first sequence, with the same random queries and keys: without
# the bias every head spreads its attention according to content alone; with it, head 0 attends
# mostly to the previous position, head 1 to a band around the diagonal, head 2 to the next
# position, and head 3 is unchanged.

# %% tags=["hide-input"] mystnb={"image": {"alt": "Two rows of four attention maps for the same random queries and keys: above, without the bias, spread by content alone; below, with it, head 0 on the previous position, head 1 on a band around the diagonal, head 2 on the next position, head 3 unchanged."}}
fig, axes = plt.subplots(2, 4, figsize=(12, 6))
for h in range(4):
    axes[0, h].imshow(plain_weights[0, h], cmap="Blues", vmin=0, vmax=1)
    axes[0, h].set_title(f"head {h}, no bias")
    axes[1, h].imshow(biased_weights[0, h], cmap="Blues", vmin=0, vmax=1)
    axes[1, h].set_title(titles[h])
    axes[1, h].set_xlabel("key position s")
axes[0, 0].set_ylabel("query position t")
axes[1, 0].set_ylabel("query position t")
plt.tight_layout()
plt.show()
previous_share = biased_weights[0, 0].diagonal(-1).mean().item()
print(
    f"head 0, mean weight on the previous position: "
    f"{plain_weights[0, 0].diagonal(-1).mean().item():.2f} without the bias, "
    f"{previous_share:.2f} with it"
)
# a zero bias changes nothing
assert torch.equal(biased_weights[:, 3], plain_weights[:, 3])


# %% [markdown]
# (sec-pos-rope)=
# ## Rotary position embeddings
#
# Rotary position embeddings (RoPE) {cite}`su2021roformer` get relative positions without any
# bias table, by *rotating* queries and keys. Cut the query $\mathbf q$ at position $m$ into pairs of
# features, $(q_{2i}, q_{2i+1})$, and rotate pair $i$ by the angle $m\theta_i$, with the
# frequencies of the sinusoidal table, $\theta_i = 10000^{-2i/D_h}$; do the same to the key
# $\mathbf k$ at position $n$ with the angle $n\theta_i$. Write $\mathbf R(\alpha)$ for the
# rotation by $\alpha$ and $\mathbf R_m$ for the block-diagonal matrix that rotates every pair.
# Rotations satisfy $\mathbf R(\alpha)^\top = \mathbf R(-\alpha)$ and
# $\mathbf R(\alpha)\mathbf R(\beta) = \mathbf R(\alpha + \beta)$, so
#
# $$
# (\mathbf R_m \mathbf q)^\top (\mathbf R_n \mathbf k)
# = \mathbf q^\top \mathbf R_m^\top \mathbf R_n\, \mathbf k
# = \mathbf q^\top \mathbf R_{n - m}\, \mathbf k .
# $$
#
# The score of a rotated query and a rotated key depends on the two positions only through their
# difference. Unlike the sinusoidal table, nothing is added to the word vectors; unlike the bias,
# nothing is learned; and unlike both, position and content interact in the score. RoPE is applied
# inside every attention layer, after the projections, to the queries and keys of each head; the
# values are left alone.
#
# `RotaryEmbedding(d_head)` rotates a tensor of shape $(\dots, T, D_h)$, by default at positions
# $0, \dots, T-1$. It pairs **adjacent** features $(2i, 2i+1)$, as the RoFormer paper, Meta's
# reference code for LLaMA {cite}`touvron2023llama` and our sinusoidal table do. GPT-NeoX and
# Hugging Face's port of LLaMA pair feature $i$ with feature $i + D_h/2$ instead ("rotate half"):
# the same rotations applied to a permuted vector, checked below. Moving weights between the two
# layouts permutes the rows of $\mathbf W^Q$ and $\mathbf W^K$, which is what Hugging Face's
# script for converting Meta's LLaMA weights does.

# %% tags=["export:blocks.rotary"]
def _check_positions(positions, x) -> None:
    """Raise ValueError unless positions broadcasts to x.shape[:-1] = (..., T)."""
    if not isinstance(positions, torch.Tensor) or positions.dtype == torch.bool:
        got = (
            positions.dtype
            if isinstance(positions, torch.Tensor)
            else type(positions).__name__
        )
        raise ValueError(f"positions: expected an integer or float tensor, got {got}")
    try:
        fits = tuple(torch.broadcast_shapes(positions.shape, x.shape[:-1])) == tuple(
            x.shape[:-1]
        )
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"positions: expected a shape that broadcasts to x.shape[:-1] "
            f"= {tuple(x.shape[:-1])} (e.g. (T,) = ({x.shape[-2]},), or "
            f"(B, 1, T) for per-sequence positions with x of shape (B, H, "
            f"T, Dh)), got {tuple(positions.shape)}"
        )


class RotaryEmbedding(nn.Module):
    """RoPE (RoFormer): rotate each pair of features (2i, 2i+1) by the angle m·θ_i.

    θ_i = base^(-2i/Dh), i = 0 ... Dh/2 - 1, and m is the position. Apply it to the
    queries and keys of every head (not to the values); then q_m·k_n depends on m and n
    only through m - n. Pairs are *adjacent* features, as in the RoFormer paper and in
    our sinusoidal table; GPT-NeoX and Hugging Face's LLaMA pair feature i with feature
    i + Dh/2 instead, which is the same rotation after a permutation of the features.

    ``forward(x, positions=None)``: x (..., T, Dh); positions (T,) (default 0 ... T-1)
    or any shape that broadcasts to x.shape[:-1], integers or floats. Returns a tensor
    shaped like x.
    """

    def __init__(self, d_head: int, base: float = 10000.0):
        super().__init__()
        check_positive_int("d_head", d_head)
        if d_head % 2 != 0:
            raise ValueError(
                f"d_head: expected an even number (features are rotated in pairs), "
                f"got {d_head}"
            )
        if isinstance(base, bool) or not isinstance(base, (int, float)) or base <= 1:
            raise ValueError(f"base: expected a number > 1, got {base!r}")
        self.d_head, self.base = d_head, float(base)
        # (Dh/2,)
        theta = self.base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
        self.register_buffer("theta", theta.float(), persistent=False)

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.shape[-1] != self.d_head:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"x: expected shape (..., T, d_head={self.d_head}), got {got}"
            )
        if positions is None:
            # (T,)
            positions = torch.arange(x.shape[-2], device=x.device)
        _check_positions(positions, x)
        # (..., T, Dh/2)
        angle = positions.to(self.theta.dtype)[..., None] * self.theta
        cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
        # (..., T, Dh/2) each
        x_even, x_odd = x[..., 0::2], x[..., 1::2]
        # 2-D rotation of
        rotated = torch.stack(
            [
                x_even * cos - x_odd * sin,
                # every pair
                x_even * sin + x_odd * cos,
            ],
            dim=-1,
        )
        # (..., T, Dh)
        return rotated.flatten(-2)

    def extra_repr(self) -> str:
        return f"d_head={self.d_head}, base={self.base}"


# %% [markdown]
# A rotation does not change lengths, so RoPE preserves the norm of every query and key. For the
# main property, the cell rotates one query and one key to every pair of positions $(m, n)$ with
# $m, n < 64$ and forms the $64\times64$ matrix of their dot products: it is constant along every
# diagonal $m - n = \text{const}$. Shifting all positions by the same amount, here 1000, changes
# none of the scores.

# %%
seed_everything(2)
rope = RotaryEmbedding(d_head=16)
print(rope)
# (B, H, T, Dh)
x = torch.randn(3, 4, 10, 16)
# positions 0 ... 9
rotated = rope(x)
assert rotated.shape == x.shape
# lengths unchanged
assert torch.allclose(rotated.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
# position 0: angle 0
assert torch.equal(rotated[..., 0, :], x[..., 0, :])

# one query, one key
q, k = torch.randn(16), torch.randn(16)
positions = torch.arange(64)
# (64, Dh): q at positions m = 0 ... 63
q_at = rope(q.expand(64, 16), positions)
# (64, Dh): k at positions n = 0 ... 63
k_at = rope(k.expand(64, 16), positions)
# (64, 64): entry (m, n)
scores = q_at @ k_at.T
for offset in range(-63, 64):
    # all (m, n) with n - m = offset
    diagonal = scores.diagonal(offset)
    assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-4)
q_far, k_far = (
    rope(q.expand(64, 16), positions + 1000),
    rope(k.expand(64, 16), positions + 1000),
)
shift_error = (q_far @ k_far.T - scores).abs().max().item()
print(
    f"<R_m q, R_n k> is constant along all 127 diagonals; shifting every position by "
    f"1000 changes the scores by at most {shift_error:.1e}"
)
assert shift_error < 1e-3


# %% [markdown]
# The shift check tolerates a little more because the angles are computed in float32: at position
# 1000 the angle $1000\,\theta_0$ carries a rounding error of about $10^{-4}$ radians.
#
# Two independent ways of writing the same rotation check the implementation. Read each pair as a
# complex number $z_i = x_{2i} + \mathrm i\,x_{2i+1}$; rotating it by $m\theta_i$ is the
# multiplication $z_i\,e^{\mathrm i m\theta_i}$, which is how the RoFormer paper and several
# libraries write RoPE. And the "rotate half" layout of GPT-NeoX and Hugging Face's LLaMA must
# give our result once the features are permuted so that pair $i$ sits at $(i, i + D_h/2)$:

# %%
def rope_complex(x, positions, base=10000.0):
    """RoPE as complex multiplication: pair i of x becomes a complex number, times
    e^{i m θ_i}."""
    d_head = x.shape[-1]
    # (Dh/2,)
    theta = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    turn = torch.polar(
        torch.ones(len(positions), d_head // 2, dtype=torch.float64),
        # (T, Dh/2) e^{i m θ_i}
        positions.double()[:, None] * theta,
    )
    # (..., T, Dh/2)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d_head // 2, 2))
    # (..., T, Dh)
    return torch.view_as_real(z * turn).flatten(-2).to(x.dtype)


def rope_rotate_half(x, positions, base=10000.0):
    """The GPT-NeoX / Hugging Face LLaMA layout: feature i is paired with feature
    i + Dh/2."""
    d_head = x.shape[-1]
    # (Dh/2,)
    theta = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    # (T, Dh)
    angle = torch.cat([theta, theta]) * positions.double()[:, None]
    first, second = x[..., : d_head // 2], x[..., d_head // 2 :]
    # (..., T, Dh)
    rotate_half = torch.cat([-second, first], dim=-1)
    return x * torch.cos(angle).to(x.dtype) + rotate_half * torch.sin(angle).to(x.dtype)


positions = torch.arange(10)
complex_error = (rope(x, positions) - rope_complex(x, positions)).abs().max().item()
# (0, 2, ..., 14, 1, 3, ..., 15)
to_halves = torch.cat([torch.arange(0, 16, 2), torch.arange(1, 16, 2)])
# permute, rotate in halves ...
halves = rope_rotate_half(x[..., to_halves], positions)
# ... permute back
halves_error = (
    (halves[..., to_halves.argsort()] - rope(x, positions)).abs().max().item()
)
print(
    f"RotaryEmbedding vs complex multiplication: {complex_error:.1e}; vs rotate-half "
    f"layout: {halves_error:.1e}"
)
assert complex_error < 1e-5 and halves_error < 1e-5

# %% [markdown]
# How large is $\langle \mathbf R_m\mathbf q, \mathbf R_n\mathbf k\rangle$ as the distance grows? For
# $\mathbf q = \mathbf k$ the score is largest at distance 0, where no rotation separates them. Away
# from it the pairs turn at different speeds and their contributions fall out of step: the score
# oscillates at a lower level, a tendency the RoFormer paper calls long-term decay
# {cite}`su2021roformer`. Queries and keys that a trained model produces need not be equal, and the
# model can learn to prefer any distance it likes.

# %% mystnb={"image": {"alt": "Line plot of the score between a query and a key of ones rotated by RoPE against their distance: largest at distance 0, then oscillating at a lower level, the long-term decay."}}
rope_64 = RotaryEmbedding(d_head=64)
# q = k = (1, ..., 1)
ones = torch.ones(1, 64)
distances = torch.arange(0, 512)
score_by_distance = (
    rope_64(ones, torch.zeros(1)) * rope_64(ones.expand(512, 64), distances)
).sum(-1)  # (512,)
assert (
    score_by_distance.argmax().item() == 0
    and abs(score_by_distance[0].item() - 64) < 1e-4
)

fig, ax = plt.subplots(figsize=(7, 2.8))
ax.plot(distances, score_by_distance)
ax.set(
    xlabel="distance n - m",
    ylabel="<R_m q, R_n k>",
    title="q = k = (1, ..., 1), D_h = 64",
)
plt.show()

# %% [markdown]
# Inside attention, RoPE is one extra line per tensor: rotate `q` and `k` of every head, then
# attend as before. Because only distances matter, shifting all positions of a sequence leaves the
# attention weights unchanged, which absolute encodings do not achieve:

# %%
seed_everything(3)
q, k, v = (torch.randn(2, 4, 12, 16) for _ in range(3))  # (B, H, T, Dh)
# positions 0 ... 11
_, weights = scaled_dot_product_attention(rope(q), rope(k), v)
# positions 37 ... 48
shifted = torch.arange(12) + 37
_, weights_shifted = scaled_dot_product_attention(rope(q, shifted), rope(k, shifted), v)
print(
    f"attention weights at positions 0..11 and 37..48 differ by at most "
    f"{(weights - weights_shifted).abs().max().item():.1e}"
)
assert torch.allclose(weights, weights_shifted, atol=1e-5)

# %% [markdown]
# (sec-pos-experiment)=
# ## An experiment: a task that needs word order
#
# Which scheme works best is an empirical question, and the answer depends on the task. Here is a
# task that cannot be solved without order and that tests extrapolation: the model reads a random
# sequence of tokens and must output, at every position $t \ge 1$, the token at position $t-1$.
# The model is deliberately small: an embedding, *one* multi-head self-attention layer (no mask,
# as in BERT), and a linear layer to the vocabulary. Five versions differ only in their positions:
#
# - `none`: no positional information at all;
# - `sinusoidal`: `SinusoidalPositionalEncoding` added to the embeddings;
# - `learned`: `LearnedPositionalEmbedding` with `max_len` equal to the training length;
# - `relative`: `RelativePositionBias` added to the scores, with `max_distance` 8;
# - `rope`: `RotaryEmbedding` applied to the queries and keys.
#
# Each is trained on sequences of length 16 and evaluated on fresh sequences of length 16, 32
# and 64. The attention layer reuses the projections of a `MultiHeadAttention` module
# ({doc}`04_multihead_attention`) and calls
# `biased_attention` so that the relative bias and the rotation can get in.

# %%
VOCAB, TRAIN_LENGTH, TEST_LENGTHS = 20, 16, (16, 32, 64)
SCHEMES = ["none", "sinusoidal", "learned", "relative", "rope"]


class PositionTestModel(nn.Module):
    """Embedding -> one multi-head self-attention with a chosen position scheme ->
    vocabulary logits."""

    def __init__(
        self, scheme: str, vocab: int = VOCAB, d_model: int = 32, n_heads: int = 4
    ):
        super().__init__()
        self.scheme = scheme
        self.embed = nn.Embedding(vocab, d_model)
        self.absolute = {
            "sinusoidal": SinusoidalPositionalEncoding(d_model, max_len=256),
            "learned": LearnedPositionalEmbedding(TRAIN_LENGTH, d_model),
        }.get(scheme)
        # its four projections
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.relative = (
            RelativePositionBias(n_heads, max_distance=8)
            if scheme == "relative"
            else None
        )
        self.rotary = RotaryEmbedding(d_model // n_heads) if scheme == "rope" else None
        self.to_vocab = nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)  # (B, T, D)
        if self.absolute is not None:
            # (B, T, D) + positions
            x = self.absolute(x)
        H = self.attention.n_heads
        # (B, H, T, Dh)
        q = split_heads(self.attention.query(x), H)
        # (B, H, T, Dh)
        k = split_heads(self.attention.key(x), H)
        # (B, H, T, Dh)
        v = split_heads(self.attention.value(x), H)
        if self.rotary is not None:
            # rotate queries and keys
            q, k = self.rotary(q), self.rotary(k)
        # (H, T, T)
        bias = None if self.relative is None else self.relative(tokens.shape[1])
        # (B, H, T, Dh)
        heads, _ = biased_attention(q, k, v, bias=bias)
        return self.to_vocab(self.attention.output(merge_heads(heads)))  # (B, T, V)


def previous_token_loss(model, tokens):
    # (B, T-1, V) positions 1 ... T-1
    logits = model(tokens)[:, 1:]
    return F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, :-1].reshape(-1))


@torch.no_grad()
def previous_token_accuracy(model, length, generator, n=256):
    tokens = torch.randint(0, VOCAB, (n, length), generator=generator).to(device)
    # (n, length-1)
    predictions = model(tokens)[:, 1:].argmax(-1)
    return (predictions == tokens[:, :-1]).float().mean().item()


STEPS, BATCH = pick(quick=30, full=600), 64
results = {}
for scheme in progress(SCHEMES, desc="training the five models", updates=2):
    seed_everything(0)
    data = torch.Generator().manual_seed(1)
    model = PositionTestModel(scheme).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(STEPS):
        tokens = torch.randint(0, VOCAB, (BATCH, TRAIN_LENGTH), generator=data).to(
            device
        )
        loss = previous_token_loss(model, tokens)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    results[scheme] = {}
    for length in TEST_LENGTHS:
        try:
            results[scheme][length] = previous_token_accuracy(
                model, length, torch.Generator().manual_seed(2)
            )
        # learned positions past max_len
        except ValueError:
            results[scheme][length] = None

print(
    f"{STEPS} training steps on length {TRAIN_LENGTH}; accuracy (chance = "
    f"{1 / VOCAB:.2f}) at test length:"
)
print(f"{'scheme':<12}" + "".join(f"{length:>9}" for length in TEST_LENGTHS))
for scheme, accuracies in results.items():
    cells = "".join(
        f"{'error':>9}" if a is None else f"{a:>9.3f}" for a in accuracies.values()
    )
    print(f"{scheme:<12}{cells}")
# no rows past max_len
assert results["learned"][32] is None and results["learned"][64] is None
# a real budget: the clear cases
if not is_quick():
    assert results["none"][16] < 0.5
    assert all(
        results[s][16] > 0.9 for s in ["sinusoidal", "learned", "relative", "rope"]
    )

# %% [markdown]
# Reading the table from the top:
#
# - Without positions the model cannot find the previous token. Its output at position $t$ depends
#   only on the token at $t$ and on the *bag* of tokens in the sequence, so the best it can do is
#   guess one of the other tokens of the bag; whatever it reaches beyond chance comes from that.
# - At the training length, every scheme with positions solves the task (in quick mode, with only a
#   few steps, the numbers mean little).
# - The learned table cannot process sequences longer than its `max_len` at all: the model raises
#   the `ValueError` of {ref}`sec-pos-learned`.
# - The sinusoidal model *runs* on longer sequences, but positions it never saw during training are
#   vectors its layers were not fitted to, and in runs of this experiment its accuracy drops well
#   below its training-length value.
# - The relative and rotary models see only distances, which are the same at any length, so they
#   keep more of their accuracy at length 64 than the sinusoidal model does (the cell below
#   asserts it; the table prints how much they keep). The relative bias loses some as the sequence
#   grows, because every far key shares the one clipped bias, and more far keys take more of the
#   softmax's mass.
#
# The exact numbers are those printed above, from this run. One small model on one synthetic task
# is not a verdict on the schemes; it shows the mechanisms.

# %%
# the claims above, for this run
if not is_quick():
    # unseen positions hurt
    assert results["sinusoidal"][64] < results["sinusoidal"][16] - 0.2
    # far keys share one bias
    assert results["relative"][64] < results["relative"][16]
    assert min(results["relative"][64], results["rope"][64]) > results["sinusoidal"][64]
    print(
        "the relative schemes kept more of their accuracy at length 64 than the "
        "sinusoidal one"
    )

# %% [markdown]
# (sec-pos-which)=
# ## Which model uses which
#
# The schemes differ first in *where* the position enters. {numref}`fig-positions` puts the three
# places side by side, at the sizes of the experiment's models: added once to the embeddings,
# added to the scores of every attention layer, or turning the queries and keys of every
# attention layer.

# %% mystnb={"figure": {"caption": "Three places for the position signal, at the sizes of the models of {ref}`sec-pos-experiment`. Left: sinusoidal or learned encodings are added to the token embeddings once, before the first layer. Middle: a relative bias $b_{j-i}$ per head is added to the attention scores. Right: RoPE rotates every query and key by angles proportional to its position, so that their dot product depends only on the offset $m - n$.", "name": "fig-positions"}, "image": {"alt": "Three panels. Left, \"sinusoidal or learned: added to the embeddings\": token ids (B, T) go to an embedding (B, T, D); a table PE (T, D) is added to it, and the sum goes to the layers, once, at the input. Middle, \"relative bias: added to the scores\": the scores q dot k over the square root of Dh, of shape (B, H, T, S), get a bias b[j minus i] of shape (H, T, S) added before the softmax, in every attention layer. Right, \"RoPE\": q at position m and k at position n, each (B, H, T, Dh), are rotated by angles m theta i and n theta i before their dot product, which then depends only on m minus n; there are Dh/2 planes of two features, each with one angle."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import positional_encoding_diagram

positional_encoding_diagram(
    d_model=model.attention.d_model, n_heads=model.attention.n_heads
)

# %% [markdown]
# | model | positions | maximum length | where the positions enter |
# |---|---|---|---|
# | Transformer {cite}`vaswani2017attention` | sinusoidal, fixed | any (trained on its sentence lengths) | added to the embeddings |
# | BERT {cite}`devlin2019bert`, RoBERTa {cite}`liu2019roberta`, ALBERT {cite}`lan2020albert`, DistilBERT {cite}`sanh2019distilbert` | learned absolute | 512 | added to the embeddings |
# | GPT-2 {cite}`radford2019language` | learned absolute | 1024 | added to the embeddings |
# | Shaw et al. {cite}`shaw2018relative`; T5 {cite}`raffel2020exploring` | relative (vectors; scalar biases in T5) | any | in every attention layer |
# | RoFormer {cite}`su2021roformer`; GPT-NeoX, LLaMA {cite}`touvron2023llama` and most recent LLMs | rotary (RoPE) | any in principle | queries and keys of every attention layer |
#
# **Extrapolation.** A model rarely works well on sequences much longer than those it was trained
# on, whatever its encoding. Learned absolute positions stop with an error at their maximum length.
# Sinusoids can be computed for any position, but the network has never seen the far rows.
# Relative biases with clipping and RoPE depend only on distances, which is why they extrapolate
# better; even so, RoPE's slowest pairs turn by angles that training at short lengths never reached,
# and long-context versions of RoPE models are usually obtained by rescaling the angles (position
# interpolation {cite}`chen2023extending` and its successors) followed by a little training at the new length. ALiBi, which
# the last exercise builds, replaces learned biases by a fixed linear penalty on distance and was
# designed for extrapolation from the start.
#
# (sec-pos-summary)=
# ## Summary
#
# - Self-attention is permutation-equivariant: without positions, "the boy hit the ball" and "the
#   ball hit the boy" give the same vectors in another order. A causal mask breaks the symmetry
#   partly; an encoder like BERT needs an explicit encoding.
# - The sinusoidal encoding gives pair $i$ the point $(\sin pos\,\omega_i, \cos pos\,\omega_i)$ with
#   $\omega_i = 10000^{-2i/D}$. An offset $k$ is a fixed block-diagonal rotation,
#   $\mathrm{PE}_{pos+k} = \mathbf M_k\mathrm{PE}_{pos}$, checked above for every position and
#   several $k$; dot products of two positions depend only on their distance.
# - Learned absolute positions (BERT: 512 rows) work as well at training lengths, but have no row
#   past `max_len`: `LearnedPositionalEmbedding` raises a `ValueError` naming both numbers.
# - Relative position biases add a learned scalar per head and clipped distance to the scores; the
#   teaching code `biased_attention` agrees with `F.scaled_dot_product_attention` given the bias as a
#   float `attn_mask`.
# - RoPE rotates each pair of query and key features by $m\theta_i$; the score then depends only on
#   $m - n$, norms are unchanged, and the result agrees with complex multiplication and with the
#   rotate-half layout after a permutation.
# - In the experiment, relative schemes kept their accuracy on longer sequences better than
#   absolute ones; the learned table could not run there at all.
#
# From `tinybert.blocks.positional` later chapters import `sinusoidal_encoding`,
# `SinusoidalPositionalEncoding`, `LearnedPositionalEmbedding`, `relative_positions` and
# `RelativePositionBias`, and from `tinybert.blocks.rotary`, `RotaryEmbedding`.
#
# (sec-pos-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-pos-sinusoidal-table
# :difficulty: 1
# :minutes: 15
# :kind: coding
# :::
# **The sinusoidal table.** Write `sinusoidal_table(max_len, d_model)` that returns the
# $(\text{max\_len}, D)$ float tensor with $\mathrm{PE}_{(pos,2i)} = \sin(pos/10000^{2i/D})$ and
# $\mathrm{PE}_{(pos,2i+1)} = \cos(pos/10000^{2i/D})$, and raises `ValueError` for an odd
# `d_model`. Do not use `tinybert.blocks.positional`. Use no Python loop over positions or features: build
# a column of positions and a row of frequencies and let broadcasting form the $(\text{max\_len},
# D/2)$ matrix of angles.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-pos-sinusoidal-table
# :class: dropdown
# ::::
# The angles are an outer product, positions times frequencies. The sines go to the even columns
# and the cosines to the odd ones; writing them into slices `0::2` and `1::2` interleaves them.

# %% tags=["solution"]
import math

import torch


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    ### BEGIN SOLUTION
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even, got {d_model}")
    # (max_len, 1)
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    frequency = torch.exp(
        -torch.arange(0, d_model, 2, dtype=torch.float64)
        # (D/2,)
        * math.log(10000.0)
        / d_model
    )
    # (max_len, D/2)
    angle = position * frequency
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.float()
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch05 import check_sinusoidal_table

check_sinusoidal_table(sinusoidal_table)

# %% [markdown]
# :::{exercise-start}
# :label: ex-pos-rope-rotate
# :difficulty: 2
# :minutes: 30
# :kind: coding
# :::
# **RoPE by hand.** Write `rope_rotate(x, positions, base=10000.0)` for `x` of shape
# $(\dots, T, D_h)$ with even $D_h$ and integer `positions` of shape $(T,)$: rotate each adjacent
# pair of features $(2i, 2i+1)$ of the vector at position $m$ by the angle $m\theta_i$, with
# $\theta_i = \text{base}^{-2i/D_h}$, and return a tensor of the shape and dtype of `x`. Do not use
# `tinybert.blocks.rotary` and do not build a $D_h\times D_h$ matrix. The check compares with
# `RotaryEmbedding` and tests that norms are preserved and that scores depend only on $m - n$.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-pos-rope-rotate
# :class: dropdown
# ::::
# Rotating $(a, b)$ by $\alpha$ gives $(a\cos\alpha - b\sin\alpha,\ a\sin\alpha + b\cos\alpha)$.
# Slice the even and odd features, combine them with the cosines and sines of the $(T, D_h/2)$
# angles, and interleave the two results again with `stack` and `flatten`.

# %% tags=["solution"]
import torch


def rope_rotate(
    x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0
) -> torch.Tensor:
    ### BEGIN SOLUTION
    d_head = x.shape[-1]
    # (Dh/2,)
    theta = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    # (T, Dh/2)
    angle = positions.to(torch.float64)[:, None] * theta
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    # (..., T, Dh/2)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack(
        [even * cos - odd * sin, even * sin + odd * cos], dim=-1
    ).flatten(-2)
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch05 import check_rope_rotate

check_rope_rotate(rope_rotate)

# %% [markdown]
# :::{exercise-start}
# :label: ex-pos-alibi
# :difficulty: 2
# :minutes: 20
# :kind: coding
# :::
# **ALiBi, a bias without parameters.** ALiBi (attention with linear biases {cite}`press2022train`) adds to
# the scores of head $h$ a penalty proportional to the distance, with a fixed slope per head and
# nothing learned. For an encoder it is symmetric:
# $\text{bias}[h, t, s] = -m_h\,\lvert s - t\rvert$, with the geometric slopes
# $m_h = 2^{-8(h+1)/H}$ for $h = 0, \dots, H-1$ (for $H = 8$: $\tfrac12, \tfrac14, \dots,
# \tfrac1{256}$). Write `alibi_bias(n_heads, T)` returning this float $(H, T, T)$ tensor. You may
# use `relative_positions` from `tinybert.blocks.positional`. Which head attends most locally, and which
# almost uniformly? (To see it, add your bias to random scores with this chapter's
# `biased_attention` and plot the weights.)
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-pos-alibi
# :class: dropdown
# ::::
# The slopes are a geometric sequence over the heads; the distances a $(T, T)$ matrix; their
# product broadcasts to $(H, T, T)$. Head 0 has the steepest slope and therefore attends most
# locally; the last head's penalty is so gentle that it can attend almost anywhere.

# %% tags=["solution"]
import torch

from tinybert.blocks.positional import relative_positions


def alibi_bias(n_heads: int, T: int) -> torch.Tensor:
    ### BEGIN SOLUTION
    # (H,)
    slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)
    # (T, T) |s - t|
    distance = relative_positions(T).abs().float()
    # (H, T, T)
    return -slopes[:, None, None] * distance
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch05 import check_alibi_bias

check_alibi_bias(alibi_bias)

# %% [markdown]
# :::{exercise-start}
# :label: ex-pos-wavelengths
# :difficulty: 2
# :minutes: 15
# :kind: derivation
# :::
# **Wavelengths.** In the sinusoidal encoding, pair $i$ repeats after $\lambda_i$ positions. Derive
# $\lambda_i$. What are the shortest and the longest wavelength for $D = 512$ (the Transformer's
# width)? Can two different positions below 10000 receive the same vector?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-pos-wavelengths
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): $\lambda_i = 2\pi\cdot 10000^{2i/D}$; shortest $2\pi$,
# longest just under $2\pi\cdot 10000$, in a geometric progression; no repeated vector below
# 10000, argued from the slowest pair, which turns less than a full circle.
#
# Pair $i$ turns by $\omega_i = 10000^{-2i/D}$ radians per position, so it repeats after
# $\lambda_i = 2\pi/\omega_i = 2\pi\cdot10000^{2i/D}$ positions. The shortest wavelength is that of
# $i = 0$, $2\pi$; the longest that of $i = D/2 - 1$, $2\pi\cdot 10000^{(D-2)/D}$, a little below
# $2\pi\cdot 10000$. In between, the wavelengths form a geometric progression. No two positions
# below the longest wavelength share a vector: the slowest pair alone turns by less than a full
# circle over that range, so its point on the circle never comes back. For $D = 512$ the longest
# wavelength is far above 10000, so the answer to the last question is no. The cell computes the
# numbers:

# %%
D_model = 512
wavelengths = (
    2
    * math.pi
    * 10000.0 ** (torch.arange(0, D_model, 2, dtype=torch.float64) / D_model)
)
print(
    f"D = {D_model}: shortest wavelength {wavelengths[0].item():.3f}, longest "
    f"{wavelengths[-1].item():,.0f} (2π·10000 = {2 * math.pi * 10000:,.0f})"
)
# the slowest pair never repeats below 10000
assert wavelengths[-1].item() > 10000
ratios = wavelengths[1:] / wavelengths[:-1]
# a geometric progression
assert torch.allclose(ratios, ratios[0].expand_as(ratios))


# %% [markdown]
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-pos-sin-cos
# :difficulty: 3
# :minutes: 30
# :kind: derivation
# :::
# **Why sine *and* cosine?** Suppose the table used only sines, $\mathrm{PE}'_{(pos,i)} =
# \sin(pos\,\omega_i)$ for $i = 0, \dots, D - 1$. Show that $\mathrm{PE}'_{pos+k}$ is then, in
# general, *not* a fixed linear function of $\mathrm{PE}'_{pos}$. Why does that matter for
# attention? Check your answer numerically with a least-squares fit.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-pos-sin-cos
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): the addition formula shows that $\mathrm{PE}'_{pos+k}$
# needs $\cos(pos\,\omega)$, which no linear map recovers from sines alone; a shift rotates each
# (sin, cos) pair; so only the full table lets a linear projection express a fixed offset at every
# position; a least-squares check whose residual is clearly larger for the sine-only table.
#
# By the addition formula, $\sin((pos+k)\omega) = \sin(pos\,\omega)\cos k\omega +
# \cos(pos\,\omega)\sin k\omega$. With sines only, the term $\cos(pos\,\omega)$ is not in the
# table, and it cannot be recovered linearly from $\sin(pos\,\omega)$: $\sin$ takes the same value
# at $a$ and $\pi - a$, where $\cos$ has opposite signs. So no matrix that depends only on $k$ maps
# every $\mathrm{PE}'_{pos}$ to $\mathrm{PE}'_{pos+k}$. The pair (sin, cos) is the smallest set
# closed under shifts: a shift is a rotation of the pair. For attention this means a linear query or
# key projection can implement "look $k$ positions away" on the sin–cos table for every position
# at once, and not on the sine-only table. A least-squares fit of $\mathrm{PE}_{pos+k}$ on
# $\mathrm{PE}_{pos}$ over many positions finds the exact map for the real table and leaves a
# clear residual for the sine-only one:

# %%
def best_linear_shift_error(table, k):
    """Largest error of the best single matrix M with table[pos + k] ≈ M table[pos]
    for all pos."""
    source, target = table[:-k], table[k:]  # (N, D) each
    # (D, D) least squares
    solution = torch.linalg.lstsq(source, target).solution
    return (source @ solution - target).abs().max().item()


n_positions, d_small = 500, 16
# (8,)
frequencies = 10000.0 ** (-torch.arange(0, d_small, 2, dtype=torch.float64) / d_small)
sine_only = torch.sin(
    torch.arange(n_positions, dtype=torch.float64)[:, None]
    # (500, 16): 16 sines, no cosines
    * torch.cat([frequencies, frequencies * 0.5])
)
real = sinusoidal_encoding(n_positions, d_small).double()  # (500, 16)
for k in [1, 3, 10]:
    print(
        f"k = {k:>2}: best linear map, sin+cos table error "
        f"{best_linear_shift_error(real, k):.1e}, sine-only table error "
        f"{best_linear_shift_error(sine_only, k):.2f}"
    )
    assert best_linear_shift_error(real, k) < 1e-5
    assert best_linear_shift_error(sine_only, k) > 1e-2

# %% [markdown]
# ::::{solution-end}
# ::::
#
# (sec-pos-quiz)=
# ## Quiz
#
# Check what you took from this chapter. In a notebook, run the cell and answer with
# `quiz.check(question, answer)`, such as `quiz.check(1, "b")`; here, press *Check*.

# %% tags=["quiz", "remove-input"]
from tinybert.exercises.quiz import Quiz, choice, number
from tinybert.blocks.positional import sinusoidal_encoding

quiz = Quiz(
    "ch05",
    [
        choice(
            "Without positions, reordering the input of self-attention",
            [
                "reorders the output in the same way",
                "changes nothing at all in the output",
                "makes attention causal",
                "raises an error",
            ],
            answer="a",
            explain="Self-attention is permutation-equivariant.",
        ),
        number(
            "What is the shortest wavelength of the sinusoidal encoding, in positions? "
            "(2 decimals)",
            answer=6.28,
            decimals=2,
            explain="Pair 0 turns by one radian per position: 2π.",
        ),
        number(
            "sinusoidal_encoding(10, 4)[1, 1], the cosine of pair 0 at position 1? "
            "(3 decimals)",
            answer=sinusoidal_encoding(10, 4)[1, 1].item(),
            decimals=3,
            explain="cos(1 · ω₀) with ω₀ = 1.",
        ),
        choice(
            "This book's learned table of 512 rows meets position 600. What happens?",
            [
                "it wraps around to row 88",
                "it extrapolates from the last rows",
                "it reuses the last row",
                "it raises a ValueError",
            ],
            answer="d",
            explain="There is no row to read past max_len.",
        ),
        choice(
            "With RoPE, the score of a query at m and a key at n depends on",
            ["m alone", "n alone", "m − n", "m + n"],
            answer="c",
            explain="Rotating both by their positions leaves their difference.",
        ),
        choice(
            "Which encoding could not run at all on the experiment's longer sequences?",
            ["sinusoidal", "learned absolute", "relative bias", "RoPE"],
            answer="b",
            explain="Its table ends at the training length.",
        ),
    ],
)
quiz
