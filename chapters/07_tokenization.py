# ---
# jupyter:
#   jupytext:
#     default_lexer: ipython3
#     formats: md:myst,py:percent
#     notebook_metadata_filter: tinybert
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
#   tinybert:
#     module: tokenizers.bpe
# ---

# %% [markdown]
# (sec-tok)=
# # Tokenization
#
# A Transformer never sees letters or words: it sees integers, one per *token*, and the
# embedding table turns each integer into a vector. Which pieces of text become tokens is decided
# before any training, by a tokenizer, and every later chapter depends on that choice. BERT reads
# WordPiece ids, RoBERTa byte-level BPE ids and ALBERT the ids of a unigram language model
# (SentencePiece). This chapter builds all three from scratch and checks, line by line on real
# text, that they give exactly the ids and character offsets that the Hugging Face `tokenizers`
# library gives for the same vocabularies.
#
# **What you will learn**
#
# - why models read *subwords* rather than words or characters: the size of a word vocabulary,
#   the words it has never seen, and the related forms (play, played, playing) it cannot relate;
# - how byte-pair encoding and WordPiece learn a vocabulary, on the worked examples of
#   {ref}`Magnusson's lecture slides <sources-decks>` (Uppsala University, 2024) and on real text, and
#   why their two scores choose different merges;
# - how BERT normalises text (control characters, Chinese characters, lower-casing, accents),
#   splits it into words and punctuation, and cuts each word into WordPiece tokens by greedy
#   longest-match-first with `##` continuations and `[UNK]`;
# - how GPT-2 and RoBERTa map every byte to a printable character, split text with a regular
#   expression, and apply BPE merges by rank, so that any text encodes and decodes losslessly;
# - how the unigram language model of SentencePiece and ALBERT scores every segmentation of a
#   word, finds the most probable one with the Viterbi algorithm, and learns its vocabulary
#   downwards, from a large seed, by EM and pruning;
# - how every token keeps the character offsets of the text it came from, which question
#   answering and token classification need later, and where the special tokens `[CLS]`, `[SEP]`,
#   `[PAD]` and `[MASK]` go;
# - how the vocabulary size trades the number of tokens per word against the size of the table.
#
# **Uses**: from {doc}`02_word_vectors`, the Gutenberg reader `load_gutenberg` for training and
# test text, and the word splitter `words` and the word-level `Vocabulary` (all in
# `tinybert.corpus`) to measure what word-level vocabularies get wrong; from
# {doc}`01_feedforward`, the argument check `check_positive_int` (`tinybert.blocks.checks`);
# and `fetch` from `tinybert.data`.
#
# (sec-tok-setup)=
# ## Setup
#
# Tokenizers are plain Python: no tensors in this chapter. The package `tinybert.tokenizers`
# gets one module per idea, and the text comes from the course's data: WikiText-2 and Project
# Gutenberg novels.

# %%
import time

from tinybert.corpus import load_gutenberg
from tinybert.runtime import is_quick, pick

# %% [markdown]
# (sec-tok-why)=
# ## Why subwords
#
# The obvious unit is the word: give every word of the training text a row of the embedding table.
# Three things go wrong {cite}`sennrich2016bpe`. The vocabulary is large, because a language has
# many words and most of them are rare. Any text still contains words the vocabulary has never seen
# (names, technical terms, spelling variants), and they all become one "unknown" token. And
# related forms such as "play", "played" and "playing" get unrelated rows, each learned only from
# its own, often few, occurrences. We measure all three on the text that the tokenizers of this
# chapter learn from, using the word splitter `words` and the `Vocabulary` of
# {doc}`02_word_vectors`, and on a book that is not part of it, *The Sign of the Four*.

# %%
from collections import Counter

from tinybert.corpus import Vocabulary, words
from tinybert.data import fetch

corpus_lines = [
    line
    for split in ("valid", "test")
    for line in fetch(f"wikitext2/{split}").read_text(encoding="utf-8").splitlines()
]
corpus_lines += [
    line for b in (1342, 98, 1400, 76) for line in load_gutenberg(b).splitlines()
]
corpus_lines = corpus_lines[: pick(quick=3000, full=None)]  # about 5 MB in full mode
test_lines = load_gutenberg(2097).splitlines()[: pick(quick=1000, full=None)]

train_words = words("\n".join(corpus_lines))
test_words = words("\n".join(test_lines))
# most frequent first; id 0 is <unk>
word_vocab = Vocabulary.from_words(train_words)
once = sum(n == 1 for n in word_vocab.counts[1:])
print(
    f"training text: {len(train_words):,} words, {len(word_vocab) - 1:,} different, "
    f"{once:,} ({once / (len(word_vocab) - 1):.0%}) of them seen only once"
)
for size in [1000, 8000, len(word_vocab) - 1]:
    known = set(word_vocab.itos[1 : size + 1])
    unknown = [w for w in test_words if w not in known]
    print(
        f"word vocabulary of {size:>6,}: {len(unknown) / len(test_words):6.2%} of "
        f"the {len(test_words):,} held-out words unknown"
    )
never_seen = list(dict.fromkeys(w for w in test_words if w not in word_vocab))
print(
    f"{len(never_seen):,} held-out words never seen in training, e.g.",
    ", ".join(never_seen[:5]),
)
family = Counter(w for w in train_words if w.startswith("play"))
print("play- words, one unrelated entry each:", dict(family.most_common(6)))
assert 0 < once < len(word_vocab) and len(never_seen) > 0

# %% [markdown]
# Even a vocabulary holding every word of the training text leaves some of the held-out words
# unknown, and a large share of its entries were seen only once. Characters would solve both
# problems (a few hundred of them cover any English text), but then every word is many tokens
# long, and the model must learn spelling before meaning. *Subword* tokenizers take the middle
# road: frequent words stay whole, rare words are cut into frequent pieces ("play" + "##ing"), and
# the pieces that remain are single characters or bytes, so no word is ever out of the vocabulary.
# {ref}`sec-tok-fertility` measures the price: a few more tokens per word.
#
# (sec-tok-encoding)=
# ## What an encoding holds
#
# An encoding is three parallel lists: the token ids the model reads, the token strings (for
# people), and for each token the half-open range `(start, end)` of characters in the *original*
# text it came from. The offsets survive lower-casing, accent stripping and byte splitting, so a
# model's answer "tokens 7 to 9" can always be turned back into a span of the user's text.

# %% tags=["export:tokenizers.encoding"]
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


# %% tags=["export:tokenizers.encoding"]
@dataclass
class Encoding:
    """The result of encoding one text: ids, token strings, and character offsets.

    ``offsets[i] = (start, end)`` means token ``i`` came from ``text[start:end]`` of the
    original text (special tokens added by the tokenizer get ``(0, 0)``).
    """

    ids: list[int] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    offsets: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not len(self.ids) == len(self.tokens) == len(self.offsets):
            raise ValueError(
                f"ids, tokens and offsets must have the same length, got "
                f"{len(self.ids)}, {len(self.tokens)} and "
                f"{len(self.offsets)}"
            )

    def __len__(self) -> int:
        return len(self.ids)


# %% [markdown]
# Every tokenizer here also encodes many texts at once, `tok.encode_batch(texts)`, either with
# its own Python code (`backend="python"`, the default) or by handing the batch to the equivalent
# tokenizer of Hugging Face's `tokenizers` library, written in Rust (`backend="tokenizers"`). The
# results are the same `Encoding` objects, as {ref}`sec-tok-parity` checks. The function below does the work for both kinds of tokenizer. The WordPiece and
# unigram tokenizers, whose `encode` can add `[CLS]` and `[SEP]`, get their `encode_batch` method
# from the small mixin class after it, together with the check that `decode` makes of its ids
# (an id without a token is an error, not skipped); the byte-level tokenizer, which adds no
# special tokens, calls the function itself.

# %% tags=["export:tokenizers.encoding"]
BACKENDS = ("python", "tokenizers")


