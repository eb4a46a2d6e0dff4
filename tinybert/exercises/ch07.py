"""Hand-written (not generated): the checks for chapter 07's exercises (tokenization).

Each ``check_*`` function calls the student's code on several inputs, including edge cases,
raises ``AssertionError`` saying what was expected and what came back, and prints a line
starting with ✓ when everything passes.
"""
from __future__ import annotations

from collections import Counter

from tinybert.tokenizers.bpe import merge_pair
from tinybert.tokenizers.wordpiece import WordPieceTokenizer

__all__ = ["check_bpe_merge_step", "check_greedy_wordpiece"]


# --- ex-tok-merge-step ----------------------------------------------------------------------------

def _reference_merge_step(words: dict[tuple[str, ...], int]):
    pairs: Counter[tuple[str, str]] = Counter()
    for symbols, n in words.items():
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += n
    if not pairs:
        return None, dict(words)
    best = max(pairs, key=pairs.get)          # Counter keeps first-seen order: ties -> first seen
    return best, {tuple(merge_pair(list(s), best)): n for s, n in words.items()}


def check_bpe_merge_step(bpe_merge_step) -> None:
    """Check ``bpe_merge_step(words) -> (pair, new_words)`` for ``words = {symbols: count}``."""
    cases = [
        ("the slides' word", {tuple("aaabdaaabac"): 1}),
        ("the slides' corpus", {tuple("text_"): 9, tuple("texting_"): 10, tuple("context_"): 11}),
        ("overlapping pairs", {tuple("aaaa"): 3, tuple("ab"): 5}),
        ("already merged symbols", {("th", "e", "_"): 7, ("th", "is", "_"): 2, ("e", "_"): 4}),
        ("a tie (the first pair seen wins)", {tuple("xy"): 2, tuple("ab"): 2}),
        ("single-symbol words only", {("a",): 3, ("bc",): 1}),
    ]
    for description, words in cases:
        expected_pair, expected_words = _reference_merge_step(words)
        got = bpe_merge_step(dict(words))
        assert isinstance(got, tuple) and len(got) == 2, (
            f"bpe_merge_step on {description}: expected a tuple (pair, new_words), got {got!r}")
        pair, new_words = got
        assert pair == expected_pair, (
            f"bpe_merge_step on {description}: expected the pair {expected_pair}, got {pair}")
        assert new_words == expected_words, (
            f"bpe_merge_step on {description}: expected the words\n  {expected_words}\n"
            f"got\n  {new_words}")
    print("✓ bpe_merge_step picks the most frequent pair and merges it everywhere, left to right")


# --- ex-tok-greedy --------------------------------------------------------------------------------

def check_greedy_wordpiece(greedy_wordpiece) -> None:
    """Check ``greedy_wordpiece(word, vocab) -> list of pieces`` against WordPieceTokenizer."""
    vocab_list = ["[UNK]", "un", "una", "##ff", "##able", "##a", "##ble", "aff", "##ord", "s",
                  "##i", "##n", "sin", "##an", "a", "##aa", "##aaa", "x"]
    vocab = {t: i for i, t in enumerate(vocab_list)}
    reference = WordPieceTokenizer(vocab, lowercase=False)
    words = ["unaffable", "unaffordable", "sinan", "sins", "a", "aaaaaaa", "unaffx", "x", "xa",
             "q", "s" + "i" * 20, "una" * 40]
    for word in words:
        pieces = reference.split_word(word)
        expected = ["[UNK]"] if pieces is None else [p for p, _, _ in pieces]
        got = greedy_wordpiece(word, set(vocab))
        assert list(got) == expected, (
            f"greedy_wordpiece({word!r}): expected {expected}, got {got}")
    print("✓ greedy_wordpiece matches longest-match-first, with [UNK] for words it cannot cover "
          "and for words longer than 100 characters")
