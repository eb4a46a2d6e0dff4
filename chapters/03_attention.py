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
#     module: blocks.attention
# ---

# %% [markdown]
# (sec-attention)=
# # Attention
#
# A word means different things in different sentences, yet a table of word vectors gives it one
# vector wherever it occurs. {term}`Attention <attention>` is the operation that fixes this: every position of a
# sequence looks at every other position, decides how relevant each one is, and takes a weighted
# average of what they offer. Stacked a dozen times, this one operation is most of what a
# Transformer, and therefore BERT, computes {cite}`vaswani2017attention`. This chapter builds it,
# measures it, and fixes the conventions (tensor shapes and masks) that the rest of the book keeps.
#
# Attention is older than the Transformer. The previous chapter ends with where it began
# ({ref}`sec-wv-road`): a recurrent translator whose decoder, before each word it writes, scores
# every state of its encoder with a small network and reads their weighted average, instead of
# one fixed-size summary of the whole source {cite}`bahdanau2015neural`. On long inputs that
# beats the summary by far, and its weights draw an alignment of source and target. This
# chapter keeps the weighted average, scores with a scaled dot product instead, and drops the
# recurrence: every position of a sequence attends to all positions of the same sequence.
#
# **What you will learn**
#
# - how {term}`queries <query>`, {term}`keys <key>` and {term}`values <value>` are three linear maps
#   of the same input, and how they combine into
#   $\operatorname{Attention}(Q, K, V) = \operatorname{softmax}(QK^\top/\sqrt{d_k})\,V$, first by hand
#   on the "Thinking Machines" example of {ref}`Sidorov's lecture slides <sources-decks>`
#   (SkillFactory), then as one function for whole batches;
# - why the scores are divided by $\sqrt{d_k}$, shown numerically;
# - {term}`padding masks <padding mask>` and {term}`causal masks <causal mask>`, the book's single
#   mask convention, and how to keep a query that may look at nothing from producing `NaN`;
# - the fast path on PyTorch's fused kernel, proved equal to the explicit one and timed against it;
# - what attention weights on a real sentence do and do not tell you;
# - the cost of attention, $O(n^2 d)$ in time and $O(n^2)$ in memory, measured.
#
# **Uses.** The softmax and `nn.Linear` of {doc}`01_feedforward`, and its `shape_of`, which
# names the shape of a refused input; the idea of word vectors and
# `load_gutenberg` and `words` from `tinybert.corpus` ({doc}`02_word_vectors`). Everything this
# chapter defines is exported to `tinybert.blocks.attention`, which the multi-head attention, Transformer
# and BERT chapters import.
#
# (sec-attention-setup)=
# ## Setup
#
# The first cell holds the imports of the module `tinybert.blocks.attention`; the second, the ones the
# teaching code needs.

# %% tags=["export"]
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from tinybert.blocks.checks import shape_of

# %%
import collections

import matplotlib.pyplot as plt
import numpy as np
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils.benchmark import Timer

from tinybert.corpus import load_gutenberg, words
from tinybert.runtime import get_device, is_quick, pick, seed_everything

device = get_device()
print(f"device: {device}, quick mode: {is_quick()}, torch {torch.__version__}")

# %% [markdown]
# (sec-attention-qkv)=
# ## Queries, keys and values
#
# Write the input sequence as a matrix $\mathbf X \in \R^{n\times d}$, one row per position (a
# word's vector). Self-attention maps every row three times, with three weight matrices learned in
# training:
#
# $$\mathbf Q = \mathbf X \mathbf W^Q,\qquad \mathbf K = \mathbf X \mathbf W^K,\qquad
# \mathbf V = \mathbf X \mathbf W^V,\qquad
# \mathbf W^Q, \mathbf W^K \in \R^{d\times d_k},\ \mathbf W^V \in \R^{d\times d_v}.$$
#
# The three roles have names borrowed from databases. The **query** $\mathbf q_i$ is what position
# $i$ is looking for; the **key** $\mathbf k_j$ is what position $j$ offers to be matched against;
# the **value** $\mathbf v_j$ is what position $j$ hands over if it is chosen. Position $i$ scores
# every position $j$ by the dot product $\mathbf q_i\cdot\mathbf k_j$, turns the scores into weights
# with a softmax, and returns the weighted average of the values. All positions at once, in matrix
# form:
#
# $$\operatorname{Attention}(\mathbf Q, \mathbf K, \mathbf V) =
# \operatorname{softmax}\!\left(\frac{\mathbf Q\mathbf K^\top}{\sqrt{d_k}}\right)\mathbf V ,$$
#
# with the softmax taken along each row. Because the queries and keys come from different matrices,
# a word can look for something other than itself (a verb for its subject, a pronoun for its
# antecedent); because the values come from a third matrix, what a word offers can differ from how
# it is found.
#
# (sec-attention-walkthrough)=
# ### "Thinking Machines" by hand
#
# Sidorov's slides walk through the computation for a two-word input, *Thinking Machines*, with
# $d_k = 64$ {cite}`alammar2018illustrated`: the query of *Thinking* scores $112$ against its own key
# and $96$ against the key of *Machines*; divided by $\sqrt{64} = 8$ these become $14$ and $12$,
# and the softmax turns them into the weights $0.88$ and $0.12$. His slides show boxes, not numbers,
# so we build vectors that produce exactly these scores. Only the part of a key along the query
# changes the dot product, so we draw random keys and shift each one along $\mathbf q_1$ until its
# score is right. The embeddings have $d = 4$ entries, like the slide's four boxes, and we pick
# $\mathbf W^Q$ and $\mathbf W^K$ so that the projections of $\mathbf X$ produce our queries and
# keys (with the pseudo-inverse: $\mathbf X\mathbf X^{+} = \mathbf I$ for two independent rows). We
# work in double precision, so that the slide's integers come out exactly.

# %%
g = torch.Generator().manual_seed(3)
d, d_k = 4, 64
# (T, D): rows "Thinking", "Machines"
X = torch.randn(2, d, generator=g, dtype=torch.float64)

q1, q2 = torch.randn(2, d_k, generator=g, dtype=torch.float64)


def shift_along_q1(key, score):
    """Move ``key`` along q1 until q1 · key == score; the part orthogonal to
    q1 stays."""
    return key + (score - q1 @ key) * q1 / (q1 @ q1)


k1 = shift_along_q1(torch.randn(d_k, generator=g, dtype=torch.float64), 112.0)
k2 = shift_along_q1(torch.randn(d_k, generator=g, dtype=torch.float64), 96.0)
v1, v2 = torch.randn(2, d_k, generator=g, dtype=torch.float64)

# Step 1: the three linear maps. W = X⁺ (rows we want) makes X @ W produce
# exactly those rows.
W_Q = torch.linalg.pinv(X) @ torch.stack([q1, q2])  # (D, Dk)
W_K = torch.linalg.pinv(X) @ torch.stack([k1, k2])  # (D, Dk)
W_V = torch.linalg.pinv(X) @ torch.stack([v1, v2])  # (D, Dv)
Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # each (T, 64)
assert (
    torch.allclose(Q[0], q1)
    and torch.allclose(K, torch.stack([k1, k2]))
    and torch.allclose(V[1], v2)
)

# Steps 2-6 for the first word, "Thinking".
scores = torch.stack([Q[0] @ K[0], Q[0] @ K[1]])  # (S,) = (2,)  q1·k1, q1·k2
scaled = scores / math.sqrt(d_k)  # (2,)
weights = torch.softmax(scaled, dim=-1)  # (2,)
# (Dv,)  the weighted sum of the values
z1 = weights[0] * V[0] + weights[1] * V[1]

print(f"{'':>18}{'Thinking':>10}{'Machines':>10}")
print(f"{'score q1·k':>18}{scores[0]:>10.4f}{scores[1]:>10.4f}")
print(f"{'divided by 8':>18}{scaled[0]:>10.4f}{scaled[1]:>10.4f}")
print(f"{'softmax':>18}{weights[0]:>10.4f}{weights[1]:>10.4f}")
assert torch.allclose(
    scores, torch.tensor([112.0, 96.0], dtype=torch.float64), atol=1e-9
)
assert torch.allclose(
    scaled, torch.tensor([14.0, 12.0], dtype=torch.float64), atol=1e-9
)
assert [round(w, 2) for w in weights.tolist()] == [0.88, 0.12]

# %% [markdown]
# The weights depend only on the *difference* of the scaled scores: $0.88 = e^{14}/(e^{14}+e^{12}) =
# 1/(1+e^{-2})$. *Thinking* keeps 88% of its own value and mixes in 12% of *Machines*'. The
# matrix form does the same for both words at once; its first row is the $\mathbf z_1$ we just
# computed:

