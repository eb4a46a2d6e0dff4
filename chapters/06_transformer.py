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
#     module: blocks.transformer
# ---

# %% [markdown]
# (sec-transformer)=
# # The Transformer
#
# The previous chapters built the parts: the
# {ref}`position-wise feed-forward block <sec-ffn-positionwise>`, {doc}`attention <03_attention>`,
# {doc}`multi-head attention <04_multihead_attention>` and
# {doc}`positional encodings <05_positional_encoding>`. This chapter assembles them into the model of
# *Attention Is All You Need* {cite}`vaswani2017attention`: an {term}`encoder` that reads a source
# sequence and a {term}`decoder` that writes a target sequence one token at a time while looking
# back at the source. We then train it the way the paper did (label smoothing, Adam with a warm-up
# schedule), decode with greedy search and beam search, and finally strip the encoder away to get
# the decoder-only language models of the GPT family, the other branch of the family tree that
# BERT belongs to.
#
# **What you will learn**
#
# - the Add & Norm step: {term}`layer normalization` written out and proved equal to
#   `nn.LayerNorm`, {term}`residual connections <residual connection>`, and the two places the
#   norm can go (post-LN, as in the paper, and pre-LN), with the gradients each gives at
#   initialisation measured layer by layer;
# - the encoder layer, the decoder layer (masked self-attention, then
#   {term}`cross-attention` whose queries come from the decoder and whose keys and values come from
#   the encoder), the stacks, scaled and shared embeddings, and the whole model, proved equal to
#   `torch.nn.Transformer` for both norm placements;
# - why the base and big models have the parameter counts they have, computed, compared with the
#   paper's 65M and 213M, and explained;
# - the training recipe: {term}`label smoothing`, Adam with $\beta_2 = 0.98$ and the warm-up then
#   inverse-square-root learning rate;
# - why training runs in parallel ({term}`teacher forcing`) while generation runs step by step,
#   with {term}`greedy decoding` and {term}`beam search`;
# - a small Transformer trained to reverse digit strings, evaluated on strings it never saw;
# - decoder-only language models ({term}`autoregressive <autoregressive model>`, like GPT) versus
#   auto-encoding ones (like BERT), and a small one trained on Shakespeare.
#
# **Uses.** From {doc}`01_feedforward`: `PositionwiseFeedForward` and `count_parameters`. From
# {doc}`03_attention`: `causal_mask` and `padding_mask`. From {doc}`04_multihead_attention`:
# `MultiHeadAttention`. From {doc}`05_positional_encoding`: `SinusoidalPositionalEncoding`. This
# chapter exports the layers to `tinybert.blocks.transformer_layers`, the model to `tinybert.blocks.transformer`,
# the training recipe to
# `tinybert.blocks.losses` and `tinybert.blocks.schedules`, decoding to `tinybert.blocks.decoding` and the decoder-only
# model to `tinybert.blocks.language_model`; the BERT chapters build on its `EncoderLayer`.
#
# (sec-transformer-setup)=
# ## Setup
#
# The chapter writes two modules of the model: the layers go to `tinybert.blocks.transformer_layers`,
# whose imports are in the first cell, and the whole model and its configuration to
# `tinybert.blocks.transformer`, whose imports open {ref}`sec-transformer-model`. The second cell holds
# the imports of the teaching code.

# %% tags=["export:blocks.transformer_layers"]
from __future__ import annotations

import torch
from torch import nn

from tinybert.blocks.feedforward import PositionwiseFeedForward
from tinybert.blocks.multihead import MultiHeadAttention

# %%
import time
import warnings
import zlib
from contextlib import contextmanager

import matplotlib.pyplot as plt
import torch.nn.functional as F

from tinybert.blocks.attention import causal_mask, padding_mask
from tinybert.data import fetch
from tinybert.blocks.feedforward import count_parameters
from tinybert.runtime import get_device, is_quick, pick, progress, seed_everything

device = get_device()
print(f"device: {device}, quick mode: {is_quick()}")


@contextmanager
def single_thread():
    """Run the block on one CPU thread: the matrices here are small, and one thread
    never waits for a core that another program keeps busy. Restores the previous
    setting afterwards."""
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# %% [markdown]
# (sec-transformer-overview)=
# ## The architecture in one paragraph
#
# The encoder is a stack of $N$ identical layers, each with two sub-layers: multi-head
# {term}`self-attention` over the source, then the position-wise feed-forward block. The decoder is
# a stack of $N$ layers with three sub-layers: *masked* self-attention over the target tokens
# produced so far, cross-attention to the encoder's output, and the feed-forward block. Every
# sub-layer is wrapped in the same Add & Norm step, and both stacks start from token embeddings
# plus positional encodings. The decoder's output goes through a linear layer and a softmax that
# give the probability of the next target token. In the paper $N = 6$, $d_\text{model} = 512$,
# $h = 8$ heads and $d_\text{ff} = 2048$ {cite}`vaswani2017attention`. {numref}`fig-transformer`, in
# {ref}`sec-transformer-model`, draws the whole model from its configuration, once the chapter has
# built it.
#
# (sec-transformer-add-norm)=
# ## Add & Norm
#
# ### Layer normalization
#
# {term}`Layer normalization <layer normalization>` rescales each position's vector on its own: it
# subtracts the mean of the vector's $D$ features, divides by their standard deviation, and then
# applies a learned per-feature scale $\boldsymbol\gamma$ and shift $\boldsymbol\beta$
# {cite}`ba2016layernorm`:
#
# $$
# \operatorname{LN}(\mathbf x) = \boldsymbol\gamma \odot \frac{\mathbf x - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \boldsymbol\beta,
# \qquad \mu = \frac1D\sum_{i=1}^D x_i,\quad \sigma^2 = \frac1D\sum_{i=1}^D (x_i - \mu)^2 .
# $$
#
# Unlike batch normalization, nothing is averaged over the batch or over positions, so a position's
# output does not depend on what else is in the batch, and training and inference compute the same
# thing. The variance is the biased one (divided by $D$, not $D - 1$), and $\varepsilon$ keeps the
# division finite for a constant vector; $10^{-5}$ is PyTorch's default.

# %% tags=["export:blocks.transformer_layers"]
class LayerNorm(nn.Module):
    """LN(x) = γ ⊙ (x - μ) / √(σ² + ε) + β, with μ and σ² over the last axis of
    each position.

    Shapes: (..., D) -> (..., D). σ² is the biased variance (divided by D), as in
    nn.LayerNorm.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        # γ, starts as the identity scale
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))  # β

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        # (..., 1) biased
        variance = (x - mean).pow(2).mean(dim=-1, keepdim=True)
        # (..., D)
        return (x - mean) / torch.sqrt(variance + self.eps) * self.weight + self.bias

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


# %% [markdown]
# With random $\boldsymbol\gamma$ and $\boldsymbol\beta$ it computes what `nn.LayerNorm` computes:

# %%
seed_everything(0)
ours, reference = LayerNorm(37), nn.LayerNorm(37)
with torch.no_grad():
    ours.weight.normal_()
    ours.bias.normal_()
    # same parameter names: weight, bias
    reference.load_state_dict(ours.state_dict())
# (B, T, D), far from zero mean and unit variance
x = 3 * torch.randn(13, 7, 37) + 5
y = ours(x)
print(f"max |ours - nn.LayerNorm| = {(y - reference(x)).abs().max().item():.1e}")
assert torch.allclose(y, reference(x), atol=1e-5)

# γ = 1, β = 0: every position standardised
plain = LayerNorm(37)(x)
print(
    f"with γ = 1, β = 0: per-position means within "
    f"{plain.mean(-1).abs().max().item():.1e} of 0, standard deviations within "
    f"{(plain.std(-1, unbiased=False) - 1).abs().max().item():.1e} of 1"
)
assert torch.allclose(plain.mean(-1), torch.zeros(13, 7), atol=1e-5)


# %% [markdown]
# ### Residual connections, after or before the norm
#
# Each sub-layer $F$ (attention or feed-forward) gets a {term}`residual connection <residual connection>`:
# its output is added to its input, so that the signal, and the gradient, can bypass it. The
# paper puts the normalization *after* the addition and applies dropout to the sub-layer's output
# just before it is added {cite}`vaswani2017attention`. This is **post-LN**:
#
# $$\mathbf x_{l+1} = \operatorname{LN}\bigl(\mathbf x_l + \operatorname{Dropout}(F(\mathbf x_l))\bigr).$$
#
# Later work moved the normalization to the *input* of the sub-layer, **pre-LN**, which leaves an
# un-normalised path straight from the embeddings to the output, and adds one final LayerNorm at
# the end of each stack {cite}`xiong2020layer`:
#
# $$\mathbf x_{l+1} = \mathbf x_l + \operatorname{Dropout}\bigl(F(\operatorname{LN}(\mathbf x_l))\bigr).$$
#
# Pre-LN Transformers can be trained without the learning-rate warm-up that post-LN ones need;
# BERT uses post-LN, GPT-2 and most recent models pre-LN. The layers below offer both, chosen by
# `norm_first`, the name PyTorch uses for the same switch.
#
# (sec-transformer-encoder-layer)=
# ## The encoder layer
#
# An encoder layer is self-attention and the feed-forward block of {doc}`01_feedforward` at four
# times the model's width ($d_\text{ff} = 4\,d_\text{model}$), each wrapped in Add & Norm. Following
# PyTorch's `nn.TransformerEncoderLayer`, each sub-layer is a two-line method (`_sa_block`,
# `_ff_block`) that ends with the residual dropout, so that `forward` reads like the two equations
# above. Dropout sits exactly where the paper puts it: on each sub-layer's output before the
# addition (the embeddings get theirs in the model). PyTorch's layers also apply the same dropout
# to the attention weights and inside the feed-forward block; the paper does not mention either,
# and ours do neither.

# %% tags=["export:blocks.transformer_layers"]
class EncoderLayer(nn.Module):
    """Self-attention and a feed-forward block, each with a residual connection and
    a LayerNorm.

    post-LN (norm_first=False, the paper): x = LN(x + Dropout(F(x))) for each sub-layer
    F; pre-LN (norm_first=True): x = x + Dropout(F(LN(x))). Shapes: x (B, T, D) -> (B,
    T, D); mask bool, True = may attend, broadcastable to (B, H, T, T).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, activation)
        self.norm1 = LayerNorm(d_model, layer_norm_eps)
        self.norm2 = LayerNorm(d_model, layer_norm_eps)
        # residual dropout, on each sub-layer's output
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), mask)  # (B, T, D)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, mask))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, mask):
        # (B, T, D); the weights are not needed here
        out, _ = self.self_attn(x, mask=mask)
        return self.dropout(out)

    def _ff_block(self, x):
        return self.dropout(self.feed_forward(x))  # (B, T, D)


# %% [markdown]
# One layer of width 32 with 4 heads and a feed-forward width of 37, on 13 sequences of 7
# positions, of which some are padding. Padding must not matter: appending more padded positions
# leaves the outputs at the real positions unchanged, because the mask hides padded keys.

# %%
seed_everything(0)
B, T, D, H, D_FF = 13, 7, 32, 4, 37
layer = EncoderLayer(D, H, D_FF, dropout=0.0).eval()
print(layer)
x = torch.randn(B, T, D)  # (B, T, D)
lengths = torch.randint(1, T + 1, (B,))  # real lengths
out = layer(x, mask=padding_mask(lengths, S=T))  # (B, T, D)

# (B, T + 3, D): 3 more padded positions
x_longer = torch.cat([x, torch.randn(B, 3, D)], dim=1)
out_longer = layer(x_longer, mask=padding_mask(lengths, S=T + 3))
# (B, T) True at real positions
real = padding_mask(lengths, S=T)[:, 0, 0]
difference = (out_longer[:, :T] - out)[real].abs().max().item()
print(
    f"output {tuple(out.shape)}; with 3 more padded positions, max change at real "
    f"positions {difference:.1e}"
)
assert out.shape == (B, T, D) and difference < 1e-5

# %% [markdown]
# {numref}`fig-encoder-layer` draws this layer, with its sizes read from `layer`, in both norm
# placements: the paper's post-LN, which `layer` uses, and the pre-LN that `norm_first=True`
# selects. The residual path is the line on the left of each sub-layer.

# %% mystnb={"figure": {"caption": "One encoder layer at the sizes of `layer`, post-LN (left) and pre-LN (right). In post-LN each sub-layer's output is added to its input and the sum normalised; in pre-LN the input is normalised, goes through the sub-layer, and is added back, so that the residual path from the input to the output passes through no LayerNorm.", "name": "fig-encoder-layer"}, "image": {"alt": "Two diagrams of an encoder layer side by side, drawn bottom to top. Left, post-LN: x (B, T, D) goes into multi-head self-attention, whose output and a residual line from x meet in an Add and LayerNorm box; the result goes into the feed-forward block (D to F to D), and again into Add and LayerNorm. Right, pre-LN: x goes through a LayerNorm into self-attention, and a plus sign adds the residual line from x; then a LayerNorm, the feed-forward block and another plus sign with its residual line. The labels give D, H and F."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import encoder_layer_diagram

