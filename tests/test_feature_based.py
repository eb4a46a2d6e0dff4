"""Feature-based BERT (chapter 11): frozen vectors per layer and the linear probe."""

from __future__ import annotations

import pytest
import torch

from tinybert.finetuning.feature_based import LinearProbe, labelled_vectors, train_probe
from tinybert.models.bert import BertConfig, BertModel
from tinybert.models.bert_heads import IGNORE_INDEX

pytestmark = pytest.mark.usefixtures("one_thread")


def tagged_features(n: int, generator: torch.Generator) -> list[dict]:
    """Random tagged features of 3 to 9 tokens, some positions unlabelled."""
    features = []
    for _ in range(n):
        length = int(torch.randint(3, 10, (), generator=generator))
        labels = torch.randint(0, 3, (length,), generator=generator)
        labels[torch.rand(length, generator=generator) < 0.4] = IGNORE_INDEX
        features.append(
            {
                "input_ids": torch.randint(
                    1, 50, (length,), generator=generator
                ).tolist(),
                "token_type_ids": [0] * length,
                "labels": labels.tolist(),
            }
        )
    return features


def test_labelled_vectors_are_each_layers_vectors_at_the_labelled_positions():
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50, d_model=16, n_layers=2, n_heads=2, d_ff=24, max_len=16
    )
    encoder = BertModel(config)
    features = tagged_features(7, torch.Generator().manual_seed(1))
    vectors, labels = labelled_vectors(encoder, features, pad_id=0, batch_size=3)
    expected_vectors, expected_labels = [], []
    for f in features:  # one sentence at a time, no padding
        ids = torch.tensor([f["input_ids"]])
        out = encoder(ids, output_hidden_states=True)
        keep = torch.tensor(f["labels"]) != IGNORE_INDEX
        expected_vectors.append(torch.stack(out.hidden_states)[:, 0, keep])
        expected_labels += [t for t in f["labels"] if t != IGNORE_INDEX]
    assert vectors.shape == (config.n_layers + 1, len(expected_labels), 16)
    assert labels.tolist() == expected_labels
    torch.testing.assert_close(vectors, torch.cat(expected_vectors, dim=1))


def test_probe_separates_separable_vectors_and_has_no_seed():
    g = torch.Generator().manual_seed(0)
    centres = 4 * torch.randn(3, 8, generator=g)
    y = torch.randint(0, 3, (300,), generator=g)
    x = centres[y] + torch.randn(300, 8, generator=g)
    first = train_probe(x, y, 3)
    torch.manual_seed(123)  # the global stream does not matter: a convex fit, no start
    second = train_probe(x, y, 3)
    assert isinstance(first, LinearProbe) and not first.training
    with torch.no_grad():
        assert (first(x).argmax(-1) == y).float().mean() > 0.98
        torch.testing.assert_close(first(x), second(x))


def test_probe_penalty_shrinks_the_weights():
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(200, 5, generator=g), torch.randint(0, 2, (200,), generator=g)
    loose, tight = train_probe(x, y, 2, l2=1e-4), train_probe(x, y, 2, l2=1.0)
    assert tight.linear.weight.norm() < 0.5 * loose.linear.weight.norm()


@pytest.mark.parametrize(
    "x, y",
    [
        (torch.zeros(4, 3), torch.zeros(5, dtype=torch.long)),
        (torch.zeros(4), torch.zeros(4, dtype=torch.long)),
    ],
)
def test_probe_rejects_mismatched_inputs(x, y):
    with pytest.raises(ValueError, match=r"expected \(N, D\) vectors and N labels"):
        train_probe(x, y, 2)