def batch_encode(
    tokenizer, texts: list[str], backend: str = "python", **kwargs
) -> list[Encoding]:
    """``tokenizer.encode(text, **kwargs)`` for each text, or the same from the Rust
    tokenizer that ``tokenizer.to_hugging_face()`` builds (``backend="tokenizers"``)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if not isinstance(texts, (list, tuple)):
        raise ValueError(
            f"encode_batch expects a list of str, got {type(texts).__name__}"
        )
    for text in texts:
        if not isinstance(text, str):
            raise ValueError(
                f"encode_batch expects a list of str, got an item of type "
                f"{type(text).__name__}"
            )
        check_text(text)  # the Rust backend's own error is cryptic
    if backend == "python":
        return [tokenizer.encode(text, **kwargs) for text in texts]
    rust = tokenizer.to_hugging_face()
    # Rust adds [CLS] and [SEP] unless told not to; our encode adds them when told to
    kwargs = {"add_special_tokens": False, **kwargs}
    return [
        Encoding(list(e.ids), list(e.tokens), [tuple(o) for o in e.offsets])
        for e in rust.encode_batch(list(texts), **kwargs)
    ]


class TokenizerMixin:
    """What the WordPiece and unigram tokenizers share, built on their ``vocab``,
    ``id_to_token``, ``encode(text, add_special_tokens)`` and ``to_hugging_face()``."""

    def encode_batch(
        self,
        texts: list[str],
        add_special_tokens: bool = False,
        *,
        backend: str = "python",
    ) -> list[Encoding]:
        """``encode`` each text; ``backend="tokenizers"`` gives the same from Rust
        (``benchmarks/bench_tokenizers.py`` compares their speed)."""
        return batch_encode(self, texts, backend, add_special_tokens=add_special_tokens)

    def check_ids(self, ids) -> list[int]:
        """``ids`` as a list of ints (a tensor or array of ids is fine), or a
        ValueError unless every id is in the vocabulary (before decoding)."""
        ids = id_list(ids)
        unknown = [i for i in ids if i not in self.id_to_token]
        if unknown:
            raise ValueError(
                f"ids must be in 0..{len(self.vocab) - 1}, got {unknown[:5]}"
            )
        return ids


def id_list(ids) -> list[int]:
    """Token ids as Python ints: from a list, a 1-D tensor or array, or a list of 0-d
    tensors (``logits.argmax(-1)[0]``); anything else is a ValueError saying so."""
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    ids = [i.item() if hasattr(i, "item") else i for i in ids]
    odd = [i for i in ids if isinstance(i, bool) or not isinstance(i, int)]
    if odd:
        raise ValueError(f"ids must be whole numbers, got {odd[:5]}")
    return ids


def import_tokenizers():
    """The ``tokenizers`` library, or an ImportError that says how to install it."""
    try:
        import tokenizers
    except ImportError as error:
        raise ImportError(
            "backend='tokenizers' needs Hugging Face's tokenizers "
            "library, which is not installed: pip "
            "install tokenizers"
        ) from error
    return tokenizers


# %% [markdown]
# Two kinds of input are refused by every tokenizer of this chapter, with the same message, on
# both backends. A text must be a `str`; and it must not hold a *lone surrogate*, one of the
# code points U+D800 to U+DFFF that Python lets into a string (for instance from bytes decoded
# with `errors="surrogateescape"`) but that is not a character and has no UTF-8 bytes. Silently
# turning it into `[UNK]` would hide a decoding bug upstream. Vocabulary files are read as
# strictly: they must be UTF-8, and an error names the file and the line.

# %% tags=["export:tokenizers.encoding"]
def check_text(text) -> str:
    """``text``, if it is a str that UTF-8 can encode; else a ValueError saying why."""
    if not isinstance(text, str):
        raise ValueError(f"encode expects a str, got {type(text).__name__}")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(
                f"the text holds a lone surrogate {text[error.start]!r} at index "
                f"{error.start}: not a character, it has no UTF-8 bytes (decode the "
                "bytes with errors='replace', or remove it)"
            ) from None
    return text


def read_lines(path: str | Path) -> list[str]:
    """The lines of a UTF-8 text file (without a last empty one); bytes that are not
    UTF-8 are a ValueError naming the file and the line."""
    data = Path(path).read_bytes()
    try:
        # utf-8-sig: a byte-order mark (Windows Notepad writes one) is not text
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ValueError(
            f"{path}:{line}: not UTF-8 (byte {data[error.start]:#04x}); "
            "save the file as UTF-8"
        ) from None
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


# %% [markdown]
# (sec-tok-bpe)=
# ## Byte-pair encoding from scratch
#
# Byte-pair encoding began as a compression method {cite}`gage1994bpe` and was carried over to
# words by {cite}`sennrich2016bpe`: find the most frequent
# pair of adjacent symbols, replace it by a new symbol, repeat. The new symbols, together with the
# single characters, are the vocabulary, and the list of merges in the order they were learned is
# the tokenizer. Training counts pairs inside words, each word weighted by how often it occurs.
#
# When two pairs are equally frequent we need a rule, or the result depends on dictionary order.
# Ours: prefer the pair that makes the shorter new token (short pieces before long ones), then the
# pair whose symbols were created first (single characters in order of first appearance, then
# merged symbols in the order they were made). This rule reproduces both examples of Magnusson's
# slides, and `pair_order` below writes it down once, for both trainers of this section. The
# first trainer is the method exactly as stated: count every adjacent pair in the table of words,
# merge the best pair in every word, and start again.

# %% tags=["export"]
from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


def merge_pair(
    symbols: list[str], pair: tuple[str, str], into: str | None = None
) -> list[str]:
    """Replace every occurrence of ``pair`` in ``symbols`` by ``into`` (by default the
    two symbols joined), scanning left to right."""
    merged = pair[0] + pair[1] if into is None else into
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == pair[0] and symbols[i + 1] == pair[1]:
            out.append(merged)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


@dataclass
class BPEModel:
    """A trained BPE: token -> id (characters first, then one token per merge) and
    the merges."""

    vocab: dict[str, int]
    merges: list[tuple[str, str]]


def bpe_start(
    word_counts: Mapping[str, int],
    num_merges: int,
    min_count: int,
    alphabet: Iterable[str],
) -> tuple[list[list[str]], dict[str, int]]:
    """Each word as a list of characters, and the first vocabulary: ``alphabet``, then
    the characters of the words in order of first appearance."""
    if num_merges < 0 or min_count < 1:
        raise ValueError(
            f"expected num_merges >= 0 and min_count >= 1, "
            f"got {num_merges} and {min_count}"
        )
    if not all(
        isinstance(w, str) and w and int(c) == c >= 0 for w, c in word_counts.items()
    ):
        raise ValueError("expected a mapping from non-empty strings to counts >= 0")
    vocab: dict[str, int] = {}
    for char in [*alphabet, *(c for word in word_counts for c in word)]:
        vocab.setdefault(char, len(vocab))
    return [list(word) for word in word_counts], vocab


def pair_order(
    pair: tuple[str, str], count: int, vocab: Mapping[str, int]
) -> tuple[int, int, int, int]:
    """The smallest of these is merged first: the highest count, then the shorter new
    token, then the older symbols."""
    a, b = pair
    return (-count, len(a) + len(b), vocab[a], vocab[b])


def train_bpe_simple(
    word_counts: Mapping[str, int],
    num_merges: int,
    *,
    min_count: int = 1,
    alphabet: list[str] | tuple[str, ...] = (),
) -> BPEModel:
    """Learn up to ``num_merges`` merges from ``{word: count}``; stop when no pair
    occurs ``min_count`` times. ``alphabet`` lists characters to put first in the
    vocabulary. Each step recounts every pair and merges the best one everywhere."""
    words, vocab = bpe_start(word_counts, num_merges, min_count, alphabet)
    counts = list(word_counts.values())
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges:
        pair_counts: Counter[tuple[str, str]] = Counter()
        for symbols, n in zip(words, counts):
            for pair in zip(symbols, symbols[1:]):
                pair_counts[pair] += n
        if not pair_counts:
            break  # every word is a single symbol
        best = min(pair_counts, key=lambda p: pair_order(p, pair_counts[p], vocab))
        if pair_counts[best] < min_count:
            break
        merges.append(best)
        vocab.setdefault(best[0] + best[1], len(vocab))
        words = [merge_pair(symbols, best) for symbols in words]
    return BPEModel(vocab, merges)


def encode_and_show_work(
    word: str, merges: list[tuple[str, str]], names: Mapping[str, str] | None = None
) -> list[str]:
    """Apply ``merges`` in order, printing the word after each merge that changes it.

    ``names`` optionally renames merged symbols for display (the slides write
    Z for "aa").
    """
    names = names or {}

    def show(symbols: list[str]) -> str:
        return "".join(names.get(s, s) for s in symbols) if names else " ".join(symbols)

    symbols = list(word)
    print(f"start:   {show(symbols)}")
    for step, pair in enumerate(merges, 1):
        new = merge_pair(symbols, pair)
        if new != symbols:
            a, b = (names.get(s, s) for s in pair)
            label = (
                f" ({names[pair[0] + pair[1]]}={a}{b})"
                if pair[0] + pair[1] in names
                else ""
            )
            print(f"step {step}: {show(new)}{label}")
        symbols = new
    return symbols


# %% [markdown]
# Magnusson's first example, "aaabdaaabac", one word seen once: "aa" is the most frequent pair,
# then "ab" and "Z a" tie with two occurrences each, and the shorter new token wins.

# %%
from tinybert.tokenizers.bpe import encode_and_show_work, merge_pair, train_bpe_simple

model = train_bpe_simple({"aaabdaaabac": 1}, num_merges=3)
print(model.merges)
names = {"aa": "Z", "ab": "Y", "aaab": "X"}
final = encode_and_show_work("aaabdaaabac", model.merges, names)
assert model.merges == [("a", "a"), ("a", "b"), ("aa", "ab")]
steps, symbols = [], list("aaabdaaabac")
for pair in model.merges:
    symbols = merge_pair(symbols, pair)
    steps.append("".join(names.get(s, s) for s in symbols))
# the slides' steps
assert steps == ["ZabdZabac", "ZYdZYac", "XdXac"] and symbols == final

# %% [markdown]
# The second example counts words: "text" 9 times, "texting" 10 times and "context" 11 times,
# with "_" marking the end of a word. As on Magnusson's slides, "te" comes first, "text_" and "con"
# later, and the whole word "texting_" last; then every word is a single token and training stops.

# %%
corpus = {"text_": 9, "texting_": 10, "context_": 11}
model = train_bpe_simple(corpus, num_merges=20)
learned = ["".join(pair) for pair in model.merges]
print(
    "  ".join(f"{step}:{'+'.join(pair)}" for step, pair in enumerate(model.merges, 1))
)
# it stopped: every word is one token
assert learned[0] == "te" and len(learned) < 20
assert learned.index("text_") < learned.index("con") < learned.index("texting_")


# %% [markdown]
# (sec-tok-bpe-fast)=
# ### Counting only what changes
#
# The simple trainer recounts every pair of every word after every merge, so its time grows with
# the number of merges times the size of the word table. Most of that work is wasted: a merge
# changes only the words that contain the merged pair, and only the pairs inside those words. The
# fast trainer, `train_bpe`, keeps the pair counts from one merge to the next instead of
# rebuilding them. An index from each pair to the words that contain it finds the words to
# update; their old pairs are subtracted from the counts and their new pairs added. A heap hands
# out the best pair. Taking an entry out of the middle of a heap is slow, so when a count changes
# a new entry is pushed and the old one is left where it is (*lazy deletion*); when an
# out-of-date entry comes to the top, its count no longer matches the live count, and it is
# skipped. Both trainers take the same arguments and order pairs with the same `pair_order`, so
# they learn the same merges. The tests check this on many small random word tables, with ties,
# one-letter words and more merges than the words allow; the cell after the code checks it on
# the chapter's own training text and measures the speed-up.

# %% tags=["export"]
def train_bpe(
    word_counts: Mapping[str, int],
    num_merges: int,
    *,
    min_count: int = 1,
    alphabet: list[str] | tuple[str, ...] = (),
) -> BPEModel:
    """``train_bpe_simple`` with the pair counts kept up to date: the same merges and
    vocabulary, faster.

    What changes: an index pair -> words, so a merge recounts only the pairs of the
    words that contain it; pair counts updated in place instead of rebuilt; a heap of
    pairs whose out-of-date entries (pushed before their count changed) are skipped
    when they come to the top. The chapter measures the speed-up.
    """
    words, vocab = bpe_start(word_counts, num_merges, min_count, alphabet)
    counts = list(word_counts.values())
    pair_counts: Counter[tuple[str, str]] = Counter()
    where: defaultdict[tuple[str, str], set[int]] = defaultdict(set)  # pair -> words
    for w, (symbols, n) in enumerate(zip(words, counts)):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += n
            where[pair].add(w)

    def entry(pair: tuple[str, str]) -> tuple:
        # the heap pops the smallest: pair_order first, so the entry starts with -count
        return (*pair_order(pair, pair_counts[pair], vocab), pair)

    heap = [entry(pair) for pair in pair_counts]
    heapq.heapify(heap)
    merges: list[tuple[str, str]] = []
    while heap and len(merges) < num_merges:
        neg_count, *_, pair = heapq.heappop(heap)
        if pair_counts[pair] != -neg_count:
            continue  # out of date: the count has changed since it was pushed
        if -neg_count < min_count:
            break
        merges.append(pair)
        vocab.setdefault(pair[0] + pair[1], len(vocab))
        changed = set()
        for w in where.pop(pair):  # only these words change
            old, n = words[w], counts[w]
            new = merge_pair(old, pair)
            for p in zip(old, old[1:]):
                pair_counts[p] -= n
                changed.add(p)
            for p in zip(new, new[1:]):
                pair_counts[p] += n
                where[p].add(w)
                changed.add(p)
            words[w] = new
        for p in changed:
            if pair_counts[p] > 0:
                heapq.heappush(heap, entry(p))
    return BPEModel(vocab, merges)


# %% [markdown]
# On the first words of the training text of {ref}`sec-tok-why`, each ending in "_", the two
# trainers learn the same merges and the same vocabulary; only the time differs.

# %%
from tinybert.tokenizers.bpe import train_bpe

table = Counter(w + "_" for w in train_words[:20_000])
seconds, models = {}, {}
for trainer in (train_bpe_simple, train_bpe):
    start = time.perf_counter()
    models[trainer.__name__] = trainer(table, num_merges=200)
    seconds[trainer.__name__] = time.perf_counter() - start
simple, fast = models["train_bpe_simple"], models["train_bpe"]
assert simple.merges == fast.merges
assert list(simple.vocab.items()) == list(fast.vocab.items())
print(
    f"{len(table):,} different words, {len(fast.merges)} merges, identical; simple "
    f"{seconds['train_bpe_simple']:.2f} s, fast {seconds['train_bpe']:.2f} s: "
    f"{seconds['train_bpe_simple'] / seconds['train_bpe']:.0f} times faster"
)

# %% [markdown]
# (sec-tok-bert-normalize)=
# ## BERT's normalisation and pre-tokenisation
#
# Before any vocabulary is consulted, BERT's tokenizer cleans the text: it deletes control and
# invalid characters, turns every kind of whitespace into a plain space, puts spaces around each
# Chinese character (so that each becomes its own word), and, for the *uncased* models, strips
# accents (decompose "é" into "e" plus a combining accent, then drop the accent) and lower-cases.
# To keep offsets, the normaliser returns for each output character the index of the input
# character it came from.

# %% tags=["export:tokenizers.normalizers"]
from __future__ import annotations

import string
import unicodedata

# Characters with the Unicode White_Space property (what Rust's
# char::is_whitespace tests).
WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
)

# The CJK Unified Ideograph blocks that BERT surrounds with spaces.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in CJK_RANGES)


def is_punctuation(char: str) -> bool:
    """ASCII punctuation (which includes $ + < = > ^ ` | ~) or any Unicode P*
    category."""
    return char in string.punctuation or unicodedata.category(char).startswith("P")


def bert_normalize(
    text: str,
    *,
    clean_text: bool = True,
    handle_chinese_chars: bool = True,
    strip_accents: bool = False,
    lowercase: bool = False,
) -> tuple[str, list[int]]:
    """BERT's normaliser. Returns the new text and, per new character, its index in
    ``text``."""
    out: list[str] = []
    source: list[int] = []
    for i, char in enumerate(text):
        if clean_text:
            if char in "\t\n\r":
                char = " "
            elif char in "\x00\ufffd" or unicodedata.category(char).startswith("C"):
                # control, format, unassigned ...
                continue
            elif char.isspace():
                char = " "
        pieces = f" {char} " if handle_chinese_chars and is_cjk(char) else char
        if strip_accents:
            pieces = "".join(
                c
                for c in unicodedata.normalize("NFD", pieces)
                if unicodedata.category(c) != "Mn"
            )
        if lowercase:
            # per character: no final-sigma rule
            pieces = "".join(c.lower() for c in pieces)
        out.extend(pieces)
        source.extend([i] * len(pieces))
    return "".join(out), source


def bert_pre_tokenize(text: str) -> list[tuple[int, int]]:
    """Split on whitespace (dropped) and punctuation (kept, one character per piece).

    Returns the ``(start, end)`` span of each piece in ``text``.
    """
    spans: list[tuple[int, int]] = []
    start = None
    for i, char in enumerate(text):
        if char in WHITESPACE or is_punctuation(char):
            if start is not None:
                spans.append((start, i))
                start = None
            if char not in WHITESPACE:
                spans.append((i, i + 1))
        elif start is None:
            start = i
    if start is not None:
        spans.append((start, len(text)))
    return spans


# %%
from tinybert.tokenizers.normalizers import bert_normalize, bert_pre_tokenize

text = "Café Dupont, 東京\tis ﬁne!"
for name, flags in [
    ("uncased", dict(strip_accents=True, lowercase=True)),
    ("cased", {}),
]:
    normalized, source = bert_normalize(text, **flags)
    words_of_text = [normalized[a:b] for a, b in bert_pre_tokenize(normalized)]
    print(f"{name:8} {normalized!r:28} -> {words_of_text}")
    assert len(source) == len(normalized) and all(0 <= s < len(text) for s in source)
assert (
    bert_normalize("Café Dupont", strip_accents=True, lowercase=True)[0]
    == "cafe dupont"
)
assert bert_normalize("Café Dupont")[0] == "Café Dupont"

# %% [markdown]
# The example of {ref}`Ozdemir's lecture slides <sources-decks>` is the first line: the *uncased*
# tokenizer turns "Café Dupont" into "cafe dupont", while the *cased* one leaves letters alone and
# only cleans the text. Uncased is the usual choice, because case seldom changes what a word
# means and one entry then serves "The" and "the"; cased helps where case carries information, as in
# recognising names. Neither folds the ligature "ﬁ" into "fi": BERT decomposes accents, not
# compatibility characters. The choice belongs to the tokenizer, not to the model, but a model must
# always be used with the normalisation it was trained with.
#
# (sec-tok-wordpiece)=
# ## WordPiece encoding
#
# A WordPiece vocabulary holds whole words ("the"), word beginnings ("play") and word
# continuations marked with `##` ("##ing"). To encode a word, take the longest vocabulary entry
# that starts the word, then the longest `##` entry that continues from there, and so on. If at
# some point no entry fits, the *whole* word becomes `[UNK]`; words longer than 100 characters
# become `[UNK]` without trying.
#
# One thing happens before normalisation: a special token written in the text, such as `[MASK]`
# in "the [MASK] sat", stays one token instead of being cut into `[`, `mask` and `]`. The text is
# split around the special tokens of the vocabulary, written exactly (`[mask]` is ordinary text),
# and each part between them is normalised and split on its own. Hugging Face's tokenizers do the
# same, and a fill-in-the-blank input can then be written as text (chapter 8 does).

# %% tags=["export:tokenizers.wordpiece"]
from __future__ import annotations

import re
from pathlib import Path

from tinybert.blocks.checks import check_positive_int
from tinybert.tokenizers.encoding import (
    Encoding,
    TokenizerMixin,
    check_text,
    import_tokenizers,
    read_lines,
)
from tinybert.tokenizers.normalizers import bert_normalize, bert_pre_tokenize

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def read_vocab_txt(path: str | Path) -> dict[str, int]:
    """One token per line; the id is the line number. A blank or repeated line is
    refused: it would shift or shadow the ids of every token after it."""
    vocab: dict[str, int] = {}
    for i, line in enumerate(read_lines(path)):
        token = line.rstrip()
        if not token or token in vocab:
            what = (
                "is blank"
                if not token
                else f"repeats line {vocab[token] + 1}, {token!r}"
            )
            raise ValueError(
                f"{path}:{i + 1}: the line {what}; a vocabulary file "
                "holds one distinct token per line"
            )
        vocab[token] = i
    return vocab


def save_vocab_txt(vocab: dict[str, int], path: str | Path) -> Path:
    ids = sorted(vocab.values())
    if ids != list(range(len(ids))):
        raise ValueError(
            f"vocabulary ids must be 0..{len(ids) - 1} without gaps, got {ids[:5]}..."
        )
    path = Path(path)
    path.write_text(
        "".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])),
        encoding="utf-8",
    )
    return path


