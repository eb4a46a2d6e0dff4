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
#     module: blocks.multihead
# ---

# %% [markdown]
# (sec-mha)=
# # Multi-head attention
#
# In the previous chapter every query took *one* weighted average of the values: one softmax, one
# distribution over the positions, one way of relating a word to the others. Words usually need
# several at once. A verb wants its subject and its object, a pronoun its antecedent, and almost
# every word profits from knowing its neighbours. One softmax can spread its mass over all of them,
# but then it returns their *average*, and an average no longer says which value came from where.
# {term}`Multi-head attention` runs several attention functions side by side, each with its own
# projections and on vectors several times narrower, and mixes their results with one more linear
# map {cite}`vaswani2017attention`. It is the attention layer of the Transformer and of BERT.
#
# **What you will learn**
#
# - the five steps of multi-head attention (project, split into {term}`heads <head>`, attend,
#   concatenate, project with $\mathbf W^O$), written once with `view`/`transpose` and once with
#   einops, and why splitting into heads is only a reshape;
# - why the width of a head is $D_h = D/H$: any number of heads costs the same parameters and the
#   same arithmetic as one head of full width, which PyTorch's FLOP counter confirms;
# - the fused QKV projection, and the layout of `nn.MultiheadAttention`'s `in_proj_weight`;
# - the module `MultiHeadAttention`, for {term}`self-attention` and {term}`cross-attention`, with
#   padding and causal masks, proved equal to `torch.nn.MultiheadAttention`, whose boolean masks
#   have the opposite polarity to ours;
# - an experiment that asks whether the heads of a small trained model divide a task between them.
#
# **Uses.** From {doc}`03_attention`: `scaled_dot_product_attention` (the core of every head),
# `fast_scaled_dot_product_attention`, `causal_mask` and `padding_mask`, and the book's
# conventions for shapes and masks. From {doc}`01_feedforward`: `MLP`, `count_parameters`, and the argument checks
# `check_positive_int`, `check_probability` and `shape_of`.
# Everything this chapter defines is exported to `tinybert.blocks.multihead`; the Transformer and BERT
# chapters build their layers on its `MultiHeadAttention`.
#
# (sec-mha-setup)=
# ## Setup
#
# The first cell holds the imports of the module `tinybert.blocks.multihead`; the second, those of the
# teaching code.

# %% tags=["export"]
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tinybert.blocks.attention import (
    fast_scaled_dot_product_attention,
    scaled_dot_product_attention,
)
from tinybert.blocks.checks import check_positive_int, check_probability, shape_of

# %%
import matplotlib.pyplot as plt
from einops import rearrange
from torch.utils.flop_counter import FlopCounterMode

from tinybert.blocks.attention import causal_mask, padding_mask
from tinybert.blocks.feedforward import MLP, count_parameters
from tinybert.runtime import get_device, is_quick, pick, progress, seed_everything

device = get_device()
print(f"device: {device}, quick mode: {is_quick()}")

# %% [markdown]
# (sec-mha-equation)=
# ## From one head to many
#
# Write $\mathbf X \in \mathbb R^{T\times D}$ for the sequence whose positions are updated (the
# queries) and $\mathbf C \in \mathbb R^{S\times D}$ for the sequence they look at (keys and
# values); in self-attention $\mathbf C = \mathbf X$. Multi-head attention with $H$ heads computes
# {cite}`vaswani2017attention`
#
# $$
# \operatorname{MultiHead}(\mathbf X, \mathbf C) = \operatorname{Concat}(\text{head}_1, \dots, \text{head}_H)\,\mathbf W^O,
# \qquad
# \text{head}_h = \operatorname{Attention}\bigl(\mathbf X\mathbf W^Q_h,\; \mathbf C\mathbf W^K_h,\; \mathbf C\mathbf W^V_h\bigr),
# $$
#
# where each head has its own projections $\mathbf W^Q_h, \mathbf W^K_h, \mathbf W^V_h \in
# \mathbb R^{D\times D_h}$, $\operatorname{Attention}$ is the scaled dot-product attention of
# {doc}`03_attention`, each $\text{head}_h$ is a $T\times D_h$ matrix, and the output projection
# $\mathbf W^O \in \mathbb R^{HD_h\times D}$ mixes the concatenated heads back to width $D$. All
# five {ref}`lecture decks <sources-decks>` give the recipe in the same five steps
# {cite}`alammar2018illustrated`:
#
# 1. take the input sentence;
# 2. embed each word (the rows of $\mathbf X$);
# 3. split into $H$ heads, multiplying $\mathbf X$ by each head's weight matrices;
# 4. compute attention in every head with its own $\mathbf Q$, $\mathbf K$, $\mathbf V$;
# 5. concatenate the heads' outputs $\mathbf Z_h$ and multiply by $\mathbf W^O$.
#
# The heads are narrow: $D_h = D/H$. In the base Transformer and in both BERT sizes that comes to
# 64 features per head {cite}`vaswani2017attention,devlin2019bert`:

# %%
sizes = {"Transformer base": (512, 8), "BERT-base": (768, 12), "BERT-large": (1024, 16)}
for label, (d_model, n_heads) in sizes.items():
    print(
        f"{label:<17} D = {d_model:>4}, H = {n_heads:>2}, Dh = D / H = "
        f"{d_model // n_heads}"
    )
    assert d_model % n_heads == 0 and d_model // n_heads == 64

# %% [markdown]
# Step 3 is cheaper than it looks. Put the $H$ matrices $\mathbf W^Q_h$ side by side and they form
# one $D\times D$ matrix, $\mathbf W^Q = [\mathbf W^Q_1\;\mathbf W^Q_2\;\cdots\;\mathbf W^Q_H]$.
# Then $\mathbf X\mathbf W^Q = [\mathbf X\mathbf W^Q_1\;\cdots\;\mathbf X\mathbf W^Q_H]$: one matrix
# product computes the queries of all heads, and head $h$'s queries are simply the $h$-th block of
# $D_h$ columns. "Splitting into heads" is therefore not a computation at all, only a way of
# indexing the result. `nn.Linear` stores its weight as (out, in), so head $h$'s block is a block
# of *rows* of `weight`:

# %%
seed_everything(0)
B, T, D, H = 2, 5, 12, 3
Dh = D // H
x = torch.randn(B, T, D)  # (B, T, D)
# W^Q for all heads: (out, in) = (D, D)
to_queries = nn.Linear(D, D, bias=False)
# (B, T, D): every head's queries side by side
all_queries = to_queries(x)

for h in range(H):
    # (Dh, D): head h's block of rows
    W_h = to_queries.weight[h * Dh : (h + 1) * Dh]
    # (B, T, Dh): X W^Q_h, head h on its own
    q_h = x @ W_h.T
    assert torch.allclose(all_queries[..., h * Dh : (h + 1) * Dh], q_h, atol=1e-6)
print(f"one ({D} x {D}) projection = {H} heads of width {Dh}, computed at once")


# %% [markdown]
# (sec-mha-split)=
# ## Splitting and merging heads
#
# Attention wants each head as its own matrix, so that one batched matrix product serves all
# heads. `split_heads` turns the projected $(B, T, D)$ tensor into $(B, H, T, D_h)$: `view` cuts the
# last axis into $H$ blocks of $D_h$, and `transpose` moves the head axis in front of the positions.
# `merge_heads` undoes it; that is the $\operatorname{Concat}$ of the equation. Neither copies
# data except the final `.contiguous()`, which `view` needs after a transpose.

