"""RoBERTa (tinybert.models.roberta and tinybert.pretraining.roberta_data, generated from chapters/12_roberta.md).

Parity: Hugging Face models built from transformers.RobertaConfig with a tiny odd config (vocab 99,
hidden 32, 4 heads, 3 layers, intermediate 37), never downloaded, every parameter randomised.
"""
from __future__ import annotations

import random

import pytest
import torch

from tinybert.models.registry import load_model, save_model
from tinybert.blocks.feedforward import count_parameters
from tinybert.training.inputs import SpecialTokens
from tinybert.models.bert import BertConfig, BertModel
from tinybert.models.roberta import (ROBERTA_PRESETS, RobertaConfig, RobertaForMaskedLM, RobertaModel,
                                     roberta_position_ids)
from tinybert.pretraining.examples import PretrainingBatches
from tinybert.pretraining.roberta_data import (full_sentence_examples, mask_for_epoch,
                                               pack_full_sentences)
import helpers  # noqa: E402
from helpers import max_error, randomised  # noqa: E402

B, T, V, PAD = 13, 7, 99, 1


def hf_model(name: str, seed: int = 0, **overrides):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    kwargs = dict(vocab_size=V, hidden_size=32, num_attention_heads=4, num_hidden_layers=3, intermediate_size=37,
                  max_position_embeddings=T + 3, type_vocab_size=1, layer_norm_eps=1e-5)
    model = getattr(transformers, name)(transformers.RobertaConfig(**{**kwargs, **overrides}))
    return randomised(model, seed)


def padded_batch(seed: int = 1):
    return helpers.padded_batch(B, T, V, seed=seed, pad_id=PAD, first_id=3)


@pytest.mark.parametrize("fast", [True, False])
def test_roberta_model_parity(fast):
    from tinybert.models.convert import from_hf

    hf = hf_model("RobertaModel")
    converted = from_hf(hf)
    assert isinstance(converted, RobertaModel) and converted.pooler is not None
    ours = RobertaModel(RobertaConfig.from_dict({**converted.config.to_dict(), "fast": fast})).eval()
    ours.load_state_dict(converted.state_dict())
    ids, real, _ = padded_batch()
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=real.long(), output_hidden_states=True)
        mine = ours(ids, attention_mask=real, output_hidden_states=True)
    assert theirs.last_hidden_state.abs().max() > 0.1
    assert max_error(mine.last_hidden_state[real], theirs.last_hidden_state[real]) < 1e-5
    assert max_error(mine.pooler_output, theirs.pooler_output) < 1e-5
    for a, b in zip(mine.hidden_states, theirs.hidden_states, strict=True):
        assert max_error(a[real], b[real]) < 1e-5


def test_roberta_masked_lm_parity_and_loss():
    from tinybert.models.convert import from_hf

    hf = hf_model("RobertaForMaskedLM", seed=3)
    ours = from_hf(hf)
    assert isinstance(ours, RobertaForMaskedLM)
    assert ours.mlm_head.decoder.weight is ours.bert.embeddings.token_embeddings.weight
    ids, real, labels = padded_batch(2)
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=real.long(), labels=labels)
        mine = ours(ids, attention_mask=real)
        mine_loss = ours(ids, attention_mask=real, labels=labels).loss
    assert max_error(mine.logits[real], theirs.logits[real]) < 1e-5
    assert abs(mine_loss.item() - theirs.loss.item()) < 1e-5


@pytest.mark.parametrize("name", ["RobertaModel", "RobertaForMaskedLM"])
def test_round_trip_reproduces_every_tensor(name):
    from tinybert.models.convert import from_hf, to_hf

    hf = hf_model(name, seed=5)
    back = to_hf(from_hf(hf))
    assert type(back) is type(hf)
    a, b = hf.state_dict(), back.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    if name == "RobertaForMaskedLM":
        assert back.lm_head.decoder.weight is back.roberta.embeddings.word_embeddings.weight
    assert back.config.model_type == "roberta" and back.config.pad_token_id == PAD


def test_to_hf_of_our_model_matches():
    from tinybert.models.convert import to_hf

    torch.manual_seed(0)
    ours = RobertaForMaskedLM(RobertaConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, d_ff=37,
                                            max_len=T + 2)).eval()
    theirs = to_hf(ours).eval()
    ids, real, _ = padded_batch(4)
    with torch.no_grad():
        assert max_error(ours(ids, attention_mask=real).logits[real],
                         theirs(input_ids=ids, attention_mask=real.long()).logits[real]) < 1e-5