# %% tags=["export:tokenizers.wordpiece"]
class WordPieceTokenizer(TokenizerMixin):
    """BERT's tokenizer: normalise, split on whitespace and punctuation, then greedy
    WordPiece."""

    def __init__(
        self,
        vocab: dict[str, int],
        *,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        clean_text: bool = True,
        handle_chinese_chars: bool = True,
        unk_token: str = "[UNK]",
        continuing_prefix: str = "##",
        max_input_chars_per_word: int = 100,
    ):
        if unk_token not in vocab:
            raise ValueError(
                f"the vocabulary must contain the unknown token "
                f"{unk_token!r}; got {len(vocab)} entries without it"
            )
        check_positive_int("max_input_chars_per_word", max_input_chars_per_word)
        self.vocab = dict(vocab)
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.clean_text, self.handle_chinese_chars = clean_text, handle_chinese_chars
        self.unk_token, self.continuing_prefix = unk_token, continuing_prefix
        self.max_input_chars_per_word = max_input_chars_per_word
        self._cache: dict[str, list[tuple[str, int, int]] | None] = {}
        # the special tokens that the text may hold whole, longest first
        specials = {self.unk_token, *SPECIAL_TOKENS} & self.vocab.keys()
        ordered = sorted(specials, key=len, reverse=True)
        self._specials = re.compile("|".join(map(re.escape, ordered)))

    @classmethod
    def from_file(cls, path: str | Path, **kwargs) -> WordPieceTokenizer:
        """The vocabulary in ``path`` (read_vocab_txt), with [UNK], [CLS] and [SEP]."""
        vocab = read_vocab_txt(path)
        missing = [
            t
            for t in (kwargs.get("unk_token", "[UNK]"), "[CLS]", "[SEP]")
            if t not in vocab
        ]
        if missing:
            raise ValueError(
                f"{path}: the vocabulary lacks {', '.join(missing)}; "
                "a BERT vocabulary holds [UNK], [CLS] and [SEP]"
            )
        return cls(vocab, **kwargs)

    def save(self, path: str | Path) -> Path:
        return save_vocab_txt(self.vocab, path)

    def split_word(self, word: str) -> list[tuple[str, int, int]] | None:
        """Greedy longest-match-first: ``[(piece, start, end), ...]``, or None for
        ``[UNK]``."""
        if word in self._cache:
            return self._cache[word]
        pieces: list[tuple[str, int, int]] | None = []
        if len(word) > self.max_input_chars_per_word:
            pieces = None
        start = 0
        while pieces is not None and start < len(word):
            for end in range(len(word), start, -1):
                piece = (
                    word[start:end]
                    if start == 0
                    else self.continuing_prefix + word[start:end]
                )
                if piece in self.vocab:
                    pieces.append((piece, start, end))
                    start = end
                    break
            else:
                # no piece fits: the whole word is unknown
                pieces = None
        self._cache[word] = pieces
        return pieces

    def encode(self, text: str, add_special_tokens: bool = False) -> Encoding:
        tokens: list[str] = []
        offsets: list[tuple[int, int]] = []
        cursor = 0
        # the parts between special tokens, each normalised on its own
        for special in [*self._specials.finditer(check_text(text)), None]:
            part_end = special.start() if special else len(text)
            for piece, start, end in self.encode_part(text[cursor:part_end]):
                tokens.append(piece)
                offsets.append((cursor + start, cursor + end))
            if special:
                tokens.append(special.group())
                offsets.append(special.span())
                cursor = special.end()
        if add_special_tokens:
            if not {"[CLS]", "[SEP]"} <= self.vocab.keys():
                raise ValueError(
                    "add_special_tokens needs [CLS] and [SEP] in the vocabulary"
                )
            tokens = ["[CLS]"] + tokens + ["[SEP]"]
            offsets = [(0, 0)] + offsets + [(0, 0)]
        return Encoding([self.vocab[t] for t in tokens], tokens, offsets)

    def encode_part(self, text: str) -> list[tuple[str, int, int]]:
        """Normalise, pre-tokenise and split ``text`` (no special token in it):
        ``[(piece, start, end), ...]``, with offsets into ``text``."""
        normalized, source = bert_normalize(
            text,
            clean_text=self.clean_text,
            handle_chinese_chars=self.handle_chinese_chars,
            strip_accents=self.strip_accents,
            lowercase=self.lowercase,
        )
        out = []
        for word_start, word_end in bert_pre_tokenize(normalized):
            pieces = self.split_word(normalized[word_start:word_end])
            if pieces is None:
                pieces = [(self.unk_token, 0, word_end - word_start)]
            for piece, start, end in pieces:
                first, last = source[word_start + start], source[word_start + end - 1]
                out.append((piece, first, last + 1))
        return out

    def to_hugging_face(self):
        """The equivalent Rust tokenizer from the ``tokenizers`` library (for
        bulk speed)."""
        rust = import_tokenizers().BertWordPieceTokenizer(
            self.vocab,
            unk_token=self.unk_token,
            lowercase=self.lowercase,
            strip_accents=self.strip_accents,
            clean_text=self.clean_text,
            handle_chinese_chars=self.handle_chinese_chars,
            wordpieces_prefix=self.continuing_prefix,
        )
        # BertWordPieceTokenizer has no argument for the word-length limit: set it
        # on the model.
        rust._tokenizer.model.max_input_chars_per_word = self.max_input_chars_per_word
        return rust

    def decode(self, ids: list[int]) -> str:
        ids = self.check_ids(ids)
        text = " ".join(self.id_to_token[i] for i in ids)
        return text.replace(" " + self.continuing_prefix, "")

    def __len__(self) -> int:
        return len(self.vocab)


# %% [markdown]
# A toy vocabulary shows the rule on Ozdemir's sentence. The name "sinan" is not in the
# vocabulary, so it is cut into two pieces that are; a word with a letter that no piece covers
# becomes `[UNK]` as a whole. With `add_special_tokens=True` the encoding starts with `[CLS]` and
# ends with `[SEP]`, exactly as on Ozdemir's slides; a `[MASK]` written in the text stays one token.

# %%
from tinybert.tokenizers.wordpiece import WordPieceTokenizer

toy = WordPieceTokenizer(
    {
        t: i
        for i, t in enumerate(
            [
                "[PAD]",
                "[UNK]",
                "[CLS]",
                "[SEP]",
                "[MASK]",
                "sin",
                "##an",
                "loves",
                "a",
                "beautiful",
                "day",
                "another",
                "play",
                "##ing",
                "##s",
                ",",
                "s",
                "##i",
                "##n",
                "caf",
                "##e",
            ]
        )
    }
)
print("'sinan' in the vocabulary:", "sinan" in toy.vocab)
print(toy.encode("Sinan loves a beautiful day", add_special_tokens=True).tokens)
for text in ["Playing, plays", "Café", "xyz"]:
    enc = toy.encode(text)
    print(f"{text!r:16} -> {list(zip(enc.tokens, enc.offsets))}")
assert toy.encode("Sinan loves a beautiful day", add_special_tokens=True).tokens == [
    "[CLS]",
    "sin",
    "##an",
    "loves",
    "a",
    "beautiful",
    "day",
    "[SEP]",
]
assert toy.encode("xyz").tokens == ["[UNK]"]
assert toy.encode("Café").offsets == [(0, 3), (3, 4)]  # "##e" still points at "é"
masked = toy.encode("Sinan loves a [MASK] day")  # a special token stays whole
print(list(zip(masked.tokens, masked.offsets)))
assert masked.tokens == ["sin", "##an", "loves", "a", "[MASK]", "day"]
assert masked.offsets[4] == (14, 20)

# %% [markdown]
# (sec-tok-special)=
# ### Special tokens
#
# The five entries at the top of every BERT vocabulary are not text. `[CLS]` starts every input;
# its final vector stands for the whole input when BERT classifies it. `[SEP]` ends each of the
# (at most two) texts of an input, and *segment ids* say which text each token belongs to.
# `[PAD]` fills shorter inputs up to the length of the batch, and a padding mask (True for real
# tokens, the polarity of {doc}`03_attention`) keeps attention away from it. `[MASK]` replaces
# the tokens that pretraining hides from the model and asks it to predict. The cell builds one
# input of length 14 by hand from two encodings, with Ozdemir's two sentences and one word
# masked; the BERT chapters build such inputs in code.

# %%
first = toy.encode("Sinan loves a beautiful day").tokens
second = toy.encode("Another beautiful day").tokens
tokens = ["[CLS]", *first, "[SEP]", *second, "[SEP]"]
segments = [0] * (len(first) + 2) + [1] * (len(second) + 1)
length = 14
n_pad = length - len(tokens)
tokens, segments = tokens + ["[PAD]"] * n_pad, segments + [0] * n_pad
real = [token != "[PAD]" for token in tokens]  # the padding mask
ids = [toy.vocab[token] for token in tokens]
# Hugging Face's BERT tokenizer lays out the same input
try:
    rust = toy.to_hugging_face()
    rust.enable_padding(length=length, pad_id=toy.vocab["[PAD]"], pad_token="[PAD]")
    expected = rust.encode("Sinan loves a beautiful day", "Another beautiful day")
    assert (expected.ids, expected.type_ids) == (ids, segments)
    assert expected.attention_mask == [int(r) for r in real]
except ImportError:
    print("(tokenizers is not installed: no comparison)")
tokens[5], ids[5] = "[MASK]", toy.vocab["[MASK]"]  # hide "beautiful"
for name, row in [
    ("token", tokens),
    ("id", ids),
    ("segment", segments),
    ("real", map(int, real)),
]:
    print(
        f"{name:8}",
        " ".join(f"{str(x):>{max(len(t), 2)}}" for x, t in zip(row, tokens)),
    )

# %% [markdown]
# Before the mask is put in, the ids, segment ids and padding mask are exactly those of Hugging
# Face's BERT tokenizer for the same pair of sentences (the cell asserts it). In pretraining, the
# hidden token's original id is the target the model must predict at position 5.
#
# (sec-tok-byte-level)=
# ## Byte-level BPE
#
# GPT-2 and RoBERTa never need `[UNK]`: they tokenize the UTF-8 *bytes* of the text, and every one
# of the 256 byte values is in the vocabulary. To keep vocabulary files readable, each byte is
# shown as a printable character: bytes that already are printable Latin-1 characters stand for
# themselves, the others (control bytes, the space) are shifted to characters from 256 on, so the
# space becomes "Ġ" and the newline "Ċ". Text is first split by a regular expression into
# contractions, letter runs, digit runs, other symbols and whitespace, each optionally preceded by
# one space; then BPE merges are applied inside each piece, lowest rank (earliest learned) first.

# %% tags=["export:tokenizers.byte_level"]
from __future__ import annotations

import json
from pathlib import Path

import regex

from tinybert.tokenizers.bpe import merge_pair
from tinybert.tokenizers.encoding import (
    Encoding,
    batch_encode,
    check_text,
    id_list,
    import_tokenizers,
    read_lines,
)

# GPT-2's pre-tokenisation pattern.
GPT2_PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte value to a printable character."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    mapping = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shifted)
            shifted += 1
    return dict(sorted(mapping.items()))


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def read_merges_txt(path: str | Path) -> list[tuple[str, str]]:
    """One merge per line, by rank, after an optional "#version" line."""
    merges: dict[tuple[str, str], int] = {}
    for number, line in enumerate(read_lines(path), 1):
        if number == 1 and line.startswith("#version"):
            continue
        parts = tuple(line.split())
        if len(parts) != 2 or parts in merges:
            got = f"a repeat of line {merges[parts]}" if parts in merges else repr(line)
            raise ValueError(
                f"{path}:{number}: expected two tokens separated by a "
                f"space, each merge once, got {got}"
            )
        merges[parts] = number
    return list(merges)


def read_vocab_json(path: str | Path) -> dict[str, int]:
    """vocab.json: a JSON object token -> id, each token and each id once."""

    def no_repeats(pairs: list[tuple[str, int]]) -> dict[str, int]:
        vocab: dict[str, int] = {}
        owner: dict[int, str] = {}
        for token, i in pairs:
            if token in vocab or i in owner:
                again = "the token" if token in vocab else f"the id of {owner[i]!r}"
                raise ValueError(f"{path}: token {token!r} (id {i!r}) repeats {again}")
            vocab[token], owner[i] = i, token
        return vocab

    try:
        vocab = json.loads("\n".join(read_lines(path)), object_pairs_hook=no_repeats)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: not JSON ({error.msg})") from None
    if not isinstance(vocab, dict):
        raise ValueError(
            f"{path}: expected a JSON object token -> id, got {type(vocab).__name__}"
        )
    return vocab


# %% tags=["export:tokenizers.byte_level"]
def apply_merges(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """Repeatedly merge the adjacent pair with the lowest rank, everywhere it occurs."""
    while len(symbols) > 1:
        best = min(
            zip(symbols, symbols[1:]), key=lambda pair: ranks.get(pair, len(ranks))
        )
        if best not in ranks:
            break
        symbols = merge_pair(symbols, best)  # the merge step of the BPE section above
    return symbols


class ByteLevelBPETokenizer:
    """GPT-2 / RoBERTa tokenizer: bytes as characters, a regex pre-split, BPE
    merges by rank."""

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]]):
        for rank, (a, b) in enumerate(merges):
            missing = [t for t in (a, b, a + b) if t not in vocab]
            if missing:
                raise ValueError(
                    f"merge {rank} ({a!r}, {b!r}) does not match the "
                    f"vocabulary: expected {missing} in it"
                )
        self.vocab = dict(vocab)
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.merges = list(merges)
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self._cache: dict[str, list[str]] = {}

    @classmethod
    def from_files(
        cls, vocab_json: str | Path, merges_txt: str | Path
    ) -> ByteLevelBPETokenizer:
        return cls(read_vocab_json(vocab_json), read_merges_txt(merges_txt))

    def save(self, directory: str | Path) -> tuple[Path, Path]:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        vocab_json, merges_txt = directory / "vocab.json", directory / "merges.txt"
        vocab_json.write_text(
            json.dumps(self.vocab, ensure_ascii=False), encoding="utf-8"
        )
        merges_txt.write_text(
            "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in self.merges),
            encoding="utf-8",
        )
        return vocab_json, merges_txt

    def to_hugging_face(self):
        """The equivalent Rust tokenizer from the ``tokenizers`` library (for
        bulk speed)."""
        return import_tokenizers().ByteLevelBPETokenizer(self.vocab, self.merges)

    def split_piece(self, piece: str) -> list[str]:
        if piece not in self._cache:
            self._cache[piece] = apply_merges(list(piece), self.ranks)
        return self._cache[piece]

    def encode(self, text: str) -> Encoding:
        tokens: list[str] = []
        offsets: list[tuple[int, int]] = []
        for match in GPT2_PATTERN.finditer(check_text(text)):
            # which character each byte belongs to
            char_of_byte = []
            for i, char in enumerate(match.group()):
                char_of_byte += [match.start() + i] * len(char.encode("utf-8"))
            piece = "".join(BYTE_TO_CHAR[b] for b in match.group().encode("utf-8"))
            position = 0
            for token in self.split_piece(piece):
                tokens.append(token)
                last = position + len(token) - 1  # the token's last byte
                offsets.append((char_of_byte[position], char_of_byte[last] + 1))
                position += len(token)
        unknown = [t for t in tokens if t not in self.vocab]
        if unknown:
            raise ValueError(
                f"tokens {unknown[:5]} are not in the vocabulary "
                f"(expected all 256 byte characters in it)"
            )
        return Encoding([self.vocab[t] for t in tokens], tokens, offsets)

    def encode_batch(
        self, texts: list[str], *, backend: str = "python"
    ) -> list[Encoding]:
        """``encode`` each text; ``backend="tokenizers"`` gives the same from Rust
        (``benchmarks/bench_tokenizers.py`` compares their speed)."""
        return batch_encode(self, texts, backend)

    def decode(self, ids: list[int]) -> str:
        ids = id_list(ids)
        unknown = [i for i in ids if i not in self.id_to_token]
        if unknown:
            raise ValueError(
                f"ids must be in the vocabulary "
                f"(0..{len(self.vocab) - 1}), got {unknown[:5]}"
            )
        data = bytes(CHAR_TO_BYTE[c] for i in ids for c in self.id_to_token[i])
        return data.decode("utf-8", errors="replace")

    def __len__(self) -> int:
        return len(self.vocab)