# %%
# (T, Dk) @ (Dk, S) -> (T, S), rows sum to 1
A = torch.softmax(Q @ K.T / math.sqrt(d_k), dim=-1)
# (T, S) @ (S, Dv) -> (T, Dv)
Z = A @ V
print(f"attention weights (rows: queries, columns: keys)\n{A.numpy().round(4)}")
assert torch.allclose(A[0], weights) and torch.allclose(Z[0], z1)
assert torch.allclose(A.sum(dim=-1), torch.ones(2, dtype=torch.float64))

# %% [markdown]
# (sec-attention-conventions)=
# ## Conventions: shapes and masks
#
# From here on, attention runs on batches of sequences and, from the next chapter on, on several
# heads at once. This is the place where the book fixes its conventions, once; the
# {doc}`../book/notation` page repeats them for reference.
#
# **Shapes.** Tensors are batch first, and every reshape and matrix product in the code carries a
# comment with its shape in these letters:
#
# | letter | meaning |
# |---|---|
# | `B` | batch size |
# | `T` | query length (the sequence being updated) |
# | `S` | key/value length (the sequence attended to; `S = T` in self-attention) |
# | `D` | model width $d_\text{model}$ |
# | `H` | number of attention heads |
# | `Dh` | width of one head, $D/H$ (the $d_k$ of this chapter) |
# | `F` | feed-forward width $d_\text{ff}$ |
# | `V` | vocabulary size |
# | `E` | embedding size, when it differs from `D` |
#
# The attention function below accepts any leading axes: `(T, Dk)` for one sequence as above,
# `(B, T, Dk)` for a batch, and `(B, H, T, Dh)` for a batch of heads.
#
# **Masks.** A mask says which query may look at which key. In this book a mask is always a
# **boolean tensor, `True` = "may attend"**, that broadcasts to `(B, H, T, S)`: a padding mask is
# `(B, 1, 1, S)`, a causal mask `(T, S)`, and they combine with `&`. This is the polarity of
# `torch.nn.functional.scaled_dot_product_attention`. The mask is applied in exactly one place, the
# attention function, where masked scores become $-\infty$ before the softmax; a query whose keys
# are all masked gets zero weights and a zero output, never `NaN`. Other libraries use other
# conventions, and they are converted only at the boundary where their data enters:
#
# | convention | "may attend" is | convert to ours |
# |---|---|---|
# | Hugging Face `attention_mask` | integer `1` (padding `0`), shape `(B, S)` | `padding_mask(attention_mask.bool())` |
# | `nn.MultiheadAttention`'s `attn_mask`, `key_padding_mask` | `False` (`True` = blocked) | `~mask` |
# | additive float masks | `0.0` (blocked: a large negative number) | `mask == 0` |
#
# The learned projections of the previous section are `nn.Linear` layers without bias in a model,
# applied to a whole batch at once:

# %%
seed_everything(0)
B, T, D, D_K = 3, 5, 16, 8
x = torch.randn(B, T, D)  # (B, T, D)
to_q, to_k, to_v = (nn.Linear(D, D_K, bias=False) for _ in range(3))
# each (B, T, Dk): self-attention, so S = T
q, k, v = to_q(x), to_k(x), to_v(x)
print(
    f"x {tuple(x.shape)} -> q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
)
# nn.Linear stores W^Q transposed, as (Dk, D)
assert torch.allclose(q, x @ to_q.weight.T)

# %% [markdown]
# (sec-attention-function)=
# ## Scaled dot-product attention
#
# {numref}`fig-sdpa` draws the function this section builds, step by step, for the batch just
# projected: the sizes in the figure are read from `q`, `k` and `v`.

# %% mystnb={"figure": {"caption": "Scaled dot-product attention for the batch above. The queries and the keys are multiplied into scores, scaled by 1/\u221aDh, masked and turned into weights by a softmax over the keys; the weights then average the values. Above each step, the shape of its result.", "name": "fig-sdpa"}, "image": {"alt": "Flow diagram of scaled dot-product attention. Q of shape (B, T, Dh) and K of shape (B, S, Dh) enter a matrix product that gives scores of shape (B, T, S); the scores go through Scale (divide by the square root of Dh), Mask (False becomes minus infinity, fed by a boolean mask) and Softmax over S, giving weights of shape (B, T, S); a second matrix product with V of shape (B, S, Dh) gives the output of shape (B, T, Dh). A legend gives the sizes of B, T, S and Dh."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import attention_diagram

attention_diagram(
    batch=q.shape[0], queries=q.shape[1], keys=k.shape[1], d_head=q.shape[-1]
)


# %% [markdown]
# The code is the equation, one step per line. The only subtlety is the mask. Masked scores are set
# to $-\infty$, so that $e^{-\infty} = 0$ removes them from the softmax. But if *every* score in a
# row is $-\infty$, the softmax computes $0/0$ and returns `NaN`, and one `NaN` spreads to every
# weight it touches in the backward pass. `masked_softmax` therefore leaves such dead rows
# unmasked while it computes the softmax (any finite answer will do) and sets them to zero
# afterwards. A row that is alive is not affected at all.

# %% tags=["export"]
def masked_softmax(
    scores: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Softmax over the last axis, counting only the entries where ``mask`` is True.

    ``scores``: (..., T, S); ``mask``: bool, True = may attend, broadcastable to
    ``scores``. A row with no True entry (a query that may attend to nothing) gets
    all-zero weights, never NaN: such rows are left unmasked for the softmax, so that
    nothing divides 0 by 0, and zeroed afterwards.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)  # (..., T, S)
    # (..., T, 1) rows with a key
    alive = mask.any(dim=-1, keepdim=True)
    # (..., T, S) the mask, applied once
    scores = scores.masked_fill(~mask & alive, float("-inf"))
    return torch.softmax(scores, dim=-1).masked_fill(~alive, 0.0)  # (..., T, S)


def _check_attention_inputs(q, k, v, mask, dropout_p) -> tuple[int, ...]:
    """Raise ValueError unless the inputs fit together; return the scores' shape
    (..., T, S)."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.dim() < 2:
            raise ValueError(
                f"{name}: expected a tensor of shape (..., length, features), got "
                f"{shape_of(x)}"
            )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share their last axis Dk: expected k of shape "
            f"(..., S, {q.shape[-1]}) for q of shape {shape_of(q)}, got k "
            f"of shape {shape_of(k)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same length S: expected v of shape "
            f"(..., {k.shape[-2]}, Dv) for k of shape {shape_of(k)}, got "
            f"v of shape {shape_of(v)}"
        )
    try:
        batch = tuple(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]))
    except RuntimeError:
        raise ValueError(
            f"the leading (batch) axes of q, k and v must broadcast, "
            f"got q {shape_of(q)}, k {shape_of(k)}, v "
            f"{shape_of(v)}"
        ) from None
    scores_shape = (*batch, q.shape[-2], k.shape[-2])  # (..., T, S)
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise ValueError(
                f"mask: expected a bool tensor (True = may attend), got "
                f"{got}; convert a 1/0 mask with mask.bool() and an "
                f"additive float mask with mask == 0"
            )
        try:
            fits = (
                tuple(torch.broadcast_shapes(mask.shape, scores_shape)) == scores_shape
            )
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(
                f"mask: expected a shape that broadcasts to the scores' "
                f"(..., T, S) = {scores_shape}, got {shape_of(mask)}"
            )
    # the test of chapter 1's check_probability, written out here: it runs at every
    # call of every layer, and a forward pass reads best without leaving this file
    if isinstance(dropout_p, bool) or not (
        isinstance(dropout_p, (int, float)) and 0.0 <= dropout_p < 1.0
    ):
        raise ValueError(
            f"dropout_p: expected a probability in [0, 1), got {dropout_p!r}"
        )
    return scores_shape


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V, written out step by step.

    Shapes: q (..., T, Dk), k (..., S, Dk), v (..., S, Dv); the leading axes (usually
    (B, H)) broadcast. ``mask``: bool, True = may attend, broadcastable to (..., T, S).
    Returns ``(output (..., T, Dv), weights (..., T, S))``; a query whose keys are all
    masked gets zero weights and a zero output. Dropout acts on the weights when
    ``dropout_p > 0`` (callers pass ``dropout_p if self.training else 0.0``); the
    returned weights are the ones applied to v.
    """
    _check_attention_inputs(q, k, v, mask, dropout_p)
    d_k = q.shape[-1]
    # (..., T, Dk) @ (..., Dk, S) -> (..., T, S)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    # (..., T, S) each live row sums to 1
    weights = masked_softmax(scores, mask)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)  # (..., T, S)
    # (..., T, S) @ (..., S, Dv) -> (..., T, Dv)
    output = weights @ v
    return output, weights