# %% tags=["export"]
def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, Dh): cut the features of every position into H heads
    of Dh = D / H.

    Head h gets features h·Dh ... (h+1)·Dh - 1, the block that W_h^Q (or W_h^K,
    W_h^V) produced.
    """
    check_positive_int("n_heads", n_heads)
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(
            f"split_heads: expected x of shape (B, T, D), got {shape_of(x)}"
        )
    B, T, D = x.shape
    if D % n_heads != 0:
        raise ValueError(
            f"split_heads: the width D = {D} of x {shape_of(x)} is not "
            f"divisible by n_heads = {n_heads}"
        )
    # (B, T, H, Dh) -> (B, H, T, Dh)
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, Dh) -> (B, T, D): put the heads side by side again, Concat(head_1,
    ..., head_H)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(
            f"merge_heads: expected x of shape (B, H, T, Dh), got {shape_of(x)}"
        )
    B, H, T, Dh = x.shape
    # (B, T, H, Dh) -> (B, T, D)
    return x.transpose(1, 2).contiguous().view(B, T, H * Dh)


# %% [markdown]
# On a tiny tensor whose entries name their own position and feature (the entry at position $t$,
# feature $f$ is $10t + f$), the layout is visible: each head holds every position, with its own
# block of features.

# %%
# (1, 3, 6)
tiny = torch.tensor([[[10 * t + f for f in range(6)] for t in range(3)]])
# (1, 2, 3, 3)
tiny_heads = split_heads(tiny, n_heads=2)
print(f"x {tuple(tiny.shape)}:\n{tiny[0]}")
for h in range(2):
    print(f"head {h} {tuple(tiny_heads[0, h].shape)}:\n{tiny_heads[0, h]}")
# head 1 = features 3..5 of every position
assert torch.equal(tiny_heads[0, 1], tiny[0, :, 3:6])
assert torch.equal(merge_heads(tiny_heads), tiny)  # merge undoes split

# %% [markdown]
# ```{admonition} A reshape that runs and is wrong
# :class: warning
# `x.view(B, H, T, Dh)` has the right shape and raises no error, but it is not a split into heads:
# it reads the numbers in memory order, so "head 0" would receive the first positions' features
# instead of the first block of features of every position. Always cut the last axis first
# (`view(B, T, H, Dh)`), then move the head axis with `transpose`.
# ```

# %%
x_proj = torch.randn(2, 5, 12)  # (B, T, D)
wrong = x_proj.view(2, 3, 5, 4)  # (B, H, T, Dh) in shape only
right = split_heads(x_proj, n_heads=3)  # (B, H, T, Dh)
print(
    f"same shape {tuple(wrong.shape) == tuple(right.shape)}, same values "
    f"{torch.equal(wrong, right)}"
)
assert wrong.shape == right.shape and not torch.equal(wrong, right)
assert torch.equal(merge_heads(right), x_proj)


# %% [markdown]
# (sec-mha-einops)=
# ### The same reshapes with einops
#
# The library einops names every axis in a small pattern language, so a reshape documents itself:
# `'b t (h d) -> b h t d'` says that the last axis is made of `h` blocks of `d` features, and that
# `h` moves in front of `t`. The two functions above in one line each:

# %%
def split_heads_einops(x, n_heads):
    # (B, T, D) -> (B, H, T, Dh)
    return rearrange(x, "b t (h d) -> b h t d", h=n_heads)


def merge_heads_einops(x):
    # (B, H, T, Dh) -> (B, T, D)
    return rearrange(x, "b h t d -> b t (h d)")


for shape, n_heads in [
    ((2, 5, 12), 3),
    ((13, 7, 32), 4),
    ((1, 1, 8), 8),
    ((3, 4, 6), 1),
]:
    x_test = torch.randn(shape)
    assert torch.equal(
        split_heads_einops(x_test, n_heads), split_heads(x_test, n_heads)
    )
    assert torch.equal(merge_heads_einops(split_heads(x_test, n_heads)), x_test)
print("einops and view/transpose agree on every shape tried")


# %% [markdown]
# Both spellings are common in the wild: nanoGPT and PyTorch use `view`/`transpose`, x-transformers
# uses einops. The library keeps `view`/`transpose`, so that it needs nothing beyond PyTorch.
#
# (sec-mha-module)=
# ## The multi-head attention module
#
# Now the whole layer. `forward` reads like {numref}`fig-mha` below (Figure 2 of the paper),
# one step per line: project, split, attend, merge, project with $\mathbf W^O$. The four
# projections are separate `nn.Linear` layers with readable names (`query`, `key`, `value`,
# `output`), each holding the $H$ heads' blocks side by side; the BERT chapter maps pretrained checkpoints onto exactly these names. Attention
# itself is the function of {doc}`03_attention`, applied to all heads at once because it accepts any
# leading axes; the mask therefore broadcasts to $(B, H, T, S)$, and a $(B, 1, 1, S)$ padding mask
# or a $(T, S)$ causal mask serves every head. Dropout, when asked for, acts on the attention
# weights and only in training mode. With `fast=True` the layer calls PyTorch's fused kernel
# instead, which computes the same output without ever forming the weights, so it returns `None`
# for them; for self-attention it also projects $Q$, $K$ and $V$ with one matrix product (the
# fused projection of {ref}`sec-mha-fused`, below). The module's `fast` chooses the path; a call
# that needs the weights says `need_weights=True`, which takes the explicit path whatever `fast`
# says.

# %% tags=["export"]
class MultiHeadAttention(nn.Module):
    """Multi-head attention: project, split into heads, attend, merge, project with W^O.

    MultiHead(x, c) = Concat(head_1, ..., head_H) W^O with head_h = Attention(x W_h^Q, c
    W_h^K, c W_h^V): self-attention when ``context`` is None (c = x), cross-attention
    otherwise. Shapes: x (B, T, D), context (B, S, D), mask bool (True = may attend)
    broadcastable to (B, H, T, S). Returns (output (B, T, D), weights (B, H, T, S));
    weights is None on the fast path (fused kernel), taken when fast=True unless
    need_weights=True asks for the weights (the explicit path).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        fast: bool = False,
    ):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("n_heads", n_heads)
        if d_model % n_heads != 0:
            raise ValueError(
                f"d_model = {d_model} must be divisible by n_heads = "
                f"{n_heads}: each head gets Dh = d_model / "
                f"n_heads features"
            )
        check_probability("dropout", dropout)
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        # on the attention weights, training only
        self.dropout = float(dropout)
        # fused kernel, no weights returned
        self.fast = bool(fast)
        # W^Q = [W_1^Q ... W_H^Q]
        self.query = nn.Linear(d_model, d_model, bias=bias)
        self.key = nn.Linear(d_model, d_model, bias=bias)  # W^K
        self.value = nn.Linear(d_model, d_model, bias=bias)  # W^V
        # W^O mixes the concatenated heads
        self.output = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        explicit = need_weights or not self.fast
        c = x if context is None else context
        self._check_inputs(x, c)
        # one product for Q, K, V
        if context is None and not explicit:
            q, k, v = self._fused_qkv(x)  # 3 x (B, H, T, Dh)
        else:
            # (B, T, D) -> (B, H, T, Dh)
            q = split_heads(self.query(x), self.n_heads)
            # (B, S, D) -> (B, H, S, Dh)
            k = split_heads(self.key(c), self.n_heads)
            # (B, S, D) -> (B, H, S, Dh)
            v = split_heads(self.value(c), self.n_heads)
        attend = (
            scaled_dot_product_attention
            if explicit
            else fast_scaled_dot_product_attention
        )
        dropout_p = self.dropout if self.training else 0.0
        # (B, H, T, Dh)
        heads, weights = attend(q, k, v, mask=mask, dropout_p=dropout_p)
        # (B, H, T, Dh) -> (B, T, D)
        return self.output(merge_heads(heads)), weights

    def _fused_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Q, K and V of self-attention from one product with the stacked (3D,
        D) weight."""
        B, T, _ = x.shape
        # (3D, D)
        weight = torch.cat([self.query.weight, self.key.weight, self.value.weight])
        bias = None
        if self.query.bias is not None:
            # (3D,)
            bias = torch.cat([self.query.bias, self.key.bias, self.value.bias])
        qkv = F.linear(x, weight, bias)  # (B, T, 3D)
        # (B, T, 3, H, Dh)
        qkv = qkv.view(B, T, 3, self.n_heads, self.d_head)
        # 3 x (B, H, T, Dh)
        return tuple(qkv.permute(2, 0, 3, 1, 4))

    def _check_inputs(self, x, context) -> None:
        """Raise ValueError unless x is (B, T, D) and context (B, S, D); attention
        checks the mask."""
        D = self.d_model
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != D:
            raise ValueError(
                f"x: expected shape (B, T, d_model={D}), got {shape_of(x)}"
            )
        if (
            not isinstance(context, torch.Tensor)
            or context.dim() != 3
            or context.shape[-1] != D
        ):
            raise ValueError(
                f"context: expected shape (B, S, d_model={D}), got {shape_of(context)}"
            )
        if context.shape[0] != x.shape[0]:
            raise ValueError(
                f"context: expected shape (B={x.shape[0]}, S, {D}) to "
                f"match x {shape_of(x)}, got {shape_of(context)}"
            )

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, dropout={self.dropout}, "
            f"fast={self.fast}"
        )


# %% [markdown]
# A layer of width 32 with 4 heads, on a batch of 3 sequences of 7 positions:

# %%
seed_everything(0)
B, T, D, H = 3, 7, 32, 4
mha = MultiHeadAttention(d_model=D, n_heads=H)
print(mha)
x = torch.randn(B, T, D)  # (B, T, D)
out, weights = mha(x)  # self-attention
print(
    f"x {tuple(x.shape)} -> output {tuple(out.shape)}, weights {tuple(weights.shape)}"
)
assert out.shape == (B, T, D) and weights.shape == (B, H, T, T)
# one distribution per head and query
assert torch.allclose(weights.sum(-1), torch.ones(B, H, T), atol=1e-6)

# %% [markdown]
# {numref}`fig-mha` draws this layer, with the sizes read from `mha` and `x`: three projections,
# a reshape into heads, one attention per head, the reverse reshape and $\mathbf W^O$.

# %% mystnb={"figure": {"caption": "Multi-head attention as `MultiHeadAttention` computes it, for the layer and the batch above: project with $\\mathbf W^Q$, $\\mathbf W^K$, $\\mathbf W^V$, split the width $D$ into $H$ heads of $D_h = D/H$, attend in every head, merge the heads and mix them with $\\mathbf W^O$. The shapes under the reshapes are those of the batch.", "name": "fig-mha"}, "image": {"alt": "Flow diagram of multi-head attention, left to right. The input x of shape (B, T, D) goes into three linear maps W^Q, W^K and W^V from D to D; a box \"split into H heads\" turns (B, T, D) into (B, H, T, Dh); H boxes, one attention per head, each with queries, keys and values of width Dh; a box \"merge\" turns (B, H, T, Dh) back into (B, T, D); the output map W^O from D to D gives the output (B, T, D). A note gives D, H and Dh."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import multihead_attention_diagram

multihead_attention_diagram(
    d_model=mha.d_model, n_heads=mha.n_heads, batch=x.shape[0], length=x.shape[1]
)

# %% [markdown]
# The steps of `forward`, redone by hand from the layer's own weights, give the same output; and
# the fast path agrees with the explicit one:

# %%
q = split_heads(x @ mha.query.weight.T + mha.query.bias, H)  # (B, H, T, Dh)
k = split_heads(x @ mha.key.weight.T + mha.key.bias, H)  # (B, H, T, Dh)
v = split_heads(x @ mha.value.weight.T + mha.value.bias, H)  # (B, H, T, Dh)
scores = q @ k.transpose(-2, -1) / (D // H) ** 0.5  # (B, H, T, T)
# (B, T, D)
by_hand = merge_heads(scores.softmax(-1) @ v) @ mha.output.weight.T + mha.output.bias
assert torch.allclose(by_hand, out, atol=1e-6)

mha.fast = True
out_fast, no_weights = mha(x)  # fused Q, K, V + kernel
print(
    f"fast path: weights {no_weights}, "
    f"max |fast - explicit| = {(out_fast - out).abs().max().item():.1e}"
)
assert no_weights is None and torch.allclose(out_fast, out, atol=1e-6)
# asking for the weights takes the explicit path
assert mha(x, need_weights=True)[1].shape == (B, H, T, T)
mha.fast = False

# %% [markdown]
# Inputs that do not fit are refused with a message naming the expected and the given shapes:

# %%
for description, call in [
    (
        "d_model not divisible by n_heads",
        lambda: MultiHeadAttention(d_model=30, n_heads=4),
    ),
    ("input of width 31", lambda: mha(torch.randn(B, T, 31))),
    (
        "context with another batch size",
        lambda: mha(x, context=torch.randn(B + 1, 5, D)),
    ),
    ("mask of shape (7, 8)", lambda: mha(x, mask=torch.ones(7, 8, dtype=torch.bool))),
]:
    try:
        call()
        raise AssertionError(f"{description}: expected a ValueError")
    except ValueError as error:
        print(f"{description}: ValueError: {error}")


# %% [markdown]
# (sec-mha-cost)=
# ### Many heads for the price of one
#
# Splitting the width instead of multiplying it is what keeps multi-head attention affordable. The
# four projections hold $4D^2 + 4D$ parameters whatever $H$ is. In the attention itself, each head
# computes a $T\times S$ score matrix from vectors of width $D_h$ and then a weighted sum of
# $D_h$-wide values, so $H$ heads do $H \cdot T S D_h = T S D$ multiply-adds for each of the two
# products: exactly what one head of width $D$ would do {cite}`vaswani2017attention`. PyTorch can
# count the floating-point operations of a call (`FlopCounterMode` counts the matrix products), so
# we do not have to take the formula on trust:

# %%
def flops(module, x):
    """Floating-point operations of one forward pass, as counted by PyTorch (matrix
    products)."""
    with FlopCounterMode(display=False) as counter:
        module(x)
    return counter.get_total_flops()


B_cost, T_cost, D_cost = 4, 64, 256
x_cost = torch.randn(B_cost, T_cost, D_cost)
rows = []
for n_heads in [1, 2, 4, 8, 16]:
    layer = MultiHeadAttention(D_cost, n_heads)
    rows.append((n_heads, count_parameters(layer), flops(layer, x_cost)))
for n_heads, n_params, n_flops in rows:
    print(
        f"H = {n_heads:>2}, Dh = {D_cost // n_heads:>3}: {n_params:>7,} parameters, "
        f"{n_flops / 1e6:6.1f} MFLOPs"
    )

# 4 linear maps, 2 FLOPs per multiply-add
projections = 4 * 2 * B_cost * T_cost * D_cost * D_cost
# scores and weighted sum
attention = 2 * 2 * B_cost * T_cost * T_cost * D_cost
assert all(p == 4 * D_cost * D_cost + 4 * D_cost for _, p, _ in rows)
assert all(f == projections + attention for _, _, f in rows)

# %% [markdown]
# What does grow with $H$ is the number of attention *weights*: one $T\times S$ matrix per head,
# $B\cdot H\cdot T\cdot S$ numbers in all, which the explicit path materialises and the fast path
# does not. Heads also get narrower as their number grows, and a head of width 4 or 8 has little
# room to express what it looks for; 64 features per head is the choice of the models above.
#
# (sec-mha-fused)=
# ### The fused QKV projection
#
# Many implementations (nanoGPT, PyTorch's `nn.MultiheadAttention`) keep $\mathbf W^Q$,
# $\mathbf W^K$ and $\mathbf W^V$ in *one* `nn.Linear(D, 3D)` and cut its output in three: one
# matrix product instead of three. In `nn.Linear`'s (out, in) layout, the fused weight is the three
# weights stacked along the output axis, queries first:

# %%
# (out, in) = (3D, D)
fused = nn.Linear(D, 3 * D)
with torch.no_grad():
    # (3D, D)
    fused.weight.copy_(
        torch.cat([mha.query.weight, mha.key.weight, mha.value.weight], dim=0)
    )
    # (3D,)
    fused.bias.copy_(torch.cat([mha.query.bias, mha.key.bias, mha.value.bias]))

# 3 x (B, T, D)
q_fused, k_fused, v_fused = fused(x).chunk(3, dim=-1)
assert torch.allclose(q_fused, mha.query(x), atol=1e-6)
assert torch.allclose(k_fused, mha.key(x), atol=1e-6)
assert torch.allclose(v_fused, mha.value(x), atol=1e-6)

heads_fused, _ = scaled_dot_product_attention(
    *(split_heads(t, H) for t in (q_fused, k_fused, v_fused))
)
# (B, T, D)
out_fused = mha.output(merge_heads(heads_fused))
print(
    f"fused weight {tuple(fused.weight.shape)}; max |fused - separate| = "
    f"{(out_fused - out).abs().max().item():.1e}"
)
assert torch.allclose(out_fused, out, atol=1e-6)

# %% [markdown]
# The fusion only works when queries, keys and values are computed from the same input. In
# cross-attention they are not, so a fused layer must be cut again into a query part and a
# key-value part. The library keeps four separate projections: they read like the equation, serve
# self- and cross-attention alike, and match the names of the BERT checkpoints we load later.
#
# (sec-mha-self-cross)=
# ## Self-attention and cross-attention
#
# In self-attention the queries, keys and values all come from one sequence: `mha(x)`. In
# cross-attention the queries come from one sequence and the keys and values from another:
# `mha(x, context=c)`. This is how the Transformer's decoder reads the encoder's output, a sentence
# being translated looking at the sentence it translates. The two sequences may have different
# lengths, so the weights have shape $(B, H, T, S)$: one row per query of `x`, one column per
# position of `c`.

# %%
S = 5
context = torch.randn(B, S, D)  # (B, S, D), another sequence
# queries from x, keys and values from context
out_cross, weights_cross = mha(x, context=context)
print(
    f"x {tuple(x.shape)}, context {tuple(context.shape)} -> output "
    f"{tuple(out_cross.shape)}, weights {tuple(weights_cross.shape)}"
)
assert out_cross.shape == (B, T, D) and weights_cross.shape == (B, H, T, S)
# context = x is self-attention
assert torch.allclose(mha(x, context=x)[0], out)

# %% [markdown]
# Attention has no notion of order. Shuffle the context's positions and cross-attention's output
# does not change at all: the keys and values are shuffled together, and a weighted sum does not
# care in which order it adds. Shuffle the *queries* and the output rows are shuffled the same way.
# A word's position is simply invisible to the layer, which is what the next chapter, on
# positional encoding, repairs.

# %%
shuffle_s, shuffle_t = torch.randperm(S), torch.randperm(T)
# keys: invariant
assert torch.allclose(mha(x, context=context[:, shuffle_s])[0], out_cross, atol=1e-6)
# queries: equivariant
assert torch.allclose(
    mha(x[:, shuffle_t], context=context)[0], out_cross[:, shuffle_t], atol=1e-6
)
# self-attention: equivariant
assert torch.allclose(mha(x[:, shuffle_t])[0], out[:, shuffle_t], atol=1e-6)
print(
    f"context shuffled by {shuffle_s.tolist()}: output unchanged; queries shuffled: "
    f"outputs shuffled alike"
)

# %% [markdown]
# Masks work as in {doc}`03_attention`, with one more axis to broadcast over: the heads. A padding
# mask of shape $(B, 1, 1, S)$ hides the same padded keys from every head and every query. Padding
# must make no difference: appending padded positions to a context, and masking them, leaves every
# output unchanged. A causal mask of shape $(T, T)$ makes each position blind to the ones after it,
# so changing the future changes nothing in the past.

# %%
# real lengths of the three contexts
lengths = torch.tensor([5, 3, 4])
short = padding_mask(lengths)  # (B, 1, 1, S)
out_short, _ = mha(x, context=context, mask=short)

# (B, S + 4, D): 4 extra positions
padded = torch.cat([context, torch.randn(B, 4, D)], dim=1)
out_padded, w_padded = mha(x, context=padded, mask=padding_mask(lengths, S=S + 4))
print(
    f"with 4 padded keys: max |difference| = "
    f"{(out_padded - out_short).abs().max().item():.1e}, weight on padding = "
    f"{w_padded[..., S:].abs().max().item()}"
)
assert torch.allclose(out_padded, out_short, atol=1e-6) and torch.all(
    w_padded[..., S:] == 0
)

# (T, T), lower triangle
causal = causal_mask(T)
out_causal, w_causal = mha(x, mask=causal)
x_new_future = x.clone()
# change positions 4, 5, 6
x_new_future[:, 4:] = torch.randn(B, T - 4, D)
out_changed, _ = mha(x_new_future, mask=causal)
# positions 0..3 do not notice
assert torch.allclose(out_changed[:, :4], out_causal[:, :4], atol=1e-6)
# no head looks ahead
assert torch.all(w_causal.triu(diagonal=1) == 0)
print("causal: outputs at positions 0-3 unchanged when positions 4-6 change")


# %% [markdown]
# (sec-mha-parity)=
# ## Parity with `torch.nn.MultiheadAttention`
#
# PyTorch has its own multi-head attention, `nn.MultiheadAttention`. If we give it our weights, it
# must compute our outputs. Two of its conventions differ from ours, and both are converted at the
# boundary, in one place.
#
# **Weights.** It keeps the three input projections fused in one `in_proj_weight` of shape
# $(3D, D)$, stacked as queries, keys, values, exactly like the fused layer above, with the biases
# in `in_proj_bias`, and $\mathbf W^O$ in `out_proj`. (That holds when keys and values have width
# $D$, as here; with other widths it keeps separate `q_proj_weight`, `k_proj_weight`,
# `v_proj_weight`.)
#
# **Masks.** Its boolean masks have the **opposite polarity**: in `attn_mask` and
# `key_padding_mask`, `True` means *not allowed*. Our `True` = "may attend" becomes its
# `~mask`. It also splits the mask in two: `key_padding_mask` of shape $(B, S)$ for padded keys,
# and `attn_mask` of shape $(T, S)$ (or $(B\cdot H, T, S)$) for everything else. Passing our mask
# unconverted raises no error: the layer silently attends to exactly the wrong keys.

# %%
def to_torch_multihead(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention with mha's weights: W^Q, W^K, W^V stacked into
    in_proj_weight."""
    has_bias = mha.query.bias is not None
    reference = nn.MultiheadAttention(
        mha.d_model, mha.n_heads, bias=has_bias, batch_first=True
    )
    with torch.no_grad():
        # (3D, D)
        reference.in_proj_weight.copy_(
            torch.cat([mha.query.weight, mha.key.weight, mha.value.weight])
        )
        # (D, D)
        reference.out_proj.weight.copy_(mha.output.weight)
        if has_bias:
            # (3D,)
            reference.in_proj_bias.copy_(
                torch.cat([mha.query.bias, mha.key.bias, mha.value.bias])
            )
            reference.out_proj.bias.copy_(mha.output.bias)
    return reference.eval()


