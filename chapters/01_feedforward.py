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
#     module: blocks.feedforward
# ---

# %% [markdown]
# (sec-ffn)=
# # Feed-forward networks
#
# Every Transformer, and therefore every BERT, is built mostly from two kinds of layers: attention
# layers, which let the positions of a sequence exchange information, and small
# {term}`feed-forward networks <feed-forward network>`, which transform each position on its own.
# Attention gets the next chapters. This one is about the second kind, the oldest idea in the
# course, and it also sets up the vocabulary (neurons, layers, activations, logits, losses,
# optimisers) that everything later takes for granted.
#
# **What you will learn**
#
# - what a {term}`neuron`, a {term}`layer`, a weight, a bias and an architecture are, by computing
#   a two-layer network by hand, then with `torch.nn.Linear`, then for a whole batch;
# - how the output unit follows from the kind of target (linear for regression, sigmoid for yes/no,
#   softmax for classes), which loss each one implies, and why we compute losses from
#   {term}`logits <logit>` rather than from probabilities;
# - how a network is trained (a refresher): gradient descent, backpropagation done by autograd,
#   and the Adam and AdamW optimisers;
# - the {term}`activation functions <activation function>` you will meet in this course
#   (sigmoid, tanh, ReLU, GELU, ELU), their derivatives, and how accurate the two popular GELU
#   approximations are;
# - why depth matters, on a problem that no linear model can solve;
# - the Transformer's **position-wise feed-forward block**, which the Transformer and BERT chapters
#   import from `tinybert.blocks.feedforward`.
#
# **Uses.** Nothing from earlier chapters: this is the first one, and its modules
# `tinybert.blocks.checks` (the argument checks every chapter uses) and
# `tinybert.blocks.feedforward` are the first of the package. Like every chapter, it takes its device,
# seeds and training budgets from the hand-written helpers in `tinybert.runtime`.
#
# (sec-ffn-setup)=
# ## Setup
#
# The first cell holds the imports of the module `tinybert.blocks.feedforward` that this chapter writes.
# Cells marked *export* are copied into that module, in order; everything else is teaching code.

# %% tags=["export"]
from __future__ import annotations

import math

import torch
from torch import nn

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import torch.nn.functional as F

from tinybert.runtime import get_device, is_quick, pick, progress, seed_everything

device = get_device()
print(f"device: {device}, quick mode: {is_quick()}")

# %% [markdown]
# (sec-ffn-checks)=
# ### Checking arguments
#
# Every layer of the course checks its arguments before it builds anything, and a refusal says
# what was expected and what was given. The helpers for that live in their own module,
# `tinybert.blocks.checks`, which every later chapter imports instead of writing its own: three
# checks of a number (a size, a dropout rate, a scale such as a LayerNorm's $\varepsilon$) and two
# descriptions of a refused input.

# %% tags=["export:blocks.checks"]
from __future__ import annotations

import math

import torch


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_positive_int(name: str, value) -> int:
    """``value`` if it is a positive int (a bool is not); otherwise a ValueError naming
    ``name``, what was expected and what was given."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value!r}")
    return value


def check_probability(name: str, value) -> float:
    """``value`` if it is a number in [0, 1), as a dropout rate must be (a rate of 1
    would drop everything); otherwise a ValueError like check_positive_int's."""
    if not (_is_number(value) and 0.0 <= value < 1.0):
        raise ValueError(f"{name}: expected a probability in [0, 1), got {value!r}")
    return value


def check_positive_number(name: str, value) -> float:
    """``value`` if it is a finite number > 0 (an ε, a standard deviation); otherwise
    a ValueError like check_positive_int's."""
    if not (_is_number(value) and 0 < value < math.inf):
        raise ValueError(f"{name}: expected a finite positive number, got {value!r}")
    return value