# %% [markdown]
# The function reproduces the walk-through, and it handles the batch projected in
# {ref}`sec-attention-conventions`, where `q`, `k` and `v` have a leading batch axis:

# %%
Z_function, A_function = scaled_dot_product_attention(Q, K, V)
assert torch.allclose(A_function, A) and torch.allclose(Z_function, Z)
print(f"Thinking Machines: weights of the first query {A_function[0].numpy().round(4)}")

out, w = scaled_dot_product_attention(q, k, v)  # (B, T, Dk), (B, T, T)
print(
    f"batch: q {tuple(q.shape)} -> output {tuple(out.shape)}, weights {tuple(w.shape)}"
)
assert out.shape == (B, T, D_K) and w.shape == (B, T, T)
assert torch.allclose(w.sum(dim=-1), torch.ones(B, T))
# no mixing across the batch
assert torch.allclose(out[1], scaled_dot_product_attention(q[1], k[1], v[1])[0])

# %% [markdown]
# Inputs that do not fit together are rejected with a message that says what was expected. Here the
# keys of the wrong width, and a mask of ones and zeros instead of booleans:

# %%
for description, call in [
    ("keys of width 7", lambda: scaled_dot_product_attention(q, k[..., :7], v)),
    (
        "an integer mask",
        lambda: scaled_dot_product_attention(
            q, k, v, mask=torch.ones(T, T, dtype=torch.long)
        ),
    ),
]:
    try:
        call()
        raise AssertionError(f"{description}: expected a ValueError")
    except ValueError as error:
        print(f"{description}: ValueError: {error}")

# %% [markdown]
# (sec-attention-scaling)=
# ## Why divide by $\sqrt{d_k}$
#
# Suppose the entries of a query and a key are independent with mean 0 and variance 1, as they
# roughly are at initialisation. Their dot product $\mathbf q\cdot\mathbf k = \sum_{i=1}^{d_k} q_i
# k_i$ is a sum of $d_k$ independent terms of variance 1, so its variance is $d_k$ and its typical
# size $\sqrt{d_k}$ {cite}`vaswani2017attention`. Dividing by $\sqrt{d_k}$ brings the variance back
# to 1, whatever the width. First the variance, measured:

# %%
g = torch.Generator().manual_seed(0)
dims = [1, 4, 16, 64, 256, 1024]
n_pairs = pick(quick=2_000, full=20_000)
variances = []
for d_k_i in dims:
    # (N, Dk) each, unit-variance entries
    q_r, k_r = torch.randn(2, n_pairs, d_k_i, generator=g)
    # variance of the N dot products
    variances.append(((q_r * k_r).sum(dim=-1)).var().item())
for d_k_i, var in zip(dims, variances):
    print(f"d_k = {d_k_i:>4}: var(q·k) = {var:8.1f}   var / d_k = {var / d_k_i:.3f}")
assert all(0.8 < var / d_k_i < 1.2 for d_k_i, var in zip(dims, variances))

# %% [markdown]
# Why does the size of the scores matter? The softmax is not scale-free: multiply its inputs by 10
# and it moves most of its mass onto the largest one. With unscaled scores of size $\sqrt{d_k}$,
# a wide model starts out with a nearly one-hot softmax. Its gradient then almost vanishes: the
# derivative of the softmax output $\mathbf p$ with respect to its input is the matrix
# $\operatorname{diag}(\mathbf p) - \mathbf p\mathbf p^\top$, which is zero when $\mathbf p$ is
# one-hot. The next cell lets one random query attend to 16 random keys, many times over, and
# measures three things with and without the scaling: the largest weight, the entropy of the
# weights (at most $\log 16 \approx 2.77$ nats, for uniform weights), and the size (Frobenius
# norm) of that derivative.

# %% mystnb={"image": {"alt": "Four plots against the width d_k: the variance of q\u00b7k grows like d_k; with raw scores the largest softmax weight climbs towards 1, the entropy falls and the softmax's derivative shrinks as d_k grows, while with scaled scores all three stay flat."}}
n_queries, n_keys = pick(quick=200, full=1_000), 16
stats = {"raw": collections.defaultdict(list), "scaled": collections.defaultdict(list)}
for d_k_i in dims:
    q_r = torch.randn(n_queries, 1, d_k_i, generator=g)  # (N, 1, Dk)
    k_r = torch.randn(n_queries, n_keys, d_k_i, generator=g)  # (N, S, Dk)
    raw = (q_r @ k_r.transpose(-2, -1)).squeeze(1)  # (N, S)
    for name, s in [("raw", raw), ("scaled", raw / math.sqrt(d_k_i))]:
        p = torch.softmax(s, dim=-1)  # (N, S)
        jacobian = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (N, S, S)
        stats[name]["max weight"].append(p.max(dim=-1).values.mean().item())
        stats[name]["entropy"].append(torch.special.entr(p).sum(dim=-1).mean().item())
        stats[name]["gradient"].append(torch.linalg.matrix_norm(jacobian).mean().item())

print(f"{'d_k':>5} | {'max weight':^15} | {'entropy (nats)':^15} | {'|d softmax|':^15}")
print(
    f"{'':>5} | {'raw':>7} {'scaled':>7} | {'raw':>7} {'scaled':>7} | {'raw':>7} "
    f"{'scaled':>7}"
)
for i, d_k_i in enumerate(dims):
    print(
        f"{d_k_i:>5} | "
        + " | ".join(
            f"{stats['raw'][m][i]:7.3f} {stats['scaled'][m][i]:7.3f}"
            for m in ["max weight", "entropy", "gradient"]
        )
    )

fig, axes = plt.subplots(1, 4, figsize=(13, 3))
axes[0].loglog(dims, variances, "o-", label="measured")
axes[0].loglog(dims, dims, "k--", lw=1, label="$d_k$")
axes[0].set(title="variance of $q\\cdot k$", xlabel="$d_k$")
axes[0].legend()
for ax, metric in zip(axes[1:], ["max weight", "entropy", "gradient"]):
    for name, style in [("raw", "o-"), ("scaled", "s-")]:
        ax.semilogx(
            dims,
            stats[name][metric],
            style,
            label=f"{name}: $q\\cdot k$"
            + ("$/\\sqrt{d_k}$" if name == "scaled" else ""),
        )
    ax.set(
        title={
            "max weight": "largest weight",
            "entropy": "entropy (nats; dashed: log 16)",
            "gradient": "size of the softmax's derivative",
        }[metric],
        xlabel="$d_k$",
    )
axes[2].axhline(math.log(n_keys), color="k", ls="--", lw=1)
axes[1].legend(fontsize=8)
fig.tight_layout()
plt.show()

# Scaled: the same picture at every width. Raw: saturation that grows with the width.
assert abs(stats["scaled"]["entropy"][2] - stats["scaled"]["entropy"][-1]) < 0.15
assert stats["raw"]["max weight"][-1] > 0.85 > stats["scaled"]["max weight"][-1]
assert stats["raw"]["gradient"][-1] < 0.3 * stats["scaled"]["gradient"][-1]


# %% [markdown]
# With the scaling, all three statistics stay where they are as $d_k$ grows: the scaled scores
# have variance 1 at every width. Without it, the largest weight climbs towards 1, the entropy falls
# towards 0 and the softmax's derivative shrinks, so the queries and keys of a wide model would
# start training with almost no gradient. BERT-base's heads have $d_k = 64$, where the raw scores
# would already be eight times too large.
#
# (sec-attention-masks)=
# ## Masks
#
# Two kinds of mask appear in every Transformer. A **padding mask** comes from batching: sentences
# of different lengths are padded to a common length $S$, and no query may attend to the padding
# keys, which carry no information. A **causal mask** comes from generating text left to right:
# position $t$ may attend to positions $s \le t$ only, so that training a model to predict the next
# word does not let it read that word. Both helpers return booleans in the book's convention, shaped
# to broadcast against `(B, H, T, S)`.

