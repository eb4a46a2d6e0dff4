"""Unit tests for tinybert.models.attention_analysis (generated from chapters/08_bert.md): word-level
attention, Clark et al.'s head predictions, the fixed-offset baseline and the half split, on
hand-built attention matrices and trees whose answers are known."""
from __future__ import annotations

import pytest
import torch

from tinybert.models.attention_analysis import (DependencyTree, best_on_one_half,
                                                count_correct, encode_words,
                                                head_predictions, offset_predictions,
                                                read_dependency_trees, syntax_counts,
                                                word_attention)
from tinybert.models.bert import BertConfig, BertModel
from tinybert.tokenizers.wordpiece import WordPieceTokenizer

# "the cat sat": the -det-> cat -nsubj-> sat (root)
TREE = DependencyTree(["the", "cat", "sat"], heads=[1, 2, -1], relations=["det", "nsubj", "root"])


def test_word_attention_sums_pieces_received_and_averages_pieces_given():
    # tokens: [CLS] a b1 b2 c [SEP] -> words a, b, c
    word_ids = [None, 0, 1, 1, 2, None]
    A = torch.tensor([[0.5, 0.1, 0.1, 0.1, 0.1, 0.1],
                      [0.2, 0.1, 0.3, 0.1, 0.2, 0.1],     # a
                      [0.0, 0.4, 0.2, 0.2, 0.2, 0.0],     # b1
                      [0.1, 0.2, 0.0, 0.4, 0.1, 0.2],     # b2
                      [0.3, 0.0, 0.1, 0.1, 0.5, 0.0],     # c
                      [0.1, 0.1, 0.1, 0.1, 0.1, 0.5]])
    expected = torch.tensor([[0.1, 0.3 + 0.1, 0.2],                               # from a
                             [(0.4 + 0.2) / 2, (0.2 + 0.2 + 0.0 + 0.4) / 2, (0.2 + 0.1) / 2],
                             [0.0, 0.1 + 0.1, 0.5]])                              # from c
    assert torch.allclose(word_attention(A, word_ids), expected)
    batched = torch.stack([A, A.flip(-1)])[None]                 # (1, 2, T, T): leading axes
    out = word_attention(batched, word_ids)
    assert out.shape == (1, 2, 3, 3) and torch.allclose(out[0, 0], expected)


def test_word_attention_rows_sum_to_one_without_special_tokens():
    g = torch.Generator().manual_seed(0)
    word_ids = [0, 0, 1, 2, 2, 2, 3]
    A = torch.rand(4, 7, 7, generator=g).softmax(dim=-1)
    W = word_attention(A, word_ids)
    assert W.shape == (4, 4, 4)
    assert torch.allclose(W.sum(dim=-1), torch.ones(4, 4), atol=1e-6)
    assert torch.allclose(word_attention(A, list(range(7))), A)  # one piece per word: unchanged


@pytest.mark.parametrize("word_ids, message", [([None, 0, 2, None], "0 ... W-1"),
                                               ([0, 1], "one entry per token")])
def test_word_attention_rejects_bad_word_ids(word_ids, message):
    with pytest.raises(ValueError, match=message):
        word_attention(torch.rand(4, 4), word_ids)


def test_head_predictions_in_both_directions_never_self():
    maps = torch.tensor([[0.9, 0.8, 0.1],     # the: itself most, then cat
                         [0.1, 0.2, 0.6],     # cat -> sat
                         [0.0, 0.7, 0.3]])    # sat -> cat
    to_head, from_head = head_predictions(maps)
    assert to_head.tolist() == [1, 2, 1]
    # who attends most to each word, itself aside: cat -> the, the -> cat (0.8 > 0.7), cat -> sat
    assert from_head.tolist() == [1, 0, 1]
    assert [head_predictions(maps.T)[1].tolist()] == [to_head.tolist()]   # transposing swaps
    assert head_predictions(torch.ones(1, 1))[0].tolist() == [0]         # one word: itself


def test_count_correct_per_relation():
    predicted = torch.tensor([[1, 2, 0],       # the -> cat ✓, cat -> sat ✓
                              [2, 0, 1]])      # both wrong
    right, total = count_correct(predicted, TREE, ["det", "nsubj", "obj"])
    assert right.tolist() == [[1, 1, 0], [0, 0, 0]] and total.tolist() == [1, 1, 0]


