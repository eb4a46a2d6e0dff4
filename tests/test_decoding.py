"""Unit tests for tinybert.blocks.decoding (chapters/06_transformer.md): greedy, beam search, sampling."""
from __future__ import annotations

import pytest
import torch

from tinybert.blocks.decoding import (BeamSearchOutput, beam_search, generate,
                                      greedy_decode)
from tinybert.blocks.language_model import DecoderOnlyLM
from tinybert.blocks.transformer import Transformer, TransformerConfig

V, PAD, BOS, EOS = 11, 0, 1, 2


def make_model(seed: int, **overrides) -> Transformer:
    torch.manual_seed(seed)
    config = TransformerConfig(**{**dict(vocab_size=V, d_model=32, n_heads=4, n_layers=2, d_ff=37, dropout=0.0,
                                         max_len=32), **overrides})
    model = Transformer(config).eval()
    with torch.no_grad():                      # sharper distributions than at initialisation
        model.embed.tokens.weight.mul_(3.0)
    return model


def sources(seed: int, n: int = 13, length: int = 7) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V, (n, length), generator=g)
    lengths = torch.randint(1, length + 1, (n,), generator=g)
    src[torch.arange(length)[None, :] >= lengths[:, None]] = PAD
    return src


def log_prob(model, src, sequence):
    """Summed log-probability of a (B, L) output (with <bos>) up to and including its first <eos>."""
    with torch.no_grad():
        log_p = model(src, sequence[:, :-1]).logits.log_softmax(-1)
    token = log_p.gather(-1, sequence[:, 1:, None]).squeeze(-1)
    is_eos = (sequence[:, 1:] == EOS).long()
    counted = (is_eos.cumsum(-1) - is_eos) == 0
    return (token * counted).sum(-1)


@pytest.mark.parametrize("seed", range(6))
def test_greedy_equals_beam_of_one(seed):
    model, src = make_model(seed), sources(seed)
    greedy = greedy_decode(model, src, BOS, EOS, max_len=9)
    beam = beam_search(model, src, BOS, EOS, max_len=9, beam_size=1)
    assert isinstance(beam, BeamSearchOutput)
    assert beam.sequences.shape == (src.shape[0], 1, greedy.shape[1])
    assert torch.equal(beam.sequences[:, 0], greedy)
    torch.testing.assert_close(beam.scores[:, 0], log_prob(model, src, greedy), atol=1e-4, rtol=1e-4)


def test_greedy_takes_the_argmax_step_by_step():
    model, src = make_model(1), sources(1)
    out = greedy_decode(model, src, BOS, EOS, max_len=6)
    assert torch.all(out[:, 0] == BOS) and out.shape[1] <= 7
    with torch.no_grad():
        logits = model(src, out[:, :-1]).logits                     # one parallel pass over the result
    finished = torch.zeros(src.shape[0], dtype=torch.bool)
    for t in range(1, out.shape[1]):
        expected = logits[:, t - 1].argmax(-1).masked_fill(finished, PAD)
        assert torch.equal(out[:, t], expected)
        finished |= out[:, t] == EOS


def test_greedy_pads_after_eos_and_stops_early():
    model = make_model(2)
    with torch.no_grad():                                           # make <eos> the best first token
        model.output.weight[EOS] += 10.0 * model.output.weight.mean(0)
    src = sources(2)
    out = greedy_decode(model, src, BOS, EOS, max_len=20)
    has_eos = (out == EOS).any(dim=1)
    for row in out[has_eos]:
        first = int((row == EOS).nonzero()[0])
        assert torch.all(row[first + 1:] == PAD)
    if has_eos.all():
        assert out.shape[1] < 21


@pytest.mark.parametrize("seed", range(4))
def test_beam_scores_are_log_probs_sorted_best_first(seed):
    model, src = make_model(seed), sources(seed)
    out = beam_search(model, src, BOS, EOS, max_len=8, beam_size=4)
    B, K, L = out.sequences.shape
    assert (B, K) == (src.shape[0], 4) == tuple(out.scores.shape)
    assert torch.all(out.scores[:, :-1] >= out.scores[:, 1:] - 1e-6)
    for k in range(K):
        torch.testing.assert_close(out.scores[:, k], log_prob(model, src, out.sequences[:, k]), atol=1e-4, rtol=1e-4)
    # The K hypotheses of each source are different sequences.
    for b in range(B):
        assert len({tuple(s.tolist()) for s in out.sequences[b]}) == K


def test_beam_is_at_least_as_good_as_greedy_on_average():
    wins = total = 0
    for seed in range(5):
        model, src = make_model(seed), sources(seed)
        greedy = log_prob(model, src, greedy_decode(model, src, BOS, EOS, max_len=8))
        beam = beam_search(model, src, BOS, EOS, max_len=8, beam_size=5).scores[:, 0]
        wins += int((beam >= greedy - 1e-4).sum())
        total += len(src)
    assert wins >= 0.9 * total