encoder_layer_diagram(
    d_model=layer.self_attn.d_model,
    n_heads=layer.self_attn.n_heads,
    d_ff=layer.feed_forward.d_ff,
)


# %% [markdown]
# (sec-transformer-decoder-layer)=
# ## The decoder layer
#
# The decoder layer has three sub-layers. **Masked self-attention** lets position $t$ look only at
# target positions $\le t$, through the {term}`causal mask` of {doc}`03_attention`. **Cross-attention**
# (encoder-decoder attention) takes its *queries* from the decoder and its *keys and values* from
# the encoder's output, the `memory`: this is where each target position reads the source. The
# **feed-forward block** follows. Each is wrapped in Add & Norm as before. Two of the three
# sub-layers are the encoder layer's, so the decoder layer is written as an encoder layer that
# adds the third: it inherits the constructor's arguments, `_sa_block` and `_ff_block`, and adds
# `cross_attn`, its own LayerNorm and a `forward` that runs the three in order.

# %% tags=["export:blocks.transformer_layers"]
class DecoderLayer(EncoderLayer):
    """An encoder layer with a third sub-layer between its two: cross-attention to
    the encoder's output.

    Shapes: x (B, T, D) target positions, memory (B, S, D) encoder output -> (B, T, D).
    self_mask broadcastable to (B, H, T, T) (causal, and padding of the target);
    memory_mask broadcastable to (B, H, T, S) (padding of the source). Bool,
    True = may attend. Takes EncoderLayer's arguments; norm2 goes with
    cross-attention and norm3 with the feed-forward block, as in PyTorch.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, **options):
        super().__init__(d_model, n_heads, d_ff, **options)
        # queries: decoder; keys, values: encoder
        self.cross_attn = MultiHeadAttention(d_model, n_heads)
        self.norm3 = LayerNorm(d_model, self.norm1.eps)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), self_mask)  # (B, T, D)
            x = x + self._ca_block(self.norm2(x), memory, memory_mask)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, self_mask))
            x = self.norm2(x + self._ca_block(x, memory, memory_mask))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _ca_block(self, x, memory, mask):
        # (B, T, D) reads memory (B, S, D); _sa_block and _ff_block are the encoder's
        out, _ = self.cross_attn(x, context=memory, mask=mask)
        return self.dropout(out)


# %% [markdown]
# Two properties follow from the masks, and the cell checks both. Changing the target tokens after
# position $t$ never changes the outputs at positions $\le t$ (causal invariance), and the source
# can have any length $S$, independent of the target length $T$:

# %%
seed_everything(1)
S = 5
decoder_layer = DecoderLayer(D, H, D_FF, dropout=0.0).eval()
# (B, S, D) an encoder output
memory = torch.randn(B, S, D)
target = torch.randn(B, T, D)  # (B, T, D)
out = decoder_layer(target, memory, self_mask=causal_mask(T))  # (B, T, D)

changed = target.clone()
# new positions 4, 5, 6
changed[:, 4:] = torch.randn(B, T - 4, D)
out_changed = decoder_layer(changed, memory, self_mask=causal_mask(T))
print(
    f"memory {tuple(memory.shape)}, target {tuple(target.shape)} -> "
    f"{tuple(out.shape)}; max change at positions 0-3 after changing 4-6: "
    f"{(out_changed[:, :4] - out[:, :4]).abs().max().item():.1e}"
)
assert torch.allclose(out_changed[:, :4], out[:, :4], atol=1e-6)
assert not torch.allclose(out_changed[:, 4:], out[:, 4:])


# %% [markdown]
# (sec-transformer-stacks)=
# ## Stacks of layers
#
# A stack runs its layers in order and, optionally, a final LayerNorm. Pre-LN needs that final norm:
# without it the stack's output would be the sum of un-normalised sub-layer outputs. The paper's
# post-LN stacks have none, because every layer already ends with a norm. The decoder's stack is
# the encoder's with one more input, the memory, passed to every layer.

# %% tags=["export:blocks.transformer_layers"]
class Encoder(nn.Module):
    """N encoder layers, then an optional final LayerNorm. x (B, S, D) -> (B, S, D)."""

    def __init__(self, layers: list[EncoderLayer], norm: LayerNorm | None = None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = norm if norm is not None else nn.Identity()

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask)  # (B, S, D)
        return self.norm(x)


class Decoder(Encoder):
    """The same stack of decoder layers (``layers``: a list of DecoderLayer), each of
    which also reads the encoder's output. x (B, T, D), memory (B, S, D) -> (B, T, D);
    the masks are DecoderLayer's."""

    def forward(self, x, memory, self_mask=None, memory_mask=None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, memory, self_mask, memory_mask)  # (B, T, D)
        return self.norm(x)


# %% [markdown]
# (sec-transformer-model)=
# ## The whole model
#
# The module `tinybert.blocks.transformer` imports the layers from `tinybert.blocks.transformer_layers`, where
# the cells above were exported, and the positional encodings of {doc}`05_positional_encoding`.

# %% tags=["export"]
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import torch
from torch import nn

from tinybert.blocks.attention import causal_mask
from tinybert.blocks.positional import SinusoidalPositionalEncoding
from tinybert.blocks.transformer_layers import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    LayerNorm,
)


# %% [markdown]
# ### Embeddings: scaled, shared and positioned
#
# Three details of the paper concern the embeddings {cite}`vaswani2017attention`:
#
# - **One matrix, three uses.** Source and target share a vocabulary (about 37,000 byte-pair
#   tokens for English-German), and the paper shares one $V\times d_\text{model}$ weight matrix
#   between the source embedding, the target embedding and the linear layer before the softmax.
#   The output logits are $\mathbf h\mathbf E^\top$: the score of token $v$ is the dot product of
#   the decoder's vector with $v$'s embedding.
# - **Scaled by $\sqrt{d_\text{model}}$.** The embedding is multiplied by $\sqrt{d_\text{model}}$
#   before the positional encoding is added. We initialise $\mathbf E$ with standard deviation
#   $d_\text{model}^{-1/2}$, so scaled embeddings have entries of size about 1, like the
#   sinusoids, and logits $\mathbf h\mathbf E^\top$ of a normalised $\mathbf h$ start at size
#   about 1 too.
# - **Dropout on the sum** of embeddings and positional encodings.
#
# The positions come from {doc}`05_positional_encoding`'s `SinusoidalPositionalEncoding`, which has
# no parameters. Weights are initialised in one function, with Xavier-uniform for every linear
# layer (PyTorch's `nn.Transformer` does the same {cite}`glorot2010understanding`), zero biases,
# and the embedding rule above.

# %% tags=["export"]
class TransformerEmbedding(nn.Module):
    """Dropout(E[tokens] · √D + PE[:T]): token ids (B, T) -> vectors (B, T, D)."""

    def __init__(
        self, vocab_size: int, d_model: int, max_len: int, dropout: float = 0.1
    ):
        super().__init__()
        self.d_model = d_model
        # E, shared with the output layer
        self.tokens = nn.Embedding(vocab_size, d_model)
        # no parameters
        self.positions = SinusoidalPositionalEncoding(d_model, max_len)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tokens(tokens) * math.sqrt(self.d_model)  # (B, T, D)
        return self.dropout(self.positions(x))  # (B, T, D)


