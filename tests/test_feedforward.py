"""Unit tests for tinybert.blocks.feedforward (generated from chapters/01_feedforward.md).

Odd, distinct sizes (batch 13, seq 7, d_model 32, d_ff 37) make swapped axes fail loudly.
"""
from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tinybert.blocks.checks import check_positive_number, check_probability
from tinybert.blocks.feedforward import (MLP, PositionwiseFeedForward, count_parameters,
                                         gelu_exact, gelu_sigmoid, gelu_tanh,
                                         get_activation)

B, T, D, D_FF = 13, 7, 32, 37
ACTIVATION_NAMES = ["relu", "gelu", "gelu_tanh", "tanh", "sigmoid", "elu"]


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


# --- GELU variants ------------------------------------------------------------------------------

def test_gelu_exact_matches_torch():
    x = torch.linspace(-6, 6, 1201)
    assert torch.allclose(gelu_exact(x), F.gelu(x, approximate="none"), rtol=0, atol=1e-6)
    x64 = torch.linspace(-10, 10, 2001, dtype=torch.float64)
    assert torch.allclose(gelu_exact(x64), F.gelu(x64), rtol=0, atol=1e-12)


def test_gelu_tanh_matches_torch():
    x = torch.linspace(-6, 6, 1201)
    assert torch.allclose(gelu_tanh(x), F.gelu(x, approximate="tanh"), rtol=0, atol=1e-6)


def test_gelu_exact_is_x_times_normal_cdf():
    x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0], dtype=torch.float64)
    cdf = torch.distributions.Normal(0.0, 1.0).cdf(x)
    assert torch.allclose(gelu_exact(x), x * cdf, atol=1e-12)
    assert gelu_exact(torch.tensor(0.0)).item() == 0.0


def test_gelu_approximations_are_close_but_not_identical():
    x = torch.linspace(-6, 6, 4000, dtype=torch.float64)
    tanh_error = (gelu_tanh(x) - gelu_exact(x)).abs().max().item()
    sigmoid_error = (gelu_sigmoid(x) - gelu_exact(x)).abs().max().item()
    assert 1e-5 < tanh_error < 1e-3
    assert 1e-3 < sigmoid_error < 0.05
    assert torch.allclose(gelu_sigmoid(x), x * torch.sigmoid(1.702 * x))


def test_gelu_functions_keep_shape_and_dtype(generator):
    x = torch.randn(B, T, D, generator=generator, dtype=torch.float64)
    for fn in (gelu_exact, gelu_tanh, gelu_sigmoid):
        y = fn(x)
        assert y.shape == x.shape and y.dtype == x.dtype, fn.__name__


# --- get_activation -----------------------------------------------------------------------------

@pytest.mark.parametrize(
    "name, reference",
    [
        ("relu", torch.relu),
        ("gelu", lambda x: F.gelu(x, approximate="none")),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
        ("tanh", torch.tanh),
        ("sigmoid", torch.sigmoid),
        ("elu", lambda x: F.elu(x, alpha=1.0)),
    ],
)
def test_get_activation_computes_the_named_function(name, reference, generator):
    module = get_activation(name)
    assert isinstance(module, nn.Module)
    x = 3 * torch.randn(B, T, D, generator=generator)
    assert torch.allclose(module(x), reference(x), atol=1e-6)


def test_get_activation_gelu_is_exact_not_tanh():
    x = torch.linspace(-3, 3, 601, dtype=torch.float64)
    y = get_activation("gelu")(x)
    assert torch.allclose(y, gelu_exact(x), atol=1e-12)
    assert not torch.allclose(y, gelu_tanh(x), atol=1e-6)


def test_get_activation_returns_a_new_module_each_time():
    assert get_activation("relu") is not get_activation("relu")