reference = to_torch_multihead(mha)
print(
    f"in_proj_weight {tuple(reference.in_proj_weight.shape)}, out_proj.weight "
    f"{tuple(reference.out_proj.weight.shape)}"
)

# %% [markdown]
# Four cases, with odd sizes so that a swapped axis would show. For each, three differences: the
# outputs; the per-head weights (`average_attn_weights=False`); and the weights averaged over the
# heads, which is what `nn.MultiheadAttention` returns by default.

# %%
seed_everything(1)
B, T, S, D, H = 3, 7, 5, 32, 4
mha = MultiHeadAttention(D, H).eval()
reference = to_torch_multihead(mha)
x, context = torch.randn(B, T, D), torch.randn(B, S, D)  # (B, T, D), (B, S, D)
pad_x = padding_mask(torch.tensor([7, 4, 6]))  # (B, 1, 1, T)
pad_c = padding_mask(torch.tensor([5, 2, 3]))  # (B, 1, 1, S)
causal = causal_mask(T)  # (T, T)

cases = {  # name: (context, our mask, its attn_mask, its key_padding_mask)
    "self, no mask": (x, None, None, None),
    "self, padding": (x, pad_x, None, ~pad_x[:, 0, 0]),
    "self, causal + padding": (x, causal & pad_x, ~causal, ~pad_x[:, 0, 0]),
    "cross, padding": (context, pad_c, None, ~pad_c[:, 0, 0]),
}
worst = 0.0
print(f"{'case':<24}{'output':>10}{'weights per head':>18}{'averaged weights':>18}")
for name, (c, ours_mask, attn_mask, key_padding_mask) in cases.items():
    # (B, T, D), (B, H, T, S)
    ours, ours_weights = mha(x, context=None if c is x else c, mask=ours_mask)
    with torch.no_grad():
        theirs, their_weights = reference(
            x,
            c,
            c,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            # (B, T, D), (B, H, T, S)
            average_attn_weights=False,
        )
        # (B, T, S)
        _, their_average = reference(
            x, c, c, attn_mask=attn_mask, key_padding_mask=key_padding_mask
        )
    diffs = [
        (ours - theirs).abs().max().item(),
        (ours_weights - their_weights).abs().max().item(),
        (ours_weights.mean(dim=1) - their_average).abs().max().item(),
    ]
    worst = max(worst, *diffs)
    print(f"{name:<24}" + "".join(f"{d:>{w}.1e}" for d, w in zip(diffs, (10, 18, 18))))
