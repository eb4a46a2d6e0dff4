"""Hand-written tests for tinybert.tokenizers (chapter 07): parity with Hugging Face `tokenizers`,
round-trip properties, and errors on bad input."""
from __future__ import annotations

import json
import random
import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

hf = pytest.importorskip("tokenizers")

from tinybert.corpus import load_gutenberg
from tinybert.data import DataUnavailableError, fetch
from tinybert.tokenizers.byte_level import ByteLevelBPETokenizer
from tinybert.tokenizers.normalizers import bert_normalize, bert_pre_tokenize
from tinybert.tokenizers.wordpiece import SPECIAL_TOKENS, WordPieceTokenizer

TRAIN_BOOKS = (1342, 98)      # used to learn the vocabularies
HELD_OUT_BOOK = 2097          # never seen in training
ODD_TEXTS = ["", " ", "Café Dupont", "CAFÉ   déjà-vu!!", "東京は大きい", "naïve\tcoöperate\r\n", "a\rb\x0bc\x1fd\x85e",
             "a\x00b\ufffdc\u200bd", "İstanbul ΣΟΦΊΑ", "x" * 150, "it's 2024: 3.14 $5 <a|b>~",
             "🙂🙃 emoji 👩‍👩‍👧", "\u3000full\u2003width", "ﬁne ﬂow"]


def ud_sentences() -> list[str]:
    texts = []
    for split in ("train", "dev", "test"):
        for line in fetch(f"ud_ewt/{split}").read_text(encoding="utf-8").splitlines():
            if line.startswith("# text = "):
                texts.append(line[len("# text = "):])
    return texts


@pytest.fixture(scope="module")
def held_out_texts() -> list[str]:
    try:
        lines = load_gutenberg(HELD_OUT_BOOK).splitlines()
        return lines + ud_sentences() + ODD_TEXTS
    except DataUnavailableError as error:  # offline with no data folder: say so, don't error
        pytest.skip(f"the course data is not available (set TINYBERT_DATA_DIR): {error}")


@pytest.fixture(scope="module")
def train_text() -> list[str]:
    try:
        return [line for book in TRAIN_BOOKS for line in load_gutenberg(book).splitlines()]
    except DataUnavailableError as error:
        pytest.skip(f"the course data is not available (set TINYBERT_DATA_DIR): {error}")


@pytest.fixture(scope="module", params=[(True, None), (False, None), (True, False)],
                ids=["uncased", "cased", "lower-keep-accents"])
def wordpiece_pair(request, tmp_path_factory, train_text):
    lowercase, strip_accents = request.param
    oracle = hf.BertWordPieceTokenizer(lowercase=lowercase, strip_accents=strip_accents,
                                       clean_text=True, handle_chinese_chars=True)
    oracle.train_from_iterator(train_text, vocab_size=3000, min_frequency=2, show_progress=False)
    directory = tmp_path_factory.mktemp("wordpiece")
    oracle.save_model(str(directory))
    vocab_file = directory / "vocab.txt"
    ours = WordPieceTokenizer.from_file(vocab_file, lowercase=lowercase, strip_accents=strip_accents)
    oracle = hf.BertWordPieceTokenizer(str(vocab_file), lowercase=lowercase,
                                       strip_accents=strip_accents, clean_text=True,
                                       handle_chinese_chars=True)
    return ours, oracle


@pytest.fixture(scope="module")
def byte_level_pair(tmp_path_factory, train_text):
    oracle = hf.ByteLevelBPETokenizer()
    oracle.train_from_iterator(train_text, vocab_size=2000, min_frequency=2, show_progress=False)
    directory = tmp_path_factory.mktemp("bytelevel")
    vocab_json, merges_txt = oracle.save_model(str(directory))
    ours = ByteLevelBPETokenizer.from_files(vocab_json, merges_txt)
    oracle = hf.ByteLevelBPETokenizer(vocab_json, merges_txt)
    return ours, oracle, directory


