"""Unit tests for tinybert.blocks.recurrent_attention (generated from
chapters/02_word_vectors.md): additive attention and the GRU encoder-decoder.

Odd, distinct sizes (batch 3, source length 7, target length 5, vocabulary 13, hidden
11, attention 9) make swapped axes fail loudly.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tinybert.blocks.recurrent_attention import (
    AdditiveAttention,
    RecurrentSeq2Seq,
    RecurrentSeq2SeqConfig,
    RecurrentSeq2SeqOutput,
    additive_attention,
)

B, S, T, V, E, H, A = 3, 7, 5, 13, 6, 11, 9
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(2015)


def model(attention: bool, seed: int = 0) -> RecurrentSeq2Seq:
    torch.manual_seed(seed)
    return RecurrentSeq2Seq(
        RecurrentSeq2SeqConfig(
            vocab_size=V,
            embed_size=E,
            hidden_size=H,
            attention_size=A,
            attention=attention,
        )
    )


def tokens(g, *shape, high=V):
    return torch.randint(0, high, shape, generator=g)


# --- additive_attention and AdditiveAttention -----------------------------------------


def test_additive_attention_shapes_and_weights_that_sum_to_one(generator):
    query, keys = (
        torch.randn(B, A, generator=generator),
        torch.randn(B, S, A, generator=generator),
    )
    values, v = (
        torch.randn(B, S, 2 * H, generator=generator),
        torch.randn(A, generator=generator),
    )
    context, weights = additive_attention(query, keys, values, v)
    assert context.shape == (B, 2 * H) and weights.shape == (B, S)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(B))
    # the context is the weighted average of the values
    torch.testing.assert_close(context, torch.einsum("bs,bsd->bd", weights, values))


def test_the_score_matches_a_hand_computation(generator):
    """e_j = v . tanh(W s + U h_j), element by element, with Python floats."""
    attention = AdditiveAttention(query_size=H, key_size=2 * H, attention_size=A)
    s = torch.randn(H, generator=generator)
    h = torch.randn(S, 2 * H, generator=generator)
    W, U, v = (
        p.detach().tolist()
        for p in (attention.W.weight, attention.U.weight, attention.v.weight[0])
    )
    s_list, h_list = s.tolist(), h.tolist()
    scores = []
    for h_j in h_list:
        hidden = [
            math.tanh(
                sum(W[a][i] * s_list[i] for i in range(H))
                + sum(U[a][i] * h_j[i] for i in range(2 * H))
            )
            for a in range(A)
        ]
        scores.append(sum(v[a] * hidden[a] for a in range(A)))
    expected = torch.softmax(torch.tensor(scores, dtype=torch.float64), dim=0)
    with torch.no_grad():
        context, weights = attention(s[None], h[None], attention.project_keys(h[None]))
    torch.testing.assert_close(weights[0].double(), expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(
        context[0].double(), expected @ h.double(), atol=1e-5, rtol=1e-5
    )


def test_masked_positions_get_zero_weight_and_do_not_change_the_context(generator):
    query, keys = (
        torch.randn(B, A, generator=generator),
        torch.randn(B, S, A, generator=generator),
    )
    values, v = (
        torch.randn(B, S, 4, generator=generator),
        torch.randn(A, generator=generator),
    )
    lengths = torch.tensor([7, 4, 1])
    mask = torch.arange(S) < lengths[:, None]  # (B, S) True = may attend
    context, weights = additive_attention(query, keys, values, v, mask)
    assert (weights[~mask] == 0).all()
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(B))
    # whatever sits at a padding position, keys or values, the output is the same
    noisy_keys = torch.where(
        mask[..., None], keys, torch.randn(B, S, A, generator=generator)
    )
    noisy_values = torch.where(mask[..., None], values, 1e3 * torch.ones(B, S, 4))
    context2, weights2 = additive_attention(query, noisy_keys, noisy_values, v, mask)
    torch.testing.assert_close(context2, context)
    torch.testing.assert_close(weights2, weights)
    # the one-position row attends to it alone
    torch.testing.assert_close(context[2], values[2, 0])


def test_a_row_with_nothing_to_attend_to_is_refused(generator):
    query, keys = (
        torch.randn(B, A, generator=generator),
        torch.randn(B, S, A, generator=generator),
    )
    values, v = (
        torch.randn(B, S, 4, generator=generator),
        torch.randn(A, generator=generator),
    )
    mask = torch.ones(B, S, dtype=torch.bool)
    mask[1] = False
    with pytest.raises(ValueError, match="every row"):
        additive_attention(query, keys, values, v, mask)


def test_attention_sizes_are_checked():
    with pytest.raises(ValueError, match="attention_size"):
        AdditiveAttention(H, 2 * H, 0)
    with pytest.raises(ValueError, match="vocab_size"):
        RecurrentSeq2Seq(RecurrentSeq2SeqConfig(vocab_size=0))


# --- RecurrentSeq2Seq ----------------------------------------------------------------


@pytest.mark.parametrize("attention", [False, True], ids=["bottleneck", "attention"])
def test_the_model_shapes(generator, attention):
    out = model(attention)(tokens(generator, B, S), tokens(generator, B, T, high=V + 1))
    assert isinstance(out, RecurrentSeq2SeqOutput)
    assert out.logits.shape == (B, T, V) and out.tokens.shape == (B, T)
    if attention:
        assert out.weights.shape == (B, T, S)
        torch.testing.assert_close(out.weights.sum(dim=-1), torch.ones(B, T))
    else:
        assert out.weights is None


@pytest.mark.parametrize("attention", [False, True], ids=["bottleneck", "attention"])
def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output(
    generator, attention
):
    net = model(attention)
    source = tokens(generator, B, S)
    greedy = net.generate(source, steps=T)
    bos = torch.full((B, 1), V)
    with torch.no_grad():
        forced = net(source, torch.cat([bos, greedy.tokens[:, :-1]], dim=1))
    torch.testing.assert_close(forced.logits, greedy.logits)
    assert torch.equal(forced.tokens, greedy.tokens)


def test_without_attention_the_decoder_sees_the_source_only_through_the_summary(
    generator,
):
    """Two sources whose encoder summaries are made equal give the same output: the
    bottleneck model reads nothing else of the source."""
    net = model(attention=False)
    source = tokens(generator, B, S)
    states, summary, keys = net.encode(source)
    assert (
        keys is None and summary.shape == (B, 2 * H) and states.shape == (B, S, 2 * H)
    )
    torch.testing.assert_close(
        summary[:, :H], states[:, -1, :H]
    )  # forward: read x_S last
    torch.testing.assert_close(
        summary[:, H:], states[:, 0, H:]
    )  # backward: read x_1 last
    net.encode = lambda _: (torch.zeros(B, S, 2 * H), summary, None)
    target_in = tokens(generator, B, T, high=V + 1)
    with torch.no_grad():
        assert torch.equal(
            net(tokens(generator, B, S), target_in).logits,
            net(source, target_in).logits,
        )


def test_every_parameter_of_the_attention_model_gets_a_gradient(generator):
    net = model(attention=True)
    out = net(tokens(generator, B, S), tokens(generator, B, T, high=V + 1))
    F.cross_entropy(out.logits.flatten(0, 1), tokens(generator, B * T)).backward()
    for name, parameter in net.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_the_attention_model_learns_to_reverse_short_strings():
    """300 steps on strings of 2 to 5 digits: far above chance (10%), most digits come
    out reversed."""
    torch.manual_seed(0)
    net = RecurrentSeq2Seq(RecurrentSeq2SeqConfig(vocab_size=10, attention=True))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    for step in range(300):
        length = 2 + step % 4
        source = torch.randint(0, 10, (64, length), generator=g)
        target = source.flip(1)
        target_in = torch.cat([torch.full((64, 1), 10), target[:, :-1]], dim=1)
        loss = F.cross_entropy(
            net(source, target_in).logits.flatten(0, 1), target.flatten()
        )
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
    source = torch.randint(0, 10, (200, 5), generator=g)
    accuracy = (net.generate(source, 5).tokens == source.flip(1)).float().mean().item()
    assert accuracy > 0.7, accuracy
