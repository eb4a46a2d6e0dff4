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
# WordPiece ids and RoBERTa reads byte-level BPE ids. This chapter builds both from scratch and
# checks, line by line on real text, that they give exactly the ids and character offsets that the
# Hugging Face `tokenizers` library gives for the same vocabulary files.
#
# **What you will learn**
#
# - why models read *subwords* rather than words or characters: the size of a word vocabulary,
#   the words it has never seen, and the related forms (play, played, playing) it cannot relate;
# - how byte-pair encoding and WordPiece learn a vocabulary, on the lecture's worked examples and
#   on real text, and why their two scores choose different merges;
# - how BERT normalises text (control characters, Chinese characters, lower-casing, accents),
#   splits it into words and punctuation, and cuts each word into WordPiece tokens by greedy
#   longest-match-first with `##` continuations and `[UNK]`;
# - how GPT-2 and RoBERTa map every byte to a printable character, split text with a regular
#   expression, and apply BPE merges by rank, so that any text encodes and decodes losslessly;
# - how every token keeps the character offsets of the text it came from, which question
#   answering and token classification need later, and where the special tokens `[CLS]`, `[SEP]`,
#   `[PAD]` and `[MASK]` go;
# - how the vocabulary size trades the number of tokens per word against the size of the table.
#
# **Uses**: from {doc}`02_word_vectors`, the Gutenberg reader `load_gutenberg` for training and
# test text, and the word splitter `words` and the word-level `Vocabulary` (all in
# `tinybert.corpus`) to measure what word-level vocabularies get wrong; and `fetch` from
# `tinybert.data`.
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

corpus_lines = [line for split in ("valid", "test")
                for line in fetch(f"wikitext2/{split}").read_text(encoding="utf-8").splitlines()]
corpus_lines += [line for b in (1342, 98, 1400, 76) for line in load_gutenberg(b).splitlines()]
corpus_lines = corpus_lines[: pick(quick=3000, full=None)]     # about 5 MB in full mode
test_lines = load_gutenberg(2097).splitlines()[: pick(quick=1000, full=None)]

train_words = words("\n".join(corpus_lines))
test_words = words("\n".join(test_lines))
word_vocab = Vocabulary.from_words(train_words)          # most frequent first; id 0 is <unk>
once = sum(n == 1 for n in word_vocab.counts[1:])
print(f"training text: {len(train_words):,} words, {len(word_vocab) - 1:,} different, "
      f"{once:,} ({once / (len(word_vocab) - 1):.0%}) of them seen only once")
for size in [1000, 8000, len(word_vocab) - 1]:
    known = set(word_vocab.itos[1 : size + 1])
    unknown = [w for w in test_words if w not in known]
    print(f"word vocabulary of {size:>6,}: {len(unknown) / len(test_words):6.2%} of the "
          f"{len(test_words):,} held-out words unknown")
never_seen = list(dict.fromkeys(w for w in test_words if w not in word_vocab))
print(f"{len(never_seen):,} held-out words never seen in training, e.g.", ", ".join(never_seen[:5]))
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


# %% tags=["export:tokenizers.encoding"]
@dataclass
class Encoding:
    """The result of encoding one text: ids, token strings, and character offsets.

    ``offsets[i] = (start, end)`` means token ``i`` came from ``text[start:end]`` of the original
    text (special tokens added by the tokenizer get ``(0, 0)``).
    """

    ids: list[int] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    offsets: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not len(self.ids) == len(self.tokens) == len(self.offsets):
            raise ValueError(f"ids, tokens and offsets must have the same length, got "
                             f"{len(self.ids)}, {len(self.tokens)} and {len(self.offsets)}")

    def __len__(self) -> int:
        return len(self.ids)


# %% [markdown]
# Every tokenizer here also encodes many texts at once, `tok.encode_batch(texts)`, either with
# its own Python code (`backend="python"`, the default) or by handing the batch to the equivalent
# tokenizer of Hugging Face's `tokenizers` library, written in Rust (`backend="tokenizers"`). The
# results are the same `Encoding` objects; {ref}`sec-tok-parity` checks that and measures the
# speed. The function below does the work for both kinds of tokenizer.

# %% tags=["export:tokenizers.encoding"]
BACKENDS = ("python", "tokenizers")