def _mismatches(ours, oracle, texts, offsets=True, **kwargs):
    bad = []
    batch = oracle.encode_batch(texts, **kwargs)
    for text, expected in zip(texts, batch):
        got = ours.encode(text, **kwargs)
        if got.ids != expected.ids or (offsets and got.offsets != [tuple(o) for o in expected.offsets]):
            bad.append((text, got.tokens, expected.tokens, got.offsets, expected.offsets))
    return bad


def test_wordpiece_parity_with_hugging_face(wordpiece_pair, held_out_texts):
    ours, oracle = wordpiece_pair
    bad = _mismatches(ours, oracle, held_out_texts, add_special_tokens=False)
    print(f"WordPiece parity: {len(held_out_texts)} lines compared, {len(bad)} mismatches")
    assert len(held_out_texts) > 20000
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"


def test_wordpiece_special_tokens_match_hugging_face(wordpiece_pair, held_out_texts):
    ours, oracle = wordpiece_pair
    texts = held_out_texts[:500] + ODD_TEXTS
    bad = _mismatches(ours, oracle, texts, add_special_tokens=True)
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"


def test_wordpiece_keeps_special_tokens_written_in_the_text(wordpiece_pair, held_out_texts):
    """M8: "[MASK]" in the text is one token, as in Hugging Face; "[mask]" is text."""
    ours, oracle = wordpiece_pair
    rng = random.Random(0)
    written = ["[MASK]", "[SEP]", "[CLS]", "[PAD]", "[UNK]", "[mask]", "[MASK", "MASK]"]
    texts = ["a[SEP]b", "[CLS][CLS]", "Ü[MASK]é", "[MASK]s", " [UNK] ", "[MASK]"]
    for text in held_out_texts[:400]:
        cut = rng.randrange(len(text) + 1)
        texts.append(text[:cut] + rng.choice(written) + text[cut:])
    bad = _mismatches(ours, oracle, texts, add_special_tokens=False)
    bad += _mismatches(ours, oracle, texts[:50], add_special_tokens=True)
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"
    assert ours.encode("the [MASK] sat").tokens == ["the", "[MASK]", "sat"]


def test_byte_level_parity_with_hugging_face(byte_level_pair, held_out_texts):
    ours, oracle, _ = byte_level_pair
    bad = _mismatches(ours, oracle, held_out_texts)
    print(f"byte-level BPE parity: {len(held_out_texts)} lines compared, {len(bad)} mismatches")
    assert len(held_out_texts) > 20000
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"


def test_byte_level_save_round_trips_files(byte_level_pair, tmp_path):
    ours, _, directory = byte_level_pair
    vocab_json, merges_txt = ours.save(tmp_path)
    assert json.loads(vocab_json.read_text()) == json.loads((directory / "vocab.json").read_text())
    assert merges_txt.read_text().split("\n")[1:] == \
        (directory / "merges.txt").read_text().split("\n")[1:]


def test_wordpiece_save_round_trips_file(wordpiece_pair, tmp_path):
    ours, _ = wordpiece_pair
    path = ours.save(tmp_path / "vocab.txt")
    again = WordPieceTokenizer.from_file(path, lowercase=ours.lowercase,
                                         strip_accents=ours.strip_accents)
    assert again.vocab == ours.vocab


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60)
       | st.sampled_from(["", "🙂👩‍👩‍👧", "東京", "e\u0301\u0302", "\x00\x01\x7f\n\r\t", " \u3000 "]))
def test_byte_level_decode_encode_round_trip(byte_level_tokenizer, text):
    enc = byte_level_tokenizer.encode(text)
    assert byte_level_tokenizer.decode(enc.ids) == text
    assert all(0 <= a < b <= len(text) for a, b in enc.offsets)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_wordpiece_ids_in_vocab_and_offsets_index_text(wordpiece_tokenizer, text):
    enc = wordpiece_tokenizer.encode(text)
    assert all(0 <= i < len(wordpiece_tokenizer) for i in enc.ids)
    assert all(0 <= a < b <= len(text) for a, b in enc.offsets)
    for token, (a, b) in zip(enc.tokens, enc.offsets):
        if token in SPECIAL_TOKENS and token != "[UNK]":  # kept whole, as written
            assert text[a:b] == token, (text, token, (a, b))
        elif token != "[UNK]":   # the piece is the normalised text of its span
            normalized, _ = bert_normalize(text[a:b], strip_accents=True, lowercase=True)
            assert normalized.strip() == token.removeprefix("##"), (text, token, (a, b))