def shape_of(x) -> str:
    """The shape of a tensor, as a tuple; the type of anything else."""
    return str(tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__


def describe(x) -> str:
    """The dtype and shape of a tensor; the type of anything else."""
    if isinstance(x, torch.Tensor):
        return f"{x.dtype} tensor of shape {tuple(x.shape)}"
    return type(x).__name__


# %% tags=["export"]
# the module just written
from tinybert.blocks.checks import check_positive_int, check_probability

# %%
refused = [
    ("d_model", check_positive_int, 0),
    ("d_model", check_positive_int, 2.0),
    ("d_model", check_positive_int, True),
    ("d_model", check_positive_int, "3"),
    ("dropout", check_probability, 1.0),
    ("layer_norm_eps", check_positive_number, math.nan),
]
for name, check, bad in refused:
    try:
        check(name, bad)
    except ValueError as error:
        print(error)
print(
    shape_of(torch.zeros(2, 3)), "|", describe(torch.zeros(2, 3)), "|", describe([1, 2])
)
assert check_positive_int("d_model", 8) == 8
assert check_probability("dropout", 0) == 0 and check_positive_number("eps", 1e-12)

# %% [markdown]
# (sec-ffn-network)=
# ## Neurons, layers and architecture
#
# A **neuron** (or *unit*) takes a vector $\mathbf{x}$, forms a weighted sum of its entries, adds a
# **bias**, and passes the result through a fixed nonlinear function $g$, the **activation
# function**:
#
# $$h = g(\mathbf{w}^\top \mathbf{x} + b).$$
#
# The weights $\mathbf{w}$ and the bias $b$ are the neuron's parameters; they are what training
# adjusts. A **layer** is many neurons reading the same input side by side. Stacking their weight
# vectors as the columns of a matrix $\mathbf{W}$ turns the whole layer into one matrix product,
# $\mathbf{h} = g(\mathbf{W}^\top \mathbf{x} + \mathbf{b})$. A **feed-forward network** chains
# layers so that information flows one way only, from the input through the *hidden* layers to the
# output, with no loops. The **architecture** is the set of choices that fixes the network before
# training: how many layers (the *depth*), how many units in each (the *width*), and which
# activation functions {cite}`goodfellow2016deep`.
#
# The network we take apart first has two inputs, one hidden layer of two ReLU units and one
# linear output:
#
# $$y = \mathbf{w}^\top g(\mathbf{W}^\top \mathbf{x} + \mathbf{b}_1) + b_2 .$$

# %% tags=["hide-input"] mystnb={"image": {"alt": "A drawing of the 2-2-1 network: inputs x1 and x2, two ReLU hidden units h1 and h2 and one linear output y, joined by edges labelled with the weights and biases of the worked example."}}
# Draw the 2-2-1 network with the weights of the worked example below.
fig, ax = plt.subplots(figsize=(6, 3.2))
inputs, hidden, output = [(0, 1.5), (0, 0.0)], [(2, 1.5), (2, 0.0)], [(4, 0.75)]
W_example, w_example, b1_example = [[1, 1], [1, 1]], [1, -2], [1, -1]
for i, (xi, yi) in enumerate(inputs):
    for j, (xj, yj) in enumerate(hidden):
        ax.plot([xi, xj], [yi, yj], color="0.6", zorder=1)
        # label each edge near its input end, where edges do not cross
        t = 0.3
        ax.text(
            xi + t * (xj - xi),
            yi + t * (yj - yi) + 0.1,
            f"$W_{{{i + 1}{j + 1}}}={W_example[i][j]}$",
            fontsize=9,
            ha="center",
        )
for j, (xj, yj) in enumerate(hidden):
    ax.plot([xj, output[0][0]], [yj, output[0][1]], color="0.6", zorder=1)
    ax.text(
        3.0,
        yj + 0.5 * (output[0][1] - yj) + 0.1,
        f"$w_{j + 1}={w_example[j]}$",
        fontsize=9,
        ha="center",
    )
    ax.text(
        xj,
        yj + (0.35 if j == 0 else -0.5),
        f"$b_{{1,{j + 1}}}={b1_example[j]}$",
        fontsize=9,
        ha="center",
    )
ax.text(output[0][0], output[0][1] + 0.35, "$b_2=0$", fontsize=9, ha="center")
nodes = [(p, f"$x_{i + 1}$", "tab:blue") for i, p in enumerate(inputs)]
nodes += [(p, f"$h_{j + 1}$", "tab:orange") for j, p in enumerate(hidden)]
nodes += [(output[0], "$y$", "tab:green")]
for (x0, y0), label, color in nodes:
    ax.add_patch(plt.Circle((x0, y0), 0.28, color=color, zorder=2))
    ax.text(
        x0, y0, label, ha="center", va="center", color="white", fontsize=12, zorder=3
    )
for title, x0 in [("input", 0), ("hidden layer\n(ReLU)", 2), ("output\n(linear)", 4)]:
    ax.text(x0, -0.8, title, ha="center", va="top", fontsize=10)
ax.set_xlim(-0.6, 4.6)
ax.set_ylim(-1.4, 2.0)
ax.set_aspect("equal")
ax.axis("off")
plt.show()

# %% [markdown]
# (sec-ffn-worked-example)=
# ### A worked example by hand
#
# Take the weights
#
# $$
# \mathbf{W} = \begin{pmatrix} 1 & 1 \\ 1 & 1 \end{pmatrix},\quad
# \mathbf{w} = \begin{pmatrix} 1 \\ -2 \end{pmatrix},\quad
# \mathbf{b}_1 = \begin{pmatrix} 1 \\ -1 \end{pmatrix},\quad
# b_2 = 0,\quad g(z) = \mathrm{ReLU}(z) = \max(0, z),
# $$
#
# and the input $\mathbf{x} = (0, 0)^\top$. Then
# $\mathbf{W}^\top\mathbf{x} + \mathbf{b}_1 = (1, -1)^\top$, the ReLU zeroes the negative entry to
# give $\mathbf{h} = (1, 0)^\top$, and $y = 1\cdot 1 + (-2)\cdot 0 + 0 = 1$. The same steps in
# tensors, one line per step of the equation:

# %%
W = torch.tensor([[1.0, 1.0], [1.0, 1.0]])  # (inputs, hidden) = (2, 2)
w = torch.tensor([1.0, -2.0])  # (hidden,) = (2,)
b1 = torch.tensor([1.0, -1.0])  # (hidden,)
b2 = torch.tensor(0.0)  # scalar
x = torch.tensor([0.0, 0.0])  # (inputs,)

pre_activation = W.T @ x + b1  # (2,)  what the hidden neurons sum up
h = torch.relu(pre_activation)  # (2,)  what they pass on
y = w @ h + b2  # ()    the output neuron is linear
print(f"W^T x + b1 = {pre_activation.tolist()},  h = {h.tolist()},  y = {y.item()}")
assert pre_activation.tolist() == [1.0, -1.0]
assert h.tolist() == [1.0, 0.0]
assert y.item() == 1.0


# %% [markdown]
# In PyTorch a layer of neurons is `nn.Linear(in_features, out_features)`. It computes
# $\mathbf{x}\mathbf{A}^\top + \mathbf{b}$ with a weight $\mathbf{A}$ stored as
# **(out_features, in_features)**, one row per neuron. Our $\mathbf{W}$ has one *column* per
# neuron, so the layer must hold $\mathbf{A} = \mathbf{W}^\top$:

# %%
def two_layer_net(W, b1, w, b2):
    """Build y = w^T ReLU(W^T x + b1) + b2 from nn.Linear layers, copying the given
    weights in."""
    n_in, n_hidden = W.shape
    hidden = nn.Linear(n_in, n_hidden)
    out = nn.Linear(n_hidden, 1)
    with torch.no_grad():  # copying numbers in is not part of training
        hidden.weight.copy_(W.T)  # nn.Linear stores (out, in): that is W^T
        hidden.bias.copy_(b1)
        out.weight.copy_(w[None, :])  # (1, hidden)
        out.bias.copy_(b2.reshape(1))
    return nn.Sequential(hidden, nn.ReLU(), out)


net = two_layer_net(W, b1, w, b2)
# nn.Linear accepts a single example of shape (2,)
y_linear = net(x).squeeze()
print(net)
print(f"y = {y_linear.item()}")
assert y_linear.item() == 1.0

# %% [markdown]
# ```{admonition} A symmetric matrix hides transposition bugs
# :class: warning
# The example's $\mathbf{W}$ is symmetric, so forgetting the transpose would give the same answer
# and the bug would go unnoticed. The next cell repeats the comparison with random, non-square
# weights, where a missing `.T` fails loudly.
# ```

# %%
g = torch.Generator().manual_seed(0)
# (inputs=3, hidden=5), not symmetric
W_random = torch.randn(3, 5, generator=g)
b1_random, w_random = torch.randn(5, generator=g), torch.randn(5, generator=g)
b2_random, x_random = torch.randn((), generator=g), torch.randn(3, generator=g)

by_hand = w_random @ torch.relu(W_random.T @ x_random + b1_random) + b2_random
with_modules = two_layer_net(W_random, b1_random, w_random, b2_random)(
    x_random
).squeeze()
assert torch.allclose(by_hand, with_modules, atol=1e-6)
print(f"by hand {by_hand.item():.6f} == nn.Linear {with_modules.item():.6f}")

# %% [markdown]
# Networks process **batches**: $N$ examples stacked as the rows of a matrix $\mathbf{X}$ of shape
# $(N, 2)$. Row by row, $\mathbf{W}^\top\mathbf{x}$ becomes $\mathbf{X}\mathbf{W}$, so the whole
# batch costs two matrix products. Here are the four corners of the unit square:

# %%
# (N, 2): one example per row
X = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
# (N, 2) @ (2, 2) -> (N, 2); b1 broadcasts over rows
H = torch.relu(X @ W + b1)
Y = H @ w + b2  # (N, 2) @ (2,)   -> (N,)
for x_row, y_row in zip(X.tolist(), Y.tolist()):
    print(f"x = {x_row} -> y = {y_row}")
# the worked example is the first row
assert Y[0].item() == 1.0
# nn.Linear handles batches the same way
assert torch.equal(Y, net(X).squeeze(-1))

# %% [markdown]
# (sec-ffn-output-units)=
# ## Output units and their losses
#
# The last layer's activation, the **output unit**, is not a free design choice: it follows from
# what the target $y$ is. Each choice pairs with a probability model for $y$, and training
# minimises the negative log-likelihood of that model {cite}`goodfellow2016deep`. We call the raw
# output of the last linear layer, before any output function, the **logit** $z$.
#
# ### Regression: linear units and the mean squared error
#
# For a real-valued target, the output is the logit itself, $\hat y = \mathbf{w}^\top\mathbf{h} + b$.
# Reading $\hat y$ as the mean of a Gaussian with unit variance,
# $-\log \mathcal{N}(y;\hat y, 1) = \tfrac12 (y-\hat y)^2 + \tfrac12\log 2\pi$:
# the negative log-likelihood is half the squared error plus a constant, so minimising the mean
# squared error is maximum-likelihood estimation under Gaussian noise.

# %%
g = torch.Generator().manual_seed(1)
y_hat, y_true = torch.randn(11, generator=g), torch.randn(11, generator=g)  # (N,)

gaussian_nll = -torch.distributions.Normal(y_hat, 1.0).log_prob(y_true).mean()
mse = F.mse_loss(y_hat, y_true)
print(
    f"Gaussian NLL = {gaussian_nll.item():.5f},  MSE/2 + log(2 pi)/2 = "
    f"{(mse / 2 + 0.5 * math.log(2 * math.pi)).item():.5f}"
)
assert torch.allclose(gaussian_nll, mse / 2 + 0.5 * math.log(2 * math.pi))


# %% [markdown]
# ### Two classes: sigmoid units and binary cross-entropy
#
# For a yes/no target $y\in\{0, 1\}$, the network predicts the probability of a *yes* by squashing
# the logit with the **sigmoid** (logistic) function, $\hat p = \sigma(z) = 1/(1+e^{-z})$, and $y$ is
# modelled as a Bernoulli variable. Its negative log-likelihood is the **binary cross-entropy**
#
# $$\ell(z, y) = -\bigl[y \log \sigma(z) + (1-y) \log\bigl(1-\sigma(z)\bigr)\bigr].$$
#
# PyTorch's `nn.BCEWithLogitsLoss` takes the *logit*, not the probability. On ordinary values it
# agrees with the formula written out by hand:

# %%
def bce_naive(z, y):
    """Binary cross-entropy, written exactly as the formula: probabilities first,
    then logs."""
    p = torch.sigmoid(z)
    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p))


g = torch.Generator().manual_seed(2)
z = 3 * torch.randn(13, generator=g)  # (N,) logits of moderate size
y = (torch.rand(13, generator=g) < 0.5).float()  # (N,) targets in {0, 1}
loss_naive = bce_naive(z, y).mean()
loss_torch = nn.BCEWithLogitsLoss()(z, y)
print(f"by hand {loss_naive.item():.6f},  BCEWithLogitsLoss {loss_torch.item():.6f}")
assert torch.allclose(loss_naive, loss_torch, atol=1e-6)


# %% [markdown]
# The formula breaks down when the network is confident. In 32-bit floats $\sigma(z)$ rounds to
# exactly $1$ beyond a modest threshold (the next cell finds it), and from there on
# $\log(1-\sigma(z)) = \log 0 = -\infty$. Worse,
# a correct confident prediction ($y=1$) multiplies that $-\infty$ by $1-y = 0$, which is `nan`,
# and a single `nan` poisons every weight it touches in the backward pass.
#
# The cure is to never form $\sigma(z)$. Using $-\log\sigma(z) = \log(1+e^{-z})$ and
# $-\log(1-\sigma(z)) = \log(1+e^{z})$, the loss simplifies to
#
# $$\ell(z, y) = \log\bigl(1 + e^{z}\bigr) - y z = \operatorname{softplus}(z) - y z,$$
#
# and softplus can be evaluated without overflow (for large $z$ it is $z$ itself). This is why
# networks output logits and the loss applies the sigmoid internally.

# %%
def bce_from_logits(z, y):
    """Binary cross-entropy computed from the logit: softplus(z) - y z, no
    probabilities formed."""
    return F.softplus(z) - y * z


z_grid = torch.linspace(0, 40, 4001)  # float32, steps of 0.01
first_one = z_grid[torch.sigmoid(z_grid) == 1.0][0].item()
print(f"in float32, sigmoid(z) == 1 exactly from z = {first_one:.2f} on")
assert first_one < 40

z_big = torch.tensor([100.0, 100.0, -100.0])  # confident logits
y_big = torch.tensor([0.0, 1.0, 1.0])  # wrong, right, wrong
naive = bce_naive(z_big, y_big)
stable = bce_from_logits(z_big, y_big)
reference = F.binary_cross_entropy_with_logits(z_big, y_big, reduction="none")
print(f"naive:  {naive.tolist()}")
print(f"stable: {stable.tolist()}")
assert torch.isinf(naive[0]) and torch.isnan(naive[1])  # the formula fails ...
assert torch.allclose(stable, torch.tensor([100.0, 0.0, 100.0]))
# ... the logit form does not
assert torch.allclose(stable, reference)
assert torch.allclose(bce_from_logits(z, y), bce_naive(z, y), atol=1e-6)

