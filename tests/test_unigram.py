"""Hand-written tests for chapter 07's unigram tokenizer (tinybert.tokenizers.unigram,
unigram_lattice and unigram_training): encoding parity with Hugging Face `tokenizers`' Unigram model on
held-out and randomised text, Viterbi and forward-backward against brute force, training
properties, and errors on bad input."""
from __future__ import annotations

import json
import math
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

hf = pytest.importorskip("tokenizers")

from tinybert.corpus import load_gutenberg  # noqa: E402
from tinybert.data import DataUnavailableError, fetch  # noqa: E402
from tinybert.tokenizers.unigram import (  # noqa: E402
    SPACE, UNIGRAM_SPECIAL_TOKENS, UnigramTokenizer, metaspace_split, viterbi)
from tinybert.tokenizers.unigram_lattice import expected_counts, lattice  # noqa: E402
from tinybert.tokenizers.unigram_training import (  # noqa: E402
    em_step, prune, seed_pieces, train_unigram, train_unigram_tokenizer,
    unigram_word_counts)

TRAIN_BOOKS = (1342, 98)      # used to learn the vocabularies
HELD_OUT_BOOK = 2097          # never seen in training
ODD_TEXTS = ["", " ", "  ", "a  b", "  leading", "trailing  ", "Café Dupont", "東京は大きい",
             "naïve\tcoöperate\r\n", "a\x00b\ufffdc\u200bd", "x" * 150,
             "it's 2024: 3.14 $5",
             "🙂🙃 emoji 👩‍👩‍👧", "\u3000full\u2003width", f"{SPACE}marked{SPACE}{SPACE}x",
             "<unk> [CLS] [SEP] <pad> [MASK]", "ǂǂǂ ǂ ǂǂ", "ǂaǂ"]


@pytest.fixture(scope="module")
def train_text() -> list[str]:
    try:
        return [line for book in TRAIN_BOOKS
                for line in load_gutenberg(book).splitlines()]
    except DataUnavailableError as error:
        pytest.skip(f"the course data is not available (set TINYBERT_DATA_DIR): "
                    f"{error}")


@pytest.fixture(scope="module")
def held_out_texts() -> list[str]:
    try:
        ud = [line[len("# text = "):] for split in ("train", "dev", "test")
              for line in fetch(f"ud_ewt/{split}").read_text("utf-8").splitlines()
              if line.startswith("# text = ")]
        return load_gutenberg(HELD_OUT_BOOK).splitlines() + ud + ODD_TEXTS
    except DataUnavailableError as error:
        pytest.skip(f"the course data is not available (set TINYBERT_DATA_DIR): "
                    f"{error}")


@pytest.fixture(scope="module")
def ours_trained(train_text) -> UnigramTokenizer:
    """Our trainer, our vocabulary (a quick configuration)."""
    return train_unigram_tokenizer(train_text, 1000, min_count=2, seed_size=5000)


@pytest.fixture(scope="module")
def hf_trained(train_text, tmp_path_factory):
    """Hugging Face's trainer; its tokenizer.json loaded by our class and by theirs."""
    rust = hf.Tokenizer(hf.models.Unigram())
    rust.pre_tokenizer = hf.pre_tokenizers.Metaspace(prepend_scheme="always")
    rust.train_from_iterator(train_text, hf.trainers.UnigramTrainer(
        vocab_size=2000, special_tokens=list(UNIGRAM_SPECIAL_TOKENS), unk_token="<unk>",
        show_progress=False))
    path = tmp_path_factory.mktemp("unigram") / "tokenizer.json"
    rust.save(str(path))
    return UnigramTokenizer.from_file(path), hf.Tokenizer.from_file(str(path))


def _mismatches(ours, oracle, texts, **kwargs):
    bad = []
    for text, expected in zip(texts, oracle.encode_batch(texts, **kwargs)):
        got = ours.encode(text, **kwargs)
        if (got.ids != expected.ids or got.tokens != expected.tokens
                or got.offsets != [tuple(o) for o in expected.offsets]):
            bad.append((text, got.tokens, expected.tokens, got.offsets,
                        expected.offsets))
    return bad