def batch_encode(tokenizer, texts: list[str], backend: str = "python", **kwargs) -> list[Encoding]:
    """``tokenizer.encode(text, **kwargs)`` for each text, or the same from the Rust tokenizer
    that ``tokenizer.to_hugging_face()`` builds (``backend="tokenizers"``)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if not isinstance(texts, (list, tuple)):
        raise ValueError(f"encode_batch expects a list of str, got {type(texts).__name__}")
    for text in texts:
        if not isinstance(text, str):
            raise ValueError(f"encode_batch expects a list of str, got an item of type "
                             f"{type(text).__name__}")
    if backend == "python":
        return [tokenizer.encode(text, **kwargs) for text in texts]
    rust = tokenizer.to_hugging_face()
    return [Encoding(list(e.ids), list(e.tokens), [tuple(o) for o in e.offsets])
            for e in rust.encode_batch(list(texts), **kwargs)]


def import_tokenizers():
    """The ``tokenizers`` library, or an ImportError that says how to install it."""
    try:
        import tokenizers
    except ImportError as error:
        raise ImportError("backend='tokenizers' needs Hugging Face's tokenizers library, which "
                          "is not installed: pip install tokenizers") from error
    return tokenizers


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
# merged symbols in the order they were made). This rule reproduces both examples on the slides. The cell below keeps the pair
# counts up to date after each merge instead of recounting, and a heap finds the best pair.

# %% tags=["export"]
from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass


def merge_pair(symbols: list[str], pair: tuple[str, str], into: str | None = None) -> list[str]:
    """Replace every occurrence of ``pair`` in ``symbols`` by ``into`` (by default the two
    symbols joined), scanning left to right."""
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
    """A trained BPE: token -> id (characters first, then one token per merge) and the merges."""

    vocab: dict[str, int]
    merges: list[tuple[str, str]]


def train_bpe(word_counts: Mapping[str, int], num_merges: int, *, min_count: int = 1,
              alphabet: list[str] | tuple[str, ...] = ()) -> BPEModel:
    """Learn up to ``num_merges`` merges from ``{word: count}``; stop when no pair occurs
    ``min_count`` times. ``alphabet`` lists characters to put first in the vocabulary."""
    if num_merges < 0 or min_count < 1:
        raise ValueError(f"expected num_merges >= 0 and min_count >= 1, "
                         f"got {num_merges} and {min_count}")
    if not all(isinstance(w, str) and w and int(c) == c >= 0 for w, c in word_counts.items()):
        raise ValueError("expected a mapping from non-empty strings to counts >= 0")
    ids: dict[str, int] = {}
    for char in [*alphabet, *(c for word in word_counts for c in word)]:
        ids.setdefault(char, len(ids))
    words = [list(word) for word in word_counts]
    counts = list(word_counts.values())
    pair_counts: Counter[tuple[str, str]] = Counter()
    where: defaultdict[tuple[str, str], set[int]] = defaultdict(set)   # pair -> word indices
    for w, (symbols, n) in enumerate(zip(words, counts)):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += n
            where[pair].add(w)
    def entry(pair: tuple[str, str]) -> tuple[int, int, int, int, tuple[str, str]]:
        # Highest count first; ties: shorter new token, then older symbols. Stale entries
        # (whose count has changed since they were pushed) are skipped when popped.
        a, b = pair
        return (-pair_counts[pair], len(a) + len(b), ids[a], ids[b], pair)

    heap = [entry(pair) for pair in pair_counts]
    heapq.heapify(heap)
    merges: list[tuple[str, str]] = []
    while heap and len(merges) < num_merges:
        neg_count, *_, pair = heapq.heappop(heap)
        if pair_counts[pair] != -neg_count:
            continue                                   # stale entry: the count has changed
        if -neg_count < min_count:
            break
        merges.append(pair)
        ids.setdefault(pair[0] + pair[1], len(ids))
        changed = set()
        for w in where.pop(pair):
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
    return BPEModel(ids, merges)


def encode_and_show_work(word: str, merges: list[tuple[str, str]],
                         names: Mapping[str, str] | None = None) -> list[str]:
    """Apply ``merges`` in order, printing the word after each merge that changes it.

    ``names`` optionally renames merged symbols for display (the slides write Z for "aa").
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
            label = f" ({names[pair[0] + pair[1]]}={a}{b})" if pair[0] + pair[1] in names else ""
            print(f"step {step}: {show(new)}{label}")
        symbols = new
    return symbols


# %% [markdown]
# The slides' first example, "aaabdaaabac", one word seen once: "aa" is the most frequent pair,
# then "ab" and "Z a" tie with two occurrences each, and the shorter new token wins.

# %%
from tinybert.tokenizers.bpe import encode_and_show_work, merge_pair, train_bpe

model = train_bpe({"aaabdaaabac": 1}, num_merges=3)
print(model.merges)
names = {"aa": "Z", "ab": "Y", "aaab": "X"}
final = encode_and_show_work("aaabdaaabac", model.merges, names)
assert model.merges == [("a", "a"), ("a", "b"), ("aa", "ab")]
steps, symbols = [], list("aaabdaaabac")
for pair in model.merges:
    symbols = merge_pair(symbols, pair)
    steps.append("".join(names.get(s, s) for s in symbols))
assert steps == ["ZabdZabac", "ZYdZYac", "XdXac"] and symbols == final   # the slides' steps

# %% [markdown]
# The second example counts words: "text" 9 times, "texting" 10 times and "context" 11 times,
# with "_" marking the end of a word. As on the slides, "te" comes first, "text_" and "con" later,
# and the whole word "texting_" last; then every word is a single token and training stops.

# %%
corpus = {"text_": 9, "texting_": 10, "context_": 11}
model = train_bpe(corpus, num_merges=20)
learned = ["".join(pair) for pair in model.merges]
print("  ".join(f"{step}:{'+'.join(pair)}" for step, pair in enumerate(model.merges, 1)))
assert learned[0] == "te" and len(learned) < 20      # it stopped: every word is one token
assert learned.index("text_") < learned.index("con") < learned.index("texting_")

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

# Characters with the Unicode White_Space property (what Rust's char::is_whitespace tests).
WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
                       + "".join(chr(c) for c in range(0x2000, 0x200B)))

# The CJK Unified Ideograph blocks that BERT surrounds with spaces.
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in CJK_RANGES)


def is_punctuation(char: str) -> bool:
    """ASCII punctuation (which includes $ + < = > ^ ` | ~) or any Unicode P* category."""
    return char in string.punctuation or unicodedata.category(char).startswith("P")


def bert_normalize(text: str, *, clean_text: bool = True, handle_chinese_chars: bool = True,
                   strip_accents: bool = False, lowercase: bool = False) -> tuple[str, list[int]]:
    """BERT's normaliser. Returns the new text and, per new character, its index in ``text``."""
    out: list[str] = []
    source: list[int] = []
    for i, char in enumerate(text):
        if clean_text:
            if char in "\t\n\r":
                char = " "
            elif char in "\x00\ufffd" or unicodedata.category(char).startswith("C"):
                continue                                   # control, format, unassigned ...
            elif char.isspace():
                char = " "
        pieces = f" {char} " if handle_chinese_chars and is_cjk(char) else char
        if strip_accents:
            pieces = "".join(c for c in unicodedata.normalize("NFD", pieces)
                             if unicodedata.category(c) != "Mn")
        if lowercase:
            pieces = "".join(c.lower() for c in pieces)    # per character: no final-sigma rule
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
for name, flags in [("uncased", dict(strip_accents=True, lowercase=True)), ("cased", {})]:
    normalized, source = bert_normalize(text, **flags)
    words_of_text = [normalized[a:b] for a, b in bert_pre_tokenize(normalized)]
    print(f"{name:8} {normalized!r:28} -> {words_of_text}")
    assert len(source) == len(normalized) and all(0 <= s < len(text) for s in source)
assert bert_normalize("Café Dupont", strip_accents=True, lowercase=True)[0] == "cafe dupont"
assert bert_normalize("Café Dupont")[0] == "Café Dupont"