# %% [markdown]
# The logit form also has the simplest possible gradient, $\partial\ell/\partial z = \sigma(z) - y$:
# the prediction error itself. It does not vanish when the sigmoid saturates on a *wrong* answer,
# which is exactly when learning is needed most.

# %%
z_leaf = z_big.clone().requires_grad_(True)
bce_from_logits(z_leaf, y_big).sum().backward()
print(f"dl/dz = {z_leaf.grad.tolist()}")
assert torch.allclose(z_leaf.grad, torch.sigmoid(z_big) - y_big)

# %% [markdown]
# ### Several classes: softmax units and cross-entropy
#
# With $C$ classes the last layer produces $C$ logits $z_1,\dots,z_C$, and the **softmax** turns
# them into a probability distribution,
#
# $$\operatorname{softmax}(\mathbf z)_k = \frac{e^{z_k}}{\sum_{j=1}^{C} e^{z_j}},$$
#
# so $y$ is modelled as a categorical (multinoulli) variable. Its negative log-likelihood, the
# **cross-entropy**, is $-\log \operatorname{softmax}(\mathbf z)_y$. With two classes and logits
# $(0, z)$ the softmax reduces to the sigmoid, so this is the binary case's generalisation.

# %%
g = torch.Generator().manual_seed(3)
N, C = 13, 7
logits = torch.randn(N, C, generator=g)  # (N, C)
targets = torch.randint(0, C, (N,), generator=g)  # (N,) class indices

probs = torch.softmax(logits, dim=-1)  # (N, C), rows sum to 1
by_hand = -torch.log(probs[torch.arange(N), targets]).mean()
print(
    f"by hand {by_hand.item():.6f},  F.cross_entropy "
    f"{F.cross_entropy(logits, targets).item():.6f}"
)
assert torch.allclose(by_hand, F.cross_entropy(logits, targets), atol=1e-6)

# Two classes with logits (0, z): the softmax's second entry is the sigmoid of z.
z_pair = torch.stack([torch.zeros_like(z), z], dim=-1)  # (N, 2)
assert torch.allclose(torch.softmax(z_pair, dim=-1)[:, 1], torch.sigmoid(z), atol=1e-6)

# %% [markdown]
# Softmax has the same numerical trap as the sigmoid: written literally, $e^{1000}$ overflows to
# infinity and the ratio becomes `nan`. `F.cross_entropy` takes logits, like
# `BCEWithLogitsLoss`, and does not fail. How it avoids the overflow is
# {ref}`an exercise <ex-ffn-cross-entropy>`.

# %%
big = torch.tensor([[1000.0, 0.0]])  # (1, 2)
literal_softmax = torch.exp(big) / torch.exp(big).sum(dim=-1, keepdim=True)
print(
    f"literal softmax: {literal_softmax.tolist()},  "
    f"F.cross_entropy: {F.cross_entropy(big, torch.tensor([1])).item()}"
)
assert torch.isnan(literal_softmax).any()
assert torch.isclose(F.cross_entropy(big, torch.tensor([1])), torch.tensor(1000.0))

# %% [markdown]
# (sec-ffn-training)=
# ### Training: gradient descent, backpropagation and Adam
#
# A loss turns "a good network" into a number to make small. Gather all the weights and biases
# into one vector $\boldsymbol\theta$; training looks for the $\boldsymbol\theta$ that makes the
# mean loss over the $N$ training examples as small as it can:
#
# $$L(\boldsymbol\theta) = \frac1N \sum_{n=1}^{N}
# \ell\bigl(f(\mathbf x_n; \boldsymbol\theta), y_n\bigr).$$
#
# This section is a refresher of the tools every chapter uses for that: gradient descent,
# backpropagation (done by autograd) and the Adam optimiser.
#
# **Gradient descent.** The gradient $\nabla_{\boldsymbol\theta} L$ points in the direction in which
# the loss grows fastest, so a small step against it lowers the loss:
#
# $$\boldsymbol\theta \leftarrow
# \boldsymbol\theta - \eta\, \nabla_{\boldsymbol\theta} L(\boldsymbol\theta).$$
#
# The {term}`learning rate` $\eta$ sets the size of the step: too small and training crawls, too
# large and the loss jumps about or diverges. *Stochastic* {term}`gradient descent` estimates the
# gradient on a random *mini-batch* of examples instead of all $N$: each step is far cheaper and
# its gradient noisy but right on average. One pass over the training set is an *epoch*. The two
# spirals below have few enough points to use all of them at every step (full-batch training).
#
# **Backpropagation, done by autograd.** A network is a chain of simple functions, so the chain rule
# gives the gradient. For a layer $\mathbf h = g(\mathbf a)$ with $\mathbf a = \mathbf W^\top
# \mathbf x + \mathbf b$, and $\partial L / \partial h_j$ known from the layers above,
#
# $$\frac{\partial L}{\partial W_{ij}} = x_i\, g'(a_j)\, \frac{\partial L}{\partial h_j},
# \qquad
# \frac{\partial L}{\partial x_i} = \sum_j W_{ij}\, g'(a_j)\, \frac{\partial L}{\partial h_j}.$$
#
# The second formula hands the signal one layer further down. {term}`Backpropagation` applies the
# two from the loss back to the input, reusing each layer's result for the layer below
# {cite}`rumelhart1986learning`, so the whole gradient costs only about twice the arithmetic of the
# forward pass. PyTorch's *autograd* does it for us: the forward pass records each operation on
# tensors that require gradients, `loss.backward()` walks that record backwards and adds each
# parameter's gradient to its `.grad`, and `optimizer.zero_grad()` clears them before the next step
# (gradients accumulate). The course never writes a backward pass by hand.
#
# **Adam.** One learning rate suits parameters badly when their gradients differ in scale by orders
# of magnitude, as they do across the layers of a deep network. {term}`Adam` {cite}`kingma2015adam`
# keeps two running averages per parameter, of the gradient $\mathbf g_t$ and of its square,
# corrects both for starting at zero, and divides one by the root of the other (all elementwise):
#
# $$\mathbf m_t = \beta_1 \mathbf m_{t-1} + (1 - \beta_1)\, \mathbf g_t, \qquad
# \mathbf v_t = \beta_2 \mathbf v_{t-1} + (1 - \beta_2)\, \mathbf g_t^2,$$
#
# $$\boldsymbol\theta_t = \boldsymbol\theta_{t-1} -
# \eta\, \frac{\hat{\mathbf m}_t}{\sqrt{\hat{\mathbf v}_t} + \epsilon},
# \qquad \hat{\mathbf m}_t = \frac{\mathbf m_t}{1 - \beta_1^t}, \quad
# \hat{\mathbf v}_t = \frac{\mathbf v_t}{1 - \beta_2^t},$$
#
# with $\beta_1 = 0.9$, $\beta_2 = 0.999$ and $\epsilon = 10^{-8}$ by default. The average of the
# gradients is *momentum*: it smooths the noise of mini-batches and keeps moving along shallow
# slopes. The division makes every parameter's step about $\eta$ in size, whatever the scale of its
# gradient, so that one learning rate serves them all. `torch.optim.Adam` trains the small models of
# chapters 1 to 6; {doc}`06_transformer` sets $\beta_2 = 0.98$ and raises the learning rate
# gradually at the start, as the Transformer paper does.
#
# **AdamW.** {term}`Weight decay` pulls every weight a little towards zero at each step, which
# discourages large weights. Written as a penalty $\frac\lambda2 \|\boldsymbol\theta\|^2$ added to
# the loss, it puts $\lambda\boldsymbol\theta$ into the gradient, where Adam's division weakens it
# for exactly the parameters with large gradients. {term}`AdamW` {cite}`loshchilov2019adamw`
# decouples the two: it takes Adam's step and shrinks the weights directly, as
# `torch.optim.AdamW` does,
#
# $$\boldsymbol\theta_t = \boldsymbol\theta_{t-1} -
# \eta\,\Bigl(\frac{\hat{\mathbf m}_t}{\sqrt{\hat{\mathbf v}_t} + \epsilon} +
# \lambda \boldsymbol\theta_{t-1}\Bigr).$$
#
# BERT is pretrained and fine-tuned with it ({doc}`09_pretraining`).
#
# (sec-ffn-activations)=
# ## Activation functions
#
# Without a nonlinear $g$ a stack of layers collapses into one: $\mathbf{W}_2^\top(\mathbf{W}_1^\top
# \mathbf{x})= (\mathbf{W}_1\mathbf{W}_2)^\top\mathbf{x}$ is still linear, however deep. The
# activation function is what lets depth buy anything.
#
# **Sigmoid and tanh.** The historical choices are the sigmoid and the hyperbolic tangent,
#
# $$\sigma(z) = \frac{1}{1+e^{-z}}, \qquad \tanh(z) = \frac{e^{2z}-1}{e^{2z}+1} = 2\sigma(2z) - 1 .$$
#
# Both *saturate*: for large $|z|$ they flatten out and their derivatives go to zero. Since the
# backward pass multiplies one derivative per layer, and $\sigma'$ is at most $\tfrac14$, the
# gradient reaching the early layers of a deep sigmoid network can become vanishingly small
# {cite}`glorot2010understanding`.
#
# **ReLU.** The rectified linear unit, $\mathrm{ReLU}(z) = \max(0, z)$, is the modern default for
# hidden layers. Its derivative is exactly $1$ wherever the unit is active, so gradients pass
# through active units undiminished, which makes deep networks much easier to train with
# stochastic gradient descent; initialisation schemes designed for it keep the signal's scale
# stable through depth {cite}`he2015delving`. Its weak spot is the other side: a unit whose input
# is negative for every example has zero gradient and stops learning (a "dead" ReLU).
#
# **GELU.** The Gaussian error linear unit {cite}`hendrycks2016gelu` weighs its input by the
# probability that a standard normal variable falls below it:
#
# $$\mathrm{GELU}(z) = z\,\Phi(z), \qquad \Phi(z) = \tfrac12\Bigl(1 + \operatorname{erf}\bigl(z/\sqrt2\bigr)\Bigr).$$
#
# It is a smooth ReLU that dips slightly below zero for negative inputs. BERT uses it in its
# feed-forward blocks {cite}`devlin2019bert`, and so do the GPT models. Because $\operatorname{erf}$ used to be slow,
# two approximations are common:
#
# $$\mathrm{GELU}(z) \approx \tfrac12 z\Bigl(1+\tanh\Bigl(\sqrt{2/\pi}\,\bigl(z + 0.044715\,z^3\bigr)\Bigr)\Bigr)
# \qquad\text{and}\qquad
# \mathrm{GELU}(z) \approx z\,\sigma(1.702\,z).$$
#
# **Where $z\,\Phi(z)$ comes from.** The formula is not an arbitrary smoothing of ReLU; it is the
# average of a random one {cite}`hendrycks2016gelu`. ReLU multiplies its input by 0 or 1 according
# to the input's sign. Dropout also multiplies by 0 or 1, but at random, whatever the input. GELU
# merges the two ideas: it multiplies $z$ by a random mask $m \sim \mathrm{Bernoulli}(\Phi(z))$ whose
# probability of being 1 grows with $z$, so a large positive input almost always passes and a large
# negative one almost never does. Replacing the random unit by its expectation gives a deterministic
# activation,
#
# $$\mathbb E[z\,m] = z \cdot \Phi(z) + 0 \cdot \bigl(1 - \Phi(z)\bigr) = z\,\Phi(z) = \mathrm{GELU}(z).$$
#
# We can check the derivation by sampling. At each point $z$ of a grid we draw $n$ masks, average
# $z\,m$, and compare the average with `F.gelu`. One draw of $z\,m$ has standard deviation
# $|z|\sqrt{\Phi(z)(1-\Phi(z))}$, so the average of $n$ draws has standard error
# $|z|\sqrt{\Phi(z)(1-\Phi(z))/n}$. The cell asserts that every point lies within five standard
# errors of GELU. A correct derivation misses that margin at any one point with a probability of
# about one in a million (by the normal approximation); a wrong one, such as a mask that is 1 with
# probability $\sigma(z)$ instead of $\Phi(z)$, misses it by far:

# %% mystnb={"image": {"alt": "Line plot against z: the GELU curve z\u00b7\u03a6(z), the average of z\u00b7m over random masks as dots lying on the curve, and ReLU dotted; the dots confirm that GELU is the expected value of a randomly masked input."}}
g_mask = torch.Generator().manual_seed(0)
n_masks = pick(quick=2_000, full=20_000)  # masks drawn per grid point
z_grid = torch.linspace(-3, 3, 60, dtype=torch.float64)  # (G,), even: skips z = 0
phi = 0.5 * (1 + torch.erf(z_grid / math.sqrt(2)))  # (G,) P(m = 1) = Φ(z)

masks = torch.bernoulli(phi.expand(n_masks, -1), generator=g_mask)  # (n, G) of 0/1
estimate = (z_grid * masks).mean(dim=0)  # (G,) Monte Carlo E[z·m]
std_error = z_grid.abs() * torch.sqrt(phi * (1 - phi) / n_masks)  # (G,)
gap = (estimate - F.gelu(z_grid)).abs()
print(
    f"{n_masks} masks per point: largest gap {gap.max().item():.4f}, "
    f"largest gap in standard errors {(gap / std_error).max().item():.2f}"
)
assert (gap <= 5 * std_error).all()

# The same test rejects a mask with the wrong probability, sigmoid(z) instead of Φ(z).
wrong = z_grid * torch.sigmoid(z_grid)  # (G,) E[z·m] for that mask
assert ((wrong - F.gelu(z_grid)).abs() > 5 * std_error).any()

fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(z_grid, F.gelu(z_grid), label="GELU$(z) = z\\,\\Phi(z)$")
ax.plot(z_grid, estimate, ".", label=f"mean of $z\\,m$ over {n_masks} masks")
ax.plot(z_grid, z_grid.clamp_min(0), ":", color="0.5", label="ReLU")
ax.set_xlabel("$z$")
ax.legend()
ax.grid(True, alpha=0.3)
plt.show()


# %% [markdown]
# **ELU.** The exponential linear unit {cite}`clevert2015elu` is the identity for positive inputs
# and saturates smoothly to $-\alpha$ for negative ones, usually with $\alpha = 1$:
#
# $$\mathrm{ELU}(z) = \begin{cases} z & z > 0 \\ \alpha\,(e^{z}-1) & z \le 0 .\end{cases}$$
#
# (sec-ffn-gelu)=
# ### Three ways to write GELU
#
# The three forms, written as plain functions of a tensor:

# %% tags=["export"]
def gelu_exact(x: torch.Tensor) -> torch.Tensor:
    """GELU(x) = x·Φ(x), with the standard normal CDF Φ written through erf."""
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """The tanh approximation of GELU (Hendrycks & Gimpel, 2016)."""
    return (
        0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    )


def gelu_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """The cheaper, coarser sigmoid approximation of GELU: x·σ(1.702x)."""
    return x * torch.sigmoid(1.702 * x)


# %% [markdown]
# PyTorch implements the exact form and the tanh form in `F.gelu`. Ours agree with it to within
# $10^{-6}$ in single precision:

# %%
x32 = torch.linspace(-6, 6, 2001)  # float32
assert torch.allclose(
    gelu_exact(x32), F.gelu(x32, approximate="none"), rtol=0, atol=1e-6
)
assert torch.allclose(
    gelu_tanh(x32), F.gelu(x32, approximate="tanh"), rtol=0, atol=1e-6
)
print(
    "gelu_exact == F.gelu(approximate='none') and gelu_tanh == "
    "F.gelu(approximate='tanh')"
)

# %% [markdown]
# How good are the approximations? We measure their error against the exact form in double
# precision, so that rounding does not blur the picture:

# %% mystnb={"image": {"alt": "Line plot, log scale, of the absolute error of the tanh and sigmoid approximations of GELU against x; the tanh form's error stays well below the sigmoid form's."}}
# an even count avoids x = 0, where all errors are 0
x64 = torch.linspace(-6, 6, 4000, dtype=torch.float64)
exact = gelu_exact(x64)
errors = {
    "tanh form": (gelu_tanh(x64) - exact).abs(),
    "sigmoid form": (gelu_sigmoid(x64) - exact).abs(),
}

fig, ax = plt.subplots(figsize=(7, 3.5))
for label, err in errors.items():
    ax.semilogy(x64, err.clamp_min(1e-18), label=label)
ax.set_xlabel("$x$")
ax.set_ylabel("|approximation - exact GELU|")
# the dips to 0 would stretch the axis
ax.set_ylim(1e-10, 1)
ax.set_title("Error of the two GELU approximations")
ax.legend()
ax.grid(True, which="both", alpha=0.3)
plt.show()

max_error = {label: err.max().item() for label, err in errors.items()}
for label, err in errors.items():
    print(
        f"{label:>12}: max abs error {err.max().item():.2e} at x = "
        f"{x64[err.argmax()].item():+.2f}"
    )
ratio = max_error["sigmoid form"] / max_error["tanh form"]
print(f"the sigmoid form's worst error is {ratio:.0f} times the tanh form's")
assert max_error["tanh form"] < max_error["sigmoid form"] < 0.05


# %% [markdown]
# The tanh form is closer to the exact GELU than the sigmoid form by the factor printed above, and
# its error is tiny next to the numbers a network computes. That is why the choice
# rarely matters in practice but still matters for *parity*: the original TensorFlow BERT code used
# the tanh form, while Hugging Face's BERT configurations ask for the exact `"gelu"`. A faithful
# reimplementation must match whichever one the weights were trained with.
#
# (sec-ffn-derivatives)=
# ### Each activation with its derivative
#
# Training needs $g'$ as much as $g$. We never write derivatives by hand in this course: autograd
# computes them. But where a closed form is simple, we check autograd against it.

# %% mystnb={"image": {"alt": "Five panels, sigmoid, tanh, ReLU, GELU and ELU, each with the function solid and its derivative dashed; the sigmoid's and tanh's derivatives fade to zero on both sides, while ReLU, ELU and GELU keep a derivative near 1 for positive inputs."}}
def derivative(fn, x):
    """g'(x) for an elementwise g, computed by autograd (one backward pass for
    all points)."""
    x = x.detach().clone().requires_grad_(True)
    # elementwise g: d(sum g)/dx_i = g'(x_i)
    (grad,) = torch.autograd.grad(fn(x).sum(), x)
    return grad


z = torch.linspace(-4, 4, 801, dtype=torch.float64)  # includes z = 0 exactly
normal_pdf = torch.exp(-(z**2) / 2) / math.sqrt(2 * math.pi)
activations = {
    "sigmoid": (torch.sigmoid, torch.sigmoid(z) * (1 - torch.sigmoid(z))),
    "tanh": (torch.tanh, 1 - torch.tanh(z) ** 2),
    # PyTorch takes ReLU'(0) = 0
    "ReLU": (torch.relu, (z > 0).to(z.dtype)),
    # Φ(z) + z φ(z)
    "GELU": (gelu_exact, 0.5 * (1 + torch.erf(z / math.sqrt(2))) + z * normal_pdf),
    "ELU (α=1)": (F.elu, torch.where(z > 0, torch.ones_like(z), torch.exp(z))),
}
for name, (fn, closed_form) in activations.items():
    assert torch.allclose(derivative(fn, z), closed_form, atol=1e-10), name