# %% tags=["export"]
def causal_mask(
    T: int, S: int | None = None, device: torch.device | str | None = None
) -> torch.Tensor:
    """Bool (T, S) mask, True where query t may attend to key s: s ≤ t + (S - T).

    With S = T (self-attention) this is the lower triangle, s ≤ t. With S > T the
    queries are taken to be the *last* T of the S positions (decoding with cached keys),
    so the last query sees every key; this is the "lower right" alignment of
    ``torch.nn.attention.bias``, not the "upper left" one of
    ``F.scaled_dot_product_attention(is_causal=True)``.
    """
    S = T if S is None else S
    for name, n in (("T", T), ("S", S)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name}: expected a positive int, got {n!r}")
    t = torch.arange(T, device=device)[:, None]  # (T, 1) query positions
    s = torch.arange(S, device=device)[None, :]  # (1, S) key positions
    return s <= t + (S - T)  # (T, S)


def padding_mask(lengths: torch.Tensor, S: int | None = None) -> torch.Tensor:
    """Bool (B, 1, 1, S) mask, True at real tokens, False at padding; broadcasts to
    (B, H, T, S).

    ``lengths``: either a 1-D integer tensor (B,) of sequence lengths (S defaults to the
    longest), or a 2-D bool tensor (B, S), True at real tokens. Convert Hugging Face's
    1/0 ``attention_mask`` with ``.bool()`` first.
    """
    if not isinstance(lengths, torch.Tensor):
        raise ValueError(f"lengths: expected a tensor, got {type(lengths).__name__}")
    if lengths.dim() == 2 and lengths.dtype == torch.bool:
        if S is not None and S != lengths.shape[1]:
            raise ValueError(
                f"S: expected {lengths.shape[1]} for a bool mask of shape "
                f"{shape_of(lengths)}, got {S}"
            )
        return lengths[:, None, None, :]  # (B, 1, 1, S)
    if (
        lengths.dim() != 1
        or lengths.dtype.is_floating_point
        or lengths.dtype == torch.bool
    ):
        raise ValueError(
            f"lengths: expected an integer tensor of shape (B,) or a bool "
            f"tensor of shape (B, S), got {lengths.dtype} of shape "
            f"{shape_of(lengths)} (for a 1/0 mask use .bool())"
        )
    longest = int(lengths.max()) if lengths.numel() else 0
    S = longest if S is None else S
    if (lengths.numel() and int(lengths.min()) < 0) or longest > S:
        raise ValueError(
            f"lengths: expected values in [0, S={S}], got {lengths.tolist()}"
        )
    positions = torch.arange(S, device=lengths.device)  # (S,)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, S)


# %% [markdown]
# The masks, drawn (dark = may attend). For a batch of three sentences of lengths 8, 5 and 2 padded
# to $S = 8$, the padding mask hides the same keys from every query, and combined with the causal
# mask it gives each sentence its own `(T, S)` pattern:

# %% mystnb={"image": {"alt": "Four grids of attention masks, dark where a query may attend: the causal mask, a lower triangle; a causal mask of 4 queries and 8 keys; the padding mask of three sequences, one row each; and padding and causal combined for the sequence of length 5."}}
lengths = torch.tensor([8, 5, 2])  # (B,)
pad = padding_mask(lengths, S=8)  # (B, 1, 1, S)
causal = causal_mask(8)  # (T, S)
# (B, 1, T, S): broadcasting does the rest
combined = pad & causal
print(
    f"padding {tuple(pad.shape)} & causal {tuple(causal.shape)} -> "
    f"{tuple(combined.shape)}"
)

panels = [
    ("causal_mask(8)", causal),
    ("causal_mask(4, 8)", causal_mask(4, 8)),
    ("padding_mask([8, 5, 2])\n(rows: sequences)", pad[:, 0, 0]),
    ("padding & causal,\nsequence of length 5", combined[1, 0]),
]
fig, axes = plt.subplots(1, 4, figsize=(13, 3.4))
for ax, (title, m) in zip(axes, panels):
    ax.imshow(m.float(), cmap="Greys", vmin=0, vmax=1.4)
    ax.set(
        title=title, xlabel="key s", ylabel="batch b" if "rows" in title else "query t"
    )
    ax.set_xticks(range(m.shape[1]))
    ax.set_yticks(range(m.shape[0]))
fig.tight_layout()
plt.show()

assert torch.equal(causal, torch.ones(8, 8).tril().bool())  # s <= t
assert torch.equal(causal_mask(4, 8), torch.ones(4, 8).tril(diagonal=4).bool())
assert pad[:, 0, 0].sum(dim=-1).tolist() == lengths.tolist()
# broadcasts to (B, H, T, S)
assert combined.expand(3, 12, 8, 8).shape == (3, 12, 8, 8)

# %% [markdown]
# The second panel is the choice `causal_mask` makes when there are more keys than queries: the
# queries are taken to be the *last* $T$ positions, as when a decoder generates new words while
# attending to the keys it cached for the words before them. For square masks, the only kind
# BERT and the Transformer's training use, there is no choice to make.
#
# A padding mask has a testable promise: padding the keys must not change the outputs at real
# positions, whatever the padding contains.

# %%
g = torch.Generator().manual_seed(1)
# (B, T, Dk) with S = 5
q_p, k_p, v_p = torch.randn(3, 2, 5, 8, generator=g)
# 4 padding keys full of junk
junk_k, junk_v = 100 * torch.randn(2, 2, 4, 8, generator=g)
# (B, 9, Dk)
k_padded, v_padded = torch.cat([k_p, junk_k], dim=1), torch.cat([v_p, junk_v], dim=1)
out_short, _ = scaled_dot_product_attention(q_p, k_p, v_p)
out_padded, _ = scaled_dot_product_attention(
    q_p, k_padded, v_padded, mask=padding_mask(torch.tensor([5, 5]), S=9)[:, 0]
)
print(
    f"largest change from 4 masked junk keys: "
    f"{(out_padded - out_short).abs().max().item():.2e}"
)
assert torch.allclose(out_padded, out_short, atol=1e-6)

# %% [markdown]
# (sec-attention-masked-rows)=
# ### A query that may attend to nothing
#
# Sometimes a whole row of the mask is `False`: the first word, when a mask also forbids attending to
# oneself; a padding query in a causally masked batch that is padded on the left; cross-attention to
# an empty source. Three common ways of applying a mask give three different answers there. Filling
# with $-\infty$ and calling the softmax gives `NaN`; filling with a large finite number such as
# $-10^9$ (a common shortcut) quietly gives *uniform* weights, so the query averages keys it was
# told to ignore; `masked_softmax` gives zeros, which is what "attend to nothing" means.

# %%
scores_demo = torch.tensor([[2.0, 1.0, 0.5], [0.3, 0.2, 0.1]])  # (T, S) = (2, 3)
mask_demo = torch.tensor(
    [
        [True, True, False],
        # the second query may look at nothing
        [False, False, False],
    ]
)
naive = torch.softmax(scores_demo.masked_fill(~mask_demo, float("-inf")), dim=-1)
magic = torch.softmax(scores_demo.masked_fill(~mask_demo, -1e9), dim=-1)
ours = masked_softmax(scores_demo, mask_demo)
for name, w_demo in [
    ("-inf fill", naive),
    ("-1e9 fill", magic),
    ("masked_softmax", ours),
]:
    print(f"{name:>15}: {w_demo.double().numpy().round(3).tolist()}")
assert torch.isnan(naive[1]).all() and torch.allclose(magic[1], torch.full((3,), 1 / 3))
assert torch.equal(ours[1], torch.zeros(3)) and torch.allclose(ours[0], naive[0])

# Through the whole function, in both directions: zero output, finite gradients.
q_m, k_m, v_m = (
    torch.randn(2, 3, 4, generator=g).requires_grad_(True) for _ in range(3)
)
out_m, w_m = scaled_dot_product_attention(
    q_m,
    k_m,
    v_m,
    mask=torch.tensor([[True, False, True], [False, False, False], [True, True, True]]),
)
out_m.square().sum().backward()
assert torch.equal(out_m[:, 1], torch.zeros(2, 4)) and torch.equal(
    w_m[:, 1], torch.zeros(2, 3)
)
assert all(torch.isfinite(t.grad).all() for t in (q_m, k_m, v_m))
print("fully masked row: zero weights, zero output, finite gradients")

# %% [markdown]
# (sec-attention-boundaries)=
# ### Converting at the boundary
#
# The table in {ref}`sec-attention-conventions` lists the conventions of the libraries we meet. Two
# conversions, checked. A Hugging Face tokenizer returns an `attention_mask` of ones and zeros;
# `.bool()` turns it into ours. PyTorch's `nn.MultiheadAttention` uses the opposite polarity
# (`True` = blocked), so it gets `~mask`. To compare with it we strip it down to a single head whose
# projections are identities, which is exactly our function with $\mathbf Q = \mathbf K = \mathbf V
# = \mathbf X$:

