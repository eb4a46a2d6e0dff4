"""What students hand the tokenizers, and what they get back (reliability probe:
wordpiece.*, vocab.utf8-bom, wordpiece-train.*, bbpe.save-into-new-folder)."""
import numpy as np
import pytest
import torch

from tinybert.tokenizers.byte_level import train_byte_level_bpe
from tinybert.tokenizers.wordpiece import WordPieceTokenizer
from tinybert.tokenizers.wordpiece_training import train_wordpiece_tokenizer

VOCAB = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "the": 5, "cat": 6}


@pytest.mark.parametrize("ids", [
    torch.tensor([5, 6]), list(torch.tensor([5, 6])), np.array([5, 6]), [5, 6],
], ids=["tensor", "list-of-0d-tensors", "array", "list"])
def test_decode_takes_ids_as_students_compute_them(ids):
    assert WordPieceTokenizer(VOCAB).decode(ids) == "the cat"


def test_decode_names_what_is_wrong():
    tokenizer = WordPieceTokenizer(VOCAB)
    with pytest.raises(ValueError, match=r"ids must be in 0\.\.6, got \[99\]"):
        tokenizer.decode(torch.tensor([5, 99]))
    with pytest.raises(ValueError, match="whole numbers"):
        tokenizer.decode([5.5])


def test_special_tokens_need_cls_and_sep_in_the_vocabulary():
    tokenizer = WordPieceTokenizer({"[PAD]": 0, "[UNK]": 1, "the": 2})
    assert tokenizer.encode("the").tokens == ["the"]
    with pytest.raises(ValueError, match=r"needs \[CLS\] and \[SEP\]"):
        tokenizer.encode("the", add_special_tokens=True)


def test_a_vocabulary_file_with_a_byte_order_mark_loads_whole(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes("\n".join(VOCAB).encode("utf-8-sig") + b"\n")
    assert WordPieceTokenizer.from_file(path).vocab == VOCAB


def test_training_on_no_words_or_too_small_a_vocabulary_is_refused():
    with pytest.raises(ValueError, match="no word"):
        train_wordpiece_tokenizer([], 100)
    with pytest.raises(ValueError, match="vocab_size"):
        train_wordpiece_tokenizer(["the cat sat"], 3)


def test_byte_level_save_makes_its_folder(tmp_path):
    tokenizer = train_byte_level_bpe(["the cat sat on the mat"] * 3, vocab_size=270)
    vocab_json, merges_txt = tokenizer.save(tmp_path / "new" / "folder")
    assert vocab_json.is_file() and merges_txt.is_file()


def test_max_input_chars_per_word_of_zero_is_refused():
    with pytest.raises(ValueError, match="max_input_chars_per_word"):
        WordPieceTokenizer(VOCAB, max_input_chars_per_word=0)