print(f"largest difference: {worst:.1e}")
assert worst <= 1e-5

# %% [markdown]
# All differences are at the level of float32 rounding. Finally, the trap the polarity note warns
# about: hand `nn.MultiheadAttention` our padding mask as it is, and it blocks the words and keeps
# the padding. A sequence without padding has every key blocked, and its outputs become `NaN`.

# %%
with torch.no_grad():
    wrong, wrong_weights = reference(
        x,
        context,
        context,
        key_padding_mask=pad_c[:, 0, 0],  # not converted
        # (B, T, D), (B, H, T, S)
        average_attn_weights=False,
    )
# (B, S) True at real keys
real = pad_c[:, 0, 0]
print(f"context lengths {real.sum(-1).tolist()} of {S}")
for b in range(B):
    on_real = wrong_weights[b][..., real[b]].sum(-1).mean().item()
    print(
        f"  sequence {b}: output NaN: {wrong[b].isnan().any().item()}, mean weight on "
        f"its real keys: {on_real:.2f}"
    )
# all 5 keys real, so all 5 blocked
assert wrong[0].isnan().all()
assert torch.all(wrong_weights[1:][..., :2] == 0) and torch.allclose(
    wrong_weights[1:].sum(-1), torch.ones(B - 1, H, T)
)