@pytest.mark.parametrize("bad", ["swish", "ReLU", "", "gelu_new"])
def test_get_activation_unknown_name_lists_valid_names(bad):
    with pytest.raises(ValueError) as info:
        get_activation(bad)
    message = str(info.value)
    assert repr(bad) in message
    for name in ACTIVATION_NAMES:
        assert name in message


def test_get_activation_rejects_non_strings():
    with pytest.raises(ValueError):
        get_activation(None)


# --- count_parameters ---------------------------------------------------------------------------

def test_count_parameters_linear_exact():
    assert count_parameters(nn.Linear(D, D_FF)) == D * D_FF + D_FF
    assert count_parameters(nn.Linear(D, D_FF, bias=False)) == D * D_FF


def test_count_parameters_trainable_only():
    model = nn.Sequential(nn.Linear(3, 5), nn.Linear(5, 2))
    model[0].weight.requires_grad_(False)
    assert count_parameters(model) == 3 * 5 + 5 + 5 * 2 + 2
    assert count_parameters(model, trainable_only=True) == 5 + 5 * 2 + 2


def test_count_parameters_counts_shared_tensors_once():
    layer = nn.Linear(D, D)
    tied = nn.Sequential(layer, nn.ReLU(), layer)
    assert count_parameters(tied) == D * D + D


def test_count_parameters_of_parameter_free_module_is_zero():
    assert count_parameters(nn.ReLU()) == 0


def test_count_parameters_returns_int():
    assert type(count_parameters(nn.Linear(2, 3))) is int


# --- MLP ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "sizes, expected",
    [
        ([2, 1], 3),
        ([2, 220, 1], 881),
        ([2, 16, 16, 16, 16, 1], 881),
        ([D, D_FF, 5], D * D_FF + D_FF + D_FF * 5 + 5),
    ],
)
def test_mlp_parameter_count(sizes, expected):
    assert count_parameters(MLP(sizes)) == expected


def test_mlp_shapes_and_layers(generator):
    mlp = MLP([D, D_FF, 11, 3], activation="tanh")
    assert [type(layer) for layer in mlp.layers] == [nn.Linear] * 3
    assert [(layer.in_features, layer.out_features) for layer in mlp.layers] == [(D, D_FF), (D_FF, 11), (11, 3)]
    x = torch.randn(B, T, D, generator=generator)
    assert mlp(x).shape == (B, T, 3)


def test_mlp_forward_equals_hand_computation(generator):
    torch.manual_seed(0)
    mlp = MLP([5, 9, 4, 2], activation="elu")
    x = torch.randn(B, 5, generator=generator)
    l1, l2, l3 = mlp.layers
    by_hand = F.elu(x @ l1.weight.T + l1.bias)
    by_hand = F.elu(by_hand @ l2.weight.T + l2.bias)
    by_hand = by_hand @ l3.weight.T + l3.bias          # no activation after the last layer
    assert torch.allclose(mlp(x), by_hand, atol=1e-6)


def test_mlp_output_is_linear_so_it_can_be_negative(generator):
    torch.manual_seed(0)
    mlp = MLP([4, 8, 6], activation="relu")
    out = mlp(torch.randn(200, 4, generator=generator))
    assert (out < 0).any()                              # a trailing ReLU would make every output >= 0


def test_mlp_without_hidden_layer_is_one_linear_layer(generator):
    mlp = MLP([3, 2])
    x = torch.randn(B, 3, generator=generator)
    (layer,) = mlp.layers
    assert torch.allclose(mlp(x), x @ layer.weight.T + layer.bias)


@pytest.mark.parametrize("sizes", [[], [4], [4, 0, 1], [4, -3, 1], [4, 2.5, 1], [4, True, 1]])
def test_mlp_rejects_bad_sizes(sizes):
    with pytest.raises(ValueError):
        MLP(sizes)


def test_mlp_rejects_unknown_activation():
    with pytest.raises(ValueError, match="swish"):
        MLP([2, 3, 1], activation="swish")


# --- PositionwiseFeedForward --------------------------------------------------------------------