# %% [markdown]
# The slides' example is the first line: the *uncased* tokenizer turns "Café Dupont" into "cafe
# dupont", while the *cased* one leaves letters alone and only cleans the text. Uncased is the
# usual choice, because case seldom changes what a word means and one entry then serves "The"
# and "the"; cased helps where case carries information, as in recognising names. Neither folds
# the ligature "ﬁ" into "fi": BERT decomposes accents, not compatibility characters. The choice
# belongs to the tokenizer, not to the model, but a model must always be used with the
# normalisation it was trained with.
#
# (sec-tok-wordpiece)=
# ## WordPiece encoding
#
# A WordPiece vocabulary holds whole words ("the"), word beginnings ("play") and word
# continuations marked with `##` ("##ing"). To encode a word, take the longest vocabulary entry
# that starts the word, then the longest `##` entry that continues from there, and so on. If at
# some point no entry fits, the *whole* word becomes `[UNK]`; words longer than 100 characters
# become `[UNK]` without trying.

# %% tags=["export:tokenizers.wordpiece"]
from __future__ import annotations

from pathlib import Path

from tinybert.tokenizers.encoding import Encoding, batch_encode, import_tokenizers
from tinybert.tokenizers.normalizers import bert_normalize, bert_pre_tokenize

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def read_vocab_txt(path: str | Path) -> dict[str, int]:
    """One token per line; the id is the line number."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return {line.rstrip(): i for i, line in enumerate(lines)}


def save_vocab_txt(vocab: dict[str, int], path: str | Path) -> Path:
    ids = sorted(vocab.values())
    if ids != list(range(len(ids))):
        raise ValueError(f"vocabulary ids must be 0..{len(ids) - 1} without gaps, got {ids[:5]}...")
    path = Path(path)
    path.write_text("".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])),
                    encoding="utf-8")
    return path


# %% tags=["export:tokenizers.wordpiece"]
class WordPieceTokenizer:
    """BERT's tokenizer: normalise, split on whitespace and punctuation, then greedy WordPiece."""

    def __init__(self, vocab: dict[str, int], *, lowercase: bool = True,
                 strip_accents: bool | None = None, clean_text: bool = True,
                 handle_chinese_chars: bool = True, unk_token: str = "[UNK]",
                 continuing_prefix: str = "##", max_input_chars_per_word: int = 100):
        if unk_token not in vocab:
            raise ValueError(f"the vocabulary must contain the unknown token {unk_token!r}; "
                             f"got {len(vocab)} entries without it")
        self.vocab = dict(vocab)
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.clean_text, self.handle_chinese_chars = clean_text, handle_chinese_chars
        self.unk_token, self.continuing_prefix = unk_token, continuing_prefix
        self.max_input_chars_per_word = max_input_chars_per_word
        self._cache: dict[str, list[tuple[str, int, int]] | None] = {}

    @classmethod
    def from_file(cls, path: str | Path, **kwargs) -> WordPieceTokenizer:
        return cls(read_vocab_txt(path), **kwargs)

    def save(self, path: str | Path) -> Path:
        return save_vocab_txt(self.vocab, path)

    def split_word(self, word: str) -> list[tuple[str, int, int]] | None:
        """Greedy longest-match-first: ``[(piece, start, end), ...]``, or None for ``[UNK]``."""
        if word in self._cache:
            return self._cache[word]
        pieces: list[tuple[str, int, int]] | None = []
        if len(word) > self.max_input_chars_per_word:
            pieces = None
        start = 0
        while pieces is not None and start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else self.continuing_prefix + word[start:end]
                if piece in self.vocab:
                    pieces.append((piece, start, end))
                    start = end
                    break
            else:
                pieces = None                      # no piece fits: the whole word is unknown
        self._cache[word] = pieces
        return pieces

    def encode(self, text: str, add_special_tokens: bool = False) -> Encoding:
        if not isinstance(text, str):
            raise ValueError(f"encode expects a str, got {type(text).__name__}")
        normalized, source = bert_normalize(
            text, clean_text=self.clean_text, handle_chinese_chars=self.handle_chinese_chars,
            strip_accents=self.strip_accents, lowercase=self.lowercase)
        tokens: list[str] = []
        offsets: list[tuple[int, int]] = []
        for word_start, word_end in bert_pre_tokenize(normalized):
            pieces = self.split_word(normalized[word_start:word_end])
            if pieces is None:
                pieces = [(self.unk_token, 0, word_end - word_start)]
            for piece, start, end in pieces:
                tokens.append(piece)
                offsets.append((source[word_start + start], source[word_start + end - 1] + 1))
        if add_special_tokens:
            tokens = ["[CLS]"] + tokens + ["[SEP]"]
            offsets = [(0, 0)] + offsets + [(0, 0)]
        return Encoding([self.vocab[t] for t in tokens], tokens, offsets)

    def encode_batch(self, texts: list[str], add_special_tokens: bool = False, *,
                     backend: str = "python") -> list[Encoding]:
        """``encode`` each text; ``backend="tokenizers"`` gives the same, faster, from Rust."""
        return batch_encode(self, texts, backend, add_special_tokens=add_special_tokens)

    def to_hugging_face(self):
        """The equivalent Rust tokenizer from the ``tokenizers`` library (for bulk speed)."""
        rust = import_tokenizers().BertWordPieceTokenizer(
            self.vocab, unk_token=self.unk_token, lowercase=self.lowercase,
            strip_accents=self.strip_accents, clean_text=self.clean_text,
            handle_chinese_chars=self.handle_chinese_chars,
            wordpieces_prefix=self.continuing_prefix)
        # BertWordPieceTokenizer has no argument for the word-length limit: set it on the model.
        rust._tokenizer.model.max_input_chars_per_word = self.max_input_chars_per_word
        return rust

    def decode(self, ids: list[int]) -> str:
        unknown = [i for i in ids if i not in self.id_to_token]
        if unknown:
            raise ValueError(f"ids must be in 0..{len(self.vocab) - 1}, got {unknown[:5]}")
        text = " ".join(self.id_to_token[i] for i in ids)
        return text.replace(" " + self.continuing_prefix, "")

    def __len__(self) -> int:
        return len(self.vocab)