def test_wordpiece_keeps_a_special_token_in_the_text_whole(wordpiece_tokenizer):
    """Hypothesis found it: "[CLS]" typed in the text is the special token, not
    "[cls]" (as Hugging Face's tokenizer does)."""
    enc = wordpiece_tokenizer.encode("a [CLS] b")
    assert "[CLS]" in enc.tokens and "[cls]" not in enc.tokens


@pytest.fixture(scope="module")
def byte_level_tokenizer(byte_level_pair):
    return byte_level_pair[0]


@pytest.fixture(scope="module")
def wordpiece_tokenizer(tmp_path_factory, train_text):
    oracle = hf.BertWordPieceTokenizer(lowercase=True)
    oracle.train_from_iterator(train_text[:3000], vocab_size=500, show_progress=False)
    directory = tmp_path_factory.mktemp("wp-small")
    oracle.save_model(str(directory))
    return WordPieceTokenizer.from_file(directory / "vocab.txt")


def test_wordpiece_greedy_longest_match_first():
    vocab = {t: i for i, t in enumerate(["[UNK]", "un", "una", "##ff", "##able", "##a", "##ble",
                                         "aff", "##ord"])}
    tok = WordPieceTokenizer(vocab)
    assert tok.encode("unaffable").tokens == ["una", "##ff", "##able"]
    assert tok.encode("Unaffordable").tokens == ["una", "##ff", "##ord", "##able"]
    assert tok.encode("unaffx!").tokens == ["[UNK]", "[UNK]"]   # no piece covers x; "!" unknown
    enc = tok.encode("  una  ")
    assert enc.offsets == [(2, 5)]
    assert tok.encode("u" * 101).tokens == ["[UNK]"]