def test_our_vocabulary_in_hugging_face_gives_our_ids(ours_trained, held_out_texts):
    """The decisive check: our trained pieces and scores in tokenizers' Unigram."""
    oracle = ours_trained.to_hugging_face()
    assert len(held_out_texts) > 20000
    for special in (False, True):
        bad = _mismatches(ours_trained, oracle, held_out_texts,
                          add_special_tokens=special)
        assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"
    unknown = sum(ours_trained.unk_id in enc.ids
                  for enc in ours_trained.encode_batch(held_out_texts))
    assert unknown > 0               # the held-out text exercises the unknown path too


def _path_score(tokenizer, tokens):
    return math.fsum(tokenizer.scores.get(token, tokenizer.unk_score) for token in tokens)


def test_hugging_face_vocabulary_in_ours_gives_their_ids(hf_trained, held_out_texts):
    ours, from_file = hf_trained
    texts = [text for text in held_out_texts
             if not any(special in text for special in UNIGRAM_SPECIAL_TOKENS)]
    # Their pieces and scores, handed to their Unigram model as Python floats: exact.
    oracle = hf.Tokenizer(hf.models.Unigram(ours.pieces, unk_id=ours.unk_id))
    oracle.pre_tokenizer = hf.pre_tokenizers.Metaspace(prepend_scheme="always")
    bad = _mismatches(ours, oracle, texts, add_special_tokens=False)
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"
    # Their own tokenizer.json reader parses scores without correct rounding (serde_json
    # can be one unit in the last place off), which can flip an exact tie between two
    # segmentations: any difference from it must be such a tie, and rare.
    bad = _mismatches(ours, from_file, texts, add_special_tokens=False)
    not_ties = [entry for entry in bad
                if not math.isclose(_path_score(ours, entry[1]),
                                    _path_score(ours, entry[2]), rel_tol=1e-12)]
    assert not not_ties, f"{len(not_ties)} mismatches, first: {not_ties[0]}"
    assert len(bad) <= len(texts) // 1000, f"{len(bad)} ties broken differently"
    # The trained tokenizer also registers the special tokens as added tokens, which are
    # cut out of the text before the model: compare the model alone on the rest.
    bad = _mismatches(ours, ours.to_hugging_face(), held_out_texts,
                      add_special_tokens=True)
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"


ALPHABET = ["a", "b", "c", "é", SPACE, " ", "  ", "東", "🙂", "\t", "<unk>", "ǂ"]


@st.composite
def vocabularies(draw):
    """Random pieces over a small alphabet, with scores that often tie."""
    pieces = draw(st.lists(st.text(alphabet="abcé東🙂" + SPACE, min_size=1, max_size=4),
                           min_size=1, max_size=25, unique=True))
    pieces = [p for p in pieces if p not in UNIGRAM_SPECIAL_TOKENS]
    scores = draw(st.lists(st.sampled_from([-1.0, -1.5, -2.0, -3.25, -7.0, -0.5]),
                           min_size=len(pieces), max_size=len(pieces)))
    all_five = [(token, 0.0) for token in UNIGRAM_SPECIAL_TOKENS]
    special = draw(st.sampled_from([[], [("<unk>", 0.0)], all_five]))
    vocab = special + list(zip(pieces, scores))
    if not special:
        vocab = [("<unk>", draw(st.sampled_from([0.0, -20.0])))] + vocab
    return vocab


def texts_of(alphabet, max_size):
    return st.lists(st.sampled_from(alphabet), max_size=max_size).map("".join)