def test_offset_predictions_and_the_baseline():
    guesses = offset_predictions(3, [-1, 1, 2])
    assert guesses.tolist() == [[-2, 0, 1], [1, 2, -2], [2, -2, -2]]
    right, _ = count_correct(guesses, TREE, ["det", "nsubj", "root"])
    assert right.tolist() == [[0, 0, 0], [1, 1, 0], [0, 0, 0]]   # +1 finds both; root never


def test_best_on_one_half_chooses_on_one_half_and_reports_the_other():
    # 4 sentences, 2 predictors, 1 relation with 10 words per sentence
    correct = torch.tensor([[[9], [5]], [[8], [6]], [[1], [7]], [[2], [9]]])   # (N, C, R)
    total = torch.full((4, 1), 10)
    choose = torch.tensor([True, True, False, False])
    best, accuracy = best_on_one_half(correct, total, choose)
    assert best.tolist() == [0] and accuracy.tolist() == [pytest.approx(0.15)]
    best, accuracy = best_on_one_half(correct, total, ~choose)
    assert best.tolist() == [1] and accuracy.tolist() == [pytest.approx(0.55)]


def test_read_dependency_trees_skips_multiword_tokens_and_empty_nodes(tmp_path):
    lines = ["# sent_id = 1", "# text = I don't know.",
             "1\tI\tI\tPRON\t_\t_\t4\tnsubj\t_\t_",
             "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_",
             "2\tdo\tdo\tAUX\t_\t_\t4\taux\t_\t_",
             "3\tn't\tnot\tPART\t_\t_\t4\tadvmod\t_\t_",
             "4\tknow\tknow\tVERB\t_\t_\t0\troot\t_\t_",
             "4.1\tit\t_\t_\t_\t_\t_\t_\t4:obj\t_",
             "5\t.\t.\tPUNCT\t_\t_\t4\tpunct\t_\t_", "",
             "1\tYes\tyes\tINTJ\t_\t_\t0\troot\t_\t_"]        # no blank line at the end
    path = tmp_path / "tiny.conllu"
    path.write_text("\n".join(lines), encoding="utf-8")
    trees = read_dependency_trees(path)
    assert trees[0] == DependencyTree(["I", "do", "n't", "know", "."], [3, 3, 3, -1, 3],
                                      ["nsubj", "aux", "advmod", "root", "punct"])
    assert trees[1] == DependencyTree(["Yes"], [-1], ["root"])
    assert read_dependency_trees(path, limit=1) == trees[:1]
    path.write_text("1\tI\tI\tPRON\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1"):
        read_dependency_trees(path)


def tiny_tokenizer() -> WordPieceTokenizer:
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "s", "##at"]
    return WordPieceTokenizer({t: i for i, t in enumerate(tokens)})


def test_encode_words_marks_pieces_and_specials():
    ids, word_ids = encode_words(tiny_tokenizer(), ["the", "sat", "Sat", "\u200b"])
    assert ids == [2, 5, 7, 7, 1, 3]            # lowercased; a word with no piece is [UNK]
    assert word_ids == [None, 0, 1, 2, 3, None]
    ids, word_ids = encode_words(tiny_tokenizer(), ["cat", "sxat"])
    assert word_ids == [None, 0, 1, None]       # an unknown word is one [UNK] piece


def test_syntax_counts_shapes_and_agreement_with_one_sentence_at_a_time():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=10, d_model=16, n_layers=2, n_heads=4, d_ff=24, max_len=16)
    model = BertModel(config).eval()
    trees = [TREE, DependencyTree(["cat", "sat"], [1, -1], ["nsubj", "root"]),
             DependencyTree(["the", "the", "cat", "sat"], [2, 2, 3, -1],
                            ["det", "det", "nsubj", "root"])]
    correct, total = syntax_counts(model, tiny_tokenizer(), trees, ["det", "nsubj"], batch_size=2)
    assert correct.shape == (3, 2, 2, 4, 2) and total.tolist() == [[1, 1], [0, 1], [2, 1]]
    assert ((correct <= total[:, None, None, None, :]) & (correct >= 0)).all()
    alone = torch.cat([syntax_counts(model, tiny_tokenizer(), [t], ["det", "nsubj"])[0]
                       for t in trees])
    assert torch.equal(correct, alone)          # padding in a batch changes nothing