def test_vocab_without_unk_is_rejected(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\nthe\n##s\n")
    with pytest.raises(ValueError, match=r"\[UNK\]"):
        WordPieceTokenizer.from_file(path)


def test_merges_not_matching_vocab_are_rejected(tmp_path):
    vocab = {"a": 0, "b": 1, "ab": 2}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\nab c\n")
    with pytest.raises(ValueError, match="merge 1"):
        ByteLevelBPETokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b c\n")
    with pytest.raises(ValueError, match="two tokens"):
        ByteLevelBPETokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt")


@pytest.mark.parametrize("bad", [None, 3, b"bytes", ["a list"]])
def test_non_string_input_is_rejected(bad, wordpiece_tokenizer, byte_level_tokenizer):
    for tok in (wordpiece_tokenizer, byte_level_tokenizer):
        with pytest.raises(ValueError, match="expects a str"):
            tok.encode(bad)
    with pytest.raises(ValueError, match="ids must be"):
        byte_level_tokenizer.decode([len(byte_level_tokenizer) + 5])


# ---- training from scratch (chapter 07, sections on BPE and WordPiece training) ----

from tinybert.tokenizers.bpe import (  # noqa: E402
    encode_and_show_work, merge_pair, train_bpe, train_bpe_simple)
from tinybert.tokenizers.byte_level import train_byte_level_bpe  # noqa: E402
from tinybert.tokenizers.wordpiece_training import (  # noqa: E402
    bert_word_counts, train_wordpiece, train_wordpiece_simple, train_wordpiece_tokenizer,
    wordpiece_merge_scores)

BPE_TRAINERS = pytest.mark.parametrize("trainer", [train_bpe_simple, train_bpe])


@BPE_TRAINERS
def test_bpe_reproduces_the_slides(trainer, capsys):
    model = trainer({"aaabdaaabac": 1}, num_merges=3)
    assert model.merges == [("a", "a"), ("a", "b"), ("aa", "ab")]
    names = {"aa": "Z", "ab": "Y", "aaab": "X"}
    final = encode_and_show_work("aaabdaaabac", model.merges, names)
    shown = [line.split(":")[1].split()[0] for line in capsys.readouterr().out.splitlines()]
    assert shown == ["aaabdaaabac", "ZabdZabac", "ZYdZYac", "XdXac"]
    assert final == ["aaab", "d", "aaab", "a", "c"]

    learned = ["".join(p) for p in trainer({"text_": 9, "texting_": 10, "context_": 11}, 50).merges]
    assert learned[0] == "te"
    assert learned.index("text_") < learned.index("con") < learned.index("texting_")
    assert learned[-1] in {"texting_", "context_"} and len(learned) == len(set(learned))


@BPE_TRAINERS
def test_bpe_counts_and_stops(trainer):
    assert merge_pair(list("aaaa"), ("a", "a")) == ["aa", "aa"]
    assert merge_pair(list("aaa"), ("a", "a")) == ["aa", "a"]
    model = trainer({"ab": 1, "cd": 5}, num_merges=10, min_count=2)
    assert model.merges == [("c", "d")]
    assert list(model.vocab) == ["a", "b", "c", "d", "cd"]
    assert trainer({"abc": 3}, 0).merges == []
    assert trainer({"abc": 0}, 5).merges == []  # a word seen 0 times adds no pair
    assert list(trainer({"ba": 2}, 1, alphabet=["c", "a"]).vocab) == ["c", "a", "b", "ba"]
    with pytest.raises(ValueError, match="num_merges"):
        trainer({"abc": 3}, -1)
    with pytest.raises(ValueError, match="min_count"):
        trainer({"abc": 3}, 2, min_count=0)
    with pytest.raises(ValueError, match="non-empty strings"):
        trainer({"": 3}, 2)


# Small alphabets and counts make ties common; words of one character, words of one
# repeated character ("aaaa", where merges overlap), counts of 0, min_count above 1, an
# alphabet given ahead and more merges than the words allow are all drawn.
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(alphabet="abcd", min_size=1, max_size=9),
                       st.integers(0, 6), min_size=1, max_size=12),
       st.integers(0, 40), st.integers(1, 4), st.lists(st.sampled_from("dcbax"), max_size=3))
def test_fast_bpe_equals_simple_bpe(word_counts, num_merges, min_count, alphabet):
    simple = train_bpe_simple(word_counts, num_merges, min_count=min_count, alphabet=alphabet)
    fast = train_bpe(word_counts, num_merges, min_count=min_count, alphabet=alphabet)
    assert fast.merges == simple.merges
    assert list(fast.vocab.items()) == list(simple.vocab.items())


def test_our_trained_tokenizers_load_in_hugging_face(train_text, held_out_texts, tmp_path):
    bl = train_byte_level_bpe(train_text[:4000], vocab_size=700)
    assert len(bl) == 700
    rust = hf.ByteLevelBPETokenizer(*[str(p) for p in bl.save(tmp_path)])
    texts = held_out_texts[:3000] + ODD_TEXTS
    assert not _mismatches(bl, rust, texts)
    assert not _mismatches(bl, bl.to_hugging_face(), texts)

    wp = train_wordpiece_tokenizer(train_text[:300], vocab_size=250)
    assert "[UNK]" in wp.vocab and len(wp) == 250
    wp.save(tmp_path / "vocab.txt")
    rust = hf.BertWordPieceTokenizer(str(tmp_path / "vocab.txt"), lowercase=True)
    assert not _mismatches(wp, rust, texts, add_special_tokens=False)
    assert not _mismatches(wp, wp.to_hugging_face(), texts, add_special_tokens=True)


def test_wordpiece_score_prefers_pairs_that_stick_together():
    words, counts = [["a", "##b"], ["a", "##c"], ["x", "##y"]], [10, 10, 2]
    scores = wordpiece_merge_scores(words, counts)
    assert scores[("a", "##b")] == pytest.approx(10 / (20 * 10))
    assert scores[("x", "##y")] == pytest.approx(2 / (2 * 2))
    vocab = train_wordpiece({"ab": 10, "ac": 10, "xy": 2}, vocab_size=11)
    assert list(vocab)[5:] == ["a", "##b", "##c", "x", "##y", "xy"]


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(alphabet="abcd#", min_size=1, max_size=9),
                       st.integers(1, 20), min_size=1, max_size=12),
       st.integers(5, 40), st.integers(1, 3))