@settings(max_examples=300, deadline=None)
@given(vocabularies(), st.lists(texts_of(ALPHABET, 12), min_size=1, max_size=5))
def test_random_vocabularies_and_texts_match_hugging_face(vocab, texts):
    unk_id = [p for p, _ in vocab].index("<unk>")
    ours = UnigramTokenizer(vocab, unk_id)
    oracle = hf.Tokenizer(hf.models.Unigram(vocab, unk_id=unk_id))
    oracle.pre_tokenizer = hf.pre_tokenizers.Metaspace(prepend_scheme="always")
    assert not _mismatches(ours, oracle, texts, add_special_tokens=False)
    assert ours.encode_batch(texts, backend="tokenizers") == ours.encode_batch(texts)


@settings(max_examples=200, deadline=None)
@given(texts_of(ALPHABET[:-1] + ["d", "e", ",", ".", "the", "The"], 30))
def test_decode_matches_hugging_face_and_round_trips(ours_trained, text):
    rust = ours_trained.to_hugging_face()
    enc = ours_trained.encode(text)
    assert ours_trained.decode(enc.ids) == rust.decode(enc.ids)
    if SPACE not in text and ours_trained.unk_id not in enc.ids:
        assert ours_trained.decode(enc.ids) == text.removeprefix(" ")
    assert all(0 <= a < b <= len(text) for a, b in enc.offsets)


def test_metaspace_split_matches_hugging_face():
    pre = hf.pre_tokenizers.Metaspace(prepend_scheme="always")
    for text in ODD_TEXTS[1:]:
        marked, source, spans = metaspace_split(text)
        expected = pre.pre_tokenize_str(text)
        assert [marked[a:b] for a, b in spans] == [w for w, _ in expected]
        offsets = [(source[a], source[b - 1] + 1) for a, b in spans]
        assert offsets == [o for _, o in expected]
    assert metaspace_split("") == ("", [], [])


def _segmentations(word, scores):
    if not word:
        yield []
    for end in range(1, len(word) + 1):
        if word[:end] in scores:
            for rest in _segmentations(word[end:], scores):
                yield [word[:end], *rest]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text("abc", min_size=2, max_size=4),
                       st.floats(-12, -0.1), max_size=12),
       st.dictionaries(st.sampled_from("abc"), st.floats(-12, -0.1), min_size=3),
       st.text("abc", min_size=1, max_size=10))
def test_viterbi_finds_the_most_probable_segmentation(longer, chars, word):
    scores = {**chars, **longer}
    best = max(sum(scores[x] for x in seg) for seg in _segmentations(word, scores))
    got = [word[a:b] for a, b in viterbi(word, scores, -math.inf, 4)]
    assert "".join(got) == word
    assert math.isclose(sum(scores[x] for x in got), best, rel_tol=1e-12, abs_tol=1e-12)


def test_viterbi_unknowns_and_ties():
    scores = {"a": -1.0, "b": -1.0, "ab": -2.0}
    assert viterbi("ab", scores, -20.0, 2) == [(0, 2)]  # a tie: the first path found
    assert viterbi("axb", scores, -20.0, 2) == [(0, 1), (1, 2), (2, 3)]
    tok = UnigramTokenizer([("<unk>", 0.0), ("▁", -1.0), ("a", -2.0)], 0)
    enc = tok.encode("axyza  zz")
    assert enc.tokens == ["▁", "a", "xyz", "a", "▁", "▁", "zz"]
    assert enc.ids == [1, 2, 0, 2, 1, 1, 0] and enc.offsets[2] == (1, 4)
    assert tok.encode("<unk>").ids == [1, 0]          # the text "<unk>" is the unknown
    # An unknown scores ten below the rarest piece; here that decides between two paths:
    # ▁ + ab + cd = -16 against ▁ + unknown a + bcd = -1 - 18 - 0.01.
    vocab = [("<unk>", 0.0), ("▁", -1.0), ("ab", -8.0), ("cd", -7.0), ("bcd", -0.01)]
    tok = UnigramTokenizer(vocab, 0)
    oracle = hf.Tokenizer(hf.models.Unigram(vocab, unk_id=0))
    oracle.pre_tokenizer = hf.pre_tokenizers.Metaspace(prepend_scheme="always")
    assert tok.encode("abcd").tokens == ["▁", "ab", "cd"]
    assert oracle.encode("abcd").tokens == ["▁", "ab", "cd"]
    assert tok.encode("abc").ids == [1, 2, 0] == oracle.encode("abc").ids


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text("ab", min_size=2, max_size=3), st.floats(-6, -0.5),
                       max_size=6),
       st.lists(st.text("ab", min_size=1, max_size=7), min_size=1, max_size=4),
       st.lists(st.integers(1, 5), min_size=4, max_size=4))