# %%
from tinybert.tokenizers.byte_level import (
    BYTE_TO_CHAR,
    GPT2_PATTERN,
    ByteLevelBPETokenizer,
)

print("space ->", BYTE_TO_CHAR[ord(" ")], " newline ->", BYTE_TO_CHAR[ord("\n")])
print(GPT2_PATTERN.findall("Hello, world! It's 2024  ok"))
bytes_only = ByteLevelBPETokenizer({c: b for b, c in BYTE_TO_CHAR.items()}, [])
sample = "naïve café 🙂 東京\n"
enc = bytes_only.encode(sample)
print(len(sample), "characters ->", len(enc), "byte tokens")
assert bytes_only.decode(enc.ids) == sample


# %% [markdown]
# Training a byte-level BPE is the BPE of {ref}`sec-tok-bpe` run on the byte characters of the
# regex pieces, with all 256 byte characters placed first in the vocabulary so that nothing is
# ever unknown.

# %% tags=["export:tokenizers.byte_level"]
def train_byte_level_bpe(
    texts: list[str], vocab_size: int, *, min_count: int = 2
) -> ByteLevelBPETokenizer:
    """Learn ``vocab_size - 256`` merges (fewer if pairs run out) from ``texts``."""
    from tinybert.tokenizers.bpe import train_bpe

    if isinstance(texts, str) or vocab_size < 256:
        raise ValueError(
            f"expected a list of texts and vocab_size >= 256, "
            f"got {type(texts).__name__} and {vocab_size}"
        )
    counts: dict[str, int] = {}
    for text in texts:
        for piece in GPT2_PATTERN.findall(text):
            word = "".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))
            counts[word] = counts.get(word, 0) + 1
    model = train_bpe(
        counts,
        vocab_size - 256,
        min_count=min_count,
        alphabet=list(BYTE_TO_CHAR.values()),
    )
    return ByteLevelBPETokenizer(model.vocab, model.merges)


# %%
from tinybert.tokenizers.byte_level import train_byte_level_bpe

book = load_gutenberg(1342).splitlines()[: pick(quick=2000, full=20000)]
start = time.perf_counter()
ours_bl = train_byte_level_bpe(book, vocab_size=pick(quick=600, full=2000))
print(f"{len(ours_bl)} tokens learned in {time.perf_counter() - start:.1f} s")
line = "It is a truth universally acknowledged, that a single man in possession"
print(ours_bl.encode(line).tokens)
assert ours_bl.decode(ours_bl.encode(line).ids) == line

# %% [markdown]
# (sec-tok-wordpiece-training)=
# ## Training WordPiece
#
# BPE merges the pair with the highest count, that is the highest probability $P(ij)$ of seeing
# $i$ followed by $j$. Schuster and Nakajima's WordPiece {cite}`schuster2012wordpiece` adds, at
# each step, the new unit that most increases the likelihood of the training data under a language
# model of the units. Google never published its trainer, so the exact rule BERT's vocabulary was
# built with is unknown. The Hugging Face course {cite}`huggingface2022wordpiece` teaches a simple
# stand-in, which it calls its best guess: merge the pair with the highest $P(ij) / (P(i) P(j))$,
# how much more often the two appear together than they would if they were independent. Under a
# unigram model of the units, the paper's likelihood gain of merging $i$ and $j$ is roughly
# $\text{count}(ij)\log\bigl(P(ij)/(P(i)P(j))\bigr)$: the same ratio, but weighted by how often
# the pair occurs. The bare ratio, which this chapter implements and calls `score="likelihood"`
# after the paper's criterion, drops that weight. By the ratio alone, a pair of two very common
# symbols needs many more joint occurrences to be chosen than a pair of rare symbols that nearly
# always appear together. Word-internal symbols carry the `##` prefix from the start, so a word's
# first piece and its continuations stay different tokens. The straightforward trainer says
# exactly this: score every pair, merge the best one in every word, and repeat until the
# vocabulary is full.

# %% tags=["export:tokenizers.wordpiece_training"]
from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from tinybert.tokenizers.bpe import merge_pair
from tinybert.tokenizers.normalizers import bert_normalize, bert_pre_tokenize
from tinybert.tokenizers.wordpiece import SPECIAL_TOKENS, WordPieceTokenizer


def wordpiece_merge_scores(
    words: list[list[str]], counts: list[int], min_count: int = 1
) -> dict[tuple[str, str], float]:
    """count(ij) / (count(i) count(j)) for every adjacent pair seen at least
    ``min_count`` times."""
    symbol_counts: Counter[str] = Counter()
    pair_counts: Counter[tuple[str, str]] = Counter()
    for symbols, n in zip(words, counts):
        for s in symbols:
            symbol_counts[s] += n
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += n
    return {
        pair: c / (symbol_counts[pair[0]] * symbol_counts[pair[1]])
        for pair, c in pair_counts.items()
        if c >= min_count
    }


def wordpiece_start(
    word_counts: Mapping[str, int],
    min_count: int,
    special_tokens: Iterable[str],
    prefix: str,
) -> tuple[list[list[str]], dict[str, int]]:
    """Each word as its first character and ``prefix``-marked continuations, and the
    first vocabulary: the special tokens, then the symbols in order of first
    appearance."""
    if not all(
        isinstance(w, str) and w and int(c) == c >= 0 for w, c in word_counts.items()
    ):
        raise ValueError("expected a mapping from non-empty strings to counts >= 0")
    if min_count < 1:
        raise ValueError(f"expected min_count >= 1, got {min_count}")
    words = [[w[0]] + [prefix + c for c in w[1:]] for w in word_counts]
    vocab: dict[str, int] = {}
    for token in [*special_tokens, *(s for symbols in words for s in symbols)]:
        vocab.setdefault(token, len(vocab))
    return words, vocab


def train_wordpiece_simple(
    word_counts: Mapping[str, int],
    vocab_size: int,
    *,
    min_count: int = 1,
    special_tokens: Iterable[str] = SPECIAL_TOKENS,
    prefix: str = "##",
) -> dict[str, int]:
    """Learn a WordPiece vocabulary (special tokens, characters, then merged pieces).

    Each step merges the pair with the highest count(ij) / (count(i) count(j)) among
    pairs seen at least ``min_count`` times; ties go to the pair of older symbols.
    """
    words, vocab = wordpiece_start(word_counts, min_count, special_tokens, prefix)
    counts = list(word_counts.values())
    while len(vocab) < vocab_size:
        scores = wordpiece_merge_scores(words, counts, min_count)
        if not scores:
            break  # every word is a single symbol
        a, b = min(
            scores, key=lambda pair: (-scores[pair], vocab[pair[0]], vocab[pair[1]])
        )
        merged = a + b.removeprefix(prefix)  # "t" + "##he" -> "the"
        vocab.setdefault(merged, len(vocab))
        words = [merge_pair(symbols, (a, b), merged) for symbols in words]
    return vocab


# %% [markdown]
# On Magnusson's corpus the two scores disagree from the first step. By count, the most frequent
# pairs are the "ex" and "xt" inside every word; by WordPiece's score, "c" and "o" win, because
# neither ever appears without the other. WordPiece has built "con" and "##ing" before it makes
# "te", which is BPE's first merge.

# %%
from collections import Counter

from tinybert.tokenizers.wordpiece import SPECIAL_TOKENS
from tinybert.tokenizers.wordpiece_training import (
    train_wordpiece_simple,
    wordpiece_merge_scores,
)

corpus = {"text_": 9, "texting_": 10, "context_": 11}
symbols = [[w[0]] + ["##" + c for c in w[1:]] for w in corpus]
pair_counts = Counter()
for word, n in zip(symbols, corpus.values()):
    for pair in zip(word, word[1:]):
        pair_counts[pair] += n
scores = wordpiece_merge_scores(symbols, list(corpus.values()))
best = sorted(scores, key=scores.get, reverse=True)[:3]
top_counts = pair_counts.most_common(3)
print("by count (BPE):      ", "   ".join(f"{a} {b}: {n}" for (a, b), n in top_counts))
print(
    "by score (WordPiece):", "   ".join(f"{a} {b}: {scores[a, b]:.3f}" for a, b in best)
)
vocab = train_wordpiece_simple(corpus, vocab_size=100)
learned = list(vocab)[
    len(SPECIAL_TOKENS) + len({s for word in symbols for s in word}) :
]
print("WordPiece merges:", " ".join(learned))
print(
    "BPE merges:      ",
    " ".join("".join(pair) for pair in train_bpe(corpus, 20).merges),
)
assert top_counts[0][1] == 30 and best[0] == ("c", "##o")
assert learned.index("con") < learned.index("te") and train_bpe(corpus, 1).merges == [
    ("t", "e")
]


# %% [markdown]
# (sec-tok-wordpiece-fast)=
# ### A faster trainer
#
# Like BPE's simple trainer, the straightforward WordPiece trainer rescans every word after every
# merge: fine for Magnusson's examples, far too slow for a 30,000 entry vocabulary. The fast
# trainer below keeps the counts as BPE's `train_bpe` does ({ref}`sec-tok-bpe-fast`): an index
# from each pair to the words that contain it finds the words to update, and a heap hands out the
# best pair, its out-of-date entries recognised (their score no longer matches) and skipped.
#
# WordPiece adds one complication. Its score divides by the counts of the two symbols, and a
# merge lowers the counts of both halves, so every pair that contains one of them gets a higher
# score, not just the pairs next to the merge. Merging "jumbl" with "##e" rescores every pair
# that ends with "##e", thousands of them. This is why WordPiece training is slower than BPE
# training, and one reason why Hugging Face's trainer learns WordPiece vocabularies with BPE's
# count instead. The heap is rebuilt from the live pairs whenever out-of-date entries make up
# most of it, which keeps its size, and the time spent skipping, in check.

# %% tags=["export:tokenizers.wordpiece_training"]
def train_wordpiece(
    word_counts: Mapping[str, int],
    vocab_size: int,
    *,
    score: str = "likelihood",
    min_count: int = 1,
    special_tokens: Iterable[str] = SPECIAL_TOKENS,
    prefix: str = "##",
) -> dict[str, int]:
    """``train_wordpiece_simple`` with counts kept up to date: the same
    vocabulary, faster.

    ``score="likelihood"`` is the Hugging Face course's ratio, named after the paper's
    criterion it stands in for; ``score="count"`` merges the most frequent pair instead,
    as BPE does and as Hugging Face's WordPiece trainer does. Section "Vocabulary size
    and fertility" and chapter 9 compare the two.

    What changes: an index pair -> words, so a merge touches only the words that contain
    the pair; symbol and pair counts updated in place instead of recounted; a heap of
    scores whose out-of-date entries are skipped, and rebuilt when they outnumber the
    live pairs. The chapter and ``benchmarks/bench_tokenizers.py`` measure the speed-up.
    """
    if score not in ("likelihood", "count"):
        raise ValueError(f"score must be 'likelihood' or 'count', got {score!r}")
    words, vocab = wordpiece_start(word_counts, min_count, special_tokens, prefix)
    counts = list(word_counts.values())
    symbol_counts: Counter[str] = Counter()
    pair_counts: Counter[tuple[str, str]] = Counter()
    where: defaultdict[tuple[str, str], set[int]] = defaultdict(set)  # pair -> words
    # symbol -> pairs
    partners: defaultdict[str, set[tuple[str, str]]] = defaultdict(set)

    def count(w: int, sign: int) -> list[tuple[str, str]]:
        """Add word ``w`` to the counts (``sign=1``) or take it out (``sign=-1``)."""
        symbols, n = words[w], sign * counts[w]
        pairs = list(zip(symbols, symbols[1:]))
        for s in symbols:
            symbol_counts[s] += n
        for pair in pairs:
            pair_counts[pair] += n
            if sign > 0:
                where[pair].add(w)
                partners[pair[0]].add(pair)
                partners[pair[1]].add(pair)
        return pairs

    def entry(pair: tuple[str, str]) -> tuple[float, int, int, tuple[str, str]]:
        # the heap pops the smallest: best score first, then older symbols
        a, b = pair
        value = pair_counts[pair]
        if score == "likelihood":
            value /= symbol_counts[a] * symbol_counts[b]
        return (-value, vocab[a], vocab[b], pair)

    def fresh_heap() -> list:
        heap = [entry(pair) for pair, c in pair_counts.items() if c >= min_count]
        heapq.heapify(heap)
        return heap

    for w in range(len(words)):
        count(w, +1)
    heap = fresh_heap()
    while heap and len(vocab) < vocab_size:
        item = heapq.heappop(heap)
        pair = item[-1]
        if pair_counts[pair] < min_count or item != entry(pair):
            continue  # out of date
        a, b = pair
        merged = a + b.removeprefix(prefix)
        vocab.setdefault(merged, len(vocab))
        touched = set()
        for w in where.pop(pair):  # only these words change
            touched.update(count(w, -1))
            words[w] = merge_pair(words[w], pair, merged)
            touched.update(count(w, +1))
        for p in touched:
            if pair_counts[p] == 0:  # gone from every word
                del pair_counts[p]
                where.pop(p, None)
                partners[p[0]].discard(p)
                partners[p[1]].discard(p)
        # a and b are rarer now, merged more frequent: rescore every pair
        # containing them
        # (by count, only the pairs next to the merge changed).
        if score == "likelihood":
            touched |= partners[a] | partners[b] | partners[merged]
        for p in touched:
            if pair_counts[p] >= min_count:
                heapq.heappush(heap, entry(p))
        if len(heap) > 2 * len(pair_counts) + 1000:  # mostly out-of-date entries
            heap = fresh_heap()
    return vocab


def bert_word_counts(texts: Iterable[str], *, lowercase: bool = True) -> Counter[str]:
    """Count the words BERT's normaliser and pre-tokeniser produce from ``texts``, in
    order of first appearance.

    The normaliser treats each character on its own and a space always ends a word, so
    each distinct space-separated chunk is normalised once, however often it occurs.
    """
    chunks = Counter(chunk for text in texts for chunk in text.split(" "))
    counts: Counter[str] = Counter()
    for chunk, n in chunks.items():
        normalized, _ = bert_normalize(
            chunk, strip_accents=lowercase, lowercase=lowercase
        )
        for a, b in bert_pre_tokenize(normalized):
            counts[normalized[a:b]] += n
    return counts


def train_wordpiece_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    *,
    lowercase: bool = True,
    min_count: int = 2,
    score: str = "likelihood",
) -> WordPieceTokenizer:
    counts = bert_word_counts(texts, lowercase=lowercase)
    if not counts:
        raise ValueError("train_wordpiece_tokenizer: the texts hold no word to learn")
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(
            f"vocab_size: expected more than the {len(SPECIAL_TOKENS)} special tokens, "
            f"got {vocab_size}"
        )
    vocab = train_wordpiece(
        counts,
        vocab_size,
        min_count=min_count,
        score=score,
    )
    return WordPieceTokenizer(vocab, lowercase=lowercase)