def make_ffn(activation: str = "gelu", dropout: float = 0.0) -> PositionwiseFeedForward:
    torch.manual_seed(0)
    return PositionwiseFeedForward(D, D_FF, activation=activation, dropout=dropout).eval()


def test_ffn_shape(generator):
    ffn = make_ffn()
    x = torch.randn(B, T, D, generator=generator)
    assert ffn(x).shape == (B, T, D)


def test_ffn_submodules_have_readable_names_and_shapes():
    ffn = make_ffn()
    assert isinstance(ffn.expand, nn.Linear) and isinstance(ffn.contract, nn.Linear)
    assert ffn.expand.weight.shape == (D_FF, D)         # nn.Linear stores (out, in)
    assert ffn.contract.weight.shape == (D, D_FF)
    assert isinstance(ffn.activation, nn.GELU)
    assert isinstance(ffn.dropout, nn.Dropout)
    assert (ffn.d_model, ffn.d_ff) == (D, D_FF)


@pytest.mark.parametrize("activation", ACTIVATION_NAMES)
def test_ffn_equals_hand_computation(activation, generator):
    ffn = make_ffn(activation)
    g = get_activation(activation)
    x = torch.randn(B, T, D, generator=generator)
    by_hand = g(x @ ffn.expand.weight.T + ffn.expand.bias) @ ffn.contract.weight.T + ffn.contract.bias
    assert torch.allclose(ffn(x), by_hand, atol=1e-5)


def test_ffn_default_activation_is_relu(generator):
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(D, D_FF)
    assert isinstance(ffn.activation, nn.ReLU)


def test_ffn_acts_on_each_position_independently(generator):
    ffn = make_ffn()
    x = torch.randn(B, T, D, generator=generator)
    y = ffn(x)
    one_at_a_time = torch.stack([ffn(x[:, t]) for t in range(T)], dim=1)   # (B, T, D)
    assert torch.allclose(y, one_at_a_time, atol=1e-6)
    # Changing one position changes that position's output only.
    x_changed = x.clone()
    x_changed[:, 3] += 1.0
    y_changed = ffn(x_changed)
    assert not torch.allclose(y_changed[:, 3], y[:, 3])
    keep = [t for t in range(T) if t != 3]
    assert torch.equal(y_changed[:, keep], y[:, keep])


def test_ffn_commutes_with_permuting_positions(generator):
    ffn = make_ffn()
    x = torch.randn(B, T, D, generator=generator)
    perm = torch.randperm(T, generator=generator)
    assert not torch.equal(perm, torch.arange(T))
    assert torch.allclose(ffn(x[:, perm]), ffn(x)[:, perm], atol=1e-6)


def test_ffn_works_for_any_leading_axes(generator):
    ffn = make_ffn()
    x = torch.randn(B, T, D, generator=generator)
    flat = ffn(x.reshape(B * T, D)).reshape(B, T, D)
    assert torch.allclose(ffn(x), flat, atol=1e-6)
    assert ffn(x[0, 0]).shape == (D,)


def test_ffn_parameter_count():
    assert count_parameters(make_ffn()) == 2 * D * D_FF + D_FF + D
    assert count_parameters(PositionwiseFeedForward(768, 3072)) == 4_722_432      # BERT-base, per layer


def test_ffn_dropout_only_in_training_mode(generator):
    ffn = make_ffn(dropout=0.5)
    x = torch.randn(B, T, D, generator=generator)
    ffn.eval()
    assert torch.equal(ffn(x), ffn(x))                 # deterministic when evaluating
    ffn.train()
    torch.manual_seed(1)
    first = ffn(x)
    torch.manual_seed(2)
    second = ffn(x)
    assert not torch.allclose(first, second)           # dropout draws different masks