def test_fast_wordpiece_equals_simple(word_counts, vocab_size, min_count):
    fast = train_wordpiece(word_counts, vocab_size, min_count=min_count)
    simple = train_wordpiece_simple(word_counts, vocab_size, min_count=min_count)
    assert list(fast.items()) == list(simple.items())


def test_fast_wordpiece_equals_simple_on_real_text(train_text):
    counts = bert_word_counts(train_text[:600])
    fast = train_wordpiece(counts, 700, min_count=2)
    assert len(fast) == 700
    assert list(fast.items()) == list(train_wordpiece_simple(counts, 700, min_count=2).items())


def test_a_smaller_vocabulary_is_a_prefix_of_a_larger_one(train_text):
    counts = bert_word_counts(train_text[:1500])
    big = train_wordpiece(counts, 1500, min_count=2)
    assert list(train_wordpiece(counts, 900, min_count=2).items()) == list(big.items())[:900]
    bl_big = train_byte_level_bpe(train_text[:1500], 900)
    bl_small = train_byte_level_bpe(train_text[:1500], 500)
    assert bl_small.merges == bl_big.merges[:244]
    assert list(bl_small.vocab.items()) == list(bl_big.vocab.items())[:500]


def test_wordpiece_training_rejects_bad_input():
    with pytest.raises(ValueError, match="min_count"):
        train_wordpiece({"ab": 2}, 10, min_count=0)
    with pytest.raises(ValueError, match="non-empty strings"):
        train_wordpiece_simple({"": 2}, 10)
    with pytest.raises(ValueError, match="counts >= 0"):
        train_wordpiece({"ab": -1}, 10)


def _bert_word_counts_directly(texts):
    """Reference: normalise and pre-tokenise each whole text."""
    counts = Counter()
    for text in texts:
        normalized, _ = bert_normalize(text, strip_accents=True, lowercase=True)
        counts.update(normalized[a:b] for a, b in bert_pre_tokenize(normalized))
    return counts


def test_word_counts_by_chunk_equal_counting_whole_texts(train_text):
    texts = train_text[:3000] + ODD_TEXTS + ["a\x1fb c", "x\u3000y 東京 東京", "  é  É "]
    assert list(bert_word_counts(texts).items()) == list(_bert_word_counts_directly(texts).items())


def test_merge_pair_into():
    assert merge_pair(["t", "##h", "##e"], ("t", "##h"), "th") == ["th", "##e"]
    assert merge_pair(list("abab"), ("a", "b")) == ["ab", "ab"]


# ---- encode_batch: the Python code or the Rust `tokenizers` backend ----

def test_encode_batch_backends_agree(wordpiece_pair, byte_level_pair, held_out_texts):
    texts = held_out_texts[:3000] + ODD_TEXTS
    wp, bl = wordpiece_pair[0], byte_level_pair[0]
    for special in (False, True):
        ours = wp.encode_batch(texts, add_special_tokens=special)
        assert ours == [wp.encode(t, add_special_tokens=special) for t in texts]
        assert wp.encode_batch(texts, add_special_tokens=special, backend="tokenizers") == ours
    ours = bl.encode_batch(texts)
    assert ours == [bl.encode(t) for t in texts]
    assert bl.encode_batch(texts, backend="tokenizers") == ours
    assert wp.encode_batch([]) == [] and bl.encode_batch([], backend="tokenizers") == []


def test_batch_encode_backends_agree_on_the_default_special_tokens(wordpiece_pair):
    """Called directly, batch_encode's backends agree without add_special_tokens: the Rust
    tokenizer's own default adds [CLS] and [SEP], ours does not."""
    from tinybert.tokenizers.encoding import batch_encode
    wp = wordpiece_pair[0]
    texts = ["the cat sat", "a dog"]
    python = batch_encode(wp, texts)
    assert python == batch_encode(wp, texts, backend="tokenizers")
    assert all("[CLS]" not in e.tokens for e in python)
    assert batch_encode(wp, texts, add_special_tokens=True) == batch_encode(
        wp, texts, backend="tokenizers", add_special_tokens=True)