def test_forward_backward_equals_sums_over_all_segmentations(longer, words, counts):
    scores = {"a": -1.2, "b": -2.3, **longer}
    pieces = list(scores)
    ids = {p: k for k, p in enumerate(pieces)}
    lattices = [lattice(w, ids, 3) for w in words]
    expected, log_likelihood = expected_counts(
        lattices, [len(w) for w in words], counts[: len(words)], list(scores.values()))
    brute = [0.0] * len(pieces)
    brute_ll = 0.0
    for word, n in zip(words, counts):
        segs = list(_segmentations(word, scores))
        probs = [math.exp(sum(scores[x] for x in seg)) for seg in segs]
        brute_ll += n * math.log(sum(probs))
        for seg, prob in zip(segs, probs):
            for x in seg:
                brute[ids[x]] += n * prob / sum(probs)
    assert math.isclose(log_likelihood, brute_ll, rel_tol=1e-9, abs_tol=1e-9)
    assert all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
               for a, b in zip(expected, brute))


def test_em_raises_the_likelihood_of_a_fixed_vocabulary():
    counts = {"▁abab": 40, "▁ab": 30, "▁ba": 20, "▁aab": 10}
    log_p = {p: math.log(1 / 6) for p in ["▁", "a", "b", "ab", "▁ab", "ba"]}
    words, n = list(counts), list(counts.values())
    history = []
    for _ in range(5):
        log_p, expected, log_likelihood = em_step(words, n, log_p, {"▁", "a", "b"}, 3)
        history.append(log_likelihood)
    assert all(b >= a - 1e-12 for a, b in zip(history, history[1:]))
    assert history[-1] > history[0]
    assert math.isclose(sum(math.exp(s) for s in log_p.values()), 1.0)


def test_training_keeps_characters_specials_first_and_size(train_text, ours_trained):
    counts = unigram_word_counts(train_text)
    assert len(ours_trained) == 1000
    assert [p for p, _ in ours_trained.pieces[:5]] == list(UNIGRAM_SPECIAL_TOKENS)
    assert ours_trained.unk_id == 1
    assert all(score == 0.0 for _, score in ours_trained.pieces[:5])
    assert {c for w in counts for c in w} <= ours_trained.vocab.keys()
    scores = [s for _, s in ours_trained.pieces[5:]]
    assert scores == sorted(scores, reverse=True) and max(scores) < 0
    assert all(len(p) <= 16 for p in ours_trained.vocab)
    # Training is deterministic.
    again = train_unigram_tokenizer(train_text, 1000, min_count=2, seed_size=5000)
    assert again.pieces == ours_trained.pieces


def test_training_on_a_tiny_corpus():
    counts = {"▁hug": 10, "▁pug": 5, "▁pun": 12, "▁bun": 4, "▁hugs": 5}
    model = train_unigram(counts, 20, seed_size=100)
    pieces = [p for p, _ in model.pieces]
    # The EM keeps only the pieces it uses: fewer than asked for, on so small a corpus.
    assert 5 + 8 < len(pieces) < 20 and pieces[:5] == list(UNIGRAM_SPECIAL_TOKENS)
    assert set("▁hugpnbs") <= set(pieces)
    history = [ll for _, ll in model.history]
    assert history[1] > history[0]
    tok = UnigramTokenizer(model.pieces, model.unk_id)
    assert tok.decode(tok.encode("hugs pun").ids) == "hugs pun"