# tanh is a rescaled sigmoid
assert torch.allclose(torch.tanh(z), 2 * torch.sigmoid(2 * z) - 1)
print("autograd matches the closed-form derivative of:", ", ".join(activations))

fig, axes = plt.subplots(1, len(activations), figsize=(15, 3), sharey=True)
for ax, (name, (fn, _)) in zip(axes, activations.items()):
    ax.plot(z, fn(z), label="$g(z)$")
    ax.plot(z, derivative(fn, z), "--", label="$g'(z)$")
    ax.axhline(0, color="0.8", lw=0.8)
    ax.axvline(0, color="0.8", lw=0.8)
    ax.set_title(name)
    ax.set_xlabel("$z$")
    ax.set_ylim(-1.5, 2.5)
axes[0].legend(loc="upper left")
plt.tight_layout()
plt.show()

# %% [markdown]
# The dashed curves tell the story of the previous section: the sigmoid's derivative never exceeds
# $\tfrac14$ and tanh's decays to zero on both sides, while ReLU and ELU keep a derivative of
# exactly $1$ for every positive input, and GELU's rises from $\tfrac12$ at $0$ to just above $1$
# and settles at $1$ for large inputs.
#
# (sec-ffn-get-activation)=
# ### Choosing an activation by name
#
# Later chapters build models from configuration objects that name their activation with a string,
# as Hugging Face's configurations do. One function turns the name into a module. The names
# are the ones used in this course; `"gelu"` is the exact form, like BERT's configuration.

# %% tags=["export"]
_ACTIVATIONS = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,  # exact x·Φ(x), BERT's choice
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),  # the tanh approximation
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "elu": lambda: nn.ELU(alpha=1.0),
}


def get_activation(name: str) -> nn.Module:
    """Return a new activation module for ``name``: relu, gelu, gelu_tanh, tanh,
    sigmoid or elu."""
    if not isinstance(name, str) or name not in _ACTIVATIONS:
        valid = ", ".join(repr(n) for n in _ACTIVATIONS)
        raise ValueError(f"unknown activation {name!r}; valid names are {valid}")
    return _ACTIVATIONS[name]()


# %%
for name in ["relu", "gelu", "gelu_tanh", "tanh", "sigmoid", "elu"]:
    print(f"{name:>9} -> {get_activation(name)}")
assert torch.allclose(get_activation("gelu")(x32), gelu_exact(x32), atol=1e-6)
try:
    get_activation("swish")
except ValueError as error:
    print(f"ValueError: {error}")


# %% [markdown]
# (sec-ffn-depth)=
# ## Depth
#
# With a single hidden layer that is wide enough, a feed-forward network can approximate any
# continuous function on a bounded region as closely as we like
# {cite}`cybenko1989approximation,hornik1991approximation`. That theorem says nothing about *how*
# wide "enough" is, nor whether gradient descent will find the weights. In practice, spending the
# same parameter budget on more layers often works better, because each layer can reuse and
# recombine the features of the one below instead of carving out every detail separately
# {cite}`goodfellow2016deep`. In this section we build the tools for that comparison, then run it.
#
# (sec-ffn-mlp)=
# ### Counting parameters and stacking layers
#
# A fair comparison holds the number of parameters fixed, so we need to count them. A shared
# tensor (we will tie weights in later chapters) is counted once, because `Module.parameters()`
# yields each tensor once.

# %% tags=["export"]
def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalar parameters in ``module`` (tied tensors once); optionally only
    trainable ones."""
    return sum(
        p.numel() for p in module.parameters() if p.requires_grad or not trainable_only
    )


# %% [markdown]
# A **multilayer perceptron** (MLP) is the plain stack: `sizes = [in, hidden_1, ..., out]` gives
# one `nn.Linear` per consecutive pair, with the same activation between layers and none after the
# last. The output stays a logit; the loss supplies the output unit.

# %% tags=["export"]
class MLP(nn.Module):
    """A stack of Linear layers with one activation between them: MLP([2, 16, 16, 1]).

    The last layer is left linear, so the output is a logit (or a regression value).
    Shapes: (..., sizes[0]) -> (..., sizes[-1]).
    """

    def __init__(self, sizes: list[int], activation: str = "relu"):
        super().__init__()
        sizes = list(sizes)
        if len(sizes) < 2:
            raise ValueError(
                f"sizes needs at least an input and an output size, got {sizes!r}"
            )
        for i, size in enumerate(sizes):
            check_positive_int(f"sizes[{i}]", size)
        self.sizes = sizes
        self.layers = nn.ModuleList(
            nn.Linear(n_in, n_out) for n_in, n_out in zip(sizes[:-1], sizes[1:])
        )
        # stateless, so one module serves every layer
        self.activation = get_activation(activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *hidden_layers, output_layer = self.layers
        for layer in hidden_layers:
            x = self.activation(layer(x))  # (..., hidden)
        return output_layer(x)  # (..., sizes[-1])


# %% [markdown]
# A linear layer from $n$ to $m$ units has $nm$ weights and $m$ biases. The two networks we are
# going to compare were chosen so that their counts come out equal: one hidden layer of 220 units,
# against four hidden layers of 16.

# %%
architectures = {
    "linear (logistic regression)": [2, 1],
    "wide shallow": [2, 220, 1],
    "deep narrow": [2, 16, 16, 16, 16, 1],
}
for label, sizes in architectures.items():
    by_formula = sum(n_in * n_out + n_out for n_in, n_out in zip(sizes[:-1], sizes[1:]))
    counted = count_parameters(MLP(sizes))
    assert counted == by_formula
    print(f"{label:>28}: sizes {str(sizes):<24} {counted:>4} parameters")
assert count_parameters(MLP(architectures["wide shallow"])) == count_parameters(
    MLP(architectures["deep narrow"])
)


# %% [markdown]
# (sec-ffn-spirals)=
# ### Two spirals
#
# The test problem is a classic benchmark for exactly this question {cite}`lang1988spirals`: two
# spirals wound into each other, one per class. Class 0 is one arm, class 1 the same arm turned
# by 180°. No straight line separates them, and, around the centre, neither does any simple
# curve.

# %% mystnb={"image": {"alt": "Scatter plot of the training set: two spiral arms wound into each other in the plane, one per class, in blue and red; no straight line separates them."}}
def make_spirals(
    n_per_class: int, turns: float = 3.0, noise: float = 0.02, generator=None
):
    """Two interleaved spirals in the plane: x of shape (2n, 2), labels y of shape (2n,)
    in {0, 1}."""
    # (n,) 0 = centre, 1 = outer end
    t = torch.rand(n_per_class, generator=generator)
    angle = 2 * math.pi * turns * t
    arm = torch.stack([t * torch.cos(angle), t * torch.sin(angle)], dim=1)  # (n, 2)
    # (2n, 2): -arm is the arm turned by 180°
    x = torch.cat([arm, -arm])
    x = x + noise * torch.randn(x.shape, generator=generator)
    y = torch.cat([torch.zeros(n_per_class), torch.ones(n_per_class)])  # (2n,)
    return x, y


# training points per class (a fresh test set of the same size)
N_PER_CLASS = pick(quick=100, full=500)
STEPS = pick(quick=150, full=4000)  # full-batch Adam steps per model
# each network is trained from several initialisations
SEEDS = pick(quick=[0], full=[0, 1, 2, 3, 4])
LEARNING_RATE = 1e-2

data_generator = seed_everything(0)
x_train, y_train = make_spirals(N_PER_CLASS, generator=data_generator)
x_test, y_test = make_spirals(N_PER_CLASS, generator=data_generator)
x_train, y_train, x_test, y_test = (
    t.to(device) for t in (x_train, y_train, x_test, y_test)
)
print(f"train {tuple(x_train.shape)}, test {tuple(x_test.shape)}")

fig, ax = plt.subplots(figsize=(4, 4))
xy = x_train.cpu()
ax.scatter(xy[:, 0], xy[:, 1], c=y_train.cpu(), cmap="coolwarm", s=6)
ax.set_aspect("equal")
ax.set_title("Two spirals (training set)")
plt.show()


# %% [markdown]
# The training loop is the one every later chapter elaborates: forward pass, loss, backward pass,
# optimiser step, here with Adam ({ref}`sec-ffn-training`). The data set is tiny, so each step
# uses all of it (full-batch training). The network outputs one logit per point, and the loss is
# binary cross-entropy on logits.

# %%
def accuracy(model, x, y):
    """Fraction of points whose logit has the sign of their label (logit > 0 means
    class 1)."""
    with torch.no_grad():
        predictions = (model(x).squeeze(-1) > 0).float()  # (N,)
    return (predictions == y).float().mean().item()


def train_classifier(sizes, activation, seed, desc):
    """Train MLP(sizes) on the spirals from seed ``seed``; return the model and its
    loss curve."""
    seed_everything(seed)  # fixes the initial weights
    model = MLP(sizes, activation).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    losses = []
    # a progress bar, redrawn twice
    for _ in progress(range(STEPS), desc=desc, updates=2):
        logits = model(x_train).squeeze(-1)  # (N,)
        loss = F.binary_cross_entropy_with_logits(logits, y_train)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        # no .item(): avoids a GPU sync per step
        losses.append(loss.detach())
    return model, torch.stack(losses).cpu()


# %% [markdown]
# First, the baseline: a linear model, i.e. logistic regression, `MLP([2, 1])`. Its decision
# boundary is a straight line through the plane, and any straight line through two spirals
# wound into each other leaves about half of each class on the wrong side.

# %%
start = time.perf_counter()
# No hidden layer, so the activation argument is unused here.
linear_model, linear_losses = train_classifier(
    architectures["linear (logistic regression)"], "tanh", 0, "linear"
)
linear_train, linear_test = (
    accuracy(linear_model, x_train, y_train),
    accuracy(linear_model, x_test, y_test),
)
print(
    f"logistic regression: train accuracy {linear_train:.1%}, test accuracy "
    f"{linear_test:.1%}"
)
if not is_quick():
    assert abs(linear_test - 0.5) < 0.1, (
        "a linear model should be near chance on the spirals"
    )

# %% [markdown]
# Now the two networks with equal parameter counts. Both use tanh hidden units: on a
# two-dimensional toy problem narrow ReLU stacks are prone to dead units, which would turn the
# comparison into a comparison of seeds ({ref}`an exercise <ex-ffn-relu-depth>` lets you try).
# Each network is trained from every seed in `SEEDS`.

# %%
results = {}
for label in ["wide shallow", "deep narrow"]:
    runs = []
    for seed in SEEDS:
        model, losses = train_classifier(
            architectures[label], "tanh", seed, f"{label}, seed {seed}"
        )
        runs.append(
            {
                "model": model,
                "losses": losses,
                "train": accuracy(model, x_train, y_train),
                "test": accuracy(model, x_test, y_test),
            }
        )
    results[label] = runs
print(f"training took {time.perf_counter() - start:.1f} s in total")


# %%
def summary(label):
    """Parameter count and the mean, min and max accuracies over the seeds of one
    architecture."""
    runs = results[label]
    train, test = [r["train"] for r in runs], [r["test"] for r in runs]
    return {
        "params": count_parameters(runs[0]["model"]),
        "train": np.mean(train),
        "test": np.mean(test),
        "test_min": min(test),
        "test_max": max(test),
    }


print(
    f"{'model':<21} {'sizes':<24} {'params':>6} {'train acc':>10} {'test acc':>9}   "
    f"test acc over {len(SEEDS)} seed(s)"
)
print(
    f"{'linear':<21} {str(architectures['linear (logistic regression)']):<24} "
    f"{count_parameters(linear_model):>6} {linear_train:>10.1%} {linear_test:>9.1%}"
)
table = {label: summary(label) for label in results}
for label, row in table.items():
    print(
        f"{label:<21} {str(architectures[label]):<24} {row['params']:>6} "
        f"{row['train']:>10.1%} {row['test']:>9.1%}   min {row['test_min']:.1%}, max "
        f"{row['test_max']:.1%}"
    )

# %% [markdown]
# Accuracies are means over the seeds. The next cell turns the table into a sentence, so the
# conclusion always matches the numbers of your run:

# %%
shallow, deep = table["wide shallow"], table["deep narrow"]
winner, loser = (
    ("deep narrow", "wide shallow")
    if deep["test"] > shallow["test"]
    else ("wide shallow", "deep narrow")
)
print(
    f"With the same {deep['params']} parameters, the {winner} network reached a mean "
    f"test accuracy of {table[winner]['test']:.1%}, against "
    f"{table[loser]['test']:.1%} for the {loser} one (logistic regression: "
    f"{linear_test:.1%})."
)
if is_quick():
    print(
        "Quick mode: the training budget is tiny, so these numbers say little. Run "
        "without TINYBERT_QUICK."
    )
else:
    assert min(shallow["test"], deep["test"]) > linear_test + 0.15, (
        "both networks should beat the linear model"
    )
    assert deep["test"] > shallow["test"], (
        "in full mode the deeper network is expected to generalise better"
    )

# %% [markdown]
# The loss curves show how the three models got there (the networks are drawn for their first
# seed), and the decision boundaries show what they learned: the colour is the predicted
# probability of class 1, the black line the boundary where it crosses ½.

# %% mystnb={"image": {"alt": "Line plot, log scale, of the training loss against the step for logistic regression and the wide shallow and deep narrow networks; the linear model's loss levels off early, while the two networks' losses keep falling."}}
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.semilogy(linear_losses, label="linear")
for label, runs in results.items():
    ax.semilogy(runs[0]["losses"], label=label)
ax.set_xlabel("training step")
ax.set_ylabel("training loss (BCE)")
ax.set_title("Loss curves")
ax.legend()
ax.grid(True, which="both", alpha=0.3)
plt.show()


# %% mystnb={"image": {"alt": "Three panels of the spiral test points on the plane coloured by the predicted probability of class 1, with the decision boundary in black: logistic regression's is a straight line cutting the spirals in half, the two networks' curve to follow the arms."}}
def plot_decision_boundary(ax, model, x, y, title):
    """Colour the plane by the model's probability of class 1 and overlay the points."""
    grid = torch.linspace(-1.2, 1.2, 250)
    # (250, 250) each
    gx, gy = torch.meshgrid(grid, grid, indexing="xy")
    # (250*250, 2)
    points = torch.stack([gx.flatten(), gy.flatten()], dim=1).to(device)
    with torch.no_grad():
        prob = torch.sigmoid(model(points)).reshape(gx.shape).cpu()  # (250, 250)
    ax.contourf(gx, gy, prob, levels=np.linspace(0, 1, 11), cmap="coolwarm", alpha=0.5)
    ax.contour(gx, gy, prob, levels=[0.5], colors="black", linewidths=1)
    x, y = x.cpu(), y.cpu()
    ax.scatter(x[:, 0], x[:, 1], c=y, cmap="coolwarm", s=3)
    ax.set_title(title, fontsize=10)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