def init_transformer_weights(model: nn.Module, d_model: int) -> None:
    """Xavier-uniform for linear weights, zero biases, N(0, 1/D) for embeddings (scaled
    by √D later)."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=d_model**-0.5)


# %% [markdown]
# ### The configuration
#
# Blocks take explicit arguments; the whole model takes one configuration dataclass, with a
# comment per field, and the paper's two sizes as presets (Table 3 of the paper; "big" uses
# $P_\text{drop} = 0.3$ for English-German). Its `layer_kwargs` picks out the seven fields a
# layer takes, so that both models of the chapter build their layers as
# `EncoderLayer(**c.layer_kwargs())` rather than spelling the seven out each time.

# %% tags=["export"]
@dataclass
class TransformerConfig:
    # V: one vocabulary for source and target (the paper's ~37k BPE tokens)
    vocab_size: int = 37000
    d_model: int = 512  # D: width of every vector between the sub-layers
    # H: attention heads per attention layer (Dh = D / H)
    n_heads: int = 8
    # N: layers in the encoder, and as many in the decoder
    n_layers: int = 6
    # F: hidden width of the feed-forward blocks (4 D in the paper)
    d_ff: int = 2048
    # P_drop: on embeddings + positions and on every sub-layer's output
    dropout: float = 0.1
    max_len: int = 512  # the longest sequence the positional table covers
    norm_first: bool = False  # False: post-LN, as in the paper; True: pre-LN
    # LayerNorm after each stack; None: only with pre-LN (the paper has none)
    final_norm: bool | None = None
    activation: str = "relu"  # of the feed-forward blocks
    layer_norm_eps: float = 1e-5  # ε inside every LayerNorm (PyTorch's default)
    # padding token id, hidden from attention; None: no padding
    pad_id: int | None = 0

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if self.d_model % self.n_heads or self.d_model % 2:
            raise ValueError(
                f"d_model: expected an even multiple of n_heads = {self.n_heads}, got "
                f"{self.d_model}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(
                f"dropout: expected a probability in [0, 1), got {self.dropout!r}"
            )
        if self.pad_id is not None and not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(
                f"pad_id: expected None or an id in [0, {self.vocab_size}), got "
                f"{self.pad_id!r}"
            )

    @property
    def uses_final_norm(self) -> bool:
        return self.norm_first if self.final_norm is None else self.final_norm

    def layer_kwargs(self) -> dict:
        """The arguments of an EncoderLayer or a DecoderLayer: the fields of the same
        names."""
        names = "d_model n_heads d_ff dropout activation norm_first layer_norm_eps"
        return {name: getattr(self, name) for name in names.split()}

    @classmethod
    def from_preset(cls, name: str, **overrides) -> TransformerConfig:
        """The paper's sizes: ``from_preset("base")``,
        ``from_preset("big", vocab_size=32000)``."""
        if name not in PRESETS:
            raise ValueError(
                f"unknown preset {name!r}; expected one of {sorted(PRESETS)}"
            )
        unknown = set(overrides) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown TransformerConfig fields {sorted(unknown)}")
        return replace(cls(**PRESETS[name]), **overrides)


PRESETS = {  # Table 3 of Vaswani et al. (2017)
    "base": dict(n_layers=6, d_model=512, d_ff=2048, n_heads=8, dropout=0.1),
    "big": dict(n_layers=6, d_model=1024, d_ff=4096, n_heads=16, dropout=0.3),
}

# %% [markdown]
# ### The model

# %% mystnb={"figure": {"caption": "The Transformer drawn from `TransformerConfig.from_preset(\"base\")`, the paper's base model (its Figure 1). Left, the encoder: source tokens, scaled embeddings plus sinusoidal positions, then $N$ layers of self-attention and feed-forward blocks, each with its residual connection and LayerNorm. Right, the decoder: the target shifted right, the same shared embedding, then $N$ layers of masked self-attention, cross-attention to the encoder's output and a feed-forward block; a linear layer tied to the embedding and a softmax give the next token's probabilities.", "name": "fig-transformer"}, "image": {"alt": "Diagram of the encoder-decoder Transformer, drawn bottom to top. Left column, the encoder: source tokens (B, S), an embedding of size V by D times the square root of D, plus sinusoidal positions, then a frame repeated N times holding multi-head self-attention and a feed-forward block, each followed by Add and LayerNorm with a residual line; its output is the memory (B, S, D). Right column, the decoder: target tokens shifted right (B, T), the same embedding plus positions, then a frame repeated N times holding masked (causal) self-attention, cross-attention whose keys and values come from the memory by an arrow from the encoder, and a feed-forward block, each followed by Add and LayerNorm; then a linear layer from D to V whose weights are the embedding, a softmax, and the next-token probabilities (B, T, V). The labels give V, D, H, Dh, F and N of the base preset."}} tags=["diagram", "hide-input"]
from tinybert.diagrams import transformer_diagram

transformer_diagram(TransformerConfig.from_preset("base"))


# %% [markdown]
# The model reads in the order of {numref}`fig-transformer`: embed the source, encode it; embed
# the target, decode it against the encoder's output; project onto the shared embedding. The padding masks
# come from `pad_id`, the target's self-attention mask is causal (and hides target padding too),
# and the model returns a small dataclass. `encode` and `decode` are public because generation
# calls them separately: the source is encoded once, the decoder runs once per new token.

# %% tags=["export"]
def check_tokens(name: str, tokens, vocab_size: int) -> None:
    """Raise ValueError unless tokens is an integer (B, T) tensor of ids in [0,
    vocab_size)."""
    if (
        not isinstance(tokens, torch.Tensor)
        or tokens.dim() != 2
        or tokens.dtype.is_floating_point
        or tokens.dtype == torch.bool
        or tokens.numel() == 0
    ):
        got = (
            f"{tokens.dtype} of shape {tuple(tokens.shape)}"
            if isinstance(tokens, torch.Tensor)
            else type(tokens).__name__
        )
        raise ValueError(
            f"{name}: expected a non-empty integer tensor of token ids of shape (B, "
            f"T), got {got}"
        )
    low, high = int(tokens.min()), int(tokens.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"{name}: expected token ids in [0, {vocab_size}), got ids from "
            f"{low} to {high}"
        )


@dataclass
class Seq2SeqOutput:
    # (B, T, V) scores of the next target token at every target position
    logits: torch.Tensor
    memory: torch.Tensor  # (B, S, D) the encoder's output


class Transformer(nn.Module):
    """The encoder-decoder Transformer with one shared embedding matrix (Vaswani et
    al., 2017)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = self.config = config

        def final_norm():
            return LayerNorm(c.d_model, c.layer_norm_eps) if c.uses_final_norm else None

        self.embed = TransformerEmbedding(c.vocab_size, c.d_model, c.max_len, c.dropout)
        self.encoder = Encoder(
            [EncoderLayer(**c.layer_kwargs()) for _ in range(c.n_layers)], final_norm()
        )
        self.decoder = Decoder(
            [DecoderLayer(**c.layer_kwargs()) for _ in range(c.n_layers)], final_norm()
        )
        self.output = nn.Linear(c.d_model, c.vocab_size, bias=False)
        init_transformer_weights(self, c.d_model)
        # tied: one (V, D) matrix
        self.output.weight = self.embed.tokens.weight

    def source_mask(self, src: torch.Tensor) -> torch.Tensor | None:
        """(B, 1, 1, S), True at real source tokens; None when the config has
        no pad_id."""
        return (
            None
            if self.config.pad_id is None
            else (src != self.config.pad_id)[:, None, None, :]
        )

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        check_tokens("src", src, self.config.vocab_size)
        return self.encoder(self.embed(src), self.source_mask(src))  # (B, S, D)

    def decode(
        self, tgt: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Logits (B, T, V) of the next token after each prefix of tgt (B, T)."""
        check_tokens("tgt", tgt, self.config.vocab_size)
        self_mask = causal_mask(tgt.shape[1], device=tgt.device)  # (T, T)
        if self.config.pad_id is not None:
            # (B, 1, T, T)
            self_mask = self_mask & (tgt != self.config.pad_id)[:, None, None, :]
        h = self.decoder(self.embed(tgt), memory, self_mask, memory_mask)  # (B, T, D)
        # (B, T, V) = h Eᵀ
        return self.output(h)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> Seq2SeqOutput:
        memory = self.encode(src)  # (B, S, D)
        return Seq2SeqOutput(self.decode(tgt, memory, self.source_mask(src)), memory)


# %% [markdown]
# A small model on a toy vocabulary of 11 tokens. The tied output layer really is the embedding:
# one tensor, counted once, and a change to it changes both.

# %%
seed_everything(2)
toy = Transformer(
    TransformerConfig(
        vocab_size=11, d_model=32, n_heads=4, n_layers=2, d_ff=37, dropout=0.0
    )
).eval()
# (B, S) token ids, 0 is padding
src = torch.randint(1, 11, (13, 7))
tgt = torch.randint(1, 11, (13, 5))  # (B, T)
result = toy(src, tgt)
print(
    f"src {tuple(src.shape)}, tgt {tuple(tgt.shape)} -> logits "
    f"{tuple(result.logits.shape)}, memory {tuple(result.memory.shape)}; "
    f"{count_parameters(toy):,} parameters"
)
assert result.logits.shape == (13, 5, 11) and result.memory.shape == (13, 7, 32)
# one tensor ...
assert toy.output.weight is toy.embed.tokens.weight
# ... counted once
assert count_parameters(toy) == sum(
    count_parameters(m) for m in (toy.embed, toy.encoder, toy.decoder)
)
with torch.no_grad():
    # ... and a change to it changes both
    toy.embed.tokens.weight[3] += 1.0
    assert torch.equal(toy.output.weight[3], toy.embed.tokens.weight[3])
    toy.embed.tokens.weight[3] -= 1.0

for description, call in [
    (
        "d_model not divisible by n_heads",
        lambda: TransformerConfig(d_model=30, n_heads=4),
    ),
    ("unknown preset", lambda: TransformerConfig.from_preset("huge")),
    ("token id 11 in a vocabulary of 11", lambda: toy(src, torch.full((13, 5), 11))),
    ("float source", lambda: toy(src.float(), tgt)),
]:
    try:
        call()
        raise AssertionError(f"{description}: expected a ValueError")
    except ValueError as error:
        print(f"{description}: ValueError: {error}")


# %% [markdown]
# (sec-transformer-parity)=
# ## Parity with `torch.nn.Transformer`
#
# PyTorch ships the same architecture as `nn.Transformer` (the stacks only: no embeddings, no
# output layer). Copying our weights into it must reproduce our outputs. Three differences have
# to be bridged at the boundary:
#
# - **Fused projections.** Its attention layers keep $\mathbf W^Q, \mathbf W^K, \mathbf W^V$ in one
#   `in_proj_weight`, as {doc}`04_multihead_attention` showed; the feed-forward layers are called
#   `linear1` and `linear2`.
# - **Mask polarity.** Its boolean masks mean *not allowed*, so ours are passed as `~mask`, split
#   into `tgt_mask` (the causal part) and the `*_key_padding_mask`s.
# - **Final norms.** `nn.Transformer` always adds a LayerNorm after the encoder stack and another
#   after the decoder stack, also with post-LN. The paper's post-LN model has none: its last layer
#   already ends with a norm. With pre-LN the final norms are part of the design, in both.
#
# Our `final_norm` option covers the third point both ways: the paper's post-LN model
# (`final_norm=False`) is compared with an `nn.Transformer` whose two final norms are removed
# (`encoder.norm = decoder.norm = None`), and a post-LN model with `final_norm=True` with
# `nn.Transformer` as it comes. All LayerNorms get random $\boldsymbol\gamma$, $\boldsymbol\beta$
# and all biases random values, so that a norm or a bias in the wrong place would show.

# %%
def to_torch_transformer(model: Transformer) -> nn.Transformer:
    """An nn.Transformer (batch_first, ReLU, no dropout) holding the weights of model's
    two stacks."""
    c = model.config
    # it warns that pre-LN disables its nested-tensor fast path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = nn.Transformer(
            c.d_model,
            c.n_heads,
            c.n_layers,
            c.n_layers,
            c.d_ff,
            dropout=0.0,
            activation="relu",
            batch_first=True,
            norm_first=c.norm_first,
            layer_norm_eps=c.layer_norm_eps,
        )

    def copy_attention(theirs, ours):
        theirs.in_proj_weight.copy_(
            torch.cat([ours.query.weight, ours.key.weight, ours.value.weight])
        )
        theirs.in_proj_bias.copy_(
            torch.cat([ours.query.bias, ours.key.bias, ours.value.bias])
        )
        theirs.out_proj.load_state_dict(ours.output.state_dict())

    def copy_common(theirs, ours):
        theirs.linear1.load_state_dict(ours.feed_forward.expand.state_dict())
        theirs.linear2.load_state_dict(ours.feed_forward.contract.state_dict())
        theirs.norm1.load_state_dict(ours.norm1.state_dict())
        theirs.norm2.load_state_dict(ours.norm2.state_dict())
        copy_attention(theirs.self_attn, ours.self_attn)

    with torch.no_grad():
        for theirs, ours in zip(reference.encoder.layers, model.encoder.layers):
            copy_common(theirs, ours)
        for theirs, ours in zip(reference.decoder.layers, model.decoder.layers):
            copy_common(theirs, ours)
            copy_attention(theirs.multihead_attn, ours.cross_attn)
            theirs.norm3.load_state_dict(ours.norm3.state_dict())
        for theirs, ours in [
            (reference.encoder, model.encoder),
            (reference.decoder, model.decoder),
        ]:
            if c.uses_final_norm:
                theirs.norm.load_state_dict(ours.norm.state_dict())
            else:
                # the paper's post-LN stacks end without an extra norm
                theirs.norm = None
    return reference.eval()


def randomise(model: nn.Module, seed: int) -> nn.Module:
    """Random values for every 1-D parameter (biases, γ, β), so that misplaced
    ones show."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                noise = torch.randn(p.shape, generator=g)
                is_gamma = "norm" in name and name.endswith("weight")
                p.copy_(1.0 + 0.3 * noise if is_gamma else 0.5 * noise)
    return model


# %% [markdown]
# Odd sizes throughout (13 sequences, source length 7, target length 5, width 32, 4 heads,
# feed-forward width 37, 2 layers), with padded sources and targets:

# %%
def compare_with_torch(
    norm_first: bool, final_norm: bool | None, seed: int = 0
) -> float:
    """Max |ours - nn.Transformer| over all positions, with padding and causal masks."""
    seed_everything(seed)
    config = TransformerConfig(
        vocab_size=11,
        d_model=32,
        n_heads=4,
        n_layers=2,
        d_ff=37,
        dropout=0.0,
        norm_first=norm_first,
        final_norm=final_norm,
    )
    model = randomise(Transformer(config), seed).eval()
    reference = to_torch_transformer(model)
    B, S, T = 13, 7, 5
    src_pad = padding_mask(torch.randint(1, S + 1, (B,)), S=S)  # (B, 1, 1, S)
    tgt_pad = padding_mask(torch.randint(1, T + 1, (B,)), S=T)  # (B, 1, 1, T)
    # embedded source and target
    src, tgt = torch.randn(B, S, 32), torch.randn(B, T, 32)
    causal = causal_mask(T)  # (T, T)
    # (B, T, D)
    ours = model.decoder(tgt, model.encoder(src, src_pad), causal & tgt_pad, src_pad)
    theirs = reference(
        src,
        tgt,
        tgt_mask=~causal,
        src_key_padding_mask=~src_pad[:, 0, 0],
        tgt_key_padding_mask=~tgt_pad[:, 0, 0],
        memory_key_padding_mask=~src_pad[:, 0, 0],
    )
    return (ours - theirs).abs().max().item()


parity = {
    "post-LN, the paper (their final norms removed)": compare_with_torch(
        norm_first=False, final_norm=False
    ),
    "post-LN + final norms (nn.Transformer as is)": compare_with_torch(
        norm_first=False, final_norm=True
    ),
    "pre-LN (final norms in both)": compare_with_torch(
        norm_first=True, final_norm=None
    ),
}
for name, difference in parity.items():
    print(f"{name:<48} max |ours - nn.Transformer| = {difference:.1e}")
assert max(parity.values()) < 1e-5


# %% [markdown]
# The reference runs with gradients enabled on purpose: in inference mode `nn.Transformer`'s
# encoder may take a "fast path" that returns zeros at padded positions, which our model does not
# do (those positions are never read, so both are correct; only the comparison would differ).
#
# (sec-transformer-params)=
# ## Counting parameters: base and big
#
# The paper reports 65 million parameters for the base model and 213 million for the big one
# (Table 3). We build both on PyTorch's `meta` device, which creates the modules with shapes but
# no memory, count their parameters, and check the count against a formula. Per layer, with
# $D = d_\text{model}$ and $F = d_\text{ff}$:
#
# - an attention sub-layer has four $D\times D$ matrices and four biases: $4D^2 + 4D$;
# - a feed-forward block: $2DF + F + D$;
# - a LayerNorm: $2D$ ($\boldsymbol\gamma$ and $\boldsymbol\beta$);
# - an encoder layer has one attention sub-layer, one feed-forward block and two norms; a decoder
#   layer two attention sub-layers, one feed-forward block and three norms;
# - plus one $V\times D$ embedding matrix, shared three ways, and no parameters for the sinusoidal
#   positions.

# %%
def transformer_parameter_count(config: TransformerConfig) -> int:
    """Parameters of Transformer(config), from the formula (shared embedding
    counted once)."""
    V, D, F_, N = config.vocab_size, config.d_model, config.d_ff, config.n_layers
    attention, feed_forward, norm = 4 * D * D + 4 * D, 2 * D * F_ + F_ + D, 2 * D
    encoder_layer = attention + feed_forward + 2 * norm
    decoder_layer = 2 * attention + feed_forward + 3 * norm
    final_norms = 2 * norm if config.uses_final_norm else 0
    return V * D + N * (encoder_layer + decoder_layer) + final_norms


def build_on_meta(config: TransformerConfig) -> Transformer:
    # shapes only: the big model takes no memory
    with torch.device("meta"):
        return Transformer(config)


def breakdown(model: Transformer) -> dict[str, int]:
    """Parameters by kind; named_parameters() lists the tied output weight once, as the
    embedding."""
    kinds = {
        "embedding (shared)": 0,
        "attention weights": 0,
        "feed-forward weights": 0,
        "biases": 0,
        "LayerNorm γ, β": 0,
    }
    for name, p in model.named_parameters():
        if "embed" in name:
            kinds["embedding (shared)"] += p.numel()
        elif "norm" in name:
            kinds["LayerNorm γ, β"] += p.numel()
        elif name.endswith("bias"):
            kinds["biases"] += p.numel()
        elif "attn" in name:
            kinds["attention weights"] += p.numel()
        else:
            kinds["feed-forward weights"] += p.numel()
    return kinds


paper_millions = {"base": 65, "big": 213}
counts = {}
for preset in ["base", "big"]:
    # vocab_size = 37000
    config = TransformerConfig.from_preset(preset)
    model = build_on_meta(config)
    counts[preset] = count_parameters(model)
    assert (
        counts[preset]
        == transformer_parameter_count(config)
        == sum(breakdown(model).values())
    )
    assert count_parameters(model.embed.positions) == 0
    parts = ", ".join(f"{kind} {n / 1e6:.2f}M" for kind, n in breakdown(model).items())
    print(
        f"{preset}: {counts[preset]:,} parameters = {counts[preset] / 1e6:.1f}M "
        f"(paper: {paper_millions[preset]}M, ratio "
        f"{counts[preset] / 1e6 / paper_millions[preset]:.3f})"
    )
    print(f"   {parts}")
    small = breakdown(model)["biases"] + breakdown(model)["LayerNorm γ, β"]
    # less than the rounding of the paper's counts
    assert small < 0.5e6

# %% [markdown]
# The formula and the built models agree, and both land close to the paper's numbers without
# matching them exactly. Where can the difference come from? Only from things the paper does not
# state, and the next cell measures the candidates:

# %%
implied = {}
for preset in ["base", "big"]:
    config = TransformerConfig.from_preset(preset)
    width, total = config.d_model, counts[preset]
    without_vocab = total - config.vocab_size * width
    # separate source, target and output matrices
    untied = total + 2 * config.vocab_size * width
    low, high = (
        (paper_millions[preset] - 0.5) * 1e6,
        (paper_millions[preset] + 0.5) * 1e6,
    )
    print(
        f"{preset}: without the embedding {without_vocab / 1e6:.1f}M; untied "
        f"embeddings would give {untied / 1e6:.1f}M; the paper's "
        f"{paper_millions[preset]}M (±0.5M of rounding) needs a shared vocabulary of "
        f"{(low - without_vocab) / width:,.0f} to "
        f"{(high - without_vocab) / width:,.0f} tokens"
    )
    # untied is far off: the paper shares
    assert untied > (paper_millions[preset] + 10) * 1e6
    implied[preset] = ((low - without_vocab) / width, (high - without_vocab) / width)
(base_low, base_high), (big_low, big_high) = implied["base"], implied["big"]
# no single vocabulary fits both
assert base_high < big_low or big_high < base_low


# %% [markdown]
# What the numbers say:
#
# - **Sharing is essential.** With three separate embedding matrices both models would be far above
#   the paper's counts (the "untied" numbers), so the paper's numbers must count one shared matrix.
# - **The vocabulary is the uncertain term.** Everything except the embedding is fixed by
#   $N$, $D$, $F$ and $h$. The paper says "about 37000 tokens"; the ranges printed above are the
#   vocabulary sizes that would reproduce each reported count exactly, and they do not overlap:
#   no single shared vocabulary gives both 65M and 213M, so the two counts were not computed under
#   one consistent set of assumptions that we can recover.
# - **Biases and LayerNorms are small.** They are the two smallest lines of the breakdown above; a
#   model without biases would move the totals by less than the rounding of "65M".
# - **Positional encodings are free**: the sinusoids are computed, not learned.
#
# So our counts are exact for the architecture as described, and the gap to the paper is about
# what it leaves unsaid (the exact vocabulary), not about the layers.
#
# (sec-transformer-gradients)=
# ## Gradients at initialisation: post-LN versus pre-LN
#
# Xiong et al. explain why post-LN Transformers need a warm-up: at initialisation, the gradients of
# the parameters near the output are large, so a large learning rate from the first step
# destabilises training, whereas in pre-LN the gradient norms stay roughly the same across layers
# {cite}`xiong2020layer`. We can look at this directly. For a freshly initialised 6-layer model of
# each kind, we compute the loss on random tokens, backpropagate once, and record the gradient norm
# of the second feed-forward matrix ($\mathbf W_2$, `feed_forward.contract.weight`) in every layer,
# averaged over a few random initialisations, as in their Figure 3.

# %% mystnb={"image": {"alt": "Two line plots, encoder and decoder, of the gradient norm of each layer's W2 at initialisation, post-LN against pre-LN; in the decoder post-LN's norms grow towards the last layer while pre-LN's stay nearly flat, and the encoder shows no such growth."}}
def ffn_gradient_norms(
    norm_first: bool, seed: int, d_model: int = 128, n_layers: int = 6
):
    """Gradient norms of W2 in each encoder and decoder layer, at initialisation, for
    one batch."""
    seed_everything(seed)
    config = TransformerConfig(
        vocab_size=1000,
        d_model=d_model,
        n_heads=4,
        n_layers=n_layers,
        d_ff=4 * d_model,
        dropout=0.0,
        norm_first=norm_first,
    )
    model = Transformer(config)
    # (B, S), (B, T), (B, T)
    src, tgt, labels = (torch.randint(1, 1000, (16, 24)) for _ in range(3))
    loss = F.cross_entropy(model(src, tgt).logits.flatten(0, 1), labels.flatten())
    loss.backward()
    return [
        [
            layer.feed_forward.contract.weight.grad.norm().item()
            for layer in stack.layers
        ]
        for stack in (model.encoder, model.decoder)
    ]


GRAD_SEEDS = pick(quick=[0], full=[0, 1, 2, 3])
grad_norms, seed_runs = {}, {}
with single_thread():
    for norm_first, name in [(False, "post-LN"), (True, "pre-LN")]:
        # (seeds, 2, N)
        runs = torch.tensor(
            [ffn_gradient_norms(norm_first, seed) for seed in GRAD_SEEDS]
        )
        # (2, N)
        grad_norms[name], seed_runs[name] = runs.mean(dim=0), runs

fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
for ax, stack_index, stack in zip(axes, (0, 1), ("encoder", "decoder")):
    for name, marker in [("post-LN", "o"), ("pre-LN", "s")]:
        ax.plot(range(1, 7), grad_norms[name][stack_index], marker=marker, label=name)
    ax.set_title(f"{stack}: gradient norm of $W_2$ at initialisation", fontsize=10)
    ax.set_xlabel("layer")
axes[0].set_ylabel("gradient norm")
axes[0].legend()
fig.tight_layout()
plt.show()

for name, norms in grad_norms.items():
    print(
        f"{name:<8} encoder {[round(v, 3) for v in norms[0].tolist()]}  decoder "
        f"{[round(v, 3) for v in norms[1].tolist()]}"
    )


# %%
def last_over_first(norms: torch.Tensor) -> float:
    """Gradient norm of layer 6 divided by that of layer 1."""
    return (norms[-1] / norms[0]).item()


ratios = {
    (name, stack): last_over_first(grad_norms[name][i])
    for name in grad_norms
    for i, stack in enumerate(["encoder", "decoder"])
}
for stack in ["encoder", "decoder"]:
    print(
        f"{stack}: gradient norm of layer 6 / layer 1: post-LN "
        f"{ratios['post-LN', stack]:.2f}, pre-LN {ratios['pre-LN', stack]:.2f}"
    )
# post-LN decoder: largest gradients at the top
assert ratios["post-LN", "decoder"] > 3
# pre-LN decoder: flat, drifting gently down
assert 0.5 < ratios["pre-LN", "decoder"] < 1.0
assert ratios["pre-LN", "encoder"] < 1.0
# each initialisation's layer-6 / layer-1 ratio, (seeds, 2): encoder, decoder
per_seed = {name: runs[:, :, -1] / runs[:, :, 0] for name, runs in seed_runs.items()}
# post-LN encoder: on every initialisation, far from the decoder's growth (under half
# its smallest ratio) and above the pre-LN encoder's ratio
post, pre = per_seed["post-LN"], per_seed["pre-LN"]
print(
    f"post-LN over the initialisations: encoder {post[:, 0].min():.2f} to "
    f"{post[:, 0].max():.2f}, decoder {post[:, 1].min():.2f} to {post[:, 1].max():.2f}"
)
assert post[:, 0].max() < 0.5 * post[:, 1].min()
assert (post[:, 0] > pre[:, 0]).all()

# %% [markdown]
# The decoder shows what Xiong et al. describe. In post-LN, the gradient of the last layer's
# $\mathbf W_2$ is several times that of the first: the layers nearest the output get the largest
# gradients, and each LayerNorm on the way down shrinks the gradient that passes through it. In
# pre-LN the norms change little from layer to layer, and drift slightly *down* towards the output:
# a lower layer's output reaches the loss both directly, along the residual path, and through every
# layer above it. The encoder of this encoder-decoder model does not show the post-LN growth in
# this measurement (its ratio, printed above, stays near 1, under half of the decoder's on
# every initialisation); its output reaches the loss through the
# cross-attention of every decoder layer. Xiong et al. turn the decoder-side picture into a bound
# and conclude that post-LN needs a small learning rate at the start, hence the warm-up, while
# pre-LN can do without {cite}`xiong2020layer`. The last exercise tries it.
#
# (sec-transformer-training-recipe)=
# ## The training recipe
#
# ### Label smoothing
#
# Instead of training towards a one-hot target, the paper uses {term}`label smoothing` with
# $\varepsilon_{ls} = 0.1$ {cite}`szegedy2016rethinking,vaswani2017attention`: the target
# distribution puts $1-\varepsilon$ on the correct token and spreads $\varepsilon$ uniformly over
# all $V$ tokens,
#
# $$q_k = (1-\varepsilon)\,[k = y] + \frac{\varepsilon}{V}, \qquad
# \ell = -\sum_k q_k \log p_k = (1-\varepsilon)\bigl(-\log p_y\bigr) + \varepsilon\,\frac1V\sum_k\bigl(-\log p_k\bigr).$$
#
# The second term is the cross-entropy with the uniform distribution: it is smallest when the
# model does *not* put all its mass on one token. The paper reports that it makes perplexity worse,
# because the model learns to be less certain, but improves accuracy and the BLEU score. Padding positions are
# skipped (`ignore_index`) and the loss is averaged over the remaining ones.

# %% tags=["export:blocks.losses"]
from __future__ import annotations

import torch


def label_smoothed_cross_entropy(
    logits: torch.Tensor,
    targets: torch.Tensor,
    smoothing: float = 0.1,
    ignore_index: int = -100,
) -> torch.Tensor:
    """Mean cross-entropy against q = (1 - ε)·one_hot(y) + ε/V, over positions whose
    target is not ignore_index.

    logits (..., V), targets (...) integer class ids. Equals
    nn.CrossEntropyLoss(label_smoothing=ε, ignore_index=ignore_index)(logits.flatten(0,
    -2), targets.flatten()).
    """
    if (
        not isinstance(logits, torch.Tensor)
        or not isinstance(targets, torch.Tensor)
        or logits.dim() < 2
        or logits.shape[:-1] != targets.shape
    ):
        got = [
            tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            for t in (logits, targets)
        ]
        raise ValueError(
            f"expected logits of shape (..., V) and targets of shape (...), got "
            f"{got[0]} and {got[1]}"
        )
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"smoothing: expected a value in [0, 1], got {smoothing!r}")
    log_p = logits.reshape(-1, logits.shape[-1]).log_softmax(dim=-1)  # (N, V)
    targets = targets.reshape(-1)  # (N,)
    # (N,) positions that count
    keep = targets != ignore_index
    # (N,) -log p_y
    nll = -log_p.gather(-1, targets.masked_fill(~keep, 0)[:, None]).squeeze(-1)
    # (N,) cross-entropy with 1/V
    uniform = -log_p.mean(dim=-1)
    loss = (1.0 - smoothing) * nll + smoothing * uniform  # (N,)
    return loss[keep].sum() / keep.sum()