# %% [markdown]
# The two trainers share one signature, and on real text they learn the same vocabulary, entry
# for entry (the tests check more corpora); only the time differs.

# %%
from tinybert.tokenizers.wordpiece_training import bert_word_counts, train_wordpiece

sample = bert_word_counts(
    load_gutenberg(1342).splitlines()[: pick(quick=300, full=800)]
)
seconds, vocabs = {}, {}
for trainer in (train_wordpiece_simple, train_wordpiece):
    start = time.perf_counter()
    vocabs[trainer.__name__] = trainer(
        sample, vocab_size=pick(quick=300, full=600), min_count=2
    )
    seconds[trainer.__name__] = time.perf_counter() - start
assert list(vocabs["train_wordpiece_simple"].items()) == list(
    vocabs["train_wordpiece"].items()
)
print(
    f"{len(sample):,} different words, {len(vocabs['train_wordpiece']):,} entries, "
    f"identical; simple {seconds['train_wordpiece_simple']:.2f} s, fast "
    f"{seconds['train_wordpiece']:.2f} s"
)

# %%
from tinybert.tokenizers.wordpiece_training import train_wordpiece_tokenizer

lines = load_gutenberg(1342).splitlines()[: pick(quick=1500, full=None)]
start = time.perf_counter()
ours_wp = train_wordpiece_tokenizer(lines, vocab_size=pick(quick=400, full=4000))
print(f"{len(ours_wp)} WordPiece tokens learned in {time.perf_counter() - start:.1f} s")
print(ours_wp.encode("Mr. Darcy's unexpectedly sinan-like smile").tokens)

# %% [markdown]
# (sec-tok-unigram)=
# ## The unigram language model
#
# BPE and WordPiece build their vocabulary up, one merge at a time, and encode by replaying
# merges or by a greedy rule. The *unigram language model* of {cite}`kudo2018subword` works the
# other way round. Its vocabulary is a set of pieces $x$, each with a probability $p(x)$, and the
# pieces of a text are assumed independent (hence "unigram"), so a segmentation
# $\mathbf{x} = (x_1, \dots, x_M)$ of a text $X$ has the probability
#
# $$
# P(\mathbf{x}) = \prod_{i=1}^{M} p(x_i), \qquad
# \mathbf{x}^* = \operatorname*{arg\,max}_{\mathbf{x} \in S(X)} P(\mathbf{x}),
# $$
#
# where $S(X)$ is the set of all the ways to cut $X$ into vocabulary pieces. The tokenizer
# returns $\mathbf{x}^*$, the most probable segmentation. SentencePiece {cite}`kudo2018sentencepiece`
# implements it, and it is the tokenizer of ALBERT (its 30,000 pieces are the vocabulary of
# {doc}`14_albert`), T5 and XLNet. SentencePiece reads raw text, spaces included: every space
# becomes the visible character "▁" (U+2581) and belongs to the piece that follows it, so that
# decoding is concatenation followed by turning "▁" back into spaces. It also puts a "▁" in
# front of the text and, by default, lets no piece span two words; Hugging Face's pre-tokeniser
# `Metaspace` does the same by starting a new word at every "▁".
#
# A word of $n$ characters can be cut in up to $2^{n-1}$ ways, too many to try. They share their
# beginnings, though, and the *Viterbi algorithm* exploits it. Draw the positions $0, \dots, n$
# between characters and an edge from $s$ to $e$ for every piece that spells characters $s$ to
# $e$: this *lattice* holds every segmentation as a path from $0$ to $n$. In log-probabilities,
# a path's score is the sum of its edges, and the best path to position $e$ is a best path to
# some position $s$ plus the piece from $s$ to $e$:
#
# $$
# \mathrm{best}[e] = \max_{s:\ X_{s:e} \in V} \big(\mathrm{best}[s] + \log p(X_{s:e})\big),
# \qquad \mathrm{best}[0] = 0 .
# $$
#
# One pass from left to right fills `best`, remembering for each position where its last piece
# starts, and one pass back from $n$ reads off the segmentation: about $n$ times the longest
# piece's length steps instead of $2^{n-1}$. A character that starts no piece of its own is
# taken alone as the unknown token, scored ten below the least probable piece, so that the
# lattice always has a path but prefers real pieces; SentencePiece and Hugging Face do the
# same.

# %% tags=["export:tokenizers.unigram"]
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from tinybert.tokenizers.encoding import (
    Encoding,
    TokenizerMixin,
    check_text,
    import_tokenizers,
    read_lines,
)

SPACE = "\u2581"  # "▁", SentencePiece's visible space
# ALBERT's first five ids:
UNIGRAM_SPECIAL_TOKENS = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")
UNK_PENALTY = 10.0  # an unknown character scores this much below the rarest piece


def metaspace_split(text: str) -> tuple[str, list[int], list[tuple[int, int]]]:
    """SentencePiece's view of a text: every space becomes ▁, a ▁ goes in front (unless
    the text starts with one already), and a new word starts at every ▁.

    Returns the marked text, for each of its characters the index of the character of
    ``text`` it stands for (the added ▁ stands for the first one), and the words' spans.
    """
    if not text:
        return "", [], []
    marked, source = text.replace(" ", SPACE), list(range(len(text)))
    if not marked.startswith(SPACE):
        marked, source = SPACE + marked, [0] + source
    starts = [i for i, char in enumerate(marked) if char == SPACE and i > 0]
    bounds = [0, *starts, len(marked)]
    return marked, source, list(zip(bounds, bounds[1:]))


def viterbi(
    word: str, scores: Mapping[str, float], unk_score: float, max_len: int
) -> list[tuple[int, int]]:
    """The most probable segmentation of ``word``: the ``(start, end)`` of each piece.

    ``scores`` maps each piece (at most ``max_len`` characters) to its log-probability.
    A character that starts no one-character piece is taken alone, as an unknown,
    scoring ``unk_score``. Ties go to the path found first: the earlier start, then the
    shorter piece.
    """
    n = len(word)
    best = [-math.inf] * (n + 1)  # best[e]: log-probability of the best path to e
    back = [-1] * (n + 1)  # back[e]: where the last piece of that path starts
    best[0] = 0.0
    for start in range(n):
        single = False
        for end in range(start + 1, min(n, start + max_len) + 1):
            score = scores.get(word[start:end])
            if score is None:
                continue
            single = single or end == start + 1
            if back[end] < 0 or best[start] + score > best[end]:
                best[end], back[end] = best[start] + score, start
        end = start + 1  # no piece of one character: an unknown
        if not single and (back[end] < 0 or best[start] + unk_score > best[end]):
            best[end], back[end] = best[start] + unk_score, start
    spans, end = [], n
    while end > 0:  # follow the back pointers from the end
        spans.append((back[end], end))
        end = back[end]
    return spans[::-1]


# %% [markdown]
# A toy model shows the search. Its pieces cover the word "▁tokens" in 12 ways; the cell lists
# them all with their probabilities and checks that Viterbi finds the most probable without
# listing any. The longest first piece, "▁token", is not part of the winner: a greedy
# longest-match rule, WordPiece's, would have missed it. The probabilities sum to less than one
# because the rest of the mass belongs to pieces this word does not use.

# %%
import math

from tinybert.tokenizers.unigram import metaspace_split, viterbi