# %% [markdown]
# (sec-mha-experiment)=
# ## What do several heads buy? An experiment
#
# Parameters and arithmetic are the same for one head of width $D$ and $H$ heads of width $D/H$.
# What differs is that $H$ heads compute $H$ separate softmaxes, so each position can take $H$
# differently weighted averages instead of one. To see whether trained heads use that freedom, we
# need a task that requires looking at two different places at once, and a model small enough to
# train in seconds.
#
# **The task.** A sequence of $T = 10$ tokens drawn from a vocabulary of 8, with one position
# *marked* (chosen at random per sequence, and flagged by an extra embedding added at that
# position). At every position $t \ge 1$ the model must output the *pair* (token at $t-1$, token at
# the marked position), one of $8 \times 8 = 64$ classes. Solving it needs two lookups of different
# kinds: "previous position" is a relation between positions; "the marked position" is found by
# content, wherever it is.
#
# **The model.** Token embeddings plus a learned vector per position (positional encodings get their
# own chapter next) plus the marker flag; one `MultiHeadAttention` layer of width $D = 32$; and a
# small `MLP` ({numref}`sec-ffn-mlp`) that reads the pair off each position's attention output.
# There is no residual
# connection, so whatever a position knows about other positions came through attention. We train
# it with $H = 1$, 2 and 4 heads, same width, same budget, from several seeds (one in quick mode).

# %%
VOCAB, LENGTH, WIDTH = 8, 10, 32
HEAD_COUNTS = [1, 2, 4]
# every head count is trained from each seed
SEEDS = pick(quick=[0], full=[0, 1, 2])
STEPS = pick(quick=150, full=800)  # Adam steps per model
BATCH = 128  # fresh random sequences per step


def make_batch(n: int, generator: torch.Generator):
    """n random sequences with one marked position each, and the target pair at every
    position."""
    tokens = torch.randint(0, VOCAB, (n, LENGTH), generator=generator)  # (n, T)
    # (n,) the marked position
    marked = torch.randint(0, LENGTH, (n,), generator=generator)
    # (n, T) token at t - 1 (t = 0 unused)
    previous = tokens.roll(1, dims=1)
    marked_token = tokens.gather(1, marked[:, None])  # (n, 1)
    # (n, T) the pair as one class
    targets = previous * VOCAB + marked_token
    return tokens, marked, targets


class TwoLookups(nn.Module):
    """Embeddings -> one multi-head attention layer -> MLP read-out of the pair at every
    position."""

    def __init__(self, n_heads: int):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, WIDTH)
        # one learned vector per position
        self.positions = nn.Embedding(LENGTH, WIDTH)
        # row 1 is added at the marked position
        self.marker = nn.Embedding(2, WIDTH)
        self.attention = MultiHeadAttention(WIDTH, n_heads)
        self.readout = MLP([WIDTH, 64, VOCAB * VOCAB])

    def forward(self, tokens, marked):
        # (T,)
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        # (B, T)
        is_marked = (positions[None, :] == marked[:, None]).long()
        # (B, T, D)
        h = self.tokens(tokens) + self.positions(positions) + self.marker(is_marked)
        # (B, T, D), (B, H, T, T)
        mixed, weights = self.attention(h)
        # (B, T, V*V)
        return self.readout(mixed), weights