# %%
hf_attention_mask = torch.tensor(
    [
        [1, 1, 1, 1, 1, 1],
        # (B, S), Hugging Face style
        [1, 1, 1, 0, 0, 0],
    ]
)
# (B, 1, 1, S)
ours_pad = padding_mask(hf_attention_mask.bool())
assert torch.equal(ours_pad, padding_mask(torch.tensor([6, 3]), S=6))

E_mha = 8
mha = nn.MultiheadAttention(E_mha, num_heads=1, bias=False, batch_first=True)
# identity projections
with torch.no_grad():
    # (3E, E): W^Q = W^K = W^V = I
    mha.in_proj_weight.copy_(torch.eye(E_mha).repeat(3, 1))
    mha.out_proj.weight.copy_(torch.eye(E_mha))
x_mha = torch.randn(2, 6, E_mha, generator=g)  # (B, T, E)
# (B, 1, T, S)
mask_mha = ours_pad & causal_mask(6)
reference, reference_weights = mha(
    x_mha,
    x_mha,
    x_mha,
    attn_mask=~causal_mask(6),
    # True = blocked
    key_padding_mask=~ours_pad[:, 0, 0],
)
out_mha, w_mha = scaled_dot_product_attention(x_mha, x_mha, x_mha, mask=mask_mha[:, 0])
print(
    f"nn.MultiheadAttention vs ours: outputs differ by "
    f"{(reference - out_mha).abs().max().item():.1e}, weights by "
    f"{(reference_weights - w_mha).abs().max().item():.1e}"
)
assert torch.allclose(reference, out_mha, atol=1e-6) and torch.allclose(
    reference_weights, w_mha, atol=1e-6
)


# %% [markdown]
# (sec-attention-fast)=
# ## The fast path
#
# PyTorch ships attention as one fused function, `F.scaled_dot_product_attention` (SDPA). Its
# kernels compute the output block by block, without ever holding the whole $T\times S$ matrix of
# weights, and pick the fastest algorithm for the device. The cost is that the weights are not
# available. `fast_scaled_dot_product_attention` wraps it with our signature and our conventions,
# so that a model can switch between the two with one argument.

# %% tags=["export"]
def fast_scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, None]:
    """The same attention on ``torch.nn.functional.scaled_dot_product_attention``
    (SDPA).

    Same signature, validation and fully-masked-row behaviour (zero output, no NaN) as
    :func:`scaled_dot_product_attention`, but SDPA never materialises the (..., T, S)
    weights, so the second element of the result is always ``None``. It needs no T×S
    buffer and is faster on long sequences: the chapter's sections "The fast path" and
    "The cost of attention" measure the speed-up and the memory in every run, on the
    reader's own machine. Fully masked rows are opened to every key before SDPA and
    zeroed after it, so that no backend or version can produce NaN from them.
    """
    _check_attention_inputs(q, k, v, mask, dropout_p)
    alive = None
    if mask is not None:
        # (..., T, 1) rows with a key
        alive = mask.any(dim=-1, keepdim=True)
        # (..., T, S) no empty rows left
        mask = mask | ~alive
    # (..., T, Dv)
    output = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p
    )
    if alive is not None:
        output = output.masked_fill(~alive, 0.0)  # (..., T, Dv)
    return output, None


# %% [markdown]
# What does SDPA itself do with a query that may attend to nothing? The answer has changed between
# PyTorch versions and can differ between its kernels, which is why the wrapper does not rely on
# it. In the version running this page:

# %%
# (T, S): query 1 sees nothing
dead_row_mask = torch.tensor([[True, True], [False, False]])
raw_sdpa = F.scaled_dot_product_attention(
    torch.ones(1, 2, 4),
    torch.ones(1, 2, 4),
    torch.ones(1, 2, 4),
    attn_mask=dead_row_mask,
)
print(
    f"torch {torch.__version__}, F.scaled_dot_product_attention on a fully masked row: "
    f"{raw_sdpa[0, 1].tolist()}"
)

# %% [markdown]
# The fast path must compute the same function as the explicit one. We check it in single precision
# on a batch of 3 sequences and 4 heads, with self-attention shapes and cross-attention shapes
# ($T \ne S$), and with every kind of mask, including a random mask with a dead row:

# %%
g = torch.Generator().manual_seed(4)
B_p, H_p, Dh_p = 3, 4, 64
# each key kept with probability 0.3: a row of 37 keys is almost never fully masked
random_mask = torch.rand(B_p, H_p, 23, 37, generator=g) < 0.3
# so one row is masked fully by hand
random_mask[0, 0, 5] = False
cases = {
    "self-attention, no mask": (37, 37, None),
    "padding": (37, 37, padding_mask(torch.tensor([37, 20, 1]), S=37)),
    "causal": (37, 37, causal_mask(37)),
    "padding & causal": (
        37,
        37,
        padding_mask(torch.tensor([37, 20, 1]), S=37) & causal_mask(37),
    ),
    "cross-attention, no mask": (23, 37, None),
    "cross, random (dead rows)": (23, 37, random_mask),
}
for name, (T_p, S_p, mask_p) in cases.items():
    # (B, H, T, Dh)
    q_f = torch.randn(B_p, H_p, T_p, Dh_p, generator=g)
    # (B, H, S, Dh) each
    k_f, v_f = torch.randn(2, B_p, H_p, S_p, Dh_p, generator=g)
    explicit, _ = scaled_dot_product_attention(q_f, k_f, v_f, mask=mask_p)
    fast, no_weights = fast_scaled_dot_product_attention(q_f, k_f, v_f, mask=mask_p)
    diff = (explicit - fast).abs().max().item()
    print(f"{name:<26} output {tuple(fast.shape)}  max |explicit - fast| = {diff:.1e}")
    assert no_weights is None and torch.isfinite(fast).all()
    assert diff <= 1e-6, f"{name}: the two paths differ by {diff}"

# %% [markdown]
# Now the speed, measured in this run with `torch.utils.benchmark`, which repeats each call until
# the timing is stable and reports the median. Both paths get the same inputs, with no mask and with
# a causal mask:

# %%
B_s, H_s, T_s, Dh_s = pick(quick=(1, 4, 256, 64), full=(2, 4, 1024, 64))
# (B, H, T, Dh)
q_s, k_s, v_s = (torch.randn(B_s, H_s, T_s, Dh_s, device=device) for _ in range(3))
mask_s = causal_mask(T_s, device=device)
min_run_time = pick(quick=0.1, full=1.0)


def median_seconds(fn, *args):
    timer = Timer("fn(*args)", globals={"fn": fn, "args": args})
    return timer.blocked_autorange(min_run_time=min_run_time).median


speedups = {}
with torch.no_grad():
    for mask_name, m in [("no mask", None), ("causal", mask_s)]:
        t_explicit = median_seconds(scaled_dot_product_attention, q_s, k_s, v_s, m)
        t_fast = median_seconds(fast_scaled_dot_product_attention, q_s, k_s, v_s, m)
        speedups[mask_name] = t_explicit / t_fast
        print(
            f"(B, H, T, Dh) = {(B_s, H_s, T_s, Dh_s)}, {mask_name:>7}: explicit "
            f"{1e3 * t_explicit:7.2f} ms, fast {1e3 * t_fast:7.2f} ms, speed-up "
            f"{speedups[mask_name]:.2f}x on {device}"
        )

# %% [markdown]
# The fused kernel never writes the $T\times S$ weights to memory and reads them back, which is
# where the explicit version spends much of its time; {ref}`sec-attention-cost` measures both
# paths across sequence lengths. The explicit version keeps one advantage: it
# returns the weights, which we want to look at next.
#
# (sec-attention-sentence)=
# ## Attention on a real sentence
#
# What do attention weights look like on real words? A trained model's weights depend on everything
# it learned, and we have not trained one yet. What we can do honestly is feed attention word
# vectors that already carry meaning and set $\mathbf W^Q = \mathbf W^K$ to a multiple of the
# identity, so that a word attends to the words whose vectors point the same way.
#
# The word vectors come from the distributional idea of {doc}`02_word_vectors`: a word is
# described by the words around it. We count, in *Pride and Prejudice*, how often each of the 3,000 most
# common words occurs within four words of each other one, turn the counts into positive pointwise
# mutual information (how much more often two words meet than chance predicts), and compress each
# row to 64 numbers with a truncated SVD. No training, and a few seconds of work.

# %%
# Pride and Prejudice, lower-cased words
novel = words(load_gutenberg(1342))
vocab = [w for w, _ in collections.Counter(novel).most_common(3000)]
index = {w: i for i, w in enumerate(vocab)}
ids = np.array([index.get(w, -1) for w in novel])  # -1 for rarer words