marked, source, spans = metaspace_split("Unigram  tokens")
print(f"{marked!r} -> words {[marked[a:b] for a, b in spans]}")
p = {
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


def segmentations(word: str):
    """Every way to cut ``word`` into pieces of ``p`` (what Viterbi avoids listing)."""
    if not word:
        yield []
    for end in range(1, len(word) + 1):
        if word[:end] in p:
            yield from ([word[:end], *rest] for rest in segmentations(word[end:]))


word = "▁tokens"
ranked = sorted(segmentations(word), key=lambda seg: -math.prod(p[x] for x in seg))
for seg in ranked[:4]:
    print(f"  {' + '.join(seg):22} P = {math.prod(p[x] for x in seg):.2e}")
log_p = {piece: math.log(q) for piece, q in p.items()}
best = [word[a:b] for a, b in viterbi(word, log_p, -math.inf, max_len=6)]
print(f"{len(ranked)} segmentations; Viterbi picks {best}")
assert best == ranked[0] == ["▁tok", "ens"] and len(ranked) == 12
assert marked == "▁Unigram▁▁tokens" and [marked[a:b] for a, b in spans][1] == "▁"


# %% [markdown]
# The two spaces of "Unigram  tokens" become two "▁", and the second starts a word of its own:
# SentencePiece keeps every space, so decoding gives the text back. The tokenizer below wraps
# the search the way the other tokenizers of this chapter are wrapped: ids, tokens and the
# offsets of the original text, `[CLS]` and `[SEP]` on request (ALBERT puts them where BERT does),
# a cache of the words it has seen, and the Rust equivalent for bulk work. Its vocabulary is a
# list of `(piece, log-probability)` pairs, ALBERT's five special tokens first. Two details come
# from Hugging Face's implementation, which it must match id for id: a run of unknown characters
# becomes one token, whose string is the run's text and whose id is that of `<unk>`; and the
# special tokens are pieces like the others (with the score 0 that Hugging Face's trainer gives
# them), so a text that contains "[MASK]" is matched by the piece `[MASK]`.

# %% tags=["export:tokenizers.unigram"]
class UnigramTokenizer(TokenizerMixin):
    """ALBERT's (SentencePiece's) tokenizer: spaces become ▁, then each word is cut into
    its most probable segmentation under a unigram language model over the pieces."""

    def __init__(self, pieces: list[tuple[str, float]], unk_id: int = 1):
        pieces = [(str(piece), float(score)) for piece, score in pieces]
        if not 0 <= unk_id < len(pieces):
            raise ValueError(
                f"unk_id must index the {len(pieces)} pieces, got {unk_id}"
            )
        bad = [p for p, score in pieces if not p or not math.isfinite(score)]
        if bad or len({piece for piece, _ in pieces}) < len(pieces):
            raise ValueError(
                "expected distinct non-empty pieces with finite scores, "
                f"got {bad[:3] or 'a piece twice'}"
            )
        self.pieces, self.unk_id = pieces, unk_id
        self.unk_token = pieces[unk_id][0]
        self.vocab = {piece: i for i, (piece, _) in enumerate(pieces)}
        self.id_to_token = {i: piece for piece, i in self.vocab.items()}
        self.scores = dict(pieces)
        self.unk_score = min(self.scores.values()) - UNK_PENALTY
        self.max_len = max(len(piece) for piece in self.scores)
        self._cache: dict[str, list[tuple[str, int, int]]] = {}

    @classmethod
    def from_file(cls, path: str | Path) -> UnigramTokenizer:
        """Read what ``save`` writes, or a Hugging Face tokenizer.json of that kind."""
        data = json.loads("\n".join(read_lines(path)))  # UTF-8, or the line
        model = data.get("model", data)
        pre = data.get("pre_tokenizer") or {}
        metaspace = {
            "type": "Metaspace",
            "replacement": SPACE,
            "prepend_scheme": "always",
            "split": True,
        }
        if (
            model.get("type") != "Unigram"
            or data.get("normalizer")
            or any(pre.get(key, value) != value for key, value in metaspace.items())
        ):
            raise ValueError(
                f"{path}: expected a Unigram model with no normaliser "
                f"and the pre-tokeniser {metaspace}"
            )
        return cls([tuple(entry) for entry in model["vocab"]], model["unk_id"])

    def save(self, path: str | Path) -> Path:
        """The pieces as JSON: the "model" entry of a Hugging Face tokenizer.json."""
        path = Path(path)
        model = {"type": "Unigram", "unk_id": self.unk_id, "vocab": self.pieces}
        path.write_text(json.dumps(model, ensure_ascii=False), encoding="utf-8")
        return path

    def split_word(self, word: str) -> list[tuple[str, int, int]]:
        """Viterbi, then runs of unknowns fused into one: ``[(token, start, end)]``."""
        if word not in self._cache:
            out: list[tuple[str, int, int]] = []
            after_unknown = False
            for start, end in viterbi(word, self.scores, self.unk_score, self.max_len):
                unknown = self.vocab.get(word[start:end], self.unk_id) == self.unk_id
                if unknown and after_unknown:
                    start = out.pop()[1]  # extend the previous unknown run
                out.append((word[start:end], start, end))
                after_unknown = unknown
            self._cache[word] = out
        return self._cache[word]

    def encode(self, text: str, add_special_tokens: bool = False) -> Encoding:
        marked, source, words = metaspace_split(check_text(text))
        tokens, offsets = [], []
        for word_start, word_end in words:
            for token, start, end in self.split_word(marked[word_start:word_end]):
                tokens.append(token)
                offsets.append(
                    (source[word_start + start], source[word_start + end - 1] + 1)
                )
        if add_special_tokens:
            if "[CLS]" not in self.vocab or "[SEP]" not in self.vocab:
                raise ValueError(
                    "add_special_tokens needs [CLS] and [SEP] in the vocabulary"
                )
            tokens = ["[CLS]", *tokens, "[SEP]"]
            offsets = [(0, 0), *offsets, (0, 0)]
        ids = [self.vocab.get(token, self.unk_id) for token in tokens]
        return Encoding(ids, tokens, offsets)

    def decode(self, ids: list[int]) -> str:
        ids = self.check_ids(ids)
        text = "".join(self.id_to_token[i] for i in ids).replace(SPACE, " ")
        return text.removeprefix(" ")  # the ▁ that encoding put in front

    def to_hugging_face(self):
        """The equivalent Rust tokenizer from the ``tokenizers`` library (for
        bulk speed)."""
        hf = import_tokenizers()
        rust = hf.Tokenizer(hf.models.Unigram(self.pieces, unk_id=self.unk_id))
        metaspace = dict(replacement=SPACE, prepend_scheme="always", split=True)
        rust.pre_tokenizer = hf.pre_tokenizers.Metaspace(**metaspace)
        rust.decoder = hf.decoders.Metaspace(**metaspace)
        if "[CLS]" in self.vocab and "[SEP]" in self.vocab:
            rust.post_processor = hf.processors.TemplateProcessing(
                single="[CLS] $A [SEP]",
                special_tokens=[
                    ("[CLS]", self.vocab["[CLS]"]),
                    ("[SEP]", self.vocab["[SEP]"]),
                ],
            )
        return rust

    def __len__(self) -> int:
        return len(self.pieces)


# %% [markdown]
# With the toy model as its vocabulary, "tokens" comes out as above; "not" is spelt from single
# letters, since no longer piece fits; and "?!", two characters without pieces, becomes one
# `<unk>` token whose offsets still point at both. Decoding (here without the special tokens)
# gives the text back, except for what became `<unk>`.

# %%
from tinybert.tokenizers.unigram import UNIGRAM_SPECIAL_TOKENS, UnigramTokenizer

toy_unigram = UnigramTokenizer(
    [(t, 0.0) for t in UNIGRAM_SPECIAL_TOKENS] + list(log_p.items())
)
enc = toy_unigram.encode("tokens not?!", add_special_tokens=True)
print(list(zip(enc.tokens, enc.ids, enc.offsets)))
print(repr(toy_unigram.decode(enc.ids[1:-1])))
assert enc.tokens[1:4] == ["▁tok", "ens", "▁"] and enc.tokens[-2:] == ["?!", "[SEP]"]
assert enc.ids[-2] == toy_unigram.unk_id and enc.offsets[-2] == (10, 12)
assert toy_unigram.decode(enc.ids[1:-1]) == "tokens not<unk>"

# %% [markdown]
# (sec-tok-unigram-training)=
# ### Training by EM and pruning
#
# Training must choose the pieces and their probabilities. For a fixed set of pieces, the best
# probabilities are those that make the training words most likely, and the likelihood of a word
# sums over all its segmentations, because nobody tells us which one produced it:
#
# $$
# \mathcal{L} = \sum_{w} \mathrm{count}(w) \log \sum_{\mathbf{x} \in S(w)} P(\mathbf{x}).
# $$
#
# The segmentation is a hidden variable, so the tool is expectation–maximisation (EM). The *E
# step* computes, for every piece, how often it is expected to occur: each segmentation of each
# word counts with its probability given the word. The *M step* sets each piece's probability
# to its expected count divided by the sum of all expected counts. Repeating the two never
# lowers $\mathcal{L}$, as long as no piece is removed in between. The expected counts come from the lattice again, with sums where
# Viterbi takes maxima: the *forward* value $\alpha[i]$ sums the probabilities of all
# segmentations of the first $i$ characters, the *backward* value $\beta[i]$ those of the rest,
# and a piece $x$ from $s$ to $e$ occurs with probability $\alpha[s]\, p(x)\, \beta[e] /
# \alpha[n]$. This is the forward–backward algorithm; the cheaper *Viterbi approximation*,
# which counts only the pieces of each word's best segmentation, would be coarser. We use the
# full forward–backward, in log-probabilities so that long words do not underflow.

# %% tags=["export:tokenizers.unigram_lattice"]
from __future__ import annotations

import math
from collections.abc import Mapping


def log_add(a: float, b: float) -> float:
    """log(exp(a) + exp(b)) without overflow."""
    if a < b:
        a, b = b, a
    return a if b == -math.inf else a + math.log1p(math.exp(b - a))


def lattice(
    word: str, ids: Mapping[str, int], max_len: int
) -> list[tuple[int, int, int]]:
    """Every piece of ``ids`` in ``word``: ``(start, end, id)``, by start."""
    return [
        (start, end, ids[word[start:end]])
        for start in range(len(word))
        for end in range(start + 1, min(len(word), start + max_len) + 1)
        if word[start:end] in ids
    ]


def expected_counts(
    lattices: list[list[tuple[int, int, int]]],
    lengths: list[int],
    counts: list[int],
    log_p: list[float],
) -> tuple[list[float], float]:
    """The E step, by forward-backward: each piece's expected number of occurrences in
    all segmentations of all words, and the log-likelihood of the words."""
    expected, log_likelihood = [0.0] * len(log_p), 0.0
    for nodes, n, count in zip(lattices, lengths, counts):
        alpha = [0.0] + [-math.inf] * n  # log P(all segmentations of word[:i])
        for start, end, k in nodes:
            alpha[end] = log_add(alpha[end], alpha[start] + log_p[k])
        beta = [-math.inf] * n + [0.0]  # log P(all segmentations of word[i:])
        for start, end, k in reversed(nodes):
            beta[start] = log_add(beta[start], log_p[k] + beta[end])
        log_likelihood += count * alpha[n]
        for start, end, k in nodes:  # P(this piece, here | the word)
            log_posterior = alpha[start] + log_p[k] + beta[end] - alpha[n]
            expected[k] += count * math.exp(log_posterior)
    return expected, log_likelihood


# %% tags=["export:tokenizers.unigram_training"]
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tinybert.tokenizers.unigram import (
    UNIGRAM_SPECIAL_TOKENS,
    UnigramTokenizer,
    metaspace_split,
    viterbi,
)
from tinybert.tokenizers.unigram_lattice import expected_counts, lattice, log_add


def unigram_word_counts(texts: Iterable[str]) -> Counter[str]:
    """Count the words of ``texts`` as SentencePiece splits them (▁the, ▁cat, ...)."""
    counts: Counter[str] = Counter()
    for text in texts:
        marked, _, spans = metaspace_split(text)
        counts.update(marked[a:b] for a, b in spans)
    return counts


# %% [markdown]
# EM tunes the probabilities of a given set of pieces; the pieces themselves are chosen by
# starting with far too many and removing the least useful, round by round
# {cite}`kudo2018subword`. The seed holds every character and the most frequent substrings of
# the words (scored by count times length, as SentencePiece does). After the EM steps of a
# round, each piece gets a *loss*: how much $\mathcal{L}$ would fall without it, estimated as its
# expected count times the difference between its log-probability and that of its best
# segmentation from the other pieces. The round keeps the 75% of the pieces with the largest
# loss (a piece that its own parts beat has a negative loss and goes first), and single
# characters always stay, so that every word can still be spelt. When the pieces are at most
# 10% more than wanted, the most probable ones make the vocabulary, after the special tokens.
# SentencePiece follows the same plan with more refined choices (a seed of up to a million
# substrings found with a suffix array, a Bayesian M step, a loss that re-normalises the
# probabilities); ours takes the simplest version of each step.

# %% tags=["export:tokenizers.unigram_training"]
def seed_pieces(
    word_counts: Mapping[str, int], seed_size: int, max_len: int
) -> dict[str, float]:
    """Every character, plus the ``seed_size`` substrings (2 to ``max_len`` characters,
    seen at least twice) with the highest count times length, with log-probabilities
    proportional to those scores (to the counts, for characters)."""
    chars: Counter[str] = Counter()
    substrings: Counter[str] = Counter()
    for word, n in word_counts.items():
        for start in range(len(word)):
            chars[word[start]] += n
            for end in range(start + 2, min(len(word), start + max_len) + 1):
                substrings[word[start:end]] += n
    scored = sorted(
        ((n * len(s), s) for s, n in substrings.items() if n >= 2),
        key=lambda score_piece: -score_piece[0],
    )[:seed_size]
    counts = {**chars, **{piece: score for score, piece in scored}}
    total = sum(counts.values())
    return {piece: math.log(n / total) for piece, n in counts.items()}


def em_step(
    words: list[str],
    counts: list[int],
    log_p: dict[str, float],
    chars: set[str],
    max_len: int,
) -> tuple[dict[str, float], dict[str, float], float]:
    """One EM step: expected counts (E), then log-probabilities log(count / total) (M).

    Pieces expected less than half a time are dropped, except characters, which keep at
    least half a count. Returns the new log-probabilities, the expected counts, and the
    log-likelihood of the words under the old log-probabilities.
    """
    pieces = list(log_p)
    ids = {piece: k for k, piece in enumerate(pieces)}
    lattices = [lattice(word, ids, max_len) for word in words]
    lengths = [len(word) for word in words]
    expected, log_likelihood = expected_counts(
        lattices, lengths, counts, list(log_p.values())
    )
    kept = {p: max(n, 0.5) for p, n in zip(pieces, expected) if n >= 0.5 or p in chars}
    total = sum(kept.values())
    return {p: math.log(n / total) for p, n in kept.items()}, kept, log_likelihood


def prune(
    log_p: dict[str, float],
    expected: Mapping[str, float],
    size: int,
    chars: set[str],
    max_len: int,
) -> dict[str, float]:
    """Keep ``size`` pieces: the characters, and the pieces whose removal costs most.

    The cost of removing a piece: its expected count times how much less probable the
    best segmentation of its string without it is.
    """
    loss = {}
    for piece, score in list(log_p.items()):
        if piece in chars:
            continue  # characters always stay
        del log_p[piece]
        alternative = viterbi(piece, log_p, -math.inf, max_len)
        log_p[piece] = score
        loss[piece] = expected[piece] * (
            score - sum(log_p[piece[a:b]] for a, b in alternative)
        )
    best = set(sorted(loss, key=lambda piece: -loss[piece])[: size - len(chars)])
    return {p: s for p, s in log_p.items() if p in chars or p in best}


@dataclass
class UnigramModel:
    """A trained unigram model: ``(piece, log-probability)`` after the special tokens,
    most probable first; ``history``: (pieces, log-likelihood per word) per EM step."""

    pieces: list[tuple[str, float]]
    unk_id: int
    history: list[tuple[int, float]] = field(default_factory=list)


def train_unigram(
    word_counts: Mapping[str, int],
    vocab_size: int,
    *,
    min_count: int = 1,
    seed_size: int = 30_000,
    max_len: int = 16,
    shrink: float = 0.75,
    em_steps: int = 2,
    special_tokens: Iterable[str] = UNIGRAM_SPECIAL_TOKENS,
    unk_token: str = "<unk>",
) -> UnigramModel:
    """Learn a unigram vocabulary of ``vocab_size`` entries, special tokens included
    (fewer if the EM steps leave fewer pieces, as on a tiny corpus).

    Seed with characters and frequent substrings; then repeat ``em_steps`` EM steps and
    a pruning to ``shrink`` times the size, until the pieces are at most 10% more than
    wanted; then keep the most probable. Words seen fewer than ``min_count`` times are
    left out of the EM, but every character of every word stays in the vocabulary.
    """
    special_tokens = list(special_tokens)
    if unk_token not in special_tokens:
        raise ValueError(f"unk_token {unk_token!r} must be one of {special_tokens}")
    if not 0 < shrink < 1 or min_count < 1 or em_steps < 1 or seed_size < 0:
        raise ValueError(
            f"expected 0 < shrink < 1, min_count >= 1, em_steps >= 1 and "
            f"seed_size >= 0, got {shrink}, {min_count}, {em_steps} and "
            f"{seed_size}"
        )
    if not all(
        isinstance(w, str) and w and int(c) == c >= 0 for w, c in word_counts.items()
    ):
        raise ValueError("expected a mapping from non-empty strings to counts >= 0")
    chars = {char for word in word_counts for char in word} - set(special_tokens)
    target = vocab_size - len(special_tokens)
    if target < len(chars):
        raise ValueError(
            f"vocab_size {vocab_size} leaves no room for the {len(chars)} "
            f"characters and {len(special_tokens)} special tokens"
        )
    words = [word for word, n in word_counts.items() if n >= min_count]
    counts = [word_counts[word] for word in words]
    log_p = seed_pieces(dict(zip(words, counts)), seed_size, max_len)
    # A special token is never a learned piece, even where a text writes "<unk>"; and a
    # character seen only in words too rare for the EM starts with probability zero.
    log_p = {p: s for p, s in log_p.items() if p not in special_tokens}
    log_p |= {char: -math.inf for char in chars - log_p.keys()}
    history = []
    while True:
        for _ in range(em_steps):
            size = len(log_p)
            log_p, expected, log_likelihood = em_step(
                words, counts, log_p, chars, max_len
            )
            history.append((size, log_likelihood / max(sum(counts), 1)))
        if len(log_p) <= 1.1 * target:
            break
        size = max(int(1.1 * target), int(shrink * len(log_p)))
        log_p = prune(log_p, expected, size, chars, max_len)
    best = sorted((p for p in log_p if p not in chars), key=lambda p: -log_p[p])
    kept = chars | set(best[: target - len(chars)])
    pieces = sorted(
        ((p, s) for p, s in log_p.items() if p in kept),
        key=lambda piece_score: -piece_score[1],
    )
    return UnigramModel(
        [(token, 0.0) for token in special_tokens] + pieces,
        special_tokens.index(unk_token),
        history,
    )


def train_unigram_tokenizer(
    texts: Iterable[str], vocab_size: int, **kwargs
) -> UnigramTokenizer:
    """Count the words of ``texts`` and train a unigram tokenizer on them (see
    ``train_unigram`` for the options)."""
    model = train_unigram(unigram_word_counts(texts), vocab_size, **kwargs)
    return UnigramTokenizer(model.pieces, model.unk_id)


# %% [markdown]
# We train on the corpus of {ref}`sec-tok-why`, WikiText-2 and four novels, to a vocabulary as
# large as the smallest one {ref}`sec-tok-fertility` compares. To keep the run to a few seconds
# of Python, the EM sees only the words that occur at least three times (the cell prints what
# share of the text they are); the characters of the other words still join the vocabulary.
# Each line of the history is one EM step: how many pieces it started with, and the
# log-likelihood per word under the probabilities it started from. The first step, from the
# seed's crude probabilities, gains by far the most (the cell checks it), and it also removes
# many seed pieces, whose expected count falls below one half. Among the most probable pieces
# is "▁<unk>": WikiText writes `<unk>` in place of the rare words it removed, so for the trainer
# it is a frequent word like any other (and a different piece from our special token `<unk>`).

# %%
from tinybert.tokenizers.unigram_training import train_unigram, unigram_word_counts

unigram_size = pick(quick=500, full=8000)
uni_counts = unigram_word_counts(corpus_lines)
frequent = sum(n for n in uni_counts.values() if n >= 3) / sum(uni_counts.values())
start = time.perf_counter()
uni_model = train_unigram(
    uni_counts, unigram_size, min_count=3, seed_size=pick(quick=5000, full=30_000)
)
ours_uni = UnigramTokenizer(uni_model.pieces, uni_model.unk_id)
print(
    f"{len(ours_uni)} pieces learned in {time.perf_counter() - start:.1f} s from "
    f"{len(uni_counts):,} different words; those seen 3+ times are {frequent:.0%} "
    "of the text"
)
for size, log_likelihood in uni_model.history:
    print(
        f"  EM step on {size:6,} pieces: log-likelihood per word {log_likelihood:7.3f}"
    )
print("most probable:", " ".join(piece for piece, _ in uni_model.pieces[5:25]))
line = "It is a truth universally acknowledged, that a single man in possession"
print(ours_uni.encode(line).tokens)
assert len(ours_uni) == unigram_size
assert ours_uni.decode(ours_uni.encode(line).ids) == line
history = [log_likelihood for _, log_likelihood in uni_model.history]
gains = [after - before for before, after in zip(history, history[1:])]
assert gains[0] > 0.5 and gains[0] > 2 * max(map(abs, gains[1:]))  # by far the most
assert all(c in ours_uni.vocab for w in uni_counts for c in w)  # every character kept

# %% [markdown]
# How close is this to Hugging Face's `UnigramTrainer`, which follows SentencePiece? Training
# algorithms differ in their details, so the vocabularies need not be equal, and this is a
# measured comparison, not a parity check: the cell gives Hugging Face's trainer the same words,
# the same characters and the same seed size, shrinking factor and number of EM steps, then
# compares the two vocabularies and how each model scores the held-out book, *The Sign of the
# Four*: the log-probability of its best segmentation per character (higher is better) and the
# number of tokens per word.

# %%
import json

try:
    import tokenizers
except ImportError:  # the comparison is optional: pip install tokenizers
    tokenizers = None
    print("Hugging Face tokenizers is not installed: the comparison is skipped")


def held_out_scores(tok, lines):
    """(log-probability of the best segmentation per character, tokens per word)."""
    encodings = tok.encode_batch(lines, backend="tokenizers")
    log_p = sum(tok.scores.get(t, tok.unk_score) for e in encodings for t in e.tokens)
    n_chars, n_words = sum(map(len, lines)), sum(len(line.split()) for line in lines)
    return log_p / n_chars, sum(map(len, encodings)) / n_words


if tokenizers is not None:
    from tokenizers import models, pre_tokenizers, trainers

    hf_uni = tokenizers.Tokenizer(models.Unigram())
    hf_uni.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    trainer = trainers.UnigramTrainer(
        vocab_size=unigram_size,
        special_tokens=list(UNIGRAM_SPECIAL_TOKENS),
        unk_token="<unk>",
        initial_alphabet=sorted({c for w in uni_counts for c in w}),
        seed_size=pick(quick=5000, full=30_000),
        shrinking_factor=0.75,
        n_sub_iterations=2,
        max_piece_length=16,
        show_progress=False,
    )
    words_seen = [w for w, n in uni_counts.items() if n >= 3 for _ in range(n)]
    start = time.perf_counter()
    hf_uni.train_from_iterator(words_seen, trainer=trainer, length=len(words_seen))
    hf_seconds = time.perf_counter() - start
    model = json.loads(hf_uni.to_str())["model"]
    theirs_uni = UnigramTokenizer(
        [tuple(entry) for entry in model["vocab"]], model["unk_id"]
    )
    shared = len(ours_uni.vocab.keys() & theirs_uni.vocab.keys()) / len(ours_uni)
    print(
        f"Hugging Face's trainer: {len(theirs_uni)} pieces in {hf_seconds:.1f} s; "
        f"{shared:.0%} of our pieces are among them"
    )
    scores = {
        name: held_out_scores(tok, test_lines)
        for name, tok in [("ours", ours_uni), ("Hugging Face's", theirs_uni)]
    }
    for name, (per_char, per_word) in scores.items():
        print(
            f"  {name:15} held out: log-probability per character {per_char:.3f}, "
            f"tokens per word {per_word:.3f}"
        )
    print("  Hugging Face's:", theirs_uni.encode(line).tokens)
    if not is_quick():  # what the text below says
        (ours_char, ours_word), (their_char, their_word) = scores.values()
        assert shared > 0.4 and abs(ours_char - their_char) < 0.05
        assert ours_word < their_word

# %% [markdown]
# About half of the pieces are the same, and per character the two models find the held-out
# book almost equally probable, each under its own probabilities; ours cuts it into fewer tokens
# per word. Whichever trainer made a vocabulary, encoding with it is fixed by the pieces and
# their scores, and there the two implementations must agree exactly; {ref}`sec-tok-parity`
# checks it.
#
# (sec-tok-parity)=
# ## The same ids as Hugging Face
#
# The claim of this chapter is that these tokenizers are the real thing, so we check it on text
# that no vocabulary was trained on: a Gutenberg book and the sentences of the Universal
# Dependencies English Web Treebank. Hugging Face's `tokenizers` (written in Rust) learns a
# WordPiece, a byte-level BPE and a unigram vocabulary and saves them in its usual files; our
# classes load those files, and every line must give the same ids and the same character offsets.
# The reverse direction, our trained vocabularies inside `tokenizers`, is what `to_hugging_face()`
# gives, and what `encode_batch(texts, backend="tokenizers")` uses. For the unigram model this
# direction is the decisive one. Its trainers differ in their details, as
# {ref}`sec-tok-unigram-training` measured, but pieces and log-probabilities fix the encoding
# completely, so our own vocabulary inside Hugging Face's `Unigram` model must give our ids, on
# the held-out lines and on a few awkward texts: empty, only spaces, repeated spaces, unknown
# characters, a literal "▁" and the text of special tokens.

# %%
import tempfile
from pathlib import Path

from tinybert.data import fetch
from tinybert.tokenizers.byte_level import ByteLevelBPETokenizer
from tinybert.tokenizers.unigram import UNIGRAM_SPECIAL_TOKENS, UnigramTokenizer
from tinybert.tokenizers.wordpiece import WordPieceTokenizer

try:
    import tokenizers
except ImportError:  # the parity oracle is optional: pip install tokenizers
    tokenizers = None
    print("Hugging Face tokenizers is not installed: the parity check is skipped")

train_lines = load_gutenberg(1342).splitlines()[: pick(quick=3000, full=None)]
held_out = load_gutenberg(2097).splitlines()[: pick(quick=1000, full=None)]
ud = [
    line[len("# text = ") :]
    for split in ("train", "dev", "test")
    for line in fetch(f"ud_ewt/{split}").read_text(encoding="utf-8").splitlines()
    if line.startswith("# text = ")
][: pick(quick=1000, full=None)]


def count_mismatches(ours, rust, texts, **kwargs):
    pairs = zip(ours.encode_batch(texts, **kwargs), rust.encode_batch(texts, **kwargs))
    return sum(
        got.ids != expected.ids or got.offsets != list(expected.offsets)
        for got, expected in pairs
    )


if tokenizers is not None:
    folder = Path(tempfile.mkdtemp())
    rust_wp = tokenizers.BertWordPieceTokenizer(lowercase=True)
    rust_wp.train_from_iterator(train_lines, vocab_size=3000, show_progress=False)
    rust_wp.save_model(str(folder))
    rust_bl = tokenizers.ByteLevelBPETokenizer()
    rust_bl.train_from_iterator(train_lines, vocab_size=3000, show_progress=False)
    rust_bl.save_model(str(folder))
    rust_uni = tokenizers.Tokenizer(tokenizers.models.Unigram())
    metaspace = tokenizers.pre_tokenizers.Metaspace(prepend_scheme="always")
    rust_uni.pre_tokenizer = metaspace
    rust_uni.train_from_iterator(
        train_lines,
        tokenizers.trainers.UnigramTrainer(
            vocab_size=3000,
            special_tokens=list(UNIGRAM_SPECIAL_TOKENS),
            unk_token="<unk>",
            show_progress=False,
        ),
    )
    rust_uni.save(str(folder / "tokenizer.json"))
    wp = WordPieceTokenizer.from_file(folder / "vocab.txt", lowercase=True)
    bl = ByteLevelBPETokenizer.from_files(folder / "vocab.json", folder / "merges.txt")
    uni = UnigramTokenizer.from_file(folder / "tokenizer.json")
    for name, texts in [("held-out book", held_out), ("UD English EWT", ud)]:
        wp_bad = count_mismatches(wp, rust_wp, texts, add_special_tokens=False)
        bl_bad = count_mismatches(bl, rust_bl, texts)
        uni_bad = count_mismatches(uni, rust_uni, texts)
        print(
            f"{name}: {len(texts)} lines compared; mismatches: WordPiece {wp_bad}, "
            f"byte-level BPE {bl_bad}, unigram {uni_bad}"
        )
        assert wp_bad == 0 and bl_bad == 0 and uni_bad == 0
    # Our own trained vocabularies, handed to the Rust implementation:
    assert count_mismatches(ours_bl, ours_bl.to_hugging_face(), held_out) == 0
    assert (
        count_mismatches(
            ours_wp, ours_wp.to_hugging_face(), held_out, add_special_tokens=True
        )
        == 0
    )
    awkward = [
        "",
        " ",
        "   ",
        "two  spaces ",
        " leading space",
        "naïve café 🙂 東京 ∑",
        "tab\tand\nnewline",
        "a ▁ marked ▁▁space",
        "<unk> [CLS] [MASK]",
        "ǂ" * 30,
    ]
    rust_ours = ours_uni.to_hugging_face()
    for name, texts in [
        ("held-out book", held_out),
        ("UD English EWT", ud),
        ("awkward texts", awkward),
    ]:
        bad = count_mismatches(ours_uni, rust_ours, texts, add_special_tokens=True)
        print(
            f"our unigram vocabulary in Hugging Face's Unigram, {name}: {len(texts)} "
            f"lines, {bad} mismatches"
        )
        assert bad == 0

# %% [markdown]
# (sec-tok-batch)=
# ### Bulk encoding
#
# Since the two implementations agree, bulk work can go to either without changing any result:
# `encode_batch(texts, backend="tokenizers")` builds the Rust tokenizer for the same vocabulary
# and converts its output to our `Encoding` objects. The cell encodes the held-out book with both
# backends, with fresh tokenizers (ours cache the pieces of words they have seen), and checks that
# every encoding, offsets included, is the same. It does not time them: the Rust backend also
# pays for building its tokenizer and for converting every encoding back into Python objects, so
# which backend is faster depends on the tokenizer and on how much text there is, and a speed
# claim belongs in a benchmark that measures both in the same run
# (`benchmarks/bench_tokenizers.py`), not in one timing of a chapter cell.

# %%
if tokenizers is not None:
    texts = held_out
    for name, tok, kwargs in [
        ("WordPiece", WordPieceTokenizer(ours_wp.vocab), {"add_special_tokens": True}),
        ("byte-level BPE", ByteLevelBPETokenizer(ours_bl.vocab, ours_bl.merges), {}),
        (
            "unigram",
            UnigramTokenizer(ours_uni.pieces, ours_uni.unk_id),
            {"add_special_tokens": True},
        ),
    ]:
        results = {
            backend: tok.encode_batch(texts, backend=backend, **kwargs)
            for backend in ("python", "tokenizers")
        }
        assert results["python"] == results["tokenizers"]
        n_tokens = sum(len(encoding.ids) for encoding in results["python"])
        print(
            f"{name:15} {len(texts):,} lines, {n_tokens:,} tokens: the same ids, "
            f"tokens and offsets from both backends"
        )

# %% [markdown]
# (sec-tok-fertility)=
# ## Vocabulary size and fertility
#
# How many tokens does a word cost? The *fertility* of a tokenizer is the number of tokens per
# word of running text. A bigger vocabulary keeps more words whole, so fertility falls, but each
# extra entry is a row of the embedding table and appears less often in training. BERT uses about
# 30,000 entries {cite}`devlin2019bert`, RoBERTa about 50,000 {cite}`liu2019roberta`. We train
# both tokenizers on the corpus of {ref}`sec-tok-why` and measure their fertility on the held-out
# book at several sizes. Training is greedy, and a merge never depends on how many will follow,
# so the vocabulary of a smaller size is the beginning of a larger one (the tests check this):
# one training run at the largest size gives every size. The unigram tokenizer of
# {ref}`sec-tok-unigram-training` joins the comparison at the smallest size, the size it was
# trained to on the same text.

# %% mystnb={"image": {"alt": "Line plot of fertility, tokens per word of the held-out book, against vocabulary size for WordPiece and byte-level BPE; both curves fall as the vocabulary grows, with a wide gap between the two tokenizers."}}
import itertools

import matplotlib.pyplot as plt


def first_entries(tok, size):
    """What training with ``vocab_size=size`` gives: ``tok`` cut to ``size`` entries."""
    vocab = dict(itertools.islice(tok.vocab.items(), size))
    if isinstance(tok, WordPieceTokenizer):
        return WordPieceTokenizer(vocab, lowercase=tok.lowercase)
    merges = itertools.takewhile(lambda pair: pair[0] + pair[1] in vocab, tok.merges)
    return ByteLevelBPETokenizer(vocab, list(merges))


sizes = pick(quick=[500, 1000, 2000], full=[8000, 16000, 24000, 30000])
backend = "python" if tokenizers is None else "tokenizers"  # the same results
start = time.perf_counter()
largest = {
    "WordPiece": train_wordpiece_tokenizer(corpus_lines, vocab_size=sizes[-1]),
    "byte-level BPE": train_byte_level_bpe(corpus_lines, vocab_size=sizes[-1]),
}
print(f"trained on {len(corpus_lines):,} lines in {time.perf_counter() - start:.0f} s")
n_words = sum(len(line.split()) for line in test_lines)
fertility, unknown, n_unk = {name: [] for name in largest}, [], 0
for size in sizes:
    for name, tok in largest.items():
        encodings = first_entries(tok, size).encode_batch(test_lines, backend=backend)
        fertility[name].append(sum(map(len, encodings)) / n_words)
        n_unk += sum(enc.tokens.count("[UNK]") for enc in encodings)
    # a word vocabulary of this size
    known_words = set(word_vocab.itos[1 : size + 1])
    unknown.append(sum(w not in known_words for w in test_words))

print(f"{'entries':31}" + "".join(f"{size:>9,}" for size in sizes))
for name, values in fertility.items():
    print(f"{name + ', tokens per word':31}" + "".join(f"{v:9.3f}" for v in values))
    assert all(a > b for a, b in zip(values, values[1:])), (
        "fertility should fall with size"
    )
print(
    f"{'word vocabulary, words unknown':31}"
    + "".join(f"{n / len(test_words):9.2%}" for n in unknown)
)
# no [UNK] at any size: every character was seen
assert is_quick() or n_unk == 0

fig, ax = plt.subplots(figsize=(5, 3))
for name, values in fertility.items():
    ax.plot(sizes, values, marker="o", label=name)
ax.set_xlabel("vocabulary size")
ax.set_ylabel("tokens per word (held out)")
ax.set_ylim(bottom=1)
ax.legend()
plt.show()

# %% [markdown]
# Both curves fall from each vocabulary size to the next (the cell asserts it; the table prints by
# how much): the entries added last are words and pieces that the held-out book rarely uses.
# Neither tokenizer leaves a word unknown at any size, where a word vocabulary of the same size
# (last row) still misses some of the held-out words. The two tokenizers do not count quite the
# same things (WordPiece drops spaces, byte-level BPE keeps them inside its tokens), but the large
# gap is the training score. The ratio $P(ij)/(P(i)P(j))$ of {ref}`sec-tok-wordpiece-training`
# rewards pairs of *rare* symbols, so our WordPiece vocabulary spends its entries on rare words
# and pieces and never joins the very common "##e" and "##d" into "##ed". The pieces below, at the
# smallest size, show it: ours keeps the rare "playfully" whole but splits the ending of the
# frequent "played", and breaks words it has never seen into single letters. The other two give
# "playfully" the stem "play" of its relatives, and the WordPiece vocabulary learned by count
# (Hugging Face's trainer, when `tokenizers` is installed) even cuts the name "sinan" into
# "sin ##an", as BERT's own vocabulary does on Ozdemir's slides.

# %%
small = {name: first_entries(tok, sizes[0]) for name, tok in largest.items()}
# Hugging Face's trainer: WordPiece pieces, merges chosen by count
if tokenizers is not None:
    rust = tokenizers.BertWordPieceTokenizer(lowercase=True)
    rust.train_from_iterator(
        corpus_lines, vocab_size=sizes[0], min_frequency=2, show_progress=False
    )
    small["WordPiece by count"] = WordPieceTokenizer(rust.get_vocab())
assert len(ours_uni) == sizes[0]  # the same size, trained on the same text
small["unigram"] = ours_uni
widths = [40, 20, 24, 28]
print(
    f"{sizes[0]:,} entries  ", "".join(f"{name:{w}}" for name, w in zip(small, widths))
)
for word in ["played", "playfully", "sinan", "unemotional", "hypodermic"]:
    pieces = [
        tok.encode(word if isinstance(tok, WordPieceTokenizer) else " " + word).tokens
        for tok in small.values()
    ]
    print(f"  {word:13}", "".join(f"{' '.join(p):{w}}" for p, w in zip(pieces, widths)))
fertilities = [
    sum(map(len, tok.encode_batch(test_lines, backend=backend))) / n_words
    for tok in small.values()
]
print(
    f"  {'per word':13}", "".join(f"{f:<{w}.3f}" for f, w in zip(fertilities, widths))
)
if not is_quick():  # what the text says about these pieces
    assert (
        "##ed" not in largest["WordPiece"].vocab
        and "playfully" in small["WordPiece"].vocab
    )
    if tokenizers is not None:
        assert small["WordPiece by count"].encode("sinan").tokens == ["sin", "##an"]
    per_word = dict(zip(small, fertilities))
    assert per_word["unigram"] < min(per_word["WordPiece"], per_word["byte-level BPE"])
    assert small["unigram"].encode("sinan").tokens == ["▁sin", "an"]
    assert small["unigram"].encode("playfully").tokens[0] == "▁play"
    if tokenizers is not None:
        assert abs(per_word["unigram"] / per_word["WordPiece by count"] - 1) < 0.1

# %% [markdown]
# Hugging Face's WordPiece trainer learns its merges with BPE's count and uses WordPiece only to
# encode, and its vocabulary of the same size costs far fewer tokens per word (the last line). It
# is a vocabulary of that kind that {ref}`sec-tok-parity` loads, and our encoder treats it
# exactly as one of its own. Our fast trainer learns such a vocabulary too, with
# `train_wordpiece(..., score="count")`: the tests check that it costs as many tokens per word as
# Hugging Face's, and chapter 9 trains the course checkpoint's vocabulary that way. The unigram
# vocabulary of the same size, trained on the same text,
# needs fewer tokens per word than our WordPiece and than byte-level BPE, and about as few (within
# 10%) as the WordPiece vocabulary learned by count. Its pieces look like theirs: the stem
# "▁play" in "playfully", and "sinan" cut into "▁sin" and "an", as BERT's vocabulary does. No
# merge order is involved: the pieces come out of the most probable segmentation under the model.
#
# (sec-tok-summary)=
# ## Summary
#
# - A word vocabulary is large, still misses words of new text, and gives related forms unrelated
#   entries. Subword vocabularies keep frequent words whole and cut the rest into frequent pieces,
#   down to characters or bytes, so no word is out of the vocabulary.
# - BERT's tokenizer normalises (clean, space out Chinese characters and, for uncased models,
#   lower-case and strip accents: "Café Dupont" becomes "cafe dupont"), splits on whitespace and
#   punctuation, and cuts each word greedily into the longest WordPiece entries, with `[UNK]` for
#   words it cannot cover. `[CLS]`, `[SEP]`, `[PAD]` and `[MASK]` frame, separate, fill and hide.
# - Byte-level BPE works on UTF-8 bytes shown as printable characters, so it never needs `[UNK]`
#   and decodes any text back exactly.
# - Both keep, for each token, the span of the original text it came from.
# - BPE training merges the most frequent pair. WordPiece's paper adds the unit that most raises
#   the training likelihood; Google's trainer is unpublished, and ours uses the Hugging Face
#   course's stand-in, the pair with the highest $P(ij)/(P(i)P(j))$, which favours rare symbols
#   that stick together. The straightforward trainer recounts everything after each merge; the
#   fast one updates only the words that contain the merged pair and keeps the scores in a heap,
#   with the same result.
# - The unigram tokenizer (SentencePiece, ALBERT) gives every piece a probability and returns
#   the most probable segmentation, found by the Viterbi algorithm on the lattice of pieces.
#   Its training goes downwards: from a large seed, EM steps (expected counts by
#   forward–backward) alternate with pruning the pieces whose removal costs least likelihood,
#   single characters always kept. Training algorithms differ in details, but our vocabulary
#   inside Hugging Face's `Unigram` gives exactly our ids.
# - Fertility falls as the vocabulary grows, and the training score matters as much as the
#   size.
# - Our tokenizers read and write the files Hugging Face uses (`vocab.txt`; `vocab.json` and
#   `merges.txt`; the unigram model of a `tokenizer.json`) and give the same ids and offsets on every line checked in
#   {ref}`sec-tok-parity`. `encode_batch(texts, backend="tokenizers")` hands bulk work to the
#   equivalent Rust tokenizer, with the same results; `benchmarks/bench_tokenizers.py` measures
#   the speed of both, in the same run.
#
# (sec-tok-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-tok-merge-step
# :difficulty: 2
# :minutes: 30
# :kind: coding
# :::
# **One BPE merge step.** Write `bpe_merge_step(words)` for a dictionary that maps each word, as a
# tuple of symbols, to its count. Return `(pair, new_words)`: the most frequent adjacent pair
# (counting every occurrence, weighted by the word's count; on a tie, the pair seen first when
# reading the words in order, each left to right) and the dictionary with that pair merged
# everywhere, left to right. If no word has two symbols, return `(None, words)`. Do not use
# `train_bpe_simple`, `train_bpe` or `merge_pair`.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-tok-merge-step
# :class: dropdown
# ::::
# Count pairs in a dictionary that remembers insertion order, take the maximum (Python's `max`
# keeps the first of equal keys), then rebuild each word, skipping ahead by two after a merge so
# that "a a a" becomes "aa a".

# %% tags=["solution"]
from collections import Counter


def bpe_merge_step(words: dict[tuple[str, ...], int]):
    ### BEGIN SOLUTION
    pairs = Counter()
    for symbols, n in words.items():
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += n
    if not pairs:
        return None, dict(words)
    best = max(pairs, key=pairs.get)
    new_words = {}
    for symbols, n in words.items():
        out, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                out.append(symbols[i] + symbols[i + 1])
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        new_words[tuple(out)] = n
    return best, new_words
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch07 import check_bpe_merge_step

check_bpe_merge_step(bpe_merge_step)


# %% [markdown]
# :::{exercise-start}
# :label: ex-tok-greedy
# :difficulty: 2
# :minutes: 20
# :kind: coding
# :::
# **Greedy longest-match-first.** Write `greedy_wordpiece(word, vocab)` that splits one
# (already normalised) word into WordPiece pieces from the set `vocab`: the longest entry that
# starts the word, then the longest `##` entry that continues it, and so on. Return `["[UNK]"]`
# if some position cannot be continued or if the word is longer than 100 characters.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-tok-greedy
# :class: dropdown
# ::::
# Try the longest candidate first and shorten it one character at a time.

# %% tags=["solution"]
def greedy_wordpiece(word: str, vocab: set[str]) -> list[str]:
    ### BEGIN SOLUTION
    if len(word) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:
            return ["[UNK]"]
    return pieces
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch07 import check_greedy_wordpiece

check_greedy_wordpiece(greedy_wordpiece)

# %% [markdown]
# :::{exercise-start}
# :label: ex-tok-viterbi
# :difficulty: 2
# :minutes: 30
# :kind: coding
# :::
# **Viterbi segmentation.** Write `viterbi_segment(word, log_probs)` that returns the most
# probable segmentation of `word` under a unigram model, as a list of pieces. `log_probs` maps
# each piece to its log-probability, and every single character of `word` is a piece. Fill
# `best[e]`, the highest log-probability of a segmentation of `word[:e]`, from left to right,
# remembering where the last piece of that best segmentation starts; then follow those starts
# back from the end of the word. Do not list the segmentations, and do not use `viterbi` or
# `UnigramTokenizer`.
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-tok-viterbi
# :class: dropdown
# ::::
# For each end position, try every piece that ends there; the best segmentation of
# `word[:end]` is the best one of `word[:start]` followed by the piece `word[start:end]`.

# %% tags=["solution"]
import math


def viterbi_segment(word: str, log_probs: dict[str, float]) -> list[str]:
    ### BEGIN SOLUTION
    n = len(word)
    best = [0.0] + [-math.inf] * n
    start_of = [0] * (n + 1)
    for end in range(1, n + 1):
        for start in range(end):
            piece = word[start:end]
            if piece in log_probs and best[start] + log_probs[piece] > best[end]:
                best[end], start_of[end] = best[start] + log_probs[piece], start
    pieces, end = [], n
    while end > 0:
        pieces.append(word[start_of[end] : end])
        end = start_of[end]
    return pieces[::-1]
    ### END SOLUTION


# %% [markdown]
# ::::{solution-end}
# ::::

# %% tags=["check"]
from tinybert.exercises.ch07 import check_viterbi_segment

check_viterbi_segment(viterbi_segment)

# %% [markdown]
# :::{exercise-start}
# :label: ex-tok-scores
# :difficulty: 1
# :minutes: 15
# :kind: derivation
# :::
# **BPE against WordPiece by hand (pen and paper).** In the corpus
# {"hat": 6, "has": 4, "zx": 2} (no end-of-word marker), list the adjacent character pairs with
# their counts. Which pair does BPE merge first? Which does WordPiece merge first, using
# count(ij) / (count(i) count(j)) with character counts over the whole corpus? Why do they differ?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-tok-scores
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): the pair counts (ha 10, at 6, as 4, zx 2); BPE merges
# "ha"; WordPiece's scores 0.1, 0.1, 0.1 and 0.5, so it merges "zx"; the reason: the score favours
# pairs whose parts seldom occur apart.
#
# Pairs: "ha" 10, "at" 6, "as" 4, "zx" 2. Character counts: h 10, a 10, t 6, s 4, z 2, x 2.
# BPE takes the most frequent pair, "ha". WordPiece scores "ha" 10/(10·10) = 0.1, "at"
# 6/(10·6) = 0.1, "as" 4/(10·4) = 0.1 and "zx" 2/(2·2) = 0.5, so it merges "zx": "z" and "x" only
# ever occur together, while "h" and "a" are common enough that their meeting is less telling.
# The cell checks this with the chapter's code (WordPiece writes continuations with `##`).