@pytest.mark.parametrize("preset", list(ROBERTA_PRESETS))
def test_preset_parameter_count_equals_hugging_face(preset):
    transformers = pytest.importorskip("transformers")
    config = RobertaConfig.preset(preset)
    released = dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, layer_norm_eps=1e-5,
                    pad_token_id=1)
    if preset == "roberta-large":
        released.update(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    with torch.device("meta"):
        ours = count_parameters(RobertaModel(config))
        theirs = count_parameters(transformers.RobertaModel(transformers.RobertaConfig(**released)))
        ours_mlm = count_parameters(RobertaForMaskedLM(config))
        theirs_mlm = count_parameters(transformers.RobertaForMaskedLM(transformers.RobertaConfig(**released)))
    assert ours == theirs and ours_mlm == theirs_mlm
    if preset == "roberta-base":
        assert ours == 124_645_632


def test_position_ids_skip_padding():
    ids = torch.tensor([[0, 7, 8, 2, 1, 1], [1, 1, 0, 7, 8, 2]])
    assert roberta_position_ids(ids, 1).tolist() == [[2, 3, 4, 5, 1, 1], [1, 1, 2, 3, 4, 5]]
    assert roberta_position_ids(torch.tensor([[5, 0, 0, 6]]), 0).tolist() == [[1, 0, 0, 2]]


def test_left_and_right_padding_give_the_same_vectors():
    torch.manual_seed(0)
    model = RobertaModel(RobertaConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=12)).eval()
    sequence = torch.randint(3, V, (5,))
    right = torch.cat([sequence, torch.full((3,), PAD)])
    left = torch.cat([torch.full((3,), PAD), sequence])
    ids = torch.stack([right, left])
    mask = ids != PAD
    with torch.no_grad():
        h = model(ids, attention_mask=mask).last_hidden_state
    assert max_error(h[0][mask[0]], h[1][mask[1]]) < 1e-5


def test_padding_row_of_the_position_table_is_zero_and_frozen():
    torch.manual_seed(0)
    model = RobertaForMaskedLM(RobertaConfig(vocab_size=V, d_model=32, n_layers=1, n_heads=4, d_ff=37, max_len=12))
    table = model.bert.embeddings.position_embeddings
    assert torch.equal(table.weight[PAD], torch.zeros(32))
    ids, real, labels = padded_batch(6)
    model(ids[:, :7], attention_mask=real, labels=labels).loss.backward()
    assert torch.equal(table.weight.grad[PAD], torch.zeros(32))
    assert table.weight.grad[2].abs().sum() > 0


def test_errors():
    with pytest.raises(ValueError, match="RobertaConfig"):
        RobertaModel(BertConfig(vocab_size=V, d_model=32, n_layers=1, n_heads=4, d_ff=37))
    with pytest.raises(ValueError, match="no position"):
        RobertaConfig(vocab_size=V, d_model=32, n_layers=1, n_heads=4, d_ff=37, max_len=2)
    with pytest.raises(ValueError, match="unknown RoBERTa preset"):
        RobertaConfig.preset("roberta-huge")
    model = RobertaModel(RobertaConfig(vocab_size=V, d_model=32, n_layers=1, n_heads=4, d_ff=37, max_len=9))
    with pytest.raises(ValueError, match="at most .* 7 tokens"):
        model(torch.randint(3, V, (2, 8)))
    model(torch.randint(3, V, (2, 7)))                                    # 7 fits: positions 2..8
    with pytest.raises(ValueError, match="token_type_ids"):
        model(torch.randint(3, V, (2, 5)), torch.ones(2, 5, dtype=torch.long))   # one segment only


def test_save_and_load(tmp_path):
    torch.manual_seed(0)
    model = RobertaForMaskedLM(RobertaConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=12))
    loaded = load_model(save_model(model, tmp_path / "roberta"))
    assert type(loaded) is RobertaForMaskedLM and loaded.config == model.config
    ids, real, _ = padded_batch(7)
    with torch.no_grad():
        assert torch.equal(loaded(ids, attention_mask=real).logits, model.eval()(ids, attention_mask=real).logits)
    assert loaded.mlm_head.decoder.weight is loaded.bert.embeddings.token_embeddings.weight


# --- FULL-SENTENCES packing ------------------------------------------------------------------------

def random_corpus(rng: random.Random, n_documents: int, max_sentence: int) -> list[list[list[int]]]:
    return [[[rng.randrange(10, 99) for _ in range(rng.randrange(0, max_sentence))]
             for _ in range(rng.randrange(0, 6))] for _ in range(n_documents)]


def test_pack_full_sentences_toy():
    toy = [[[11, 11, 11], [12, 12], [13, 13, 13, 13]], [[21, 21, 21, 21, 21]], [[31, 31], [32, 32, 32]]]
    assert pack_full_sentences(toy, 8, 0) == [[11, 11, 11, 12, 12], [13, 13, 13, 13, 0],
                                              [21, 21, 21, 21, 21, 0, 31, 31], [32, 32, 32]]
    assert pack_full_sentences([[[1] * 7]], 3, 0) == [[1, 1, 1], [1, 1, 1], [1]]       # long sentences are cut
    assert pack_full_sentences([[], [[]], [[5]]], 4, 0) == [[5]]                        # empty ones vanish