def test_encode_batch_backends_agree_with_a_short_word_limit():
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##a",
                                         "b", "##b", "ab"])}
    tok = WordPieceTokenizer(vocab, max_input_chars_per_word=3)
    texts = ["aaaa ab", "abb b", "aaa", "AB ba bab baba"]
    ours = tok.encode_batch(texts, add_special_tokens=True)
    assert ours[0].tokens == ["[CLS]", "[UNK]", "ab", "[SEP]"]
    assert tok.encode_batch(texts, add_special_tokens=True, backend="tokenizers") == ours


def test_encode_batch_rejects_bad_input(wordpiece_tokenizer, byte_level_tokenizer):
    for tok in (wordpiece_tokenizer, byte_level_tokenizer):
        with pytest.raises(ValueError, match="backend must be one of"):
            tok.encode_batch(["a"], backend="rust")
        with pytest.raises(ValueError, match="list of str, got str"):
            tok.encode_batch("a text", backend="tokenizers")
        with pytest.raises(ValueError, match="item of type int"):
            tok.encode_batch(["a", 3], backend="tokenizers")


def test_encode_batch_says_how_to_install_tokenizers(monkeypatch, wordpiece_tokenizer,
                                                     byte_level_tokenizer):
    monkeypatch.setitem(sys.modules, "tokenizers", None)     # as if it were not installed
    for tok in (wordpiece_tokenizer, byte_level_tokenizer):
        assert tok.encode_batch(["still works"]) == [tok.encode("still works")]
        with pytest.raises(ImportError, match="pip install tokenizers"):
            tok.encode_batch(["a"], backend="tokenizers")


def test_wordpiece_by_count_learns_what_hugging_face_learns(train_text, held_out_texts):
    """score="count" merges as Hugging Face's WordPiece trainer does: (nearly) the same
    entries, and the same cost in tokens per held-out word."""
    texts = train_text[:3000]
    ours = train_wordpiece_tokenizer(texts, 1200, min_count=2, score="count")
    oracle = hf.BertWordPieceTokenizer(lowercase=True)
    oracle.train_from_iterator(texts, vocab_size=1200, min_frequency=2,
                               show_progress=False)
    theirs = WordPieceTokenizer(oracle.get_vocab())
    assert len(set(ours.vocab) & set(theirs.vocab)) >= 0.98 * len(theirs)
    n_words = sum(len(t.split()) for t in held_out_texts)
    cost = {name: sum(len(tok.encode(t).ids) for t in held_out_texts) / n_words
            for name, tok in [("ours", ours), ("theirs", theirs)]}
    assert cost["ours"] == pytest.approx(cost["theirs"], rel=0.01)
    likelihood = train_wordpiece_tokenizer(texts, 1200, min_count=2)
    worse = sum(len(likelihood.encode(t).ids) for t in held_out_texts) / n_words
    assert worse > 1.2 * cost["ours"]      # the ratio score splits frequent words


def test_wordpiece_score_is_checked():
    with pytest.raises(ValueError, match="'likelihood' or 'count', got 'frequency'"):
        train_wordpiece({"ab": 2}, 10, score="frequency")


# --- clumsy and hostile input (issue 16, item 7) ---

def _three_tokenizers():
    from tinybert.tokenizers.unigram import UnigramTokenizer

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    wordpiece = WordPieceTokenizer({t: i for i, t in
                                    enumerate(specials + ["a", "##b"])})
    byte_level = train_byte_level_bpe(["ab ab ab"], 258)
    pieces = [("<pad>", 0.0), ("<unk>", 0.0), ("▁a", -1.0), ("b", -2.0)]
    unigram = UnigramTokenizer(pieces + [(c, -5.0) for c in "a▁"])
    return {"wordpiece": wordpiece, "byte-level": byte_level, "unigram": unigram}