def test_ffn_gradients_reach_every_parameter(generator):
    ffn = make_ffn()
    ffn(torch.randn(B, T, D, generator=generator)).sum().backward()
    for name, p in ffn.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_ffn_rejects_wrong_input_width(generator):
    with pytest.raises(ValueError, match="d_model"):
        make_ffn()(torch.randn(B, T, D + 1, generator=generator))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"d_model": 0, "d_ff": D_FF},
        {"d_model": -1, "d_ff": D_FF},
        {"d_model": 32.0, "d_ff": D_FF},
        {"d_model": True, "d_ff": D_FF},
        {"d_model": D, "d_ff": 0},
        {"d_model": D, "d_ff": "37"},
        {"d_model": D, "d_ff": D_FF, "dropout": 1.0},
        {"d_model": D, "d_ff": D_FF, "dropout": -0.1},
        {"d_model": D, "d_ff": D_FF, "dropout": math.nan},
        {"d_model": D, "d_ff": D_FF, "dropout": "0.1"},
        {"d_model": D, "d_ff": D_FF, "activation": "swish"},
    ],
)
def test_ffn_argument_validation(kwargs):
    with pytest.raises(ValueError):
        PositionwiseFeedForward(**kwargs)


def test_ffn_error_messages_name_the_argument():
    with pytest.raises(ValueError, match="d_ff"):
        PositionwiseFeedForward(D, 0)
    with pytest.raises(ValueError, match="dropout"):
        PositionwiseFeedForward(D, D_FF, dropout=1.5)


# --- properties (hypothesis): for any small shape and any permutation of positions ------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(B=st.integers(1, 5), T=st.integers(1, 9), D=st.integers(1, 12), F_=st.integers(1, 20),
       activation=st.sampled_from(["relu", "gelu", "gelu_tanh", "tanh", "sigmoid", "elu"]),
       seed=st.integers(0, 2**16), data=st.data())
def test_ffn_is_position_wise_for_any_shape(B, T, D, F_, activation, seed, data):  # noqa: N803
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    ffn = PositionwiseFeedForward(D, F_, activation=activation).eval()
    x = torch.randn(B, T, D, generator=g)                            # (B, T, D)
    order = torch.tensor(data.draw(st.permutations(range(T))))
    with torch.no_grad():
        y = ffn(x)                                                  # (B, T, D)
        assert y.shape == (B, T, D)
        assert torch.allclose(ffn(x[:, order]), y[:, order], atol=1e-6)
        one_position = ffn(x[:, :1])                                # (B, 1, D)
        assert torch.allclose(one_position, y[:, :1], atol=1e-6)


# tinybert.blocks.checks: the argument checks every chapter uses (chapter 1)
@pytest.mark.parametrize("value", [0, 0.0, 0.5, 0.999])
def test_check_probability_returns_a_rate_in_zero_one(value):
    assert check_probability("dropout", value) == value


@pytest.mark.parametrize("value", [1.0, 1, -0.1, math.nan, math.inf, True, False, "0.1", None])
def test_check_probability_refuses_what_is_not_a_rate_in_zero_one(value):
    with pytest.raises(ValueError, match=rf"^p: expected a probability in \[0, 1\), got {re.escape(repr(value))}$"):
        check_probability("p", value)


@pytest.mark.parametrize("value", [1e-12, 0.02, 3, 1e300])
def test_check_positive_number_returns_a_finite_positive_number(value):
    assert check_positive_number("eps", value) == value


@pytest.mark.parametrize("value", [0, 0.0, -1e-12, math.inf, math.nan, True, "1e-12", None])
def test_check_positive_number_refuses_the_rest(value):
    with pytest.raises(ValueError, match=rf"^eps: expected a finite positive number, got {re.escape(repr(value))}$"):
        check_positive_number("eps", value)


def test_ffn_dropout_message_says_what_was_expected_and_given():
    with pytest.raises(ValueError, match=r"^dropout: expected a probability in \[0, 1\), got 1.0$"):
        PositionwiseFeedForward(D, D_FF, dropout=1.0)