n_vocab = len(vocab)
counts = np.zeros(n_vocab * n_vocab)
# neighbours up to 4 words away
for offset in range(1, 5):
    left, right = ids[:-offset], ids[offset:]
    keep = (left >= 0) & (right >= 0)
    counts += np.bincount(
        left[keep] * n_vocab + right[keep], minlength=n_vocab * n_vocab
    )
counts = counts.reshape(n_vocab, n_vocab)
# (V, V), symmetric co-occurrences
counts = counts + counts.T
expected = counts.sum(1, keepdims=True) * counts.sum(0, keepdims=True) / counts.sum()
with np.errstate(divide="ignore"):
    ppmi = np.maximum(np.log(counts / expected), 0.0)  # log 0 = -inf -> 0
# svd_lowrank starts from random vectors
seed_everything(0)
U, singular, _ = torch.svd_lowrank(
    torch.tensor(ppmi, dtype=torch.float32), q=64, niter=4
)
# (V, 64), unit length
word_vectors = F.normalize(U * singular.sqrt(), dim=-1)
print(
    f"{len(novel):,} words, vocabulary {n_vocab}, word vectors "
    f"{tuple(word_vectors.shape)}"
)
for probe in ["man", "fortune", "good"]:
    nearest = (word_vectors @ word_vectors[index[probe]]).topk(5).indices.tolist()
    print(f"  nearest to {probe!r}: {[vocab[i] for i in nearest]}")

# %% [markdown]
# The book's first sentence, with each word's vector as its query, key and value. The vectors have
# unit length, so the score of a pair is its cosine similarity times a sharpness we choose:
# $\mathbf q\cdot\mathbf k/\sqrt{d_k} = 8\cos\theta$. Each word is most similar to itself, so the
# left panel forbids that diagonal with a mask (`~eye`), to show who each word looks at *besides*
# itself. The right panel adds the causal mask, which lets each word look only back; the first word
# then has nothing left to look at, and its row is the zero row of {ref}`sec-attention-masked-rows`.

# %% mystnb={"image": {"alt": "Two heat maps of attention weights between the words of the book's first sentence, queries down and keys across: left, every other word, brightest at other copies of the same word; right, earlier words only, with an empty first row."}}
sentence = (
    "It is a truth universally acknowledged, that a single man in possession "
    "of a good fortune, must be in want of a wife."
)
tokens = words(sentence)
assert all(t in index for t in tokens), [t for t in tokens if t not in index]
x_s = word_vectors[[index[t] for t in tokens]]  # (T, 64)
sharpness = 8.0
# so that q·k/√d_k = 8 cos θ
q_w = k_w = x_s * math.sqrt(sharpness * math.sqrt(x_s.shape[-1]))
not_self = ~torch.eye(len(tokens), dtype=torch.bool)  # (T, T)
_, w_both = scaled_dot_product_attention(q_w, k_w, x_s, mask=not_self)
_, w_back = scaled_dot_product_attention(
    q_w, k_w, x_s, mask=not_self & causal_mask(len(tokens))
)

fig, axes = plt.subplots(1, 2, figsize=(13, 6))
for ax, w_plot, title in [
    (axes[0], w_both, "every other word"),
    (axes[1], w_back, "earlier words only (causal)"),
]:
    image = ax.imshow(w_plot, cmap="viridis", vmin=0)
    fig.colorbar(image, ax=ax, shrink=0.7, label="attention weight")
    ax.set_xticks(range(len(tokens)), tokens, rotation=90)
    ax.set_yticks(range(len(tokens)), tokens)
    ax.set(title=title, xlabel="key", ylabel="query")
fig.tight_layout()
plt.show()

# "it" has nothing before it
assert torch.equal(w_back[0], torch.zeros(len(tokens)))
assert torch.allclose(w_both.sum(-1), torch.ones(len(tokens)), atol=1e-5)
word_counts = collections.Counter(novel)
for word in ["universally", "fortune", "wife"]:
    top = w_both[tokens.index(word)].topk(3)
    print(
        f"{word!r:>13} ({word_counts[word]:>3} times in the novel) attends most to "
        + ", ".join(
            f"{tokens[j]!r} ({p:.2f})"
            for p, j in zip(top.values.tolist(), top.indices.tolist())
        )
    )


# %% [markdown]
# Read the picture as what it is: a map of which words of this sentence have similar neighbours in
# one novel. The brightest cells pair a word with another copy of itself (*a*, *in*, *of* occur
# more than once, and two copies share one vector). Elsewhere the weights are spread thinly, with
# the stronger ones between words used in similar contexts; the printed lines list a few, with the
# number of times each word occurs in the novel, and a word seen only a handful of times has a
# vector too noisy to trust. In the causal panel, the second word gives all its weight to the
# first: the softmax only *compares* scores, so a query with a single candidate takes it, however
# dissimilar.
#
# Three cautions carry over to trained models. The weights say how much of each value is mixed
# into a position's output, not *why*, and not how much the result matters: a small weight on a
# long value vector can move the output more than a large weight on a short one. The weights of one
# layer are computed from the outputs of the layers below, which have already mixed the words, so
# "column $j$" no longer means "word $j$" alone. And a trained model has different $\mathbf W^Q$
# and $\mathbf W^K$ (and many heads), so it can look for things other than similarity; the
# multi-head attention chapter looks at what heads do.
#
# (sec-attention-cost)=
# ## The cost of attention
#
# For a sequence of $n$ positions and width $d$, the score matrix $\mathbf Q\mathbf K^\top$ has
# $n^2$ entries, each a dot product of length $d$; the product with $\mathbf V$ costs the same again.
# Attention therefore takes $O(n^2 d)$ time and, in the explicit form, $O(n^2)$ memory for the
# weights, per head and per layer. The Transformer paper sets this against a recurrent layer, which
# costs $O(n d^2)$ but needs $n$ *sequential* steps, and whose information takes up to $n$ steps to
# travel from one position to another; self-attention needs $O(1)$ sequential steps and connects
# every pair of positions directly {cite}`vaswani2017attention`. For BERT's sentences ($n \le 512$,
# $d = 768$) the $n^2 d$ term is no worse than $n d^2$; for long documents it dominates.
#
# We measure the time of both paths for growing $n$ at fixed $d = 64$, on the CPU whatever
# device this chapter runs on: a GPU finishes one head of these sizes in microseconds, so its clock
# would measure the cost of launching the kernels, not the growth of the work. For memory we record
# the largest tensor that any PyTorch operation hands back during the call, with a
# `TorchFunctionMode`: a context manager that sees every call into PyTorch.

# %% mystnb={"image": {"alt": "Two log-log plots against the sequence length for the explicit and the fast attention: time per call, growing faster than linearly for both, and the largest tensor, growing with slope 2 for the explicit path and slope 1 for the fast one."}}
class LargestTensor(TorchFunctionMode):
    """Record the size in bytes of the largest tensor returned by any torch call inside
    the block."""

    def __init__(self):
        super().__init__()
        self.nbytes = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for r in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(r, torch.Tensor):
                self.nbytes = max(self.nbytes, r.nelement() * r.element_size())
        return result


lengths_n = pick(
    quick=[64, 128, 256, 512, 1024], full=[64, 128, 256, 512, 1024, 2048, 4096]
)
min_run_time = pick(quick=0.05, full=0.5)
cost = collections.defaultdict(list)
with torch.no_grad():
    for n in lengths_n:
        # (B, H, n, d), on the CPU: see above
        q_n, k_n, v_n = (torch.randn(1, 1, n, 64) for _ in range(3))
        for name, fn in [
            ("explicit", scaled_dot_product_attention),
            ("fast", fast_scaled_dot_product_attention),
        ]:
            cost[f"{name} time"].append(median_seconds(fn, q_n, k_n, v_n))
            with LargestTensor() as largest:
                fn(q_n, k_n, v_n)
            cost[f"{name} memory"].append(largest.nbytes)
        _, weights_n = scaled_dot_product_attention(q_n, k_n, v_n)
        # the (n, n) weights
        assert cost["explicit memory"][-1] == weights_n.nelement() * 4 == n * n * 4
        print(
            f"n = {n:>4}: explicit {1e3 * cost['explicit time'][-1]:8.2f} ms, "
            f"largest tensor {cost['explicit memory'][-1] / 2**20:7.2f} MiB | fast "
            f"{1e3 * cost['fast time'][-1]:7.2f} ms, largest tensor "
            f"{cost['fast memory'][-1] / 2**20:6.2f} MiB"
        )