# %% [markdown]
# A toy vocabulary shows the rule on the slides' sentence. The name "sinan" is not in the
# vocabulary, so it is cut into two pieces that are; a word with a letter that no piece covers
# becomes `[UNK]` as a whole. With `add_special_tokens=True` the encoding starts with `[CLS]` and
# ends with `[SEP]`, exactly as on the slides.

# %%
from tinybert.tokenizers.wordpiece import WordPieceTokenizer

toy = WordPieceTokenizer({t: i for i, t in enumerate(
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "sin", "##an", "loves", "a", "beautiful",
     "day", "another", "play", "##ing", "##s", ",", "s", "##i", "##n", "caf", "##e"])})
print("'sinan' in the vocabulary:", "sinan" in toy.vocab)
print(toy.encode("Sinan loves a beautiful day", add_special_tokens=True).tokens)
for text in ["Playing, plays", "Café", "xyz"]:
    enc = toy.encode(text)
    print(f"{text!r:16} -> {list(zip(enc.tokens, enc.offsets))}")
assert toy.encode("Sinan loves a beautiful day", add_special_tokens=True).tokens == \
    ["[CLS]", "sin", "##an", "loves", "a", "beautiful", "day", "[SEP]"]
assert toy.encode("xyz").tokens == ["[UNK]"]
assert toy.encode("Café").offsets == [(0, 3), (3, 4)]     # "##e" still points at "é"

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
# input of length 14 by hand from two encodings, with the slides' two sentences and one word
# masked; the BERT chapters build such inputs in code.

# %%
first = toy.encode("Sinan loves a beautiful day").tokens
second = toy.encode("Another beautiful day").tokens
tokens = ["[CLS]", *first, "[SEP]", *second, "[SEP]"]
segments = [0] * (len(first) + 2) + [1] * (len(second) + 1)
length = 14
n_pad = length - len(tokens)
tokens, segments = tokens + ["[PAD]"] * n_pad, segments + [0] * n_pad
real = [token != "[PAD]" for token in tokens]                  # the padding mask
ids = [toy.vocab[token] for token in tokens]
try:                                  # Hugging Face's BERT tokenizer lays out the same input
    rust = toy.to_hugging_face()
    rust.enable_padding(length=length, pad_id=toy.vocab["[PAD]"], pad_token="[PAD]")
    expected = rust.encode("Sinan loves a beautiful day", "Another beautiful day")
    assert (expected.ids, expected.type_ids) == (ids, segments)
    assert expected.attention_mask == [int(r) for r in real]
except ImportError:
    print("(tokenizers is not installed: no comparison)")
tokens[5], ids[5] = "[MASK]", toy.vocab["[MASK]"]              # hide "beautiful"
for name, row in [("token", tokens), ("id", ids), ("segment", segments), ("real", map(int, real))]:
    print(f"{name:8}", " ".join(f"{str(x):>{max(len(t), 2)}}" for x, t in zip(row, tokens)))

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
from tinybert.tokenizers.encoding import Encoding, batch_encode, import_tokenizers

# GPT-2's pre-tokenisation pattern.
GPT2_PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte value to a printable character."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
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
    merges = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").split("\n"), 1):
        if (number == 1 and line.startswith("#version")) or not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"{path}:{number}: expected two tokens separated by a space, "
                             f"got {line!r}")
        merges.append((parts[0], parts[1]))
    return merges


# %% tags=["export:tokenizers.byte_level"]
def apply_merges(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """Repeatedly merge the adjacent pair with the lowest rank, everywhere it occurs."""
    while len(symbols) > 1:
        best = min(zip(symbols, symbols[1:]), key=lambda pair: ranks.get(pair, len(ranks)))
        if best not in ranks:
            break
        symbols = merge_pair(symbols, best)   # the merge step of the BPE section above
    return symbols


class ByteLevelBPETokenizer:
    """GPT-2 / RoBERTa tokenizer: bytes as characters, a regex pre-split, BPE merges by rank."""

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]]):
        for rank, (a, b) in enumerate(merges):
            missing = [t for t in (a, b, a + b) if t not in vocab]
            if missing:
                raise ValueError(f"merge {rank} ({a!r}, {b!r}) does not match the vocabulary: "
                                 f"expected {missing} in it")
        self.vocab = dict(vocab)
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.merges = list(merges)
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self._cache: dict[str, list[str]] = {}

    @classmethod
    def from_files(cls, vocab_json: str | Path, merges_txt: str | Path) -> ByteLevelBPETokenizer:
        vocab = json.loads(Path(vocab_json).read_text(encoding="utf-8"))
        if not isinstance(vocab, dict):
            raise ValueError(f"{vocab_json}: expected a JSON object token -> id, "
                             f"got {type(vocab).__name__}")
        return cls(vocab, read_merges_txt(merges_txt))

    def save(self, directory: str | Path) -> tuple[Path, Path]:
        directory = Path(directory)
        vocab_json, merges_txt = directory / "vocab.json", directory / "merges.txt"
        vocab_json.write_text(json.dumps(self.vocab, ensure_ascii=False), encoding="utf-8")
        merges_txt.write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in self.merges),
                              encoding="utf-8")
        return vocab_json, merges_txt

    def to_hugging_face(self):
        """The equivalent Rust tokenizer from the ``tokenizers`` library (for bulk speed)."""
        return import_tokenizers().ByteLevelBPETokenizer(self.vocab, self.merges)

    def split_piece(self, piece: str) -> list[str]:
        if piece not in self._cache:
            self._cache[piece] = apply_merges(list(piece), self.ranks)
        return self._cache[piece]

    def encode(self, text: str) -> Encoding:
        if not isinstance(text, str):
            raise ValueError(f"encode expects a str, got {type(text).__name__}")
        tokens: list[str] = []
        offsets: list[tuple[int, int]] = []
        for match in GPT2_PATTERN.finditer(text):
            char_of_byte = []                          # which character each byte belongs to
            for i, char in enumerate(match.group()):
                char_of_byte += [match.start() + i] * len(char.encode("utf-8"))
            piece = "".join(BYTE_TO_CHAR[b] for b in match.group().encode("utf-8"))
            position = 0
            for token in self.split_piece(piece):
                tokens.append(token)
                last = position + len(token) - 1               # the token's last byte
                offsets.append((char_of_byte[position], char_of_byte[last] + 1))
                position += len(token)
        unknown = [t for t in tokens if t not in self.vocab]
        if unknown:
            raise ValueError(f"tokens {unknown[:5]} are not in the vocabulary (expected all 256 "
                             "byte characters in it)")
        return Encoding([self.vocab[t] for t in tokens], tokens, offsets)

    def encode_batch(self, texts: list[str], *, backend: str = "python") -> list[Encoding]:
        """``encode`` each text; ``backend="tokenizers"`` gives the same, faster, from Rust."""
        return batch_encode(self, texts, backend)

    def decode(self, ids: list[int]) -> str:
        unknown = [i for i in ids if i not in self.id_to_token]
        if unknown:
            raise ValueError(f"ids must be in the vocabulary (0..{len(self.vocab) - 1}), "
                             f"got {unknown[:5]}")
        data = bytes(CHAR_TO_BYTE[c] for i in ids for c in self.id_to_token[i])
        return data.decode("utf-8", errors="replace")

    def __len__(self) -> int:
        return len(self.vocab)