@pytest.mark.parametrize("backend", ["python", "tokenizers"])
@pytest.mark.parametrize("kind", ["wordpiece", "byte-level", "unigram"])
@pytest.mark.parametrize("text, index", [("a\ud800b", 1), ("\udcff", 0),
                                         ("ab \udfff", 3)])
def test_a_lone_surrogate_is_the_same_clear_error_everywhere(kind, backend, text,
                                                             index):
    """One documented behaviour: a lone surrogate is not a character, so every
    tokenizer, on both backends, refuses it with one message (not [UNK], not a codec
    error)."""
    tokenizer = _three_tokenizers()[kind]
    message = (f"lone surrogate {text[index]!r} at index {index}: not a character, "
               "it has no UTF-8 bytes")
    with pytest.raises(ValueError) as caught:
        tokenizer.encode_batch(["ab", text], backend=backend)
    assert message in str(caught.value)
    if backend == "python":
        with pytest.raises(ValueError, match="lone surrogate"):
            tokenizer.encode(text)
    assert tokenizer.encode_batch(["ab é"], backend=backend)     # real text is fine


@pytest.mark.parametrize("content, message", [
    (b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n\nthe\n", "vocab.txt:5: the line is blank"),
    (b"[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\nof\nthe\n",
     "vocab.txt:7: the line repeats line 5, 'the'"),
    (b"[PAD]\n[UNK]\n[CLS]\n[SEP]\ncaf\xe9\n",
     "vocab.txt:5: not UTF-8 \\(byte 0xe9\\)"),
    (b"[PAD]\n[UNK]\nthe\n[MASK]\n",
     "vocab.txt: the vocabulary lacks \\[CLS\\], \\[SEP\\]"),
    (b"[PAD]\n[CLS]\n[SEP]\n", "lacks \\[UNK\\]"),
], ids=["blank", "repeat", "latin-1", "no-cls-sep", "no-unk"])
def test_a_broken_vocabulary_file_is_refused_naming_the_line(tmp_path, content,
                                                             message):
    path = tmp_path / "vocab.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        WordPieceTokenizer.from_file(path)


@pytest.mark.parametrize("vocab, merges, message", [
    (b'{"a": 0, "b": 1, "ab": 2}', b"#version: 0.2\na b\n\n", "merges.txt:3: .*got ''"),
    (b'{"a": 0, "b": 1, "ab": 2}', b"#version: 0.2\na b\na b\n",
     "merges.txt:3: .*a repeat of line 2"),
    (b'{"a": 0, "b": 1, "ab": 2}', b"#version: 0.2\n\xff\xfe\n",
     "merges.txt:2: not UTF-8 \\(byte 0xff\\)"),
    (b'{"a": 0, "b": 1, "a": 2}', b"",
     "vocab.json: token 'a' \\(id 2\\) repeats the token"),
    (b'{"a": 0, "b": 0}', b"",
     "vocab.json: token 'b' \\(id 0\\) repeats the id of 'a'"),
    (b'{"a": 0,\n "\xe9": 1}', b"", "vocab.json:2: not UTF-8"),
    (b'{"a": 0,\n "b": }', b"", "vocab.json:2: not JSON"),
], ids=["blank", "repeat", "latin-1", "token-twice", "id-twice", "latin-1-json",
        "json"])
def test_broken_byte_level_files_are_refused_naming_the_line(tmp_path, vocab, merges,
                                                             message):
    (tmp_path / "vocab.json").write_bytes(vocab)
    (tmp_path / "merges.txt").write_bytes(merges)
    with pytest.raises(ValueError, match=message):
        ByteLevelBPETokenizer.from_files(tmp_path / "vocab.json",
                                         tmp_path / "merges.txt")


def test_a_unigram_file_that_is_not_utf8_is_refused(tmp_path):
    from tinybert.tokenizers.unigram import UnigramTokenizer

    path = tmp_path / "unigram.json"
    path.write_bytes(b'{"type": "Unigram",\n "unk_id": 1, "vocab": [["\xe9", 0.0]]}')
    with pytest.raises(ValueError, match="unigram.json:2: not UTF-8"):
        UnigramTokenizer.from_file(path)