# %%
g = torch.Generator().manual_seed(3)
logits = 3 * torch.randn(13, 5, 11, generator=g)  # (B, T, V)
targets = torch.randint(1, 11, (13, 5), generator=g)  # (B, T)
targets[:, 3:] = 0  # padding, id 0
ours = label_smoothed_cross_entropy(logits, targets, smoothing=0.1, ignore_index=0)
theirs = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=0)(
    logits.flatten(0, 1), targets.flatten()
)
print(f"ours {ours.item():.6f}, nn.CrossEntropyLoss {theirs.item():.6f}")
assert torch.allclose(ours, theirs, atol=1e-6)


# %% [markdown]
# Label smoothing puts a floor under the loss. Even a model that is always right cannot reach
# zero: the best it can do is predict $q$ itself, and the loss is then the entropy of $q$. With
# $V = 13$ (the digit task below), that floor is:

# %%
def smoothing_floor(V: int, eps: float) -> float:
    """Entropy of q = (1 - ε) one_hot + ε / V: the lowest label-smoothed loss any model
    can reach."""
    q = torch.full((V,), eps / V)
    q[0] += 1 - eps
    return -(q * q.log()).sum().item()


# predict q itself
best_logits = torch.log(
    torch.full((1, 13), 0.1 / 13) + F.one_hot(torch.tensor([0]), 13) * 0.9
)
print(
    f"floor for V = 13, ε = 0.1: {smoothing_floor(13, 0.1):.4f}; "
    f"loss of the model that predicts q: "
    f"{label_smoothed_cross_entropy(best_logits, torch.tensor([0])).item():.4f}"
)
assert (
    abs(
        label_smoothed_cross_entropy(best_logits, torch.tensor([0])).item()
        - smoothing_floor(13, 0.1)
    )
    < 1e-5
)