fig, axes = plt.subplots(1, 3, figsize=(13, 4.5))
panels = [("linear", linear_model, linear_test)] + [
    (label, runs[0]["model"], runs[0]["test"]) for label, runs in results.items()
]
for ax, (label, model, test_acc) in zip(axes, panels):
    plot_decision_boundary(
        ax, model, x_test, y_test, f"{label}: test accuracy {test_acc:.1%}"
    )
plt.tight_layout()
plt.show()

# %% [markdown]
# Read the plots together with the printed sentence. The straight boundary of logistic regression
# cuts the spirals in half. If a loss curve is still falling at the end, that network had not
# finished learning: the table compares the networks at a fixed training budget as much as at a
# fixed size. A network with one hidden layer of tanh units adds up one smooth step
# per unit, so following the spiral arm round and round costs it many units, while layers that
# transform the output of other layers can bend the plane in stages. Depth is not free, though:
# deeper stacks are harder to optimise, and the Transformer relies on residual connections and
# normalisation (chapter on the Transformer) to make dozens of layers trainable.
#
# (sec-ffn-positionwise)=
# ## The position-wise feed-forward block
#
# Inside a Transformer, the input to a layer is a sequence: $T$ vectors of size
# $d_\text{model}$, one per position (per token). Attention mixes information *across* positions;
# the feed-forward block then processes *each position on its own* with the same two-layer network
# {cite}`vaswani2017attention`:
#
# $$\mathrm{FFN}(\mathbf x) = \mathbf W_2\, g(\mathbf W_1 \mathbf x + \mathbf b_1) + \mathbf b_2,
# \qquad \mathbf W_1 \in \mathbb R^{d_\text{ff}\times d_\text{model}},\;
# \mathbf W_2 \in \mathbb R^{d_\text{model}\times d_\text{ff}} .$$
#
# It is the network of our worked example (with the weights written in the $(\text{out},\text{in})$
# orientation of `nn.Linear`), only bigger: the first layer *expands* each vector to $d_\text{ff}$
# units, the activation acts on each unit, and the second layer *contracts* back to
# $d_\text{model}$, so that the block's output can be added to its input. The original Transformer
# uses ReLU; BERT uses GELU. The hidden layer is conventionally four times wider than the model.
# The factor is a design choice of the original paper that BERT kept, not something derived: the
# wider the hidden layer, the more nonlinear features of each position the block can compute
# before mixing them back down to $d_\text{model}$, at a cost in parameters and time that grows
# linearly with $d_\text{ff}$.

# %%
ffn_sizes = {
    "Transformer base (Vaswani et al.)": (512, 2048),
    "BERT-base (Devlin et al.)": (768, 3072),
}
for label, (d_model, d_ff) in ffn_sizes.items():
    print(
        f"{label:<34} d_model = {d_model:>4}, d_ff = {d_ff:>4}, d_ff / d_model = "
        f"{d_ff // d_model}"
    )
    assert d_ff == 4 * d_model


# %% [markdown]
# In a batch the input has shape $(B, T, D)$ with $D = d_\text{model}$. Because `nn.Linear` acts
# on the last axis and treats all leading axes as "many examples", the code is the same as for a
# single vector: batch and positions are handled alike.

# %% tags=["export"]
class PositionwiseFeedForward(nn.Module):
    """The Transformer's feed-forward block, FFN(x) = W2 g(W1 x + b1) + b2, applied to
    every position.

    Shapes: (B, T, D) -> (B, T, D), with D = d_model; only the last axis is mixed, so
    any leading axes work. Dropout acts on the hidden activations; the dropout on the
    block's output belongs to the residual connection around it (Transformer chapter).
    """

    def __init__(
        self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0
    ):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("d_ff", d_ff)
        check_probability("dropout", dropout)
        self.d_model, self.d_ff = d_model, d_ff
        self.expand = nn.Linear(d_model, d_ff)  # W1, b1: D -> F
        self.activation = get_activation(activation)
        self.dropout = nn.Dropout(dropout)
        self.contract = nn.Linear(d_ff, d_model)  # W2, b2: F -> D

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"expected the last axis to be d_model={self.d_model}, got shape "
                f"{tuple(x.shape)}"
            )
        h = self.activation(self.expand(x))  # (B, T, F)
        h = self.dropout(h)  # (B, T, F)
        return self.contract(h)  # (B, T, D)