def test_beam_search_finds_the_best_sequence_when_exhaustive():
    """With a beam as wide as all sequences of the length, beam search is exhaustive search."""
    model, src = make_model(3, vocab_size=4), torch.tensor([[3, 3], [3, 0]])
    out = beam_search(model, src, BOS, EOS, max_len=2, beam_size=16)
    best = out.scores[:, 0]
    g_eos = EOS
    candidates = [torch.tensor([BOS, a, b]) for a in range(4) for b in range(4)]
    for i in range(2):
        scores = []
        for c in candidates:
            if c[1] == g_eos:
                c = torch.tensor([BOS, g_eos, PAD])
            scores.append(log_prob(model, src[i:i + 1], c[None])[0])
        assert abs(best[i].item() - max(scores).item()) < 1e-4


def test_length_penalty_prefers_longer_outputs():
    model, src = make_model(4), sources(4)
    plain = beam_search(model, src, BOS, EOS, max_len=8, beam_size=4, length_penalty=0.0)
    normalised = beam_search(model, src, BOS, EOS, max_len=8, beam_size=4, length_penalty=1.0)

    def length(seq):
        return (seq[:, 0, 1:] != PAD).sum(-1).float().mean()

    assert length(normalised.sequences) >= length(plain.sequences)
    assert torch.all(normalised.scores[:, :-1] >= normalised.scores[:, 1:] - 1e-6)


@pytest.mark.parametrize("alpha", [0.6, 1.0])
def test_length_penalty_is_the_gnmt_formula(alpha):
    """score = summed log-probability / ((5 + |Y|) / 6) ** alpha, |Y| counting <eos>."""
    model, src = make_model(5), sources(5)
    out = beam_search(model, src, BOS, EOS, max_len=8, beam_size=3, length_penalty=alpha)
    for k in range(3):
        sequence = out.sequences[:, k]
        generated = (sequence[:, 1:] != PAD).sum(-1).float()
        expected = log_prob(model, src, sequence) / ((5.0 + generated) / 6.0) ** alpha
        torch.testing.assert_close(out.scores[:, k], expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("call, message", [
    (lambda m: greedy_decode(m, torch.randint(3, V, (7,)), BOS, EOS, 5), r"src: expected token ids of shape \(B, S\)"),
    (lambda m: greedy_decode(m, sources(0), BOS, EOS, 0), "max_len: expected a positive int, got 0"),
    (lambda m: beam_search(m, sources(0), BOS, EOS, 5, beam_size=0), "beam_size: expected a positive int, got 0"),
])
def test_bad_decoding_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call(make_model(0))


# --- sampling from a decoder-only model ----------------------------------------------------------

def make_lm(seed: int = 0) -> DecoderOnlyLM:
    torch.manual_seed(seed)
    return DecoderOnlyLM(TransformerConfig(vocab_size=V, d_model=32, n_heads=4, n_layers=2, d_ff=37, dropout=0.0,
                                           max_len=8, norm_first=True, pad_id=None)).eval()


def test_generate_is_reproducible_and_crops_the_context():
    lm, prompt = make_lm(), torch.randint(0, V, (3, 5))
    a = generate(lm, prompt, 12, generator=torch.Generator().manual_seed(1))
    b = generate(lm, prompt, 12, generator=torch.Generator().manual_seed(1))
    assert a.shape == (3, 17) and torch.equal(a, b) and torch.equal(a[:, :5], prompt)   # 17 > max_len = 8


def test_generate_at_temperature_zero_is_greedy():
    lm, prompt = make_lm(1), torch.randint(0, V, (2, 3))
    out = generate(lm, prompt, 4, temperature=0.0)
    for t in range(3, 7):
        with torch.no_grad():
            expected = lm(out[:, :t]).logits[:, -1].argmax(-1)
        assert torch.equal(out[:, t], expected)


def test_generate_top_1_is_greedy():
    lm, prompt = make_lm(2), torch.randint(0, V, (2, 3))
    assert torch.equal(generate(lm, prompt, 5, top_k=1, generator=torch.Generator().manual_seed(0)),
                       generate(lm, prompt, 5, temperature=0.0))


def test_generate_bad_arguments():
    lm = make_lm()
    with pytest.raises(ValueError, match=r"prompt: expected token ids of shape \(B, T0\)"):
        generate(lm, torch.zeros(2, 0, dtype=torch.long), 3)
    with pytest.raises(ValueError, match="temperature: expected a number >= 0, got -1"):
        generate(lm, torch.zeros(2, 1, dtype=torch.long), 3, temperature=-1)
