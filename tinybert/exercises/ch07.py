"""Hand-written (not generated): the checks for chapter 07's exercises (tokenization).

Each ``check_*`` function calls the student's code on several inputs, including edge
cases, raises ``AssertionError`` saying what was expected and what came back, and prints
a line starting with ✓ when everything passes.
"""

from __future__ import annotations

import math
import random
from collections import Counter

from tinybert.exercises._assertions import answers_required
from tinybert.tokenizers.bpe import merge_pair
from tinybert.tokenizers.unigram import viterbi
from tinybert.tokenizers.wordpiece import WordPieceTokenizer

__all__ = ["check_bpe_merge_step", "check_greedy_wordpiece", "check_viterbi_segment"]


# --- ex-tok-merge-step ----------------------------------------------------------------


def _reference_merge_step(words: dict[tuple[str, ...], int]):
    pairs: Counter[tuple[str, str]] = Counter()
    for symbols, n in words.items():
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += n
    if not pairs:
        return None, dict(words)
    # Counter keeps first-seen order: ties -> first seen
    best = max(pairs, key=pairs.get)
    return best, {tuple(merge_pair(list(s), best)): n for s, n in words.items()}


@answers_required
def check_bpe_merge_step(bpe_merge_step) -> None:
    """Check ``bpe_merge_step(words) -> (pair, new_words)`` for
    ``words = {symbols: count}``."""
    cases = [
        ("the slides' word", {tuple("aaabdaaabac"): 1}),
        (
            "the slides' corpus",
            {tuple("text_"): 9, tuple("texting_"): 10, tuple("context_"): 11},
        ),
        ("overlapping pairs", {tuple("aaaa"): 3, tuple("ab"): 5}),
        (
            "already merged symbols",
            {("th", "e", "_"): 7, ("th", "is", "_"): 2, ("e", "_"): 4},
        ),
        ("a tie (the first pair seen wins)", {tuple("xy"): 2, tuple("ab"): 2}),
        ("single-symbol words only", {("a",): 3, ("bc",): 1}),
    ]
    for description, words in cases:
        expected_pair, expected_words = _reference_merge_step(words)
        got = bpe_merge_step(dict(words))
        assert isinstance(got, tuple) and len(got) == 2, (
            f"bpe_merge_step on {description}: expected a tuple (pair, "
            f"new_words), got {got!r}"
        )
        pair, new_words = got
        assert pair == expected_pair, (
            f"bpe_merge_step on {description}: expected the pair "
            f"{expected_pair}, got {pair}"
        )
        assert new_words == expected_words, (
            f"bpe_merge_step on {description}: expected the words\n  {expected_words}\n"
            f"got\n  {new_words}"
        )
    print(
        "✓ bpe_merge_step picks the most frequent pair and merges it everywhere, "
        "left to right"
    )


# --- ex-tok-greedy --------------------------------------------------------------------


@answers_required
def check_greedy_wordpiece(greedy_wordpiece) -> None:
    """Check ``greedy_wordpiece(word, vocab) -> list of pieces`` against
    WordPieceTokenizer."""
    vocab_list = [
        "[UNK]",
        "un",
        "una",
        "##ff",
        "##able",
        "##a",
        "##ble",
        "aff",
        "##ord",
        "s",
        "##i",
        "##n",
        "sin",
        "##an",
        "a",
        "##aa",
        "##aaa",
        "x",
    ]
    vocab = {t: i for i, t in enumerate(vocab_list)}
    reference = WordPieceTokenizer(vocab, lowercase=False)
    words = [
        "unaffable",
        "unaffordable",
        "sinan",
        "sins",
        "a",
        "aaaaaaa",
        "unaffx",
        "x",
        "xa",
        "q",
        "s" + "i" * 20,
        "una" * 40,
    ]
    for word in words:
        pieces = reference.split_word(word)
        expected = ["[UNK]"] if pieces is None else [p for p, _, _ in pieces]
        got = greedy_wordpiece(word, set(vocab))
        assert list(got) == expected, (
            f"greedy_wordpiece({word!r}): expected {expected}, got {got}"
        )
    print(
        "✓ greedy_wordpiece matches longest-match-first, with [UNK] for words it "
        "cannot cover and for words longer than 100 characters"
    )


# --- ex-tok-viterbi ---------------------------------------------------------------


def _viterbi_cases() -> list[tuple[str, str, dict[str, float]]]:
    toy = {
        "▁": 0.10,
        "t": 0.04,
        "o": 0.05,
        "k": 0.02,
        "e": 0.08,
        "n": 0.05,
        "s": 0.06,
        "▁to": 0.04,
        "▁tok": 0.006,
        "en": 0.03,
        "ens": 0.015,
        "ken": 0.006,
        "▁token": 0.001,
    }
    toy_log = {piece: math.log(p) for piece, p in toy.items()}
    cases = [
        ("the chapter's toy model", "▁tokens", toy_log),
        ("one character", "k", toy_log),
        ("no piece longer than a character fits", "▁sent", toy_log | {"s": -3.0}),
        ("an empty word", "", toy_log),
        (
            "the best path is not the one with the best first piece",
            "abcd",
            {"a": -1.0, "b": -1.0, "c": -1.0, "d": -1.0, "abc": -1.5, "bcd": -1.2},
        ),
    ]
    rng = random.Random(7)
    for k in range(6):  # random models over a small alphabet
        pieces = {c: -rng.uniform(2, 6) for c in "abc"}
        for _ in range(12):
            piece = "".join(rng.choice("abc") for _ in range(rng.randint(2, 5)))
            pieces[piece] = -rng.uniform(1, 9)
        word = "".join(rng.choice("abc") for _ in range(rng.randint(8, 20)))
        cases.append((f"random model {k}", word, pieces))
    return cases


@answers_required
def check_viterbi_segment(viterbi_segment) -> None:
    """Check ``viterbi_segment(word, log_probs) -> pieces``: a segmentation of ``word``
    into pieces of ``log_probs`` whose total log-probability is the highest possible."""
    for description, word, log_probs in _viterbi_cases():
        max_len = max(map(len, log_probs))
        expected = [word[a:b] for a, b in viterbi(word, log_probs, -math.inf, max_len)]
        best = sum(log_probs[piece] for piece in expected)
        got = viterbi_segment(word, dict(log_probs))
        assert isinstance(got, list), (
            f"viterbi_segment({word!r}) on {description}: expected a list of pieces, "
            f"got {got!r}"
        )
        assert "".join(got) == word and all(piece in log_probs for piece in got), (
            f"viterbi_segment({word!r}) on {description}: expected pieces of the model "
            f"that spell the word, got {got}"
        )
        total = sum(log_probs[piece] for piece in got)
        assert math.isclose(total, best, rel_tol=1e-9, abs_tol=1e-9), (
            f"viterbi_segment({word!r}) on {description}: expected a segmentation of "
            f"log-probability {best:.4f}, such as {expected}, got {got} ({total:.4f})"
        )
    print(
        "✓ viterbi_segment finds the most probable segmentation, toy and random "
        "models alike"
    )