@pytest.mark.parametrize("seed", range(8))
def test_pack_full_sentences_properties(seed):
    rng = random.Random(seed)
    documents = random_corpus(rng, rng.randrange(1, 9), 13)
    max_tokens, sep = rng.randrange(2, 17), 0
    inputs = pack_full_sentences(documents, max_tokens, sep)
    assert all(1 <= len(x) <= max_tokens for x in inputs)
    assert all(x[0] != sep for x in inputs)                                             # never starts with one
    joined = [t for x in inputs for t in x]
    assert [t for t in joined if t != sep] == [t for d in documents for s in d for t in s]   # nothing lost
    crossings = sum(1 for x in inputs for t in x if t == sep)
    non_empty = [d for d in documents if any(d)]
    assert crossings <= max(0, len(non_empty) - 1)
    # greedy: an input (other than the last) ends only when the next sentence piece would not fit
    pieces = [s[i:i + max_tokens] for d in non_empty for s in d if s for i in range(0, len(s), max_tokens)]
    assert len(inputs) <= len(pieces)


def test_pack_full_sentences_rejects_bad_lengths():
    with pytest.raises(ValueError, match="max_tokens"):
        pack_full_sentences([[[1, 2]]], 1, 0)


def test_full_sentence_examples_feed_chapter_9_batches():
    special = SpecialTokens(pad=0, unk=1, cls=2, sep=3, mask=4, vocab_size=V)
    rng = random.Random(0)
    documents = random_corpus(rng, 20, 9)
    examples = full_sentence_examples(documents, special, max_len=16)
    assert all(e.input_ids[0] == special.cls and e.input_ids[-1] == special.sep and len(e.input_ids) <= 16
               for e in examples)
    assert all(set(e.token_type_ids) == {0} and e.pair_label == -100 for e in examples)
    batch = PretrainingBatches(examples, special, 4, seed=0)(0)
    assert batch["input_ids"].shape[0] == 4 and "pair_labels" not in batch   # no NSP loss, no NaN
    assert ((batch["mlm_labels"] != -100) <= batch["attention_mask"]).all()


# --- dynamic masking ---------------------------------------------------------------------------------

SPECIAL = SpecialTokens(pad=0, unk=1, cls=2, sep=3, mask=4, vocab_size=500)


def sequences(n: int = 64, length: int = 128) -> torch.Tensor:
    ids = torch.randint(5, 500, (n, length), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = SPECIAL.cls, SPECIAL.sep
    return ids


def test_dynamic_masking_draws_a_new_mask_every_epoch():
    ids = sequences(1)
    masks = [mask_for_epoch(ids, SPECIAL, seed=0, epoch=e, index=3)[1] for e in range(6)]
    assert len({tuple(m[0].tolist()) for m in masks}) == 6
    again = mask_for_epoch(ids, SPECIAL, seed=0, epoch=2, index=3)
    assert torch.equal(again[1], masks[2])                                             # a function of its arguments
    other = mask_for_epoch(ids, SPECIAL, seed=0, epoch=2, index=4)[1]
    assert not torch.equal(other, masks[2])                                            # sequences differ


@pytest.mark.parametrize("copies", [1, 4, 10])
def test_static_masking_cycles_through_its_copies(copies):
    ids = sequences(1)
    masks = [tuple(mask_for_epoch(ids, SPECIAL, seed=1, epoch=e, index=0, copies=copies)[1][0].tolist())
             for e in range(2 * copies + 1)]
    assert len(set(masks)) == copies
    assert all(masks[e] == masks[e + copies] for e in range(copies + 1))


def test_masking_rates():
    ids = sequences()
    corrupted, labels = mask_for_epoch(ids, SPECIAL, seed=2, epoch=7, index=0)
    chosen = labels != -100
    maskable = ~torch.isin(ids, torch.tensor(SPECIAL.ids))
    assert not chosen[~maskable].any()
    assert abs(chosen.sum() / maskable.sum() - 0.15) < 0.01
    as_mask = (corrupted[chosen] == SPECIAL.mask).float().mean()
    unchanged = (corrupted[chosen] == ids[chosen]).float().mean()
    random_ = 1 - as_mask - unchanged
    assert abs(as_mask - 0.8) < 0.02 and abs(unchanged - 0.1) < 0.02 and abs(random_ - 0.1) < 0.02
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(corrupted[~chosen], ids[~chosen])


def test_mask_for_epoch_errors():
    with pytest.raises(ValueError, match="copies"):
        mask_for_epoch(sequences(1), SPECIAL, seed=0, epoch=0, index=0, copies=0)
    with pytest.raises(ValueError, match="non-negative"):
        mask_for_epoch(sequences(1), SPECIAL, seed=0, epoch=-1, index=0)