# %%
from tinybert.tokenizers.bpe import train_bpe
from tinybert.tokenizers.wordpiece_training import wordpiece_merge_scores

corpus = {"hat": 6, "has": 4, "zx": 2}
assert train_bpe(corpus, 1).merges == [("h", "a")]
scores = wordpiece_merge_scores(
    [[w[0]] + ["##" + c for c in w[1:]] for w in corpus], list(corpus.values())
)
assert max(scores, key=scores.get) == ("z", "##x") and scores[("z", "##x")] == 0.5

# %% [markdown]
# ::::{solution-end}
# ::::
#
# :::{exercise-start}
# :label: ex-tok-bytes
# :difficulty: 1
# :minutes: 10
# :kind: concept
# :::
# **How many byte tokens? (pen and paper)** With a byte-level tokenizer that has no merges, how
# many tokens do "café", "東京" and the family emoji "👩‍👩‍👧" (woman, zero-width joiner, woman,
# zero-width joiner, girl) produce? UTF-8 uses 1 byte below U+0080, 2 below U+0800, 3 below
# U+10000 and 4 above. What does this say about the cost of non-English text for a byte-level
# vocabulary trained mostly on English?
# :::{exercise-end}
# :::
#
# ::::{solution-start} ex-tok-bytes
# :class: dropdown
# ::::
# **Rubric** (what a full answer contains): 5, 6 and 18 tokens, from the bytes of each code point;
# the consequence that text in other scripts costs several times more tokens, so a fixed context
# holds less of it.
#
# "café": c, a, f take one byte each and é (U+00E9) two: 5 tokens. "東京": two characters of
# three bytes each: 6 tokens. The emoji is five code points: three emoji of four bytes and two
# joiners (U+200D) of three bytes: 18 tokens for what a reader sees as one symbol. Merges learned
# on English text rarely cover such byte sequences, so the same content costs several times more
# tokens, and a fixed-length model sees less of it.