# %%
from tinybert.tokenizers.byte_level import BYTE_TO_CHAR, GPT2_PATTERN, ByteLevelBPETokenizer

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
def train_byte_level_bpe(texts: list[str], vocab_size: int, *,
                         min_count: int = 2) -> ByteLevelBPETokenizer:
    """Learn ``vocab_size - 256`` merges (fewer if pairs run out) from ``texts``."""
    from tinybert.tokenizers.bpe import train_bpe

    if isinstance(texts, str) or vocab_size < 256:
        raise ValueError(f"expected a list of texts and vocab_size >= 256, "
                         f"got {type(texts).__name__} and {vocab_size}")
    counts: dict[str, int] = {}
    for text in texts:
        for piece in GPT2_PATTERN.findall(text):
            word = "".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))
            counts[word] = counts.get(word, 0) + 1
    model = train_bpe(counts, vocab_size - 256, min_count=min_count,
                      alphabet=list(BYTE_TO_CHAR.values()))
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
# $i$ followed by $j$. WordPiece {cite}`schuster2012wordpiece` merges the pair with the highest
# $P(ij) / (P(i) P(j))$: how much more often the two appear together than they would if they were
# independent. A pair of two very common symbols needs many more joint occurrences to be chosen
# than a pair of rare symbols that nearly always appear together. Word-internal symbols carry the
# `##` prefix from the start, so a word's first piece and its continuations stay different tokens.
# The straightforward trainer says exactly this: score every pair, merge the best one in every
# word, and repeat until the vocabulary is full.

# %% tags=["export:tokenizers.wordpiece_training"]
from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from tinybert.tokenizers.bpe import merge_pair
from tinybert.tokenizers.normalizers import bert_normalize, bert_pre_tokenize
from tinybert.tokenizers.wordpiece import SPECIAL_TOKENS, WordPieceTokenizer


def wordpiece_merge_scores(words: list[list[str]], counts: list[int],
                           min_count: int = 1) -> dict[tuple[str, str], float]:
    """count(ij) / (count(i) count(j)) for every adjacent pair seen at least ``min_count`` times."""
    symbol_counts: Counter[str] = Counter()
    pair_counts: Counter[tuple[str, str]] = Counter()
    for symbols, n in zip(words, counts):
        for s in symbols:
            symbol_counts[s] += n
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += n
    return {pair: c / (symbol_counts[pair[0]] * symbol_counts[pair[1]])
            for pair, c in pair_counts.items() if c >= min_count}


def wordpiece_start(word_counts: Mapping[str, int], min_count: int, special_tokens: Iterable[str],
                    prefix: str) -> tuple[list[list[str]], dict[str, int]]:
    """Each word as its first character and ``prefix``-marked continuations, and the first
    vocabulary: the special tokens, then the symbols in order of first appearance."""
    if not all(isinstance(w, str) and w and int(c) == c >= 0 for w, c in word_counts.items()):
        raise ValueError("expected a mapping from non-empty strings to counts >= 0")
    if min_count < 1:
        raise ValueError(f"expected min_count >= 1, got {min_count}")
    words = [[w[0]] + [prefix + c for c in w[1:]] for w in word_counts]
    vocab: dict[str, int] = {}
    for token in [*special_tokens, *(s for symbols in words for s in symbols)]:
        vocab.setdefault(token, len(vocab))
    return words, vocab


def train_wordpiece_simple(word_counts: Mapping[str, int], vocab_size: int, *, min_count: int = 1,
                           special_tokens: Iterable[str] = SPECIAL_TOKENS,
                           prefix: str = "##") -> dict[str, int]:
    """Learn a WordPiece vocabulary (special tokens, characters, then merged pieces).

    Each step merges the pair with the highest count(ij) / (count(i) count(j)) among pairs seen
    at least ``min_count`` times; ties go to the pair of older symbols.
    """
    words, vocab = wordpiece_start(word_counts, min_count, special_tokens, prefix)
    counts = list(word_counts.values())
    while len(vocab) < vocab_size:
        scores = wordpiece_merge_scores(words, counts, min_count)
        if not scores:
            break                                    # every word is a single symbol
        a, b = min(scores, key=lambda pair: (-scores[pair], vocab[pair[0]], vocab[pair[1]]))
        merged = a + b.removeprefix(prefix)          # "t" + "##he" -> "the"
        vocab.setdefault(merged, len(vocab))
        words = [merge_pair(symbols, (a, b), merged) for symbols in words]
    return vocab


# %% [markdown]
# On the slides' corpus the two scores disagree from the first step. By count, the most frequent
# pairs are the "ex" and "xt" inside every word; by WordPiece's score, "c" and "o" win, because
# neither ever appears without the other. WordPiece has built "con" and "##ing" before it makes
# "te", which is BPE's first merge.

# %%
from collections import Counter