def slope(xs, ys, last=3):
    """Slope of log(y) against log(x) over the last points: the exponent p
    in y ∝ x^p."""
    return np.polyfit(np.log(xs[-last:]), np.log(ys[-last:]), 1)[0]


slopes = {key: slope(lengths_n, values) for key, values in cost.items()}
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for ax, kind in zip(axes, ["time", "memory"]):
    for name, style in [("explicit", "o-"), ("fast", "s-")]:
        ax.loglog(
            lengths_n,
            cost[f"{name} {kind}"],
            style,
            label=f"{name} (slope {slopes[f'{name} {kind}']:.2f})",
        )
    ax.set(
        xlabel="sequence length n",
        title=f"{kind} (log-log)",
        ylabel="median seconds per call" if kind == "time" else "largest tensor, bytes",
    )
    ax.legend()
fig.tight_layout()
plt.show()
print(
    "log-log slopes over the three longest lengths: "
    + ", ".join(f"{k} {v:.2f}" for k, v in slopes.items())
)
assert (
    abs(slopes["explicit memory"] - 2) < 1e-6 and abs(slopes["fast memory"] - 1) < 1e-6
)
assert slopes["explicit time"] > 1.5 and slopes["fast time"] > 1.3


# %% [markdown]
# The memory plot is exact: the explicit path's largest tensor is the $n\times n$ weight matrix
# (slope 2), while the fast path's largest is its $n\times d$ output (slope 1). The timings show the
# growth: on short sequences fixed overheads flatten the curve, and at long lengths the slopes
# are the ones printed above; the cell asserts only that they are well above linear (1.5 for the
# explicit path, 1.3 for the fast one), since timings are noisy. A slope above 2 means that the data have outgrown
# the processor's caches, so that every pass over them waits on main memory; the explicit path,
# which writes the whole weight matrix out and reads it back, suffers most, and that traffic is
# what the fused kernel saves. It still does the $O(n^2 d)$ arithmetic: fusing saves memory and
# time, not the quadratic work. In a BERT-base forward pass the explicit weights are $B \cdot H \cdot n^2$ floats
# in every one of the 12 layers, and training keeps them all for the backward pass; an exercise
# works out how much that is.
#
# (sec-attention-summary)=
# ## Summary
#
# - Queries, keys and values are three linear maps of the same input, $\mathbf Q = \mathbf
#   X\mathbf W^Q$, $\mathbf K = \mathbf X\mathbf W^K$, $\mathbf V = \mathbf X\mathbf W^V$, and
#   $\operatorname{Attention}(\mathbf Q,\mathbf K,\mathbf V) =
#   \operatorname{softmax}(\mathbf Q\mathbf K^\top/\sqrt{d_k})\,\mathbf V$ gives each position a
#   weighted average of all values. In Sidorov's example the scores 112 and 96 become 14 and 12
#   and the weights 0.88 and 0.12.
# - Dot products of random unit-variance vectors have variance $d_k$; dividing by $\sqrt{d_k}$ keeps
#   the softmax from saturating as the width grows, and with it the gradient alive.
# - Masks are boolean, `True` = may attend, broadcastable to `(B, H, T, S)`: `padding_mask` gives
#   `(B, 1, 1, S)`, `causal_mask` gives `(T, S)`, and `&` combines them. Other conventions are
#   converted at the boundary (`.bool()`, `~mask`). A fully masked row gives zeros, never `NaN`.
# - `scaled_dot_product_attention` (explicit, returns the weights) and
#   `fast_scaled_dot_product_attention` (PyTorch's fused kernel, returns `None` for the weights)
#   share one signature and agree to within $10^{-6}$ in single precision; the fast one was faster
#   in this run by the factor printed in {ref}`sec-attention-fast`.
# - Attention weights show how values are mixed, not why; read heatmaps with care.
# - Attention costs $O(n^2 d)$ time and, written out, $O(n^2)$ memory: the measured log-log slopes
#   are printed in {ref}`sec-attention-cost`.
#
# From `tinybert.blocks.attention` later chapters import `scaled_dot_product_attention`,
# `fast_scaled_dot_product_attention`, `masked_softmax`, `causal_mask` and `padding_mask`.
#
# (sec-attention-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-attention-thinking-machines
# :difficulty: 1
# :minutes: 20
# :kind: derivation
# :::
# **The Thinking Machines numbers (pen and paper).** With the scores $\mathbf q_1\cdot\mathbf k_1 =
# 112$ and $\mathbf q_1\cdot\mathbf k_2 = 96$ of the walk-through:
#
# 1. Show that the weight of *Thinking* on itself is $1/(1+e^{-2})$ and evaluate it to three
#    decimals.
# 2. What would the weights be if the same dot products came from vectors of width $d_k = 256$?
# 3. What would they be without the division by $\sqrt{d_k}$?
# 4. Which value of $\mathbf q_1\cdot\mathbf k_2$ (with $d_k = 64$ and $\mathbf q_1\cdot\mathbf k_1 =
#    112$) would make the two weights equal, and which would give *Machines* the weight $0.88$?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-attention-thinking-machines
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): $1/(1+e^{-2}) \approx 0.881$ from the scaled scores 14
# and 12; about 0.731 and 0.269 at $d_k = 256$; a practically one-hot softmax without the scaling;
# equal weights at 112 and a weight of 0.88 for *Machines* at 128; the remark that only the
# difference of the scores matters.
#
# 1. $\operatorname{softmax}(14, 12)_1 = e^{14}/(e^{14}+e^{12}) = 1/(1+e^{12-14}) = 1/(1+e^{-2})
#    \approx 0.881$; the other weight is $0.119$. Only the difference of the scores matters.
# 2. $\sqrt{256} = 16$, so the scaled scores are $7$ and $6$, and the weights
#    $1/(1+e^{-1}) \approx 0.731$ and $0.269$: the same dot products count for less in a wider
#    space, where they are expected to be larger.
# 3. The difference is $16$, so the weights are $1/(1+e^{-16}) \approx 1 - 1.1\times10^{-7}$ and
#    $1.1\times 10^{-7}$: the softmax is one-hot for all practical purposes.
# 4. Equal weights need equal scores, $\mathbf q_1\cdot\mathbf k_2 = 112$. *Machines* gets $0.88$
#    when its scaled score is 2 above the other one, $14 + 2 = 16$, that is
#    $\mathbf q_1\cdot\mathbf k_2 = 128$.

# %%
def two_weights(score_1, score_2, d_k_ex):
    return torch.softmax(
        torch.tensor([score_1, score_2], dtype=torch.float64) / math.sqrt(d_k_ex),
        dim=-1,
    )


print(
    "d_k = 64:",
    two_weights(112, 96, 64).numpy().round(3),
    "  d_k = 256:",
    two_weights(112, 96, 256).numpy().round(3),
    "  unscaled:",
    two_weights(112, 96, 1).numpy(),
    "  q1·k2 = 128:",
    two_weights(112, 128, 64).numpy().round(3),
)
assert abs(two_weights(112, 96, 256)[0].item() - 1 / (1 + math.exp(-1))) < 1e-12
assert [round(w_ex, 2) for w_ex in two_weights(112, 128, 64).tolist()] == [0.12, 0.88]

# %% [markdown]
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-attention-masked-softmax
# :difficulty: 2
# :minutes: 30
# :kind: coding
# :::
# **A masked softmax that never returns NaN.** Write `softmax_with_mask(scores, mask)` for scores of
# shape `(..., T, S)` and a bool mask (`True` = may attend) that broadcasts to them. It returns the
# softmax over the last axis restricted to the allowed entries: masked entries get weight 0, every
# row with at least one allowed entry sums to 1, and a row with none is all zeros. No `NaN` may
# appear, neither in the result nor in the gradient with respect to `scores`, and scores as large as
# $\pm 10^4$ must work. Do not use `tinybert`. *Hint:* subtract each row's largest *allowed* score
# before exponentiating, and think about what to divide by when a row's sum is 0.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-attention-masked-softmax
# :class: dropdown
# ::::
# Subtracting the row's largest allowed score keeps every exponential of an allowed entry at most 1
# (no overflow), and the largest one is exactly 1 (the sum is at least 1 in a live row). Setting
# the masked entries to $-\infty$ before exponentiating makes them exactly 0. In a dead row the
# sum is 0; dividing such rows by 1 instead turns $0/0$ into $0/1 = 0$, in the forward pass and in
# the gradient. The maximum of a dead row is $-\infty$, so we replace it with 0 before
# subtracting, which keeps $-\infty - (-\infty)$ out of the computation.

# %% tags=["solution"]
import torch