# %%
from tinybert.tokenizers.byte_level import BYTE_TO_CHAR, ByteLevelBPETokenizer

no_merges = ByteLevelBPETokenizer({c: b for b, c in BYTE_TO_CHAR.items()}, [])
texts = ["café", "東京", "👩\u200d👩\u200d👧"]
counts = {text: len(no_merges.encode(text)) for text in texts}
print(counts)
assert list(counts.values()) == [5, 6, 18]

# %% [markdown]
# ::::{solution-end}
# ::::
#
# (sec-tok-quiz)=
# ## Quiz
#
# Check what you took from this chapter. In a notebook, run the cell and answer with
# `quiz.check(question, answer)`, such as `quiz.check(1, "b")`; here, press *Check*.

# %% tags=["quiz", "remove-input"]
from tinybert.exercises.quiz import Quiz, choice, number

quiz = Quiz(
    "ch07",
    [
        choice(
            "What does BERT's uncased normaliser make of 'Café Dupont'?",
            ["Café Dupont", "CAFE DUPONT", "café dupont", "cafe dupont"],
            answer="d",
            explain="Lower-case, then strip the accents.",
        ),
        choice(
            "Which tokenizer never needs an unknown token?",
            ["WordPiece", "a word vocabulary", "byte-level BPE", "none of them"],
            answer="c",
            explain="Every string is a sequence of bytes.",
        ),
        choice(
            "Which pair does this chapter's WordPiece trainer merge next?",
            [
                "the pair with the highest P(ij) / (P(i) P(j))",
                "the most frequent pair",
                "the pair with the highest P(i) P(j)",
                "the pair with the lowest P(ij) / (P(i) P(j))",
            ],
            answer="a",
            explain=(
                "The Hugging Face course's stand-in for WordPiece's unpublished rule; "
                "BPE merges the most frequent pair."
            ),
        ),
        number(
            "How many tokens does 'café' give a byte-level tokenizer without merges?",
            answer=len("café".encode("utf-8")),
            decimals=0,
            explain="é takes two bytes in UTF-8.",
        ),
        choice(
            "As the vocabulary grows, the fertility (tokens per word)",
            [
                "grows",
                "falls, quickly at first and then slowly",
                "falls, slowly at first and then quickly",
                "falls in a straight line",
            ],
            answer="b",
            explain="Frequent words are whole early; the rest gain little.",
        ),
        choice(
            "How does a unigram tokenizer, such as ALBERT's, cut a word into pieces?",
            [
                "longest vocabulary entry first, from the left",
                "by applying the learned merges in order",
                "into the fewest pieces its vocabulary allows",
                "into the segmentation with the highest product of piece probabilities",
            ],
            answer="d",
            explain="The Viterbi algorithm finds it without listing them all.",
        ),
        choice(
            "How does WordPiece mark a piece that continues a word?",
            ["a leading ##", "a leading Ġ", "a trailing </w>", "a leading ▁"],
            answer="a",
            explain="Ġ is byte-level BPE's mark of a preceding space.",
        ),
    ],
)
quiz