def train_two_lookups(n_heads: int, seed: int) -> TwoLookups:
    # fixes the initial weights
    seed_everything(seed)
    model = TwoLookups(n_heads).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    # fixes the training sequences
    data = torch.Generator().manual_seed(1000 + seed)
    for _ in range(STEPS):
        tokens, marked, targets = (t.to(device) for t in make_batch(BATCH, data))
        logits, _ = model(tokens, marked)  # (B, T, V*V)
        loss = F.cross_entropy(
            logits[:, 1:].reshape(-1, VOCAB * VOCAB), targets[:, 1:].reshape(-1)
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


runs = [(n_heads, seed) for n_heads in HEAD_COUNTS for seed in SEEDS]
threads = torch.get_num_threads()
# the matrices are tiny: one CPU thread is enough, and never waits for a busy one
torch.set_num_threads(1)
models = {
    run: train_two_lookups(*run) for run in progress(runs, desc="training", updates=3)
}
torch.set_num_threads(threads)


# %% [markdown]
# To see what each head does we measure, on 2,000 fresh sequences, how much attention mass every
# query $t \ge 1$ puts on the previous position and how much on the marked one (leaving out queries
# for which the two coincide), averaged over queries. A head that looks at the previous token scores
# near 1 on the first measure, a head that looks at the marker near 1 on the second.

# %%
def evaluate(model, tokens, marked, targets):
    """Accuracy, and per head the mean attention mass on the previous and on the marked
    position."""
    with torch.no_grad():
        # (N, T, V*V), (N, H, T, T)
        logits, weights = model(tokens, marked)
    N, H, T, _ = weights.shape
    accuracy = (logits[:, 1:].argmax(-1) == targets[:, 1:]).float().mean().item()
    # queries with a previous token
    t = torch.arange(1, T, device=weights.device)
    on_previous = weights[:, :, t, t - 1]  # (N, H, T-1)
    on_marked = weights[:, :, 1:, :].gather(
        -1, marked.view(N, 1, 1, 1).expand(N, H, T - 1, 1)
    )[..., 0]  # (N, H, T-1)
    # (N, 1, T-1) previous != marked
    distinct = (marked[:, None] != t[None, :] - 1)[:, None, :].float()
    # (H,) over queries and sequences
    mean = lambda w: ((w * distinct).sum(dim=(0, 2)) / distinct.sum()).tolist()
    return accuracy, mean(on_previous), mean(on_marked)


test_tokens, test_marked, test_targets = (
    t.to(device) for t in make_batch(2000, torch.Generator().manual_seed(7))
)
results = {
    run: evaluate(model, test_tokens, test_marked, test_targets)
    for run, model in models.items()
}


def role(previous: float, marked: float) -> str:
    return "previous" if previous > 0.5 else "marker" if marked > 0.5 else "mixed"


print(
    f"{'H':>2} {'seed':>4} {'accuracy':>9}   per head: mass on previous / mass on "
    f"marked -> role"
)
for (n_heads, seed), (accuracy, previous, marked) in results.items():
    heads = "  ".join(
        f"{p:.2f}/{m:.2f} {role(p, m):<8}" for p, m in zip(previous, marked)
    )
    print(f"{n_heads:>2} {seed:>4} {accuracy:>9.1%}   {heads}")


# %% [markdown]
# A blind guess is right 1 time in 64. A model that finds only one of the two tokens is right
# $\frac{1}{10} + \frac{9}{10}\cdot\frac18 \approx 21\%$ of the time: always when the previous and
# the marked position coincide (one query in ten), otherwise when its guess of the missing token is
# lucky. The next cell turns the table into sentences, so the conclusion always matches the numbers
# of your run:

# %%
def specialised(previous, marked):
    """Some head mostly looks at the previous token and another one mostly at
    the marker."""
    roles = [role(p, m) for p, m in zip(previous, marked)]
    return "previous" in roles and "marker" in roles


summary = {}
for n_heads in HEAD_COUNTS:
    rows = [results[(n_heads, seed)] for seed in SEEDS]
    solved = sum(accuracy >= 0.95 for accuracy, _, _ in rows)
    split = sum(specialised(p, m) for _, p, m in rows)
    mean_accuracy = sum(accuracy for accuracy, _, _ in rows) / len(rows)
    summary[n_heads] = mean_accuracy
    print(
        f"H = {n_heads}: mean accuracy {mean_accuracy:.1%}; {solved} of {len(rows)} "
        f"run(s) solved the task (accuracy >= 95%); in {split} of {len(rows)} some "
        f"head specialised on the previous token and another on the marker."
    )
if is_quick():
    print(
        "Quick mode: the training budget is tiny, so these numbers say little. Run "
        "without TINYBERT_QUICK."
    )
else:
    assert max(summary[2], summary[4]) > summary[1], (
        "with this budget, more heads are expected to do better"
    )
    # one softmax could solve it with a consistent mix of the two places, but with
    # this budget no single-head run learns to
    assert not any(results[(1, seed)][0] >= 0.95 for seed in SEEDS)
    # and every run that solves it has divided the work between its heads
    assert all(specialised(p, m) for a, p, m in results.values() if a >= 0.95)

# %% [markdown]
# The attention maps show it directly. Each panel is one head on the same test sequence: rows are
# queries, columns keys, the red frame marks the marked position, and the dotted line runs just
# below the diagonal, where each query's previous position lies (query 0 has no previous position
# and no target, so its row is arbitrary). For every number of heads the figure shows the first run
# (in seed order) that solved the task, or the first run if none did; the titles name the seed.

# %% mystnb={"image": {"alt": "A grid of attention maps on one test sequence, a row for 1, 2 and 4 heads and a panel per head, with the marked position framed in red and the previous position dotted; in a run that solves the task one head follows the dotted line, another the marked column."}}
# marked position mid-sequence
example = int(((test_marked > 2) & (test_marked < LENGTH - 3)).nonzero()[0])
marked_at = test_marked[example].item()
fig, axes = plt.subplots(
    len(HEAD_COUNTS),
    max(HEAD_COUNTS),
    figsize=(2.6 * max(HEAD_COUNTS), 2.8 * len(HEAD_COUNTS)),
    squeeze=False,
)
for row, n_heads in enumerate(HEAD_COUNTS):
    solved = [seed for seed in SEEDS if results[(n_heads, seed)][0] >= 0.95]
    seed = (solved or SEEDS)[0]
    accuracy, previous, marked = results[(n_heads, seed)]
    with torch.no_grad():
        # (1, H, T, T)
        _, weights = models[(n_heads, seed)](
            test_tokens[example : example + 1], test_marked[example : example + 1]
        )
    for h in range(max(HEAD_COUNTS)):
        ax = axes[row, h]
        if h >= n_heads:
            ax.axis("off")
            continue
        ax.imshow(weights[0, h].cpu(), cmap="viridis", vmin=0, vmax=1)
        # key t-1 of query t
        ax.plot(range(LENGTH - 1), range(1, LENGTH), ":", color="white", lw=1)
        ax.add_patch(
            plt.Rectangle(
                (marked_at - 0.5, -0.5), 1, LENGTH, fill=False, ec="red", lw=2
            )
        )
        ax.set_title(
            f"H={n_heads} (seed {seed}, acc. {accuracy:.0%}), head {h}\n"
            f"prev {previous[h]:.2f}, marked {marked[h]:.2f}",
            fontsize=8,
        )
        ax.set_xticks(range(0, LENGTH, 3))
        ax.set_yticks(range(0, LENGTH, 3))
    axes[row, 0].set_ylabel("query position")
for ax in axes[-1]:
    ax.set_xlabel("key position")
fig.suptitle(
    f"Attention of each head on one test sequence (marked position {marked_at})",
    fontsize=10,
)
fig.tight_layout()
plt.show()

# %% [markdown]
# Read the table, the sentences and the maps together. In a run that solves the task, look for a
# head whose mass sits on the previous position, along the dotted diagonal, and another whose mass
# sits in the marked column; the second half of each sentence counts the runs where that happened.
# Nothing in the model or the loss assigns roles to heads: each head has its own softmax, and
# training made them different. Training can also miss the split within this budget and leave every
# head on the same lookup; the table shows whether that happened in your run.
#
# With one head the model has a single distribution per query. It *could* still solve the task by
# weighting the two positions differently but consistently (a mix of, say, one third and two thirds
# still tells the read-out which token sat where), but that is a narrow target for training, and a
# single head that settles on one of the two lookups is left with half the information. How often
# that happens in your run, the sentences above report.
#
# This is a toy with a designed answer. In trained language models, studies of BERT's heads have
# found heads that track the previous or the next token, the separator tokens, or particular
# syntactic relations {cite}`clark2019does`, and also that many heads can be removed after training
# with little loss {cite}`michel2019sixteen`. What a head's weights "mean" must be read with the
# cautions of {doc}`03_attention`.
#
# (sec-mha-summary)=
# ## Summary
#
# - Multi-head attention runs $H$ attention functions in parallel on projections of width
#   $D_h = D/H$, concatenates their outputs and mixes them with $\mathbf W^O$:
#   $\operatorname{MultiHead} = \operatorname{Concat}(\text{head}_1,\dots,\text{head}_H)\mathbf W^O$.
# - The $H$ per-head projections side by side are one $D\times D$ matrix, so the layer projects
#   once and *splits* by reshaping: `view(B, T, H, Dh).transpose(1, 2)`, or in einops
#   `'b t (h d) -> b h t d'`. `view(B, H, T, Dh)` has the right shape and the wrong values.
# - With $D_h = D/H$, the parameters ($4D^2 + 4D$) and the matrix-product FLOPs are the same for
#   every $H$, as counted above; the number of attention weights, $B\cdot H\cdot T\cdot S$, grows.
# - The fused QKV projection is the three weights stacked along the output axis; it is also the
#   layout of `nn.MultiheadAttention`'s `in_proj_weight`.
# - `MultiHeadAttention(d_model, n_heads, dropout, bias, fast)` does self-attention (`mha(x)`) and
#   cross-attention (`mha(x, context=c)`), takes the book's masks, and returns
#   `(output, weights)`; with `fast=True` the weights are `None` unless a call asks for them
#   with `need_weights=True`. It agrees with `nn.MultiheadAttention` to float32 rounding, once our mask
#   is converted to its opposite polarity, `~mask`.
# - In a small task that needs two lookups, no single-head model solved it, and every run that
#   did had divided the work, one head on the previous token and another on the marker; the cell
#   of {ref}`sec-mha-experiment` asserts both.
#
# From `tinybert.blocks.multihead` later chapters import `MultiHeadAttention`, `split_heads` and
# `merge_heads`.
#
# (sec-mha-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-mha-loop
# :difficulty: 3
# :minutes: 40
# :kind: coding
# :::
# **Head by head, as the equation reads.** Write `multihead_by_loop(mha, x, context=None, mask=None)`
# that computes the same output as `mha(x, context=context, mask=mask)[0]` for a
# `MultiHeadAttention` module `mha`, but follows the equation literally: a Python loop over the
# heads, each with its own slices $\mathbf W^Q_h$, $\mathbf W^K_h$, $\mathbf W^V_h$ of the
# projection weights (and biases, if the layer has them), one call of
# `scaled_dot_product_attention` per head on tensors of shape $(B, T, D_h)$, then `torch.cat` of
# the heads and the output projection. Do not use `split_heads`, `merge_heads` or `mha.forward`.
# `mask` broadcasts to $(B, H, T, S)$, so each head needs its own slice of it.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-mha-loop
# :class: dropdown
# ::::
# Head $h$'s blocks are rows $hD_h$ to $(h+1)D_h - 1$ of each projection's weight, because
# `nn.Linear` stores (out, in). The mask is broadcast to its full shape first, so that a
# $(B, 1, 1, S)$ or $(T, S)$ mask and a per-head one are sliced the same way.

# %% tags=["solution"]
import torch
import torch.nn.functional as F

from tinybert.blocks.attention import scaled_dot_product_attention


def multihead_by_loop(mha, x, context=None, mask=None):
    ### BEGIN SOLUTION
    context = x if context is None else context
    B, T, _ = x.shape
    S, H, Dh = context.shape[1], mha.n_heads, mha.d_head
    if mask is not None:
        mask = torch.broadcast_to(mask, (B, H, T, S))  # (B, H, T, S)
    heads = []
    for h in range(H):
        # head h's block of features
        rows = slice(h * Dh, (h + 1) * Dh)

        def project(linear, inputs):
            bias = None if linear.bias is None else linear.bias[rows]
            return F.linear(inputs, linear.weight[rows], bias)  # (B, *, Dh)

        q, k, v = (
            project(mha.query, x),
            project(mha.key, context),
            project(mha.value, context),
        )
        head_mask = None if mask is None else mask[:, h]  # (B, T, S)
        head, _ = scaled_dot_product_attention(q, k, v, mask=head_mask)  # (B, T, Dh)
        heads.append(head)
    return mha.output(torch.cat(heads, dim=-1))  # (B, T, D)
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch04 import check_multihead_by_loop

check_multihead_by_loop(multihead_by_loop)

# %% [markdown]
# :::{exercise-start}
# :label: ex-mha-torch-mask
# :difficulty: 3
# :minutes: 30
# :kind: coding
# :::
# **A per-head mask for `nn.MultiheadAttention`.** Our masks broadcast to $(B, H, T, S)$, so a
# mask can differ between heads and between sequences. `nn.MultiheadAttention` accepts such a mask
# only as a 3-D `attn_mask` of shape $(B\cdot H, T, S)$ with the opposite polarity (`True` = not
# allowed). Write `to_torch_attn_mask(mask, batch_size, n_heads, T, S)` that takes a bool mask
# broadcastable to `(batch_size, n_heads, T, S)` (for instance $(T, S)$, $(B, 1, 1, S)$,
# $(1, H, 1, S)$ or $(B, H, T, S)$) and returns that `attn_mask`. Which index of the first axis
# belongs to sequence $b$ and head $h$? The check finds out by running a real
# `nn.MultiheadAttention` with your mask.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-mha-torch-mask
# :class: dropdown
# ::::
# `nn.MultiheadAttention` reshapes its $(B, T, D)$ input to $(B\cdot H, T, D_h)$ with the batch
# axis outside the head axis, so row $b\cdot H + h$ belongs to sequence $b$, head $h$: exactly the
# order that `reshape` produces from $(B, H, T, S)$.

# %% tags=["solution"]
import torch


def to_torch_attn_mask(mask, batch_size, n_heads, T, S):
    ### BEGIN SOLUTION
    full = torch.broadcast_to(mask, (batch_size, n_heads, T, S))  # (B, H, T, S)
    # (B*H, T, S), True = blocked
    return ~full.reshape(batch_size * n_heads, T, S)
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch04 import check_to_torch_attn_mask

check_to_torch_attn_mask(to_torch_attn_mask)

# %% [markdown]
# :::{exercise-start}
# :label: ex-mha-params
# :difficulty: 1
# :minutes: 15
# :kind: coding
# :::
# **Counting parameters.** Write `mha_parameter_count(d_model, n_heads, bias=True)` that returns, as
# a Python `int`, the number of parameters of `MultiHeadAttention(d_model, n_heads, bias=bias)`
# without building it, and raises `ValueError` when `d_model` is not divisible by `n_heads`. How
# many parameters does one attention layer of BERT-base ($D = 768$, $H = 12$) have, and how many
# do its 12 layers have together?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-mha-params
# :class: dropdown
# ::::
# Four $D\times D$ weight matrices, plus four bias vectors of length $D$ when `bias=True`; the number
# of heads does not appear, it only decides how the $D$ columns are grouped.

# %%
per_layer = count_parameters(MultiHeadAttention(768, 12))
print(
    f"BERT-base: {per_layer:,} attention parameters per layer, {12 * per_layer:,} "
    f"in 12 layers"
)
assert per_layer == 4 * 768 * 768 + 4 * 768


# %% tags=["solution"]
def mha_parameter_count(d_model, n_heads, bias=True):
    ### BEGIN SOLUTION
    if d_model % n_heads != 0:
        raise ValueError(f"d_model = {d_model} is not divisible by n_heads = {n_heads}")
    return 4 * d_model * d_model + (4 * d_model if bias else 0)
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch04 import check_mha_parameter_count

check_mha_parameter_count(mha_parameter_count)

# %% [markdown]
# :::{exercise-start}
# :label: ex-mha-cost
# :difficulty: 3
# :minutes: 30
# :kind: derivation
# :::
# **Why $D_h = D/H$ (pen and paper).** For self-attention on a sequence of length $n$ with width
# $D$ and $H$ heads of width $D_h$, count the multiply-adds of (a) the four projections, (b) the
# score matrices $\mathbf Q_h\mathbf K_h^\top$ of all heads, (c) the weighted sums with the values.
# Show that with $D_h = D/H$ the total does not depend on $H$. What would it be if every head kept
# the full width, $D_h = D$ (and $\mathbf W^O$ mapped $HD$ back to $D$)? Which quantity grows with $H$
# even when $D_h = D/H$, and why does it matter for memory during training?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-mha-cost
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): $4nD^2$ for the projections and $Hn^2D_h$ each for the
# scores and the weighted sums; a total of $4nD^2 + 2n^2D$, independent of $H$ at $D_h = D/H$;
# full-width heads multiply the cost and the parameters by $H$; the $Hn^2$ attention weights grow
# with $H$ and dominate training memory at long $n$.
#
# (a) Each projection multiplies an $n\times D$ matrix by a $D\times D$ one: $nD^2$ multiply-adds,
# $4nD^2$ for the four. (b) Each head forms an $n\times n$ matrix of dot products of length $D_h$:
# $n^2D_h$ per head, $Hn^2D_h$ in all. (c) The weighted sums cost the same, $Hn^2D_h$. With
# $D_h = D/H$ the total is $4nD^2 + 2n^2D$, independent of $H$: this is what the FLOP counter of
# {ref}`sec-mha-cost` confirmed, in FLOPs (two per multiply-add).
#
# With full-width heads, the query, key and value projections map $D$ to $HD$ ($3nHD^2$), the
# output projection maps $HD$ to $D$ ($nHD^2$), and the attention costs $2Hn^2D$: everything but
# nothing else grows $H$-fold, and so do the parameters ($4HD^2$ instead of $4D^2$).
#
# What grows with $H$ even at $D_h = D/H$ is the number of attention weights, $Hn^2$ per sequence.
# Training keeps them for the backward pass in every layer, so at long $n$ they, not the
# projections, dominate the memory of the explicit path; fused kernels avoid storing them.
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-mha-three-lookups
# :difficulty: 3
# :minutes: 60
# :kind: experiment
# :::
# **Three lookups (experiment).** Extend the task of {ref}`sec-mha-experiment` so that the target
# at position $t$ is the *triple* (token at $t-1$, token at $t+1$, marked token), for $1 \le t \le
# T-2$, with $8^3 = 512$ classes. Before running anything, predict how many heads the model needs.
# Then train $H = 1, 2, 4$ (and $H = 8$, where $D_h = 4$) with the same width and budget, print
# the table of attention masses, and compare with your prediction. Do any heads look at two things
# at once?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-mha-three-lookups
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): a prediction written before any run; the changes to
# the batches, the read-out and the evaluation; the table of attention masses for $H = 1, 2, 4,
# 8$; a comparison with the prediction that reports failed runs; an observation on heads that
# split their attention.
#
# Change `make_batch` to build `next_token = tokens.roll(-1, dims=1)` and
# `targets = (previous * VOCAB + next_token) * VOCAB + marked_token`, the read-out to
# `MLP([WIDTH, 64, VOCAB ** 3])`, the loss and accuracy to positions `1:-1`, and add the mass on
# key $t+1$ to `evaluate` (`weights[:, :, t, t + 1]` for `t = torch.arange(1, T - 1)`).
#
# What to look for: three separate lookups suggest at least three heads, one per relation, and
# with four heads one is spare (check in the chapter's table where the spare heads of the
# two-lookup models went). Two
# heads can still solve the task if one of them splits its mass between two positions in a
# consistent ratio, as the single head could in principle do in the chapter's task; whether
# training finds that depends on the seed. With eight heads of width 4, each head has little room,
# but there are enough of them to cover all three relations. The results depend on your seeds,
# so report what your runs show, including the runs that failed.
# ::::{solution-end}
# ::::
#
# (sec-mha-quiz)=
# ## Quiz
#
# Check what you took from this chapter. In a notebook, run the cell and answer with
# `quiz.check(question, answer)`, such as `quiz.check(1, "b")`; here, press *Check*.