from tinybert.tokenizers.wordpiece import SPECIAL_TOKENS
from tinybert.tokenizers.wordpiece_training import train_wordpiece_simple, wordpiece_merge_scores

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
print("by score (WordPiece):", "   ".join(f"{a} {b}: {scores[a, b]:.3f}" for a, b in best))
vocab = train_wordpiece_simple(corpus, vocab_size=100)
learned = list(vocab)[len(SPECIAL_TOKENS) + len({s for word in symbols for s in word}) :]
print("WordPiece merges:", " ".join(learned))
print("BPE merges:      ", " ".join("".join(pair) for pair in train_bpe(corpus, 20).merges))
assert top_counts[0][1] == 30 and best[0] == ("c", "##o")
assert learned.index("con") < learned.index("te") and train_bpe(corpus, 1).merges == [("t", "e")]


# %% [markdown]
# (sec-tok-wordpiece-fast)=
# ### A faster trainer
#
# The straightforward trainer rescans every word after every merge, so its time grows with the
# number of merges times the size of the corpus: fine for the slides, far too slow for a 30,000
# entry vocabulary. Most of that work is wasted, because a merge changes only the words that
# contain the merged pair. The fast trainer below keeps the counts instead of recounting them:
# an index from each pair to the words that contain it finds the words to update, and a heap
# hands out the best pair. When a count changes, a new heap entry is pushed and the old one is
# left where it is; when an out-of-date entry comes to the top, it is recognised (its score no
# longer matches) and skipped. BPE's `train_bpe` above works the same way.
#
# WordPiece adds one complication. Its score divides by the counts of the two symbols, and a
# merge lowers the counts of both halves, so every pair that contains one of them gets a higher
# score, not just the pairs next to the merge. Merging "jumbl" with "##e" rescores every pair
# that ends with "##e", thousands of them. This is why WordPiece training is slower than BPE
# training, and one reason why Hugging Face's trainer learns WordPiece vocabularies with BPE's
# count instead. The heap is rebuilt from the live pairs whenever out-of-date entries make up
# most of it, which keeps its size, and the time spent skipping, in check.

# %% tags=["export:tokenizers.wordpiece_training"]
def train_wordpiece(word_counts: Mapping[str, int], vocab_size: int, *, min_count: int = 1,
                    special_tokens: Iterable[str] = SPECIAL_TOKENS,
                    prefix: str = "##") -> dict[str, int]:
    """``train_wordpiece_simple`` with counts kept up to date: the same vocabulary, faster.

    What changes: an index pair -> words, so a merge touches only the words that contain the
    pair; symbol and pair counts updated in place instead of recounted; a heap of scores whose
    out-of-date entries are skipped, and rebuilt when they outnumber the live pairs. The chapter
    and ``benchmarks/bench_tokenizers.py`` measure the speed-up.
    """
    words, vocab = wordpiece_start(word_counts, min_count, special_tokens, prefix)
    counts = list(word_counts.values())
    symbol_counts: Counter[str] = Counter()
    pair_counts: Counter[tuple[str, str]] = Counter()
    where: defaultdict[tuple[str, str], set[int]] = defaultdict(set)     # pair -> words
    partners: defaultdict[str, set[tuple[str, str]]] = defaultdict(set)  # symbol -> pairs

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
        a, b = pair      # the heap pops the smallest: best score first, then older symbols
        score = pair_counts[pair] / (symbol_counts[a] * symbol_counts[b])
        return (-score, vocab[a], vocab[b], pair)

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
            continue                                       # out of date
        a, b = pair
        merged = a + b.removeprefix(prefix)
        vocab.setdefault(merged, len(vocab))
        touched = set()
        for w in where.pop(pair):                          # only these words change
            touched.update(count(w, -1))
            words[w] = merge_pair(words[w], pair, merged)
            touched.update(count(w, +1))
        for p in touched:
            if pair_counts[p] == 0:                        # gone from every word
                del pair_counts[p]
                where.pop(p, None)
                partners[p[0]].discard(p)
                partners[p[1]].discard(p)
        # a and b are rarer now, merged more frequent: rescore every pair that contains them.
        for p in touched | partners[a] | partners[b] | partners[merged]:
            if pair_counts[p] >= min_count:
                heapq.heappush(heap, entry(p))
        if len(heap) > 2 * len(pair_counts) + 1000:        # mostly out-of-date entries
            heap = fresh_heap()
    return vocab


def bert_word_counts(texts: Iterable[str], *, lowercase: bool = True) -> Counter[str]:
    """Count the words BERT's normaliser and pre-tokeniser produce from ``texts``, in order of
    first appearance.

    The normaliser treats each character on its own and a space always ends a word, so each
    distinct space-separated chunk is normalised once, however often it occurs.
    """
    chunks = Counter(chunk for text in texts for chunk in text.split(" "))
    counts: Counter[str] = Counter()
    for chunk, n in chunks.items():
        normalized, _ = bert_normalize(chunk, strip_accents=lowercase, lowercase=lowercase)
        for a, b in bert_pre_tokenize(normalized):
            counts[normalized[a:b]] += n
    return counts


def train_wordpiece_tokenizer(texts: Iterable[str], vocab_size: int, *, lowercase: bool = True,
                              min_count: int = 2) -> WordPieceTokenizer:
    vocab = train_wordpiece(bert_word_counts(texts, lowercase=lowercase), vocab_size,
                            min_count=min_count)
    return WordPieceTokenizer(vocab, lowercase=lowercase)


# %% [markdown]
# The two trainers share one signature, and on real text they learn the same vocabulary, entry
# for entry (the tests check more corpora); only the time differs.

# %%
from tinybert.tokenizers.wordpiece_training import bert_word_counts, train_wordpiece

sample = bert_word_counts(load_gutenberg(1342).splitlines()[: pick(quick=300, full=800)])
seconds, vocabs = {}, {}
for trainer in (train_wordpiece_simple, train_wordpiece):
    start = time.perf_counter()
    vocabs[trainer.__name__] = trainer(sample, vocab_size=pick(quick=300, full=600), min_count=2)
    seconds[trainer.__name__] = time.perf_counter() - start