# %% [markdown]
# (The annotated re-implementations of the paper often spread $\varepsilon$ over $V - 2$ classes,
# leaving out the correct token and the padding token. That is a slightly different $q$; ours
# is PyTorch's.)
#
# ### Adam and the warm-up schedule
#
# The paper trains with Adam, $\beta_1 = 0.9$, $\beta_2 = 0.98$ (the default is 0.999, so second-moment
# estimates adapt faster) and $\epsilon = 10^{-9}$, with a learning rate that first grows linearly
# for `warmup_steps` steps and then decays with the inverse square root of the step number:
#
# $$\text{lr}(s) = d_\text{model}^{-0.5}\cdot\min\bigl(s^{-0.5},\; s\cdot \text{warmup}^{-1.5}\bigr), \qquad s = 1, 2, \dots,$$
#
# with 4000 warm-up steps. The two branches meet at $s = \text{warmup}$, where the rate peaks at
# $d_\text{model}^{-0.5}\cdot\text{warmup}^{-0.5}$. `warmup_inverse_sqrt` wraps the formula in a
# `LambdaLR`, which multiplies the optimizer's own learning rate by it: create the optimizer with
# `lr=1.0` for the paper's schedule, or a smaller value to scale it down.

# %% tags=["export:blocks.schedules"]
from __future__ import annotations

import torch


def transformer_lr(step: int, d_model: int, warmup_steps: int = 4000) -> float:
    """d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) for step = 1, 2, ...: warm-up,
    then 1/√step."""
    for name, value in (
        ("step", step),
        ("d_model", d_model),
        ("warmup_steps", warmup_steps),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                f"{name}: expected a positive int (steps count from 1), got {value!r}"
            )
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def warmup_inverse_sqrt(
    optimizer: torch.optim.Optimizer, d_model: int, warmup_steps: int = 4000
) -> torch.optim.lr_scheduler.LambdaLR:
    """LambdaLR that multiplies the optimizer's lr by transformer_lr; call .step() after
    each update."""
    return torch.optim.lr_scheduler.LambdaLR(
        # LambdaLR counts from 0
        optimizer,
        lambda i: transformer_lr(i + 1, d_model, warmup_steps),
    )


# %% mystnb={"image": {"alt": "Line plot of the Transformer's learning rate against the step for four settings of d_model and warm-up: each rises linearly to a peak at the end of the warm-up, then decays; wider models get lower curves, a longer warm-up a lower and later peak."}}
steps = range(1, 20001)
fig, ax = plt.subplots(figsize=(6.5, 3.2))
for d_model, warmup in [(512, 4000), (1024, 4000), (256, 4000), (512, 8000)]:
    ax.plot(
        steps,
        [transformer_lr(s, d_model, warmup) for s in steps],
        label=f"$d_{{model}}$={d_model}, warmup={warmup}",
    )
ax.set_xlabel("step")
ax.set_ylabel("learning rate")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

peak = max(steps, key=lambda s: transformer_lr(s, 512, 4000))
print(
    f"d_model 512, warm-up 4000: peak at step {peak}, lr "
    f"{transformer_lr(peak, 512, 4000):.3e} = 512^-0.5 · 4000^-0.5 = "
    f"{512**-0.5 * 4000**-0.5:.3e}"
)
assert peak == 4000 and abs(transformer_lr(4000, 512) - 512**-0.5 * 4000**-0.5) < 1e-12

optimizer = torch.optim.Adam(
    nn.Linear(2, 2).parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9
)
scheduler = warmup_inverse_sqrt(optimizer, d_model=512)
rates = []
for _ in range(5):
    rates.append(optimizer.param_groups[0]["lr"])  # the rate used by this update
    optimizer.step()
    scheduler.step()
assert all(
    abs(r - transformer_lr(s, 512)) < 1e-15 for s, r in enumerate(rates, start=1)
)
print(f"the scheduler's first rates: {[f'{r:.2e}' for r in rates]}")

# %% [markdown]
# Wider models get smaller rates ($d_\text{model}^{-0.5}$), and a longer warm-up lowers and delays
# the peak.
#
# (sec-transformer-decoding)=
# ## Training in parallel, generating step by step
#
# During training the whole target sentence is known. The decoder gets the target shifted right by
# one position (a start token `<bos>` in front, the last token dropped) and must predict, at every
# position, the next token. This is {term}`teacher forcing`: the decoder is fed the true previous
# tokens, not its own guesses. With the causal mask, position $t$ cannot see positions after $t$,
# so one forward pass trains all positions at once, as if the decoder had been run $T$ times.
#
# At inference time nothing is known: the model generates the first token, appends it, runs the
# decoder again on the longer prefix, and so on until it emits `<eos>`. Each step costs a
# forward pass of the decoder; the source is encoded only once. (Production implementations also
# cache the keys and values of earlier positions; ours recompute them, which is simpler and fast
# enough here.)
#
# The cell below checks that the parallel pass and the step-by-step computation give the same
# logits: the logits at position $t$ of one pass over the whole target equal the last logits of a
# pass over the prefix of length $t + 1$.

# %%
memory = toy.encode(src)  # (B, S, D) once
# (B, T, V) all positions in one pass
parallel = toy.decode(tgt, memory, toy.source_mask(src))
one_by_one = torch.stack(
    [
        toy.decode(tgt[:, : t + 1], memory, toy.source_mask(src))[:, -1]
        # (B, T, V) T passes
        for t in range(tgt.shape[1])
    ],
    dim=1,
)
print(
    f"max |parallel - step by step| = {(parallel - one_by_one).abs().max().item():.1e}"
)
assert torch.allclose(parallel, one_by_one, atol=1e-5)

# %% [markdown]
# ### Greedy decoding and beam search
#
# {term}`Greedy decoding <greedy decoding>` takes the most probable token at every step. It can miss the most
# probable *sequence*: a slightly less likely first token may lead to much more likely
# continuations. {term}`Beam search <beam search>` keeps the $k$ best partial sequences (the beam) instead of
# one: at every step it extends each of them by every possible token, scores each candidate by its
# summed log-probability, and keeps the best $k$ of the $k\cdot V$ candidates. A hypothesis that
# has produced `<eos>` is finished: it stays in the beam with its score and can only be extended
# by padding at no cost, and the search stops when all $k$ are finished or the length limit is
# reached. The paper used $k = 4$.
#
# Summed log-probabilities favour short outputs, since every token adds a negative term. A
# **length penalty** corrects for that by dividing the score by
# $\text{lp}(Y) = \bigl((5 + |Y|)/6\bigr)^{\alpha}$ {cite}`wu2016google`; the paper used
# $\alpha = 0.6$. Our `length_penalty` is $\alpha$: $0$ (the default) means no normalisation, and
# $1$ is close to the mean log-probability per token. In our implementation the penalty reorders
# the $k$ hypotheses of the final beam; which hypotheses survive during the search is decided by
# the raw sums. With $k = 1$ and $\alpha = 0$, beam search *is* greedy decoding, and the tests
# check that they return the same tokens.

# %% tags=["export:blocks.decoding"]
from __future__ import annotations

from dataclasses import dataclass

import torch


def _pad_id(model, eos_id: int) -> int:
    """The id written after <eos>: the model's pad_id, or eos_id again when it
    has none."""
    pad_id = getattr(model.config, "pad_id", None)
    return eos_id if pad_id is None else pad_id