# %% tags=["quiz", "remove-input"]
from tinybert.exercises.quiz import Quiz, choice, number
from tinybert.blocks.feedforward import count_parameters
from tinybert.blocks.multihead import MultiHeadAttention

quiz = Quiz(
    "ch04",
    [
        number(
            "How many parameters does MultiHeadAttention(768, 12) hold?",
            answer=count_parameters(MultiHeadAttention(768, 12)),
            decimals=0,
            explain="4D² + 4D: four D×D projections and their biases.",
        ),
        choice(
            "With D_h = D/H, how does the number of parameters change with H?",
            [
                "it grows with H",
                "it shrinks with H",
                "it does not change",
                "it grows with H²",
            ],
            answer="c",
            explain="The H projections side by side are one D×D matrix.",
        ),
        choice(
            "Which turns (B, T, D) into heads correctly?",
            [
                "view(B, T, H, Dh).transpose(1, 2)",
                "view(B, H, T, Dh)",
                "view(B, Dh, T, H)",
                "transpose(1, 2).view(B, H, T, Dh)",
            ],
            answer="a",
            explain="view(B, H, T, Dh) has the right shape and the wrong values.",
        ),
        choice(
            "What grows with H even when D_h = D/H?",
            [
                "the parameters",
                "the FLOPs of the projections",
                "the width of the output",
                "the number of attention weights",
            ],
            answer="d",
            explain="One T×S matrix of weights per head: B·H·T·S in all.",
        ),
        choice(
            "What do you pass to nn.MultiheadAttention for one of this book's masks?",
            [
                "mask, as it is",
                "~mask",
                "mask.float()",
                "mask.transpose(-2, -1)",
            ],
            answer="b",
            explain="PyTorch's module marks what to ignore: the opposite polarity.",
        ),
        choice(
            "In mha(x, context=c), where do the keys and values come from?",
            ["x", "c", "both", "neither: they are learned constants"],
            answer="b",
            explain="Queries from x, keys and values from the context.",
        ),
    ],
)
quiz