assert list(vocabs["train_wordpiece_simple"].items()) == list(vocabs["train_wordpiece"].items())
print(f"{len(sample):,} different words, {len(vocabs['train_wordpiece']):,} entries, identical; "
      f"simple {seconds['train_wordpiece_simple']:.2f} s, fast {seconds['train_wordpiece']:.2f} s")

# %%
from tinybert.tokenizers.wordpiece_training import train_wordpiece_tokenizer

lines = load_gutenberg(1342).splitlines()[: pick(quick=1500, full=None)]
start = time.perf_counter()
ours_wp = train_wordpiece_tokenizer(lines, vocab_size=pick(quick=400, full=4000))
print(f"{len(ours_wp)} WordPiece tokens learned in {time.perf_counter() - start:.1f} s")
print(ours_wp.encode("Mr. Darcy's unexpectedly sinan-like smile").tokens)

# %% [markdown]
# (sec-tok-parity)=
# ## The same ids as Hugging Face
#
# The claim of this chapter is that these tokenizers are the real thing, so we check it on text
# that no vocabulary was trained on: a Gutenberg book and the sentences of the Universal
# Dependencies English Web Treebank. Hugging Face's `tokenizers` (written in Rust) learns a
# WordPiece and a byte-level BPE vocabulary and saves them in its usual files; our classes load
# those files, and every line must give the same ids and the same character offsets. The reverse
# direction, our trained vocabularies inside `tokenizers`, is what `to_hugging_face()` gives: the
# Rust implementation is the one to use for bulk encoding.

# %%
import tempfile
from pathlib import Path

from tinybert.data import fetch
from tinybert.tokenizers.byte_level import ByteLevelBPETokenizer
from tinybert.tokenizers.wordpiece import WordPieceTokenizer

try:
    import tokenizers
except ImportError:  # the parity oracle is optional: pip install tokenizers
    tokenizers = None
    print("Hugging Face tokenizers is not installed: the parity check is skipped")

train_lines = load_gutenberg(1342).splitlines()[: pick(quick=3000, full=None)]
held_out = load_gutenberg(2097).splitlines()[: pick(quick=1000, full=None)]
ud = [line[len("# text = "):] for split in ("train", "dev", "test")
      for line in fetch(f"ud_ewt/{split}").read_text(encoding="utf-8").splitlines()
      if line.startswith("# text = ")][: pick(quick=1000, full=None)]


def count_mismatches(ours, rust, texts, **kwargs):
    pairs = zip(ours.encode_batch(texts, **kwargs), rust.encode_batch(texts, **kwargs))
    return sum(got.ids != expected.ids or got.offsets != list(expected.offsets)
               for got, expected in pairs)


if tokenizers is not None:
    folder = Path(tempfile.mkdtemp())
    rust_wp = tokenizers.BertWordPieceTokenizer(lowercase=True)
    rust_wp.train_from_iterator(train_lines, vocab_size=3000, show_progress=False)
    rust_wp.save_model(str(folder))
    rust_bl = tokenizers.ByteLevelBPETokenizer()
    rust_bl.train_from_iterator(train_lines, vocab_size=3000, show_progress=False)
    rust_bl.save_model(str(folder))
    wp = WordPieceTokenizer.from_file(folder / "vocab.txt", lowercase=True)
    bl = ByteLevelBPETokenizer.from_files(folder / "vocab.json", folder / "merges.txt")
    for name, texts in [("held-out book", held_out), ("UD English EWT", ud)]:
        wp_bad = count_mismatches(wp, rust_wp, texts, add_special_tokens=False)
        bl_bad = count_mismatches(bl, rust_bl, texts)
        print(f"{name}: {len(texts)} lines compared; mismatches: WordPiece {wp_bad}, "
              f"byte-level BPE {bl_bad}")
        assert wp_bad == 0 and bl_bad == 0
    # Our own trained vocabulary, handed to the Rust implementation:
    assert count_mismatches(ours_bl, ours_bl.to_hugging_face(), held_out) == 0
    assert count_mismatches(ours_wp, ours_wp.to_hugging_face(), held_out,
                            add_special_tokens=True) == 0

# %% [markdown]
# (sec-tok-batch)=
# ### Bulk encoding
#
# Since the two implementations agree, bulk work can go to the faster one without changing any
# result: `encode_batch(texts, backend="tokenizers")` builds the Rust tokenizer for the same
# vocabulary and converts its output to our `Encoding` objects. The cell times both backends on
# the held-out book with fresh tokenizers (ours cache the pieces of words they have seen) and
# checks that every encoding, offsets included, is the same.

# %%
if tokenizers is not None:
    texts = held_out
    for name, tok, kwargs in [
        ("WordPiece", WordPieceTokenizer(ours_wp.vocab), {"add_special_tokens": True}),
        ("byte-level BPE", ByteLevelBPETokenizer(ours_bl.vocab, ours_bl.merges), {}),
    ]:
        seconds, results = {}, {}
        for backend in ("python", "tokenizers"):
            start = time.perf_counter()
            results[backend] = tok.encode_batch(texts, backend=backend, **kwargs)
            seconds[backend] = time.perf_counter() - start
        assert results["python"] == results["tokenizers"]
        print(f"{name:15} {len(texts):,} lines, identical: python {seconds['python']:.2f} s, "
              f"tokenizers {seconds['tokenizers']:.3f} s "
              f"({seconds['python'] / seconds['tokenizers']:.0f} times faster)")

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
# one training run at the largest size gives every size.

# %%
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
backend = "python" if tokenizers is None else "tokenizers"    # the same results, faster
start = time.perf_counter()
largest = {"WordPiece": train_wordpiece_tokenizer(corpus_lines, vocab_size=sizes[-1]),
           "byte-level BPE": train_byte_level_bpe(corpus_lines, vocab_size=sizes[-1])}
print(f"trained on {len(corpus_lines):,} lines in {time.perf_counter() - start:.0f} s")
n_words = sum(len(line.split()) for line in test_lines)
fertility, unknown, n_unk = {name: [] for name in largest}, [], 0
for size in sizes:
    for name, tok in largest.items():
        encodings = first_entries(tok, size).encode_batch(test_lines, backend=backend)
        fertility[name].append(sum(map(len, encodings)) / n_words)
        n_unk += sum(enc.tokens.count("[UNK]") for enc in encodings)
    known_words = set(word_vocab.itos[1 : size + 1])            # a word vocabulary of this size
    unknown.append(sum(w not in known_words for w in test_words))