def _check_decoding(src, max_len, beam_size=1) -> None:
    if not isinstance(src, torch.Tensor) or src.dim() != 2:
        got = tuple(src.shape) if isinstance(src, torch.Tensor) else type(src).__name__
        raise ValueError(f"src: expected token ids of shape (B, S), got {got}")
    for name, value in (("max_len", max_len), ("beam_size", beam_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")


@torch.no_grad()
def greedy_decode(
    model, src: torch.Tensor, bos_id: int, eos_id: int, max_len: int
) -> torch.Tensor:
    """Most probable token at every step. Returns (B, L) ids: <bos>, up to max_len
    tokens, padding after <eos>.

    model: a Transformer (or anything with encode, decode and source_mask),
    in eval mode.
    """
    _check_decoding(src, max_len)
    pad_id = _pad_id(model, eos_id)
    # (B, S, D), encoded once
    memory, memory_mask = model.encode(src), model.source_mask(src)
    # (B, 1)
    out = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    # (B,)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        # (B, V) next token only
        logits = model.decode(out, memory, memory_mask)[:, -1]
        next_token = logits.argmax(dim=-1).masked_fill(done, pad_id)  # (B,)
        out = torch.cat([out, next_token[:, None]], dim=1)  # (B, L + 1)
        done |= next_token == eos_id
        if done.all():
            break
    return out


@dataclass
class BeamSearchOutput:
    # (B, K, L) the final beam, best first: <bos>, tokens, padding after <eos>
    sequences: torch.Tensor
    # (B, K) summed log-probabilities divided by the length penalty
    scores: torch.Tensor


@torch.no_grad()
def beam_search(
    model,
    src: torch.Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int,
    beam_size: int = 4,
    length_penalty: float = 0.0,
) -> BeamSearchOutput:
    """Keep the beam_size best partial outputs by summed log-probability; rank the final
    ones by score / ((5 + length) / 6) ** length_penalty (Wu et al., 2016; 0 = no length
    normalisation)."""
    _check_decoding(src, max_len, beam_size)
    B, K, pad_id = src.shape[0], beam_size, _pad_id(model, eos_id)
    memory_mask = model.source_mask(src)
    # (B*K, S, D) one copy per hypothesis
    memory = model.encode(src).repeat_interleave(K, dim=0)
    if memory_mask is not None:
        memory_mask = memory_mask.repeat_interleave(K, dim=0)  # (B*K, 1, 1, S)
    # (B*K, 1)
    seqs = torch.full((B * K, 1), bos_id, dtype=torch.long, device=src.device)
    scores = torch.full((B, K), float("-inf"), device=src.device)
    # at first, one live hypothesis
    scores[:, 0] = 0.0
    done = torch.zeros(B * K, dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        # (B*K, V)
        log_p = model.decode(seqs, memory, memory_mask)[:, -1].log_softmax(dim=-1)
        V = log_p.shape[-1]
        finished = torch.full_like(log_p, float("-inf"))
        # a finished one only takes padding, free
        finished[:, pad_id] = 0.0
        log_p = torch.where(done[:, None], finished, log_p)
        # (B, K·V) every one-token extension
        candidates = (scores.view(B * K, 1) + log_p).view(B, K * V)
        # (B, K) the best K
        scores, index = candidates.topk(K, dim=-1)
        # (B, K) which hypothesis, which token
        parent, token = index // V, index % V
        # (B*K,)
        rows = (torch.arange(B, device=src.device)[:, None] * K + parent).view(-1)
        seqs = torch.cat([seqs[rows], token.view(-1, 1)], dim=1)  # (B*K, L + 1)
        done = done[rows] | (token.view(-1) == eos_id)
        if done.all():
            break
    # generated tokens, <eos> included
    lengths = (seqs[:, 1:] != pad_id).sum(dim=-1).view(B, K).float()
    final = scores / ((5.0 + lengths) / 6.0) ** length_penalty  # (B, K)
    # (B, K) best first
    order = final.argsort(dim=-1, descending=True)
    L = seqs.shape[1]
    sequences = seqs.view(B, K, L).gather(1, order[..., None].expand(B, K, L))
    return BeamSearchOutput(sequences, final.gather(1, order))


# %% [markdown]
# On the untrained toy model both produce garbage, but they already agree with each other when the
# beam has size 1. A beam of 4 finds a sequence at least as probable as greedy decoding's for most
# sources, though not for every source in general: once the greedy path falls out of the beam, the hypotheses that replaced it had better
# prefixes, but their continuations can still turn out worse. The cell recomputes the summed
# log-probability of each output with the model and counts how often the beam won:

# %%
def sequence_log_prob(model, src, sequences, eos_id):
    """Summed log-probability of each sequence (B, L) (starting with <bos>), up to and
    including <eos>."""
    # (B, L-1, V)
    log_p = model(src, sequences[:, :-1]).logits.log_softmax(-1)
    # (B, L-1)
    token_log_p = log_p.gather(-1, sequences[:, 1:, None]).squeeze(-1)
    before_eos = (sequences[:, 1:] == eos_id).long().cumsum(-1) - (
        sequences[:, 1:] == eos_id
    ).long() == 0
    # (B,)
    return (token_log_p * before_eos).sum(-1)


BOS_TOY, EOS_TOY = 1, 2
greedy = greedy_decode(toy, src, BOS_TOY, EOS_TOY, max_len=6)
beam1 = beam_search(toy, src, BOS_TOY, EOS_TOY, max_len=6, beam_size=1)
beam4 = beam_search(toy, src, BOS_TOY, EOS_TOY, max_len=6, beam_size=4)
print(
    f"greedy {tuple(greedy.shape)}: {greedy[0].tolist()}; beam 1: "
    f"{beam1.sequences[0, 0].tolist()}"
)
assert torch.equal(greedy, beam1.sequences[:, 0])
with torch.no_grad():
    lp_greedy = sequence_log_prob(toy, src, greedy, EOS_TOY)
    lp_beam = sequence_log_prob(toy, src, beam4.sequences[:, 0], EOS_TOY)
print(
    f"log-probability, mean over 13 sources: greedy {lp_greedy.mean().item():.3f}, "
    f"beam of 4 {lp_beam.mean().item():.3f}; the beam's output is at least as "
    f"probable in {int((lp_beam >= lp_greedy - 1e-4).sum())} of 13 sources"
)
# the score is the summed log-probability
assert torch.allclose(lp_beam, beam4.scores[:, 0], atol=1e-4)
# at least as probable for most sources, and on average
assert (lp_beam >= lp_greedy - 1e-4).float().mean() > 0.5
assert lp_beam.mean() >= lp_greedy.mean() - 1e-4

# %% [markdown]
# (sec-transformer-reverse)=
# ## Training a Transformer: reversing digit strings
#
# Now a full training run on a task small enough for a laptop CPU: the source is a string of 1 to
# 10 digits, the target is the same string reversed. The model must learn where to look
# (cross-attention from target position $t$ to source position $S - 1 - t$, which depends on the
# source's length), so it exercises every part of the architecture.
#
# **A genuinely held-out test set.** Random strings are cheap, so it would be easy to test on
# strings that also occurred in training and to measure memorisation instead of generalisation.
# We split by hash instead: the CRC-32 checksum of a string decides, once and for all, whether it
# belongs to training (80% of all strings), validation (10%) or test (10%). Training batches are
# drawn only from training strings, the validation strings decide when to stop, and the test
# strings are used once, at the end. The cell also records every training string and checks that
# no test string is among them.

# %%
PAD, BOS, EOS = 0, 1, 2  # special tokens; digit d is token d + 3
DIGITS_VOCAB = 13
MAX_DIGITS = 10


def split_of(digits: str) -> str:
    """'train', 'valid' or 'test', fixed by the string itself (a hash), never
    by chance."""
    bucket = zlib.crc32(digits.encode()) % 10
    return "test" if bucket == 0 else "valid" if bucket == 1 else "train"


def sample_strings(
    n: int, split: str, generator: torch.Generator, distinct: bool = False
) -> list[str]:
    """n random digit strings of length 1 ... MAX_DIGITS that belong to the given split.

    Lengths are uniform, so short strings repeat often; distinct=True keeps each
    string once.
    """
    out, seen = [], set()
    while len(out) < n:
        length = int(torch.randint(1, MAX_DIGITS + 1, (1,), generator=generator))
        digits = "".join(
            map(str, torch.randint(0, 10, (length,), generator=generator).tolist())
        )
        if split_of(digits) == split and not (distinct and digits in seen):
            out.append(digits)
            seen.add(digits)
    return out


def to_tensors(strings: list[str]):
    """Source (B, S), decoder input <bos> + reversed (B, T) and decoder target
    reversed + <eos> (B, T)."""
    B, S = len(strings), max(map(len, strings))
    src = torch.full((B, S), PAD)
    tgt_in, tgt_out = torch.full((B, S + 1), PAD), torch.full((B, S + 1), PAD)
    for i, digits in enumerate(strings):
        ids = torch.tensor([int(c) + 3 for c in digits])
        n = len(ids)
        src[i, :n] = ids
        tgt_in[i, 0], tgt_in[i, 1 : n + 1] = BOS, ids.flip(0)
        tgt_out[i, :n], tgt_out[i, n] = ids.flip(0), EOS
    return src, tgt_in, tgt_out


example_src, example_in, example_out = to_tensors(["120", "98765"])
print(
    f"source\n{example_src}\ndecoder input (teacher forcing)\n{example_in}\n"
    f"decoder target\n{example_out}"
)
counts_by_split = {
    name: sum(split_of(f"{i:05d}") == name for i in range(100_000))
    for name in ["train", "valid", "test"]
}
print(f"split of all 100,000 five-digit strings: {counts_by_split}")

# %% [markdown]
# The model is small: 2 encoder and 2 decoder layers, $d_\text{model} = 64$, 4 heads,
# $d_\text{ff} = 256$, the paper's post-LN. The recipe is the paper's, scaled down: label
# smoothing 0.1, Adam with $\beta_2 = 0.98$, and the warm-up schedule with 200 warm-up steps,
# multiplied by 0.5 (the formula's peak for $d_\text{model} = 64$ and 200 steps would be
# $8.8\cdot10^{-3}$; halving it is a cautious choice for so small a model, not one tuned here). Dropout is off, because every batch is fresh data and there is nothing
# to over-fit. Every 100 steps, greedy decoding on 500 distinct validation strings measures the
# exact-match rate, and training stops after two checks in a row at 99.8% or more, or when the
# step budget runs out. The test set holds 1,000 *distinct* strings: lengths are drawn uniformly,
# so without that rule the single one-digit test string would make up a tenth of the test set.

# %%
MAX_STEPS = pick(quick=120, full=1500)
BATCH_SIZE = 128
N_VALID, N_TEST = pick(quick=200, full=500), pick(quick=300, full=1000)


def exact_match(model, strings: list[str], beam_size: int = 1) -> tuple[float, float]:
    """(exact-match rate, per-digit accuracy) of the decoded outputs on the
    given strings."""
    src, _, tgt_out = (t.to(device) for t in to_tensors(strings))
    if beam_size == 1:
        decoded = greedy_decode(model, src, BOS, EOS, max_len=MAX_DIGITS + 1)
    else:
        decoded = beam_search(
            model, src, BOS, EOS, max_len=MAX_DIGITS + 1, beam_size=beam_size
        ).sequences[:, 0]
    predicted = torch.full_like(tgt_out, PAD)
    n = min(decoded.shape[1] - 1, tgt_out.shape[1])
    # drop <bos>, align with the targets
    predicted[:, :n] = decoded[:, 1 : n + 1]
    real = tgt_out != PAD
    exact = ((predicted == tgt_out) | ~real).all(dim=-1).float().mean().item()
    digits = real & (tgt_out != EOS)
    per_digit = (predicted == tgt_out)[digits].float().mean().item()
    return exact, per_digit


valid_strings = sample_strings(
    N_VALID, "valid", torch.Generator().manual_seed(11), distinct=True
)
test_strings = sample_strings(
    N_TEST, "test", torch.Generator().manual_seed(12), distinct=True
)

seed_everything(0)
reverser_config = TransformerConfig(
    vocab_size=DIGITS_VOCAB,
    d_model=64,
    n_heads=4,
    n_layers=2,
    d_ff=256,
    dropout=0.0,
    max_len=MAX_DIGITS + 2,
    pad_id=PAD,
)
reverser = Transformer(reverser_config).to(device)
optimizer = torch.optim.Adam(reverser.parameters(), lr=0.5, betas=(0.9, 0.98), eps=1e-9)
scheduler = warmup_inverse_sqrt(optimizer, d_model=64, warmup_steps=200)
data = torch.Generator().manual_seed(1)
seen_in_training, history = set(), []

start = time.perf_counter()
with single_thread():
    bar = progress(total=MAX_STEPS, desc="reversal", updates=4)
    for step in range(1, MAX_STEPS + 1):
        strings = sample_strings(BATCH_SIZE, "train", data)
        seen_in_training.update(strings)
        src, tgt_in, tgt_out = (t.to(device) for t in to_tensors(strings))
        # (B, T, V): all positions at once
        logits = reverser(src, tgt_in).logits
        loss = label_smoothed_cross_entropy(
            logits, tgt_out, smoothing=0.1, ignore_index=PAD
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        bar.update(1)
        if step % 100 == 0 or step == MAX_STEPS:
            reverser.eval()
            valid_exact, _ = exact_match(reverser, valid_strings)
            reverser.train()
            history.append((step, loss.item(), valid_exact))
            if len(history) >= 2 and min(v for _, _, v in history[-2:]) >= 0.998:
                # two good checks in a row
                break
    bar.close()
reverser.eval()
train_seconds = time.perf_counter() - start
for step, loss_value, valid_exact in history:
    print(
        f"step {step:>5}: training loss {loss_value:.3f}, validation exact match "
        f"{valid_exact:.1%}"
    )
print(
    f"trained for {history[-1][0]} steps in {train_seconds:.0f} s on "
    f"{len(seen_in_training):,} distinct strings; label-smoothing floor of the loss: "
    f"{smoothing_floor(DIGITS_VOCAB, 0.1):.3f}"
)
assert not seen_in_training & set(test_strings), "a test string occurred in training"

# %% [markdown]
# The test set, decoded greedily and with a beam of 4:

# %%
N_BEAM = pick(quick=50, full=300)
with single_thread():
    test_exact, test_digits = exact_match(reverser, test_strings)
    beam_exact, _ = exact_match(reverser, test_strings[:N_BEAM], beam_size=4)
    greedy_subset, _ = exact_match(reverser, test_strings[:N_BEAM])
print(
    f"held-out test strings ({len(test_strings)}, none seen in training): exact "
    f"match {test_exact:.1%} (greedy), per-digit accuracy {test_digits:.1%} "
    f"(chance: 10%)"
)
print(f"on the first {N_BEAM}: greedy {greedy_subset:.1%}, beam of 4 {beam_exact:.1%}")
for digits in test_strings[:4]:
    decoded = greedy_decode(
        reverser, to_tensors([digits])[0].to(device), BOS, EOS, max_len=MAX_DIGITS + 1
    )[0]
    text = "".join(str(t - 3) for t in decoded.tolist()[1:] if t > EOS)
    print(f"  {digits:>10} -> {text}")
if is_quick():
    # 120 steps do not finish the job, but no broken model gets here: a model that
    # copies instead of
    # reversing, or ignores the source, stays near 10% per digit and near 0%
    # exact match.
    assert test_digits >= 0.5 and test_exact >= 0.15, (
        "the quick run should get most digits right"
    )
else:
    assert test_exact >= 0.99, (
        f"expected >= 99% exact match on held-out strings, got {test_exact:.1%}"
    )

# %% [markdown]
# A model that had only memorised its training strings would be lost here: none of the test
# strings was ever a training example. In quick mode the budget is far too small to learn the
# task completely; the assertion then only checks per-digit accuracy well above chance, and
# the full run is needed to see near-perfect reversal.
#
# Where does the decoder look? The figure shows the cross-attention weights of the last decoder
# layer, averaged over its heads, for one test string. Each row is a decoder input, and the digit
# it must predict next is the mirror image of its position in the source, so a model that has
# learnt the task concentrates each row on one source digit along the anti-diagonal (after the full
# run, the cell asserts that most rows do; the quick run's map is blurrier).

# %% mystnb={"image": {"alt": "Heat map of the last decoder layer's cross-attention, averaged over its heads, for one test string, decoder inputs down and source digits across; a trained model puts each row's weight on the anti-diagonal, the digit it must write next."}}
digits = max(test_strings[:50], key=len)
src, tgt_in, _ = (t.to(device) for t in to_tensors([digits]))
with torch.no_grad():
    memory = reverser.encode(src)
    h = reverser.embed(tgt_in)
    self_mask = causal_mask(tgt_in.shape[1], device=device)
    for layer in reverser.decoder.layers[:-1]:
        h = layer(h, memory, self_mask, None)
    last = reverser.decoder.layers[-1]
    # post-LN: the first sub-layer
    h = last.norm1(h + last._sa_block(h, self_mask))
    _, weights = last.cross_attn(h, context=memory)  # (1, H, T, S)
fig, ax = plt.subplots(figsize=(4, 4))
ax.imshow(weights[0].mean(0).cpu(), cmap="viridis", vmin=0, vmax=1)
ax.set_xticks(range(len(digits)), list(digits))
ax.set_yticks(range(len(digits) + 1), ["<bos>"] + list(digits[::-1]))
ax.set_xlabel("source digit")
ax.set_ylabel("decoder input")
ax.set_title("cross-attention, last decoder layer", fontsize=10)
fig.tight_layout()
plt.show()
# (T, S): row i predicts the digit at the mirror position len - 1 - i
mean_map = weights[0].mean(0).cpu()[: len(digits), : len(digits)]
mirror = torch.arange(len(digits) - 1, -1, -1)
on_mirror = (mean_map.argmax(-1) == mirror).float().mean().item()
print(f"rows whose strongest source digit is the mirror position: {on_mirror:.0%}")
if not is_quick():
    assert on_mirror >= 0.8

# %% [markdown]
# (sec-transformer-decoder-only)=
# ## Decoder-only language models
#
# ### Auto-regressive and auto-encoding models
#
# A language model can be trained in two ways {cite}`radford2019language,devlin2019bert`:
#
# - **Auto-regressive** models predict the next token from the ones before it, like the decoder
#   above, but with no source sentence at all. They are trained on plain text, and they generate
#   text by sampling one token at a time (auto-complete, natural-language generation). The GPT
#   family is this kind: a Transformer *decoder*, without the encoder and therefore without
#   cross-attention, whose self-attention is masked everywhere.
# - **Auto-encoding** models see the whole input at once, with some tokens hidden, and predict the
#   hidden ones from both sides. They do not generate text left to right, but they produce a
#   representation of every token that uses its full context, which is what understanding tasks
#   (classification, question answering, tagging) need. BERT is this kind: a Transformer *encoder*,
#   with unmasked self-attention, the subject of the next chapters.
#
# In the example of {ref}`Ozdemir's lecture slides <sources-decks>`, "If you don't ____ at the
# sign, you will get a ticket.", an
# auto-regressive model predicts the gap from "If you don't" alone; an auto-encoding one also reads
# "at the sign, you will get a ticket".
#
# ### The model
#
# A decoder layer without cross-attention has two sub-layers, masked self-attention and the
# feed-forward block, which is exactly an encoder layer given a causal mask. So a GPT-style
# model is built from `EncoderLayer` and `causal_mask` ({numref}`sec-attention-masks`): token
# embedding and positions, $N$ layers,
# a final norm (GPT-2 uses pre-LN) and the output layer tied to the embedding
# {cite}`radford2019language`. The cell checks the claim: a pre-LN decoder layer whose
# cross-attention output projection is zero computes the same as an encoder layer with the same
# weights under a causal mask.

# %%
seed_everything(4)
decoder_layer = randomise(
    DecoderLayer(D, H, D_FF, dropout=0.0, norm_first=True), 4
).eval()
encoder_layer = EncoderLayer(D, H, D_FF, dropout=0.0, norm_first=True).eval()
with torch.no_grad():
    decoder_layer.cross_attn.output.weight.zero_()
    # cross-attention now adds 0
    decoder_layer.cross_attn.output.bias.zero_()
    encoder_layer.self_attn.load_state_dict(decoder_layer.self_attn.state_dict())
    encoder_layer.feed_forward.load_state_dict(decoder_layer.feed_forward.state_dict())
    encoder_layer.norm1.load_state_dict(decoder_layer.norm1.state_dict())
    # the feed-forward's norm
    encoder_layer.norm2.load_state_dict(decoder_layer.norm3.state_dict())
x = torch.randn(B, T, D)
as_decoder = decoder_layer(x, memory=torch.randn(B, 5, D), self_mask=causal_mask(T))
as_encoder = encoder_layer(x, mask=causal_mask(T))
print(
    f"max |decoder layer without cross-attention - causal encoder layer| = "
    f"{(as_decoder - as_encoder).abs().max().item():.1e}"
)
assert torch.allclose(as_decoder, as_encoder, atol=1e-6)

# %% tags=["export:blocks.language_model"]
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tinybert.blocks.attention import causal_mask
from tinybert.blocks.transformer import (
    TransformerConfig,
    TransformerEmbedding,
    check_tokens,
    init_transformer_weights,
)
from tinybert.blocks.transformer_layers import EncoderLayer, LayerNorm


@dataclass
class LMOutput:
    # (B, T, V) scores of the next token after each prefix
    logits: torch.Tensor
    # mean cross-entropy against targets, when they are given
    loss: torch.Tensor | None = None


class DecoderOnlyLM(nn.Module):
    """A GPT-style language model: embeddings + positions -> N causal layers -> norm ->
    tied output.

    Each layer is an EncoderLayer under a causal mask: the Transformer decoder without
    cross-attention. Uses config.vocab_size, d_model, n_heads, n_layers, d_ff, dropout,
    max_len (the context), norm_first, final_norm, activation and layer_norm_eps; pad_id
    is not used.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = self.config = config
        self.embed = TransformerEmbedding(c.vocab_size, c.d_model, c.max_len, c.dropout)
        self.layers = nn.ModuleList(
            EncoderLayer(**c.layer_kwargs()) for _ in range(c.n_layers)
        )
        self.norm = (
            LayerNorm(c.d_model, c.layer_norm_eps)
            if c.uses_final_norm
            else nn.Identity()
        )
        self.output = nn.Linear(c.d_model, c.vocab_size, bias=False)
        init_transformer_weights(self, c.d_model)
        # tied, as in GPT-2
        self.output.weight = self.embed.tokens.weight

    def forward(
        self, tokens: torch.Tensor, targets: torch.Tensor | None = None
    ) -> LMOutput:
        check_tokens("tokens", tokens, self.config.vocab_size)
        # (T, T) no peeking ahead
        mask = causal_mask(tokens.shape[1], device=tokens.device)
        x = self.embed(tokens)  # (B, T, D)
        for layer in self.layers:
            x = layer(x, mask)  # (B, T, D)
        logits = self.output(self.norm(x))  # (B, T, V)
        if targets is None:
            return LMOutput(logits)
        return LMOutput(
            logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        )


# %% [markdown]
# Generation samples the next token from the softmax of the last position's logits, divided by a
# *temperature* (below 1 sharpens the distribution, above 1 flattens it, 0 means greedy), keeps
# the last `max_len` tokens as context, and repeats. `top_k` optionally restricts the choice to
# the $k$ most probable tokens.

# %% tags=["export:blocks.decoding"]
@torch.no_grad()
def generate(
    model,
    prompt: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Extend prompt (B, T0) by sampling max_new_tokens tokens from a decoder-only model
    -> (B, T0 + n).

    generator: a torch.Generator on the model's device, for reproducible samples.
    """
    if (
        not isinstance(prompt, torch.Tensor)
        or prompt.dim() != 2
        or prompt.shape[1] == 0
    ):
        got = (
            tuple(prompt.shape)
            if isinstance(prompt, torch.Tensor)
            else type(prompt).__name__
        )
        raise ValueError(
            f"prompt: expected token ids of shape (B, T0) with T0 >= 1, got {got}"
        )
    if not temperature >= 0:
        raise ValueError(f"temperature: expected a number >= 0, got {temperature!r}")
    tokens = prompt
    for _ in range(max_new_tokens):
        context = tokens[:, -model.config.max_len :]  # (B, <= max_len)
        logits = model(context).logits[:, -1]  # (B, V)
        if temperature == 0:
            next_token = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        else:
            logits = logits / temperature
            if top_k is not None:
                # (B, 1)
                kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            # (B, 1)
            next_token = torch.multinomial(
                logits.softmax(dim=-1), 1, generator=generator
            )
        tokens = torch.cat([tokens, next_token], dim=1)
    return tokens


# %% [markdown]
# ### Training on Tiny Shakespeare
#
# The text is the 1.1 million characters of Tiny Shakespeare, modelled character by character; the
# first 90% train the model, the last 10% are held out. Each training example is a random window
# of 64 characters, and the targets are the same window shifted by one: at every position the
# model predicts the next character, all positions in parallel (teacher forcing again). The model
# has 4 pre-LN layers of width 64; the optimiser and schedule are the recipe above, with 100
# warm-up steps and the rate scaled by 0.25.

# %%
text = fetch("tinyshakespeare/input").read_text(encoding="utf-8")
chars = sorted(set(text))
char_to_id = {c: i for i, c in enumerate(chars)}
ids = torch.tensor([char_to_id[c] for c in text])
split = int(0.9 * len(ids))
train_ids, heldout_ids = ids[:split], ids[split:]
counts_per_char = torch.bincount(train_ids, minlength=len(chars)).float()
unigram = counts_per_char / counts_per_char.sum()
# best loss without context
unigram_loss = -(unigram * unigram.clamp_min(1e-12).log()).sum().item()
print(
    f"{len(text):,} characters, {len(chars)} distinct; train {len(train_ids):,}, held "
    f"out {len(heldout_ids):,}"
)
print(
    f"reference losses: uniform guess ln {len(chars)} = "
    f"{torch.log(torch.tensor(float(len(chars)))).item():.2f}, character frequencies "
    f"alone {unigram_loss:.2f} nats per character"
)

CONTEXT, LM_BATCH = 64, 32
LM_STEPS = pick(quick=50, full=1000)


def windows(source: torch.Tensor, n: int, generator: torch.Generator):
    """n random windows (n, CONTEXT) and their next-character targets (n, CONTEXT)."""
    starts = torch.randint(0, len(source) - CONTEXT - 1, (n,), generator=generator)
    offsets = torch.arange(CONTEXT)
    return source[starts[:, None] + offsets], source[starts[:, None] + offsets + 1]


heldout_x, heldout_y = (
    t.to(device)
    for t in windows(
        heldout_ids, pick(quick=50, full=400), torch.Generator().manual_seed(5)
    )
)


def heldout_loss(model) -> float:
    model.eval()
    with torch.no_grad():
        loss = model(heldout_x, heldout_y).loss.item()
    model.train()
    return loss


seed_everything(0)
lm_config = TransformerConfig(
    vocab_size=len(chars),
    d_model=64,
    n_heads=4,
    n_layers=4,
    d_ff=256,
    dropout=0.0,
    max_len=CONTEXT,
    norm_first=True,
    pad_id=None,
)
lm = DecoderOnlyLM(lm_config).to(device)
print(f"DecoderOnlyLM: {count_parameters(lm):,} parameters")
lm_optimizer = torch.optim.Adam(lm.parameters(), lr=0.25, betas=(0.9, 0.98), eps=1e-9)
lm_scheduler = warmup_inverse_sqrt(lm_optimizer, d_model=64, warmup_steps=100)
lm_data = torch.Generator().manual_seed(6)
lm_history = [(0, heldout_loss(lm))]

start = time.perf_counter()
with single_thread():
    for step in progress(range(1, LM_STEPS + 1), desc="language model", updates=4):
        x, y = (t.to(device) for t in windows(train_ids, LM_BATCH, lm_data))
        loss = lm(x, y).loss
        lm_optimizer.zero_grad()
        loss.backward()
        lm_optimizer.step()
        lm_scheduler.step()
        if step % pick(quick=25, full=100) == 0:
            lm_history.append((step, heldout_loss(lm)))
lm.eval()
final_heldout = lm_history[-1][1]
print(
    f"{LM_STEPS} steps in {time.perf_counter() - start:.0f} s; held-out loss by step: "
    + ", ".join(f"{s}: {l:.2f}" for s, l in lm_history)
)
assert final_heldout < unigram_loss, (
    "the model should beat character frequencies on held-out text"
)
if not is_quick():
    assert final_heldout < unigram_loss - 0.8, (
        "with the full budget the model should use its context"
    )

# %% [markdown]
# The held-out loss at step 0 is the untrained model's; compare it with the uniform guess printed
# above (random logits can be confidently wrong, which puts a model above the uniform guess).
# Training brings the loss below what character frequencies alone achieve, which the cell asserts,
# so the model uses the context. A sample, seeded, from the prompt "ROMEO:" at temperature 0.8:

# %%
prompt = torch.tensor([[char_to_id[c] for c in "ROMEO:"]], device=device)
sample_generator = torch.Generator(device=device).manual_seed(0)
with single_thread():
    sample = generate(
        lm,
        prompt,
        max_new_tokens=pick(quick=60, full=300),
        temperature=0.8,
        generator=sample_generator,
    )
print("".join(chars[i] for i in sample[0].tolist()))

# %% [markdown]
# With the CPU time printed above and 200 thousand parameters the model learns the look of the
# text: names in capitals followed by a colon, line breaks, common short words and plausible
# spellings.
# Meaning needs far more data and parameters; the recipe stays the same.
#
# Finally, the auto-regressive property holds for the trained model too: its prediction at a
# position does not depend on anything after it.

# %%
window = heldout_x[:1]  # (1, CONTEXT)
changed = window.clone()
changed[:, 40:] = torch.randint(0, len(chars), (1, CONTEXT - 40), device=device)
with torch.no_grad():
    before, after = lm(window).logits, lm(changed).logits
print(
    f"max change of the logits at positions 0-39 after changing 40-63: "
    f"{(after[:, :40] - before[:, :40]).abs().max().item():.1e}"
)
assert torch.allclose(after[:, :40], before[:, :40], atol=1e-5)

# %% [markdown]
# (sec-transformer-summary)=
# ## Summary
#
# - Each sub-layer of a Transformer is wrapped in a residual connection and a layer normalization,
#   either after the addition (post-LN, the paper) or at the sub-layer's input (pre-LN, with a
#   final norm per stack). Our `LayerNorm` equals `nn.LayerNorm`; at initialisation the two
#   placements distribute gradients over the layers differently, as measured above.
# - The encoder layer is self-attention plus a feed-forward block of width $4\,d_\text{model}$; the
#   decoder layer adds masked self-attention and cross-attention, whose queries come from the
#   decoder and keys and values from the encoder. Dropout goes on each sub-layer's output and on
#   the embeddings plus positions.
# - Embeddings are scaled by $\sqrt{d_\text{model}}$ and one matrix serves source, target and output.
#   With weights copied in, our model equals `torch.nn.Transformer` for both norm placements, once
#   its extra final norms are accounted for.
# - The base and big configurations have the parameter counts printed in
#   {ref}`sec-transformer-params`. Only the shared vocabulary is uncertain, yet no single
#   vocabulary size reproduces both of the paper's counts, 65M and 213M: the paper leaves its
#   exact accounting unstated.
# - The recipe: label smoothing 0.1 (equal to `nn.CrossEntropyLoss(label_smoothing=0.1)`), Adam with
#   $\beta_2 = 0.98$, and $\text{lr} = d_\text{model}^{-0.5}\min(s^{-0.5}, s\cdot\text{warmup}^{-1.5})$.
# - Training is parallel (teacher forcing under a causal mask); generation is sequential, greedy or
#   with a beam. A small Transformer learns to reverse digit strings it has never seen.
# - Decoder-only models (GPT) are the decoder without cross-attention; auto-encoding models (BERT)
#   are the encoder. BERT is next.
#
# From `tinybert.blocks.transformer_layers` later chapters import `LayerNorm`, `EncoderLayer`,
# `DecoderLayer`, `Encoder` and `Decoder`; from `tinybert.blocks.transformer` `TransformerEmbedding`,
# `init_transformer_weights`, `TransformerConfig` and `Transformer`; from
# `tinybert.blocks.losses` `label_smoothed_cross_entropy`; from `tinybert.blocks.schedules` `transformer_lr`
# and `warmup_inverse_sqrt`; from `tinybert.blocks.decoding` `greedy_decode`, `beam_search` and
# `generate`; from `tinybert.blocks.language_model` `DecoderOnlyLM`.
#
# (sec-transformer-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-transformer-layer-params
# :difficulty: 2
# :minutes: 20
# :kind: derivation
# :::
# **Parameters of one layer (pen and paper).** Write the number of parameters of one encoder layer
# and of one decoder layer as formulas in $D = d_\text{model}$ and $F = d_\text{ff}$. Evaluate them
# for the base model ($D = 512$, $F = 2048$). What fraction of an encoder layer's parameters sits
# in the feed-forward block? Does the number of heads appear in your formulas?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-transformer-layer-params
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): $4D^2 + 2DF + F + 9D$ for an encoder layer and $8D^2 +
# 2DF + F + 15D$ for a decoder layer, evaluated for the base model; about two thirds of an encoder
# layer in the feed-forward block; no $H$ in the formulas, because heads only split the columns of
# each projection.
#
# An attention sub-layer has $4D^2 + 4D$ parameters (four $D\times D$ matrices and their biases),
# the feed-forward block $2DF + F + D$, a LayerNorm $2D$. So an encoder layer has
# $4D^2 + 2DF + F + 9D$ and a decoder layer $8D^2 + 2DF + F + 15D$. The heads do not appear: they
# only split the $D$ columns of each projection into groups. The cell evaluates the formulas for
# the base model and checks them against the layers:

# %%
D_base, F_base = 512, 2048
encoder_formula = 4 * D_base**2 + 2 * D_base * F_base + F_base + 9 * D_base
decoder_formula = 8 * D_base**2 + 2 * D_base * F_base + F_base + 15 * D_base
assert encoder_formula == count_parameters(EncoderLayer(D_base, 8, F_base))
assert decoder_formula == count_parameters(DecoderLayer(D_base, 8, F_base))
ffn_share = (2 * D_base * F_base + F_base + D_base) / encoder_formula
print(
    f"encoder layer {encoder_formula:,}, decoder layer {decoder_formula:,}; "
    f"feed-forward share of an encoder layer {ffn_share:.1%}"
)

# %% [markdown]
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-transformer-label-smoothing
# :difficulty: 2
# :minutes: 25
# :kind: coding
# :::
# **Label smoothing by hand.** Write `smoothed_cross_entropy(logits, targets, smoothing, ignore_index)`
# for logits of shape $(N, V)$ and integer targets of shape $(N,)$. It returns the mean, over the
# positions whose target is not `ignore_index`, of $-\sum_k q_k\log p_k$ with
# $q_k = (1-\varepsilon)[k = y] + \varepsilon/V$ and $p = \operatorname{softmax}(\text{logits})$.
# Do not use `F.cross_entropy` or `nn.CrossEntropyLoss`; `torch.log_softmax` is allowed.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-transformer-label-smoothing
# :class: dropdown
# ::::
# Build $q$ explicitly and take the dot product with $-\log p$ row by row; the ignored positions are
# removed before the mean. (`label_smoothed_cross_entropy` in the chapter computes the same
# without building $q$, as a weighted sum of the two terms.)

# %% tags=["solution"]
import torch


def smoothed_cross_entropy(logits, targets, smoothing=0.1, ignore_index=-100):
    ### BEGIN SOLUTION
    keep = targets != ignore_index  # (N,)
    logits, targets = logits[keep], targets[keep]  # (M, V), (M,)
    V = logits.shape[-1]
    q = torch.full_like(logits, smoothing / V)  # (M, V)
    q[torch.arange(len(targets)), targets] += 1.0 - smoothing
    return -(q * torch.log_softmax(logits, dim=-1)).sum(dim=-1).mean()
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch06 import check_smoothed_cross_entropy

check_smoothed_cross_entropy(smoothed_cross_entropy)


# %% [markdown]
# :::{exercise-start}
# :label: ex-transformer-schedule
# :difficulty: 1
# :minutes: 20
# :kind: coding
# :::
# **The learning-rate schedule.** Write `noam_lr(step, d_model, warmup_steps)` returning, as a
# Python float, $d_\text{model}^{-0.5}\min(\text{step}^{-0.5}, \text{step}\cdot\text{warmup}^{-1.5})$
# for steps $1, 2, \dots$, and raising `ValueError` for a step below 1. At which step is it largest,
# and what is the largest value? For $d_\text{model} = 512$ and 4000 warm-up steps, how many
# steps after the peak does the rate take to fall to half of it?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-transformer-schedule
# :class: dropdown
# ::::
# Before the warm-up ends the second branch is smaller and grows linearly; after it, the first
# branch is smaller and decays. They meet at $\text{step} = \text{warmup}$, which is the peak,
# $d_\text{model}^{-0.5}\,\text{warmup}^{-0.5}$. After the peak the rate is proportional to
# $\text{step}^{-0.5}$, so it halves when the step number quadruples: at step 16,000, that is
# 12,000 steps after the peak.

# %% tags=["solution"]
def noam_lr(step, d_model, warmup_steps=4000):
    ### BEGIN SOLUTION
    if step < 1:
        raise ValueError(f"step: expected an int >= 1, got {step!r}")
    return float(d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5))
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch06 import check_noam_lr

check_noam_lr(noam_lr)


# %% [markdown]
# :::{exercise-start}
# :label: ex-transformer-pre-ln
# :difficulty: 2
# :minutes: 20
# :kind: coding
# :::
# **A pre-LN block from a post-LN layer's parts.** Write `pre_ln_forward(layer, x, mask=None)` that
# takes an `EncoderLayer` (whatever its `norm_first` says) and computes the *pre-LN* update
# $\mathbf x \leftarrow \mathbf x + F(\operatorname{LN}(\mathbf x))$ for its two sub-layers, using
# only its parts: `layer.self_attn`, `layer.feed_forward`, `layer.norm1`, `layer.norm2` (and
# `layer.dropout`, which the check turns off). Do not call `layer(...)` or its `_sa_block`/`_ff_block`.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-transformer-pre-ln
# :class: dropdown
# ::::
# Two residual lines, the norm inside the branch; `norm1` belongs to the attention sub-layer and
# `norm2` to the feed-forward block, in both placements.

# %% tags=["solution"]
def pre_ln_forward(layer, x, mask=None):
    ### BEGIN SOLUTION
    attended, _ = layer.self_attn(layer.norm1(x), mask=mask)  # (B, T, D)
    x = x + layer.dropout(attended)
    x = x + layer.dropout(layer.feed_forward(layer.norm2(x)))
    return x
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch06 import check_pre_ln_forward

check_pre_ln_forward(pre_ln_forward)

# %% [markdown]
# :::{exercise-start}
# :label: ex-transformer-no-warmup
# :difficulty: 3
# :minutes: 60
# :kind: experiment
# :::
# **Post-LN without warm-up (experiment).** Retrain the digit-reversal model of
# {ref}`sec-transformer-reverse` four ways: post-LN and pre-LN, each with the warm-up schedule and
# with a constant learning rate equal to the schedule's peak from the first step. Record the
# validation exact match every 100 steps. Which runs fail or train more slowly? Relate what you
# see to the gradient norms of {ref}`sec-transformer-gradients`. Then raise the constant rate by a
# factor of 3 and repeat.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-transformer-no-warmup
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): four runs (post- and pre-LN, with and without warm-up)
# on the same seeds, each with its validation curve; which runs fail or slow down; the link to
# post-LN's large gradients near the output; the repeat at three times the rate; conclusions from
# the curves, runs that did not fail included.
#
# Replace `warmup_inverse_sqrt(...)` by no scheduler and create Adam with the peak rate
# (`lr=0.5 * transformer_lr(200, 64, 200)`); set `norm_first=True` in `reverser_config` for the
# pre-LN runs; keep the seeds so that the four runs see the same data.
#
# What to look for: Xiong et al. predict that post-LN is the sensitive one: with a large rate from
# the first step, the large updates to the layers near the output can throw training into a
# plateau from which it recovers slowly or not at all, while pre-LN tolerates the same rate. At
# this small depth (2 layers) the effect may be mild at the peak rate and only show at the higher
# one; deeper models (try 6 layers) show it more clearly. Report the curves your runs produce,
# including any run that did not fail.
# ::::{solution-end}
# ::::
#
# (sec-transformer-quiz)=
# ## Quiz
#
# Check what you took from this chapter. In a notebook, run the cell and answer with
# `quiz.check(question, answer)`, such as `quiz.check(1, "b")`; here, press *Check*.

# %% tags=["quiz", "remove-input"]
from tinybert.exercises.quiz import Quiz, choice, number
from tinybert.blocks.schedules import transformer_lr

quiz = Quiz(
    "ch06",
    [
        choice(
            "Where does a pre-LN layer normalise?",
            [
                "after each residual addition",
                "at each sub-layer's input, with no final norm",
                "at each sub-layer's input, with a final norm per stack",
                "at each sub-layer's output, before the residual addition",
            ],
            answer="c",
            explain="Without the final norm a stack's output is an un-normalised sum; "
            "post-LN, the paper's placement, normalises after the addition.",
        ),
        number(
            "The peak learning rate of the schedule for d_model = 512 and 4000 warm-up "
            "steps? (5 decimals)",
            answer=transformer_lr(4000, 512, 4000),
            decimals=5,
            explain="512^-0.5 · 4000^-0.5, reached at the end of the warm-up.",
        ),
        choice(
            "In the decoder's cross-attention, the queries come from",
            ["the encoder", "the decoder", "the embeddings", "the output layer"],
            answer="b",
            explain="Keys and values come from the encoder.",
        ),
        choice(
            "Label smoothing with ε = 0.1 trains towards a target that puts",
            [
                "the model's own prediction, mixed 90/10 with the one-hot target",
                "1 on the correct token, with 10% of the targets made random tokens",
                "0.9 on the correct token and nothing on the others",
                "0.9 on the correct token and 0.1 spread evenly over all V tokens",
            ],
            answer="d",
            explain="nn.CrossEntropyLoss(label_smoothing=0.1) computes the same loss.",
        ),
        choice(
            "How does the trained model produce the target tokens of a translation?",
            [
                "one after the other, greedily or with a beam",
                "all at once, as in training: the causal mask allows it",
                "all at once, after the encoder has run",
                "one after the other, each from the source alone",
            ],
            answer="a",
            explain="Each new token depends on the ones before it.",
        ),
        choice(
            "A decoder-only model such as GPT is",
            [
                "the encoder without its masks",
                "the decoder without its causal mask",
                "an encoder-decoder with one vocabulary",
                "the decoder without cross-attention",
            ],
            answer="d",
            explain="There is no encoder to attend to.",
        ),
    ],
)
quiz