def softmax_with_mask(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    # (..., T, S)
    mask = mask.expand_as(scores)
    # (..., T, 1)
    row_max = scores.masked_fill(~mask, float("-inf")).amax(dim=-1, keepdim=True)
    row_max = torch.where(
        torch.isfinite(row_max), row_max, torch.zeros_like(row_max)
    ).detach()
    # (..., T, S), masked -> 0
    exps = torch.exp((scores - row_max).masked_fill(~mask, float("-inf")))
    # (..., T, 1), 0 in dead rows
    total = exps.sum(dim=-1, keepdim=True)
    # dead rows: 0 / 1 = 0
    return exps / torch.where(total > 0, total, torch.ones_like(total))
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch03 import check_softmax_with_mask

check_softmax_with_mask(softmax_with_mask)

# %% [markdown]
# :::{exercise-start}
# :label: ex-attention-causal-loop
# :difficulty: 2
# :minutes: 25
# :kind: coding
# :::
# **Causal attention one query at a time.** A causal mask says that query $t$ may only use keys
# $0, \dots, t$. Write `causal_attention_loop(q, k, v)` for self-attention inputs of shape
# `(..., T, Dk)`, `(..., T, Dk)` and `(..., T, Dv)` that computes the output for each position $t$
# *separately*, with a Python loop over $t$ that slices out the keys and values it may see, and
# stacks the results into `(..., T, Dv)`. Use no mask at all, and neither `tinybert` nor
# `F.scaled_dot_product_attention`. The check compares your function with
# `scaled_dot_product_attention(q, k, v, causal_mask(T))`: two very different programs that must
# compute the same thing.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-attention-causal-loop
# :class: dropdown
# ::::
# For position $t$, the query is `q[..., t:t+1, :]`, of shape `(..., 1, Dk)`, and the visible keys
# and values are the first $t+1$ rows. The rest is the attention formula for a single query.

# %% tags=["solution"]
import math

import torch


def causal_attention_loop(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    ### BEGIN SOLUTION
    T = q.shape[-2]
    outputs = []
    for t in range(T):
        q_t = q[..., t : t + 1, :]  # (..., 1, Dk)
        # (..., t+1, Dk), (..., t+1, Dv)
        k_seen, v_seen = k[..., : t + 1, :], v[..., : t + 1, :]
        # (..., 1, t+1)
        weights = torch.softmax(
            q_t @ k_seen.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1
        )
        outputs.append(weights @ v_seen)  # (..., 1, Dv)
    return torch.cat(outputs, dim=-2)  # (..., T, Dv)
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch03 import check_causal_attention_loop

check_causal_attention_loop(causal_attention_loop)

# %% [markdown]
# :::{exercise-start}
# :label: ex-attention-boundaries
# :difficulty: 2
# :minutes: 20
# :kind: coding
# :::
# **Converting masks at the boundary.** Write two converters between the book's masks and other
# libraries' conventions:
#
# - `from_hf_attention_mask(attention_mask)`: a Hugging Face `attention_mask` of shape `(B, S)` with
#   integer (or float) ones at real tokens and zeros at padding → the book's padding mask,
#   `(B, 1, 1, S)` bool. Padding may sit on the left as well as on the right.
# - `to_key_padding_mask(mask)`: the book's padding mask `(B, 1, 1, S)` → the `key_padding_mask` of
#   `nn.MultiheadAttention`, `(B, S)` bool with `True` at the positions to *ignore*.
#
# The check feeds your second converter's result to a real `nn.MultiheadAttention`.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-attention-boundaries
# :class: dropdown
# ::::
# Non-zero means "real token" in the Hugging Face convention, and the book's polarity is the
# opposite of `nn.MultiheadAttention`'s:

# %% tags=["solution"]
import torch


def from_hf_attention_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    # (B, S) -> (B, 1, 1, S), True = may attend
    return (attention_mask != 0)[:, None, None, :]
    ### END SOLUTION


def to_key_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    # (B, 1, 1, S) -> (B, S), True = ignore
    return ~mask[:, 0, 0, :]
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch03 import check_mask_conversions

check_mask_conversions(from_hf_attention_mask, to_key_padding_mask)

# %% [markdown]
# :::{exercise-start}
# :label: ex-attention-cost
# :difficulty: 2
# :minutes: 20
# :kind: derivation
# :::
# **How big are BERT's attention weights? (pen and paper)** BERT-base has 12 layers of 12 heads.
# Training it on batches of 32 sequences of 512 tokens in 32-bit floats, the explicit attention
# function materialises a `(B, H, T, S)` weight tensor in every layer, and autograd keeps it for the
# backward pass.
#
# 1. How many bytes do the weights of one layer take? And of all 12 layers?
# 2. The same with sequences of 4,096 tokens?
# 3. By the $O(n^2 d)$ estimate, how much longer does one attention call take when $n$ doubles?
#    The chapter's measured slopes: do they agree?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-attention-cost
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): $B\cdot H\cdot n^2 \cdot 4$ bytes: 384 MiB per layer,
# 4.5 GiB for 12 layers; 64 times as much at 4,096 tokens; a factor of 4 per doubling of $n$
# (slope 2 on a log-log plot), compared with the chapter's measured slopes, with a reason why
# short sequences differ.
#
# 1. $B\cdot H\cdot n^2$ floats of 4 bytes: $32 \cdot 12 \cdot 512^2 \cdot 4 = 402{,}653{,}184$
#    bytes, 384 MiB per layer and 4.5 GiB for 12 layers, for the weights alone (the scores before
#    the softmax, and the dropout mask in training, take as much again).
# 2. $8\times$ longer sequences need $64\times$ as much: 24 GiB per layer, 288 GiB for the model,
#    more than any single GPU holds. This is why long-context models use fused kernels, which
#    recompute the weights block by block in the backward pass instead of storing them.
# 3. Doubling $n$ multiplies $n^2 d$ by 4, a slope of 2 on the log-log plot. The measured slopes
#    approach 2 for long sequences; for short ones the fixed cost of each call dominates and the
#    slope is smaller, and a slope above 2 means the weights have outgrown the processor's cache.

# %%
for n_tokens in [512, 4096]:
    per_layer = 32 * 12 * n_tokens**2 * 4
    print(
        f"n = {n_tokens}: {per_layer:,} bytes = {per_layer / 2**20:,.0f} MiB per "
        f"layer, {12 * per_layer / 2**30:,.1f} GiB in 12 layers"
    )
assert 32 * 12 * 512**2 * 4 == 384 * 2**20

# %% [markdown]
# ::::{solution-end}
# ::::
#
# (sec-attention-quiz)=
# ## Quiz
#
# Check what you took from this chapter. In a notebook, run the cell and answer with
# `quiz.check(question, answer)`, such as `quiz.check(1, "b")`; here, press *Check*.

# %% tags=["quiz", "remove-input"]
import torch

from tinybert.exercises.quiz import Quiz, choice, number

walk_through = torch.softmax(torch.tensor([112.0, 96.0]) / 64**0.5, dim=0)
quiz = Quiz(
    "ch03",
    [
        number(
            "Scores 112 and 96 with d_k = 64: the weight of Thinking on itself? "
            "(3 decimals)",
            answer=walk_through[0].item(),
            decimals=3,
            explain="The scaled scores 14 and 12 give 1/(1 + e⁻²).",
        ),
        choice(
            "Why are the scores divided by √d_k?",
            [
                "the scores' variance grows like d_k, and large scores saturate the "
                "softmax",
                "the weights of each row must sum to one, whatever the width",
                "the values' variance grows like d_k, and the output must keep unit "
                "variance",
                "large scores overflow in float32 unless they are scaled",
            ],
            answer="a",
            explain="Saturated softmaxes have vanishing gradients.",
        ),
        choice(
            "In this book's masks, what does True mean?",
            [
                "the position is padding",
                "the position comes first",
                "must be ignored",
                "may attend",
            ],
            answer="d",
            explain="The polarity of F.scaled_dot_product_attention.",
        ),
        choice(
            "Which shape does padding_mask return?",
            ["(B, T)", "(B, 1, 1, S)", "(T, S)", "(B, H, T, S)"],
            answer="b",
            explain="It broadcasts over heads and queries.",
        ),
        choice(
            "What does a row with every key masked give?",
            ["NaN", "uniform weights", "zeros", "an error"],
            answer="c",
            explain="masked_softmax makes a fully masked row all zeros.",
        ),
        number(
            "By what factor does doubling n multiply attention's O(n²d) time?",
            answer=4,
            decimals=0,
            explain="A slope of 2 on a log-log plot.",
        ),
    ],
)
quiz