print(f"{'entries':31}" + "".join(f"{size:>9,}" for size in sizes))
for name, values in fertility.items():
    print(f"{name + ', tokens per word':31}" + "".join(f"{v:9.3f}" for v in values))
    assert all(a > b for a, b in zip(values, values[1:])), "fertility should fall with size"
print(f"{'word vocabulary, words unknown':31}"
      + "".join(f"{n / len(test_words):9.2%}" for n in unknown))
assert is_quick() or n_unk == 0          # no [UNK] at any size: every character was seen

fig, ax = plt.subplots(figsize=(5, 3))
for name, values in fertility.items():
    ax.plot(sizes, values, marker="o", label=name)
ax.set_xlabel("vocabulary size")
ax.set_ylabel("tokens per word (held out)")
ax.set_ylim(bottom=1)
ax.legend()
plt.show()

# %% [markdown]
# Both curves fall as the vocabulary grows, steeply at first and then more slowly: the entries
# added last are words and pieces that the held-out book rarely uses. Neither tokenizer leaves a
# word unknown at any size, where a word vocabulary of the same size (last row) still misses
# some of the held-out words. The two tokenizers do not count quite the same things (WordPiece
# drops spaces, byte-level BPE keeps them inside its tokens), but the large gap is the training
# score. $P(ij)/(P(i)P(j))$ rewards pairs of *rare* symbols, so our WordPiece vocabulary spends
# its entries on rare words and pieces and never joins the very common "##e" and "##d" into
# "##ed". The pieces below, at the smallest size, show it: ours keeps the rare "playfully" whole
# but splits the ending of the frequent "played", and breaks words it has never seen into single
# letters. The other two give "playfully" the stem "play" of its relatives, and the WordPiece
# vocabulary learned by count (Hugging Face's trainer, when `tokenizers` is installed) even cuts
# the name "sinan" into "sin ##an", as BERT's own vocabulary does on the slides.

# %%
small = {name: first_entries(tok, sizes[0]) for name, tok in largest.items()}
if tokenizers is not None:   # Hugging Face's trainer: WordPiece pieces, merges chosen by count
    rust = tokenizers.BertWordPieceTokenizer(lowercase=True)
    rust.train_from_iterator(corpus_lines, vocab_size=sizes[0], min_frequency=2,
                             show_progress=False)
    small["WordPiece by count"] = WordPieceTokenizer(rust.get_vocab())
widths = [40, 20, 24]
print(f"{sizes[0]:,} entries  ", "".join(f"{name:{w}}" for name, w in zip(small, widths)))
for word in ["played", "playfully", "sinan", "unemotional", "hypodermic"]:
    pieces = [tok.encode(word if isinstance(tok, WordPieceTokenizer) else " " + word).tokens
              for tok in small.values()]
    print(f"  {word:13}", "".join(f"{' '.join(p):{w}}" for p, w in zip(pieces, widths)))
fertilities = [sum(map(len, tok.encode_batch(test_lines, backend=backend))) / n_words
               for tok in small.values()]
print(f"  {'per word':13}", "".join(f"{f:<{w}.3f}" for f, w in zip(fertilities, widths)))
if not is_quick():                          # what the text above says about these pieces
    assert "##ed" not in largest["WordPiece"].vocab and "playfully" in small["WordPiece"].vocab
    if tokenizers is not None:
        assert small["WordPiece by count"].encode("sinan").tokens == ["sin", "##an"]

# %% [markdown]
# Hugging Face's WordPiece trainer learns its merges with BPE's count and uses WordPiece only to
# encode, and its vocabulary of the same size costs far fewer tokens per word (the last line). It
# is a vocabulary of that kind that {ref}`sec-tok-parity` loads, and our encoder treats it
# exactly as one of its own.
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
# - BPE training merges the most frequent pair; WordPiece training merges the pair with the
#   highest $P(ij)/(P(i)P(j))$, which favours rare symbols that stick together. The
#   straightforward trainer recounts everything after each merge; the fast one updates only the
#   words that contain the merged pair and keeps the scores in a heap, with the same result.
# - Fertility falls as the vocabulary grows, quickly at first and then slowly, and the training
#   score matters as much as the size.
# - Our tokenizers read and write the files Hugging Face uses (`vocab.txt`; `vocab.json` and
#   `merges.txt`) and give the same ids and offsets on every line checked in
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
# `train_bpe` or `merge_pair`.
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
scores = wordpiece_merge_scores([[w[0]] + ["##" + c for c in w[1:]] for w in corpus],
                                list(corpus.values()))
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

quiz = Quiz("ch07", [
    choice("What does BERT's uncased normaliser make of 'Café Dupont'?",
           ["Café Dupont", "cafe dupont", "café dupont", "CAFE DUPONT"], answer="b",
           explain="Lower-case, then strip the accents."),
    choice("Which tokenizer never needs an unknown token?",
           ["WordPiece", "a word vocabulary", "byte-level BPE", "none of them"],
           answer="c", explain="Every string is a sequence of bytes."),
    choice("Which pair does WordPiece training merge next?",
           ["the most frequent pair", "the pair with the highest P(ij) / (P(i) P(j))",
            "the longest pair", "a random pair"], answer="b",
           explain="BPE is the one that merges the most frequent pair."),
    number("How many tokens does 'café' give a byte-level tokenizer without merges?",
           answer=len("café".encode("utf-8")), decimals=0,
           explain="é takes two bytes in UTF-8."),
    choice("As the vocabulary grows, the fertility (tokens per word)",
           ["grows", "falls, quickly at first and then slowly", "stays the same",
            "falls in a straight line"], answer="b",
           explain="Frequent words are whole early; the rest gain little."),
    choice("How does WordPiece mark a piece that continues a word?",
           ["a leading Ġ", "a leading ##", "a trailing </w>", "a leading ▁"],
           answer="b", explain="Ġ is byte-level BPE's mark of a preceding space."),
])
quiz