def test_seed_and_prune():
    seeds = seed_pieces({"▁abc": 3, "▁ab": 2, "▁c": 1}, seed_size=1, max_len=3)
    # characters always; then the substring with the highest count times length, "▁ab"
    # (5 x 3), with a probability proportional to that score: chars ▁ 6, a 5, b 5, c 4
    assert set(seeds) == {"▁", "a", "b", "c", "▁ab"}
    assert math.isclose(seeds["▁ab"], math.log(15 / 35))
    assert math.isclose(sum(math.exp(s) for s in seeds.values()), 1.0)
    log_p = {"a": -1.0, "b": -1.0, "ab": -1.5, "ba": -3.0, "aba": -1.0}
    counts = {"a": 1.0, "b": 1.0, "ab": 5.0, "ba": 5.0, "aba": 1.0}
    kept = prune(dict(log_p), counts, 4, {"a", "b"}, 3)
    # losses: ab 5 * (-1.5 + 2) = 2.5, ba 5 * (-3 + 2) = -5, aba 1 * (-1 + 2.5) = 1.5
    assert set(kept) == {"a", "b", "ab", "aba"}


def test_save_and_load(ours_trained, tmp_path, hf_trained):
    path = ours_trained.save(tmp_path / "unigram.json")
    assert UnigramTokenizer.from_file(path).pieces == ours_trained.pieces
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["type"] == "Unigram" and data["unk_id"] == 1
    full = json.loads(hf_trained[1].to_str())
    full["normalizer"] = {"type": "Lowercase"}
    (tmp_path / "lower.json").write_text(json.dumps(full), encoding="utf-8")
    with pytest.raises(ValueError, match="no normaliser"):
        UnigramTokenizer.from_file(tmp_path / "lower.json")


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="unk_id"):
        UnigramTokenizer([("a", -1.0)], unk_id=3)
    with pytest.raises(ValueError, match="distinct"):
        UnigramTokenizer([("<unk>", 0.0), ("a", -1.0), ("a", -2.0)], 0)
    with pytest.raises(ValueError, match="distinct"):
        UnigramTokenizer([("<unk>", 0.0), ("", -1.0)], 0)
    with pytest.raises(ValueError, match="finite"):
        UnigramTokenizer([("<unk>", 0.0), ("a", -math.inf)], 0)
    tok = UnigramTokenizer([("<unk>", 0.0), ("a", -1.0)], 0)
    with pytest.raises(ValueError, match="expects a str"):
        tok.encode(b"a")
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        tok.encode("a", add_special_tokens=True)
    with pytest.raises(ValueError, match="ids must be"):
        tok.decode([2])
    with pytest.raises(ValueError, match="no room"):
        train_unigram({"▁abcdef": 3}, 8)
    with pytest.raises(ValueError, match="unk_token"):
        train_unigram({"▁ab": 3}, 20, unk_token="[UNK]")
    with pytest.raises(ValueError, match="shrink"):
        train_unigram({"▁ab": 3}, 20, shrink=1.0)
    with pytest.raises(ValueError, match="non-empty strings"):
        train_unigram({"": 3}, 20)


def test_encode_batch_says_how_to_install_tokenizers(monkeypatch):
    tok = UnigramTokenizer([("<unk>", 0.0), ("▁", -1.0), ("a", -1.0)], 0)
    monkeypatch.setitem(sys.modules, "tokenizers", None)     # as if not installed
    assert tok.encode_batch(["a a"]) == [tok.encode("a a")]
    with pytest.raises(ImportError, match="pip install tokenizers"):
        tok.encode_batch(["a"], backend="tokenizers")


def test_viterbi_on_a_long_word():
    # 2**199 segmentations, far too many to list; the best uses the longest piece.
    scores = {"a" * k: -float(k) + 0.01 * k * k for k in range(1, 5)}
    spans = viterbi("a" * 200, scores, -math.inf, 4)
    assert spans == [(start, start + 4) for start in range(0, 200, 4)]