# %% [markdown]
# A small block in action, with the shapes tagged:

# %%
seed_everything(0)
B, T, D, D_FF = 2, 5, 8, 32
ffn = PositionwiseFeedForward(d_model=D, d_ff=D_FF, activation="gelu")
print(ffn)
x_seq = torch.randn(B, T, D)  # (B, T, D)
y_seq = ffn(x_seq)  # (B, T, D)
print(f"input {tuple(x_seq.shape)} -> output {tuple(y_seq.shape)}")
assert y_seq.shape == (B, T, D)

# The same computation written out with the block's own weights.
by_hand = (
    gelu_exact(x_seq @ ffn.expand.weight.T + ffn.expand.bias) @ ffn.contract.weight.T
    + ffn.contract.bias
)
assert torch.allclose(y_seq, by_hand, atol=1e-5)

# %% [markdown]
# "Position-wise" is a promise we can test. Applying the block to each position separately gives
# the same result as applying it to the whole sequence, and shuffling the positions shuffles the
# outputs in the same way: the block cannot see order or neighbours. (Attention is what lets
# positions talk to each other, and positional encodings are what tell it the order.)

# %%
# T times (B, D) -> (B, T, D)
one_at_a_time = torch.stack([ffn(x_seq[:, t]) for t in range(T)], dim=1)
assert torch.allclose(one_at_a_time, y_seq, atol=1e-6)

perm = torch.randperm(T)
# permute, then FFN == FFN, then permute
assert torch.allclose(ffn(x_seq[:, perm]), y_seq[:, perm], atol=1e-6)
print(
    f"positions processed independently; permutation {perm.tolist()} commutes "
    f"with the block"
)

# %% [markdown]
# The block is small in code but large in parameters. Each Transformer layer also has an attention
# sub-layer with four $d_\text{model}\times d_\text{model}$ projections (and their biases), and at
# $d_\text{ff} = 4\,d_\text{model}$ the feed-forward block holds about twice as many parameters:

# %%
for label, (d_model, d_ff) in ffn_sizes.items():
    ffn_params = count_parameters(PositionwiseFeedForward(d_model, d_ff))
    # query, key, value and output projections
    attention_params = 4 * (d_model * d_model + d_model)
    assert ffn_params == 2 * d_model * d_ff + d_ff + d_model
    # "about twice as many"
    assert abs(ffn_params / attention_params - 2) < 0.01
    print(
        f"{label:<34} FFN {ffn_params:>10,}  attention {attention_params:>10,}  "
        f"FFN share {ffn_params / (ffn_params + attention_params):.1%}"
    )

# %% [markdown]
# (sec-ffn-summary)=
# ## Summary
#
# - A neuron computes $g(\mathbf w^\top\mathbf x + b)$; a layer is a matrix product plus a bias
#   followed by an elementwise activation; a feed-forward network chains layers. `nn.Linear` stores
#   its weight as (out, in), the transpose of the $\mathbf W$ in $\mathbf W^\top\mathbf x$.
# - The output unit and the loss come from the target: linear + mean squared error (Gaussian),
#   sigmoid + binary cross-entropy (Bernoulli), softmax + cross-entropy (categorical). Losses are
#   computed from logits because the probability form overflows and produces `inf` and `nan`.
# - Sigmoid and tanh saturate; ReLU keeps a derivative of 1 where active; GELU, $x\Phi(x)$, is the
#   smooth variant that BERT uses, and its tanh approximation is much closer to it than the sigmoid
#   one. ELU saturates to $-\alpha$ on the negative side.
# - On two spirals a linear model is at chance, and at equal parameter count the depth of a
#   network changes what it learns; the table in {ref}`sec-ffn-spirals` shows by how much.
# - The Transformer's `PositionwiseFeedForward` is a two-layer network applied to every position
#   independently, with $d_\text{ff} = 4\,d_\text{model}$.
#
# From `tinybert.blocks.feedforward` later chapters import `PositionwiseFeedForward`, `get_activation`,
# `count_parameters`, `MLP` and the three GELU functions.
#
# (sec-ffn-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-ffn-xor
# :difficulty: 1
# :minutes: 15
# :kind: derivation
# :::
# **The worked example at the corners (pen and paper).** Evaluate the worked example's network
# ($\mathbf W$ all ones, $\mathbf w = (1,-2)^\top$, $\mathbf b_1 = (1,-1)^\top$, $b_2 = 0$, ReLU)
# by hand at the four corners $(0,0)$, $(0,1)$, $(1,0)$, $(1,1)$. Then change **only**
# $\mathbf b_1$ so that the network computes XOR: $0, 1, 1, 0$ at the four corners. Why can no
# linear model $y = \mathbf v^\top\mathbf x + c$ do that?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ffn-xor
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): the outputs 1, 2, 2, 1 at the corners; a $\mathbf b_1$
# that gives XOR (such as $(0, -1)^\top$) with its four outputs; the argument that every linear
# model has $y(0,0) + y(1,1) = y(0,1) + y(1,0)$, which XOR breaks.
#
# For an input $\mathbf x = (x_1, x_2)$, both hidden units see the same sum $s = x_1 + x_2$, so
# $\mathbf h = (\max(0, s+1), \max(0, s-1))$ and $y = \max(0, s+1) - 2\max(0, s-1)$.
# At the corners $s$ is $0, 1, 1, 2$, giving $y = 1, 2, 2, 1$.
#
# With $\mathbf b_1 = (0, -1)^\top$ the output is $y = \max(0, s) - 2\max(0, s-1)$, which is
# $0, 1, 1, 0$: XOR. The second unit switches on only when both inputs are 1 and then cancels
# twice its excess. A linear model cannot do this: $y(0,0) + y(1,1) = y(0,1) + y(1,0)$ holds for
# every linear function (both sides equal $2c + v_1 + v_2$), but XOR needs $0 + 0 = 1 + 1$.
#
# The cell checks both claims with the batched code from the chapter:

# %%
corners = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])  # (4, 2)
y_example = torch.relu(corners @ W + torch.tensor([1.0, -1.0])) @ w  # (4,)
y_xor = torch.relu(corners @ W + torch.tensor([0.0, -1.0])) @ w  # (4,)
print(f"b1 = (1, -1): {y_example.tolist()}   b1 = (0, -1): {y_xor.tolist()}")
assert y_example.tolist() == [1.0, 2.0, 2.0, 1.0]
assert y_xor.tolist() == [0.0, 1.0, 1.0, 0.0]

# %% [markdown]
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-ffn-sigmoid-derivative
# :difficulty: 2
# :minutes: 20
# :kind: derivation
# :::
# **The sigmoid's derivative (pen and paper).** Show that $\sigma'(z) = \sigma(z)\bigl(1-\sigma(z)\bigr)$
# and that $\sigma'(z) \le \tfrac14$ for every $z$. A chain of $n$ sigmoid units, each feeding the
# next through a weight of 1, computes $\sigma(\sigma(\cdots\sigma(z)))$. Bound the derivative of
# the chain's output with respect to $z$. What is the corresponding derivative for a chain of ReLU
# units when all of them are active, and what does that suggest about training deep networks?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ffn-sigmoid-derivative
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): $\sigma' = \sigma(1-\sigma)$ derived; its maximum
# $\tfrac14$ at $z = 0$; the chain's derivative bounded by $4^{-n}$ through the chain rule; a
# chain of active ReLUs passes a derivative of 1; the conclusion about vanishing gradients in deep
# sigmoid networks.
#
# Differentiate $\sigma(z) = (1+e^{-z})^{-1}$:
# $\sigma'(z) = e^{-z}/(1+e^{-z})^2 = \sigma(z)\cdot\frac{e^{-z}}{1+e^{-z}} = \sigma(z)\bigl(1-\sigma(z)\bigr)$.
# The product $p(1-p)$ of a number $p\in(0,1)$ with its complement is largest at $p=\tfrac12$, where
# it is $\tfrac14$; $\sigma(z)=\tfrac12$ happens at $z=0$.
#
# By the chain rule, the chain's derivative is the product of the $n$ local derivatives, each at
# most $\tfrac14$, so it is at most $4^{-n}$: it shrinks exponentially with depth, and the early
# layers of a deep sigmoid network receive almost no gradient (the *vanishing gradient* problem).
# An active ReLU has derivative exactly $1$, so a chain of active ReLUs passes the gradient through
# unchanged. This is one reason ReLU-like activations made deep networks trainable; weights and
# their initialisation still scale the gradient, which is why initialisation schemes matter too.
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-ffn-bert-ffn-params
# :difficulty: 1
# :minutes: 15
# :kind: derivation
# :::
# **Counting BERT's feed-forward parameters.** Write the number of parameters of one
# `PositionwiseFeedForward(d_model, d_ff)` as a formula in $d_\text{model}$ and $d_\text{ff}$.
# How many parameters do the feed-forward blocks hold in all of BERT-base (12 layers,
# $d_\text{model} = 768$, $d_\text{ff} = 3072$) and in BERT-large (24 layers, $d_\text{model} = 1024$,
# $d_\text{ff} = 4096$)? Compute them by hand first, then check with `count_parameters`.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ffn-bert-ffn-params
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): the formula $2\,d_\text{model}\,d_\text{ff} +
# d_\text{ff} + d_\text{model}$ with where each term comes from; the totals for 12 and 24 blocks,
# checked with `count_parameters`.
#
# The expanding layer has $d_\text{model}\,d_\text{ff}$ weights and $d_\text{ff}$ biases, the
# contracting layer $d_\text{ff}\,d_\text{model}$ weights and $d_\text{model}$ biases, so one block
# has $2\,d_\text{model}\,d_\text{ff} + d_\text{ff} + d_\text{model}$ parameters. Multiply by the
# number of layers; the cell prints the totals and checks them against the model:

# %%
for label, n_layers, d_model, d_ff in [
    ("BERT-base", 12, 768, 3072),
    ("BERT-large", 24, 1024, 4096),
]:
    per_block = 2 * d_model * d_ff + d_ff + d_model
    assert per_block == count_parameters(PositionwiseFeedForward(d_model, d_ff))
    print(
        f"{label}: {per_block:,} per block, {n_layers * per_block:,} in "
        f"{n_layers} blocks"
    )

# %% [markdown]
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-ffn-cross-entropy
# :difficulty: 2
# :minutes: 20
# :kind: coding
# :::
# **A cross-entropy that does not overflow.** Write `cross_entropy(logits, targets)` for logits of
# shape $(N, C)$ and integer class indices of shape $(N,)$, returning the mean loss
# $\frac1N\sum_i -\log\operatorname{softmax}(\mathbf z_i)_{y_i}$ as a 0-dimensional tensor. Do not
# use `torch.log_softmax`, `torch.logsumexp` or `F.cross_entropy`. It must stay finite for logits
# like $1000$. *Hint:* $\log\sum_j e^{z_j} = m + \log\sum_j e^{z_j - m}$ for any $m$; which $m$ keeps
# every exponential at most 1?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ffn-cross-entropy
# :class: dropdown
# ::::
# Take $m = \max_j z_j$ per row. Then every $z_j - m \le 0$, so no exponential overflows, and at
# least one term of the sum is $e^0 = 1$, so the logarithm's argument is at least 1 and never
# underflows to $\log 0$. This is the *log-sum-exp trick*.

# %% tags=["solution"]
import torch


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    # (N, 1) largest logit per row
    m = logits.max(dim=-1, keepdim=True).values
    # (N,)
    log_normaliser = m.squeeze(-1) + torch.log(torch.exp(logits - m).sum(dim=-1))
    target_logits = logits.gather(-1, targets[:, None]).squeeze(-1)  # (N,)
    return (log_normaliser - target_logits).mean()
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch01 import check_cross_entropy

check_cross_entropy(cross_entropy)

# %% [markdown]
# :::{exercise-start}
# :label: ex-ffn-silu
# :difficulty: 1
# :minutes: 15
# :kind: coding
# :::
# **SiLU and its derivative.** The SiLU (also called *swish*) activation is $\mathrm{SiLU}(x) = x\,\sigma(x)$:
# the sigmoid approximation of GELU without the factor 1.702. Write `silu(x)` and
# `silu_derivative(x)`, where the derivative uses a closed form that you derive (no autograd).
# Both take a tensor of any shape and return a tensor of the same shape. *Hint:* use the product
# rule and $\sigma' = \sigma(1-\sigma)$.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ffn-silu
# :class: dropdown
# ::::
# By the product rule, $\frac{d}{dx}\,x\sigma(x) = \sigma(x) + x\,\sigma(x)\bigl(1-\sigma(x)\bigr)
# = \sigma(x)\bigl(1 + x(1-\sigma(x))\bigr)$.

# %% tags=["solution"]
import torch


def silu(x: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    return x * torch.sigmoid(x)
    ### END SOLUTION


def silu_derivative(x: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    s = torch.sigmoid(x)
    return s * (1 + x * (1 - s))
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch01 import check_silu

check_silu(silu, silu_derivative)

# %% [markdown]
# :::{exercise-start}
# :label: ex-ffn-mlp-params
# :difficulty: 1
# :minutes: 15
# :kind: coding
# :::
# **Counting without building.** Write `mlp_parameter_count(sizes)` that returns, as a Python
# `int`, the number of parameters of `MLP(sizes)` without constructing any module, and raises
# `ValueError` when `sizes` has fewer than two entries. Use it to find the width $h$ of a
# network with three hidden layers of $h$ units, `[2, h, h, h, 1]`, whose parameter count is
# closest to that of `MLP([2, 220, 1])`.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ffn-mlp-params
# :class: dropdown
# ::::
# Each `nn.Linear(n_in, n_out)` holds an $(n_\text{out}, n_\text{in})$ weight and $n_\text{out}$
# biases; the function sums that over consecutive pairs of sizes. For the second question, search
# over $h$. The cell below runs the search with the chapter's `count_parameters`, which gives the
# same numbers as your function, so that this answer does not depend on it:

# %%
target = count_parameters(MLP([2, 220, 1]))
best_h = min(
    range(1, 64), key=lambda h: abs(count_parameters(MLP([2, h, h, h, 1])) - target)
)
print(
    f"target {target}; h = {best_h} gives "
    f"{count_parameters(MLP([2, best_h, best_h, best_h, 1]))} parameters"
)


# %% tags=["solution"]
def mlp_parameter_count(sizes) -> int:
    ### BEGIN SOLUTION
    sizes = list(sizes)
    if len(sizes) < 2:
        raise ValueError(
            f"an MLP needs at least an input and an output size, got {sizes!r}"
        )
    return sum(n_in * n_out + n_out for n_in, n_out in zip(sizes[:-1], sizes[1:]))
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch01 import check_mlp_parameter_count

check_mlp_parameter_count(mlp_parameter_count)

# %% [markdown]
# :::{exercise-start}
# :label: ex-ffn-relu-depth
# :difficulty: 2
# :minutes: 45
# :kind: experiment
# :::
# **ReLU, depth and seeds (experiment).** Rerun the depth experiment of
# {ref}`sec-ffn-spirals` with `activation="relu"` for both networks, and with ten seeds instead of
# five. Print the test accuracy of every run, not only the means. How does the spread over seeds
# compare with the tanh runs? Count, for a trained deep ReLU network, how many hidden units never
# activate on any training point, and relate what you find to "dead" ReLUs.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-ffn-relu-depth
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): every test accuracy of the ten seeds for both
# networks; the spread compared with the tanh runs; dead units counted per hidden layer of a
# trained deep ReLU network; a link between dead units, narrow layers and the seeds that stall,
# drawn from the runs rather than asserted.
#
# Change the activation argument of `train_classifier` and set `SEEDS = list(range(10))`. To find
# dead units, run the training points through the network layer by layer and record, for each
# hidden layer, which units are positive for at least one point; a unit that is never positive
# gets no gradient and cannot recover:
#
# ```python
# def dead_units(model, x):
#     """Per hidden layer, the number of ReLU units that are zero for every row of x."""
#     counts = []
#     with torch.no_grad():
#         for layer in model.layers[:-1]:
#             x = model.activation(layer(x))            # (N, hidden)
#             counts.append(int((x.max(dim=0).values <= 0).sum()))
#     return counts
# ```
#
# What to look for: with narrow layers, a few dead units remove a large share of a layer's
# capacity, so some seeds train well and others stall, and the spread of test accuracies over
# seeds widens. Wide layers lose only a small fraction. The results depend on your seeds, so
# report what your runs show rather than a single number.
# ::::{solution-end}
# ::::
#
# (sec-ffn-quiz)=
# ## Quiz
#
# Check what you took from this chapter. In a notebook, run the cell and answer with
# `quiz.check(question, answer)`, such as `quiz.check(1, "b")`; here, press *Check*.

# %% tags=["quiz", "remove-input"]
from tinybert.exercises.quiz import Quiz, choice, number
from tinybert.blocks.feedforward import PositionwiseFeedForward, count_parameters

quiz = Quiz(
    "ch01",
    [
        choice(
            "nn.Linear(3, 5) stores its weight with which shape?",
            ["(3, 5)", "(5,)", "(15,)", "(5, 3)"],
            answer="d",
            explain="PyTorch keeps (out, in), the transpose of the W in Wᵀx.",
        ),
        choice(
            "Which output unit and loss go with a target that is one of C classes?",
            [
                "softmax and cross-entropy",
                "sigmoid and binary cross-entropy",
                "linear and mean squared error",
                "ReLU and mean squared error",
            ],
            answer="a",
            explain="A categorical target: softmax, and the cross-entropy of its log.",
        ),
        choice(
            "Why is a loss computed from logits rather than from probabilities?",
            [
                "the softmax has no gradient, so it must be left out",
                "cross-entropy needs inputs that can be negative",
                "the probability form overflows or underflows into inf and nan",
                "logits are always positive, so their log is defined",
            ],
            answer="c",
            explain="log(softmax) written out meets exp(1000) or log(0).",
        ),
        choice(
            "Which activation do BERT's feed-forward blocks use?",
            ["ReLU", "GELU", "tanh", "sigmoid"],
            answer="b",
            explain="GELU, x·Φ(x), a smooth relative of ReLU.",
        ),
        number(
            "What is the largest value of the sigmoid's derivative? (2 decimals)",
            answer=0.25,
            decimals=2,
            explain="σ(1 − σ) peaks at σ = 1/2, at z = 0.",
        ),
        number(
            "How many parameters does PositionwiseFeedForward(768, 3072) hold?",
            answer=count_parameters(PositionwiseFeedForward(768, 3072)),
            decimals=0,
            explain="2·768·3072 weights, plus 3072 + 768 biases.",
        ),
    ],
)
quiz
