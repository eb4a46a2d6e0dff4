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
# - how BERT normalises text (control characters, Chinese characters, lower-casing, accents),
#   splits it into words and punctuation, and cuts each word into WordPiece tokens by greedy
#   longest-match-first with `##` continuations and `[UNK]`;
# - how GPT-2 and RoBERTa map every byte to a printable character, split text with a regular
#   expression, and apply BPE merges by rank, so that any text encodes and decodes losslessly;
# - how every token keeps the character offsets of the text it came from, which question
#   answering and token classification need later.
#
# **Uses**: the Gutenberg reader `load_gutenberg` from `tinybert.corpus` (built in
# {doc}`02_word_vectors`) for training and test text, and `fetch` from `tinybert.data`.
#
# (sec-tok-setup)=
# ## Setup
#
# Tokenizers are plain Python: no tensors in this chapter. The package `tinybert.tokenizers`
# gets one module per idea; the cell below holds the imports of the first one, the result type
# that every tokenizer returns.

# %% tags=["export:tokenizers.encoding"]
from __future__ import annotations

from dataclasses import dataclass, field

# %%
import time

from tinybert.corpus import load_gutenberg
from tinybert.runtime import is_quick, pick


# %% [markdown]
# (sec-tok-encoding)=
# ### What an encoding holds
#
# An encoding is three parallel lists: the token ids the model reads, the token strings (for
# people), and for each token the half-open range `(start, end)` of characters in the *original*
# text it came from. The offsets survive lower-casing, accent stripping and byte splitting, so a
# model's answer "tokens 7 to 9" can always be turned back into a span of the user's text.

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
# (sec-tok-bpe)=
# ## Byte-pair encoding from scratch
#
# Byte-pair encoding began as a compression method (Gage, 1994) and was carried over to words
# by {cite}`sennrich2016bpe`: find the most frequent
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


def merge_pair(symbols: list[str], pair: tuple[str, str]) -> list[str]:
    """Replace every occurrence of ``pair`` in ``symbols``, scanning left to right."""
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == pair[0] and symbols[i + 1] == pair[1]:
            out.append(pair[0] + pair[1])
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
from tinybert.tokenizers.bpe import encode_and_show_work, train_bpe

model = train_bpe({"aaabdaaabac": 1}, num_merges=3)
print(model.merges)
names = {"aa": "Z", "ab": "Y", "aaab": "X"}
final = encode_and_show_work("aaabdaaabac", model.merges, names)
assert model.merges == [("a", "a"), ("a", "b"), ("aa", "ab")]
assert "".join(names.get(s, s) for s in final) == "XdXac"

# %% [markdown]
# The second example counts words: "text" 9 times, "texting" 10 times and "context" 11 times,
# with "_" marking the end of a word.

# %%
corpus = {"text_": 9, "texting_": 10, "context_": 11}
model = train_bpe(corpus, num_merges=20)
learned = ["".join(pair) for pair in model.merges]
print(learned)
assert learned[0] == "te"
assert learned.index("text_") < learned.index("con") < learned.index("texting_")
for word in corpus:
    assert encode_and_show_work(word, model.merges[:4]) != list(word)

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
normalized, source = bert_normalize(text, strip_accents=True, lowercase=True)
print(repr(normalized))
print([normalized[a:b] for a, b in bert_pre_tokenize(normalized)])
assert normalized.startswith("cafe dupont")
assert len(source) == len(normalized) and all(0 <= s < len(text) for s in source)

# %% [markdown]
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

from tinybert.tokenizers.encoding import Encoding
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

    def to_hugging_face(self):
        """The equivalent Rust tokenizer from the ``tokenizers`` library (for bulk speed)."""
        from tokenizers import BertWordPieceTokenizer

        return BertWordPieceTokenizer(
            self.vocab, unk_token=self.unk_token, lowercase=self.lowercase,
            strip_accents=self.strip_accents, clean_text=self.clean_text,
            handle_chinese_chars=self.handle_chinese_chars,
            wordpieces_prefix=self.continuing_prefix)

    def decode(self, ids: list[int]) -> str:
        unknown = [i for i in ids if i not in self.id_to_token]
        if unknown:
            raise ValueError(f"ids must be in 0..{len(self.vocab) - 1}, got {unknown[:5]}")
        text = " ".join(self.id_to_token[i] for i in ids)
        return text.replace(" " + self.continuing_prefix, "")

    def __len__(self) -> int:
        return len(self.vocab)


# %% [markdown]
# A toy vocabulary shows the rule, including the slides' out-of-vocabulary name "sinan", which
# splits into pieces the vocabulary knows, and a word with a letter no piece covers.

# %%
from tinybert.tokenizers.wordpiece import WordPieceTokenizer

toy = WordPieceTokenizer({t: i for i, t in enumerate(
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "sin", "##an", "play", "##ing", "##s", "a", ",",
     "s", "##i", "##n", "caf", "##e"])})
for text in ["sinan", "Playing, plays", "Café", "xyz"]:
    enc = toy.encode(text)
    print(f"{text!r:18} -> {enc.tokens} {enc.offsets}")
assert toy.encode("sinan").tokens == ["sin", "##an"]
assert toy.encode("xyz").tokens == ["[UNK]"]

# %% [markdown]
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
from tinybert.tokenizers.encoding import Encoding

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
        from tokenizers import ByteLevelBPETokenizer as RustByteLevelBPETokenizer

        return RustByteLevelBPETokenizer(self.vocab, self.merges)

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
                offsets.append((char_of_byte[position], char_of_byte[position + len(token) - 1] + 1))
                position += len(token)
        unknown = [t for t in tokens if t not in self.vocab]
        if unknown:
            raise ValueError(f"tokens {unknown[:5]} are not in the vocabulary (expected all 256 "
                             "byte characters in it)")
        return Encoding([self.vocab[t] for t in tokens], tokens, offsets)

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


def train_wordpiece(word_counts: Mapping[str, int], vocab_size: int, *, min_count: int = 1,
                    special_tokens: Iterable[str] = SPECIAL_TOKENS,
                    prefix: str = "##") -> dict[str, int]:
    """Learn a WordPiece vocabulary (special tokens, characters, then merged pieces).

    Each step merges the pair with the highest count(ij) / (count(i) count(j)) among pairs seen
    at least ``min_count`` times; ties go to the pair of older symbols.
    """
    if not all(isinstance(w, str) and w for w in word_counts):
        raise ValueError("expected a mapping from non-empty strings to counts")
    words = [[w[0]] + [prefix + c for c in w[1:]] for w in word_counts]
    counts = list(word_counts.values())
    vocab: dict[str, int] = {}
    for token in [*special_tokens, *(s for symbols in words for s in symbols)]:
        vocab.setdefault(token, len(vocab))
    symbol_counts: Counter[str] = Counter()
    pair_counts: Counter[tuple[str, str]] = Counter()
    where: defaultdict[tuple[str, str], set[int]] = defaultdict(set)    # pair -> words
    partners: defaultdict[str, set[tuple[str, str]]] = defaultdict(set)  # symbol -> pairs
    for w, (symbols, n) in enumerate(zip(words, counts)):
        for s in symbols:
            symbol_counts[s] += n
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += n
            where[pair].add(w)
            partners[pair[0]].add(pair)
            partners[pair[1]].add(pair)

    def entry(pair: tuple[str, str]) -> tuple[float, int, int, tuple[str, str]]:
        a, b = pair
        return (-pair_counts[pair] / (symbol_counts[a] * symbol_counts[b]), vocab[a], vocab[b], pair)

    # The same lazy heap as train_bpe; a merge changes the scores of all pairs around its symbols.
    heap = [entry(pair) for pair, c in pair_counts.items() if c >= min_count]
    heapq.heapify(heap)
    while heap and len(vocab) < vocab_size:
        item = heapq.heappop(heap)
        pair = item[-1]
        if pair_counts[pair] < min_count or entry(pair) != item:
            continue                                     # stale
        a, b = pair
        merged = a + b.removeprefix(prefix)
        vocab.setdefault(merged, len(vocab))
        changed = set()
        for w in where.pop(pair):
            old, n = words[w], counts[w]
            new = merge_pair(old, pair)
            new = [merged if s == a + b else s for s in new] if merged != a + b else new
            for s in old:
                symbol_counts[s] -= n
            for s in new:
                symbol_counts[s] += n
            for p in zip(old, old[1:]):
                pair_counts[p] -= n
                changed.add(p)
            for p in zip(new, new[1:]):
                pair_counts[p] += n
                where[p].add(w)
                partners[p[0]].add(p)
                partners[p[1]].add(p)
                changed.add(p)
            words[w] = new
        for s in (a, b):                    # their counts fell: rescore pairs around them
            partners[s] = {p for p in partners[s] if pair_counts[p] > 0}
            changed |= partners[s]
        for p in changed:
            if pair_counts[p] >= min_count:
                heapq.heappush(heap, entry(p))
    return vocab


def bert_word_counts(texts: Iterable[str], *, lowercase: bool = True) -> Counter[str]:
    """Count the words BERT's normaliser and pre-tokeniser produce from ``texts``."""
    counts: Counter[str] = Counter()
    for text in texts:
        normalized, _ = bert_normalize(text, strip_accents=lowercase, lowercase=lowercase)
        counts.update(normalized[a:b] for a, b in bert_pre_tokenize(normalized))
    return counts


def train_wordpiece_tokenizer(texts: Iterable[str], vocab_size: int, *, lowercase: bool = True,
                              min_count: int = 2) -> WordPieceTokenizer:
    vocab = train_wordpiece(bert_word_counts(texts, lowercase=lowercase), vocab_size,
                            min_count=min_count)
    return WordPieceTokenizer(vocab, lowercase=lowercase)


# %% [markdown]
# On a small corpus where "e" and "s" are everywhere, BPE first joins the most frequent pair while
# WordPiece prefers a pair of rarer letters that always go together:

# %%
from tinybert.tokenizers.bpe import train_bpe
from tinybert.tokenizers.wordpiece_training import train_wordpiece, wordpiece_merge_scores

small = {"sees": 12, "seas": 8, "queue": 3, "quest": 2, "less": 9}
bpe_first = train_bpe(small, num_merges=1).merges[0]
words = [[w[0]] + ["##" + c for c in w[1:]] for w in small]
scores = wordpiece_merge_scores(words, list(small.values()))
wp_first = max(scores, key=scores.get)
print("BPE merges first:", bpe_first, "  WordPiece merges first:", wp_first)
assert bpe_first != (wp_first[0], wp_first[1].removeprefix("##"))
vocab = train_wordpiece(small, vocab_size=30)
print(list(vocab)[-8:])

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


def count_mismatches(ours, rust, texts, offsets=True, **kwargs):
    bad = 0
    for text, expected in zip(texts, rust.encode_batch(texts, **kwargs)):
        got = ours.encode(text, **kwargs)
        bad += got.ids != expected.ids or (offsets and got.offsets != list(expected.offsets))
    return bad


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
# (sec-tok-fertility)=
# ## Vocabulary size and fertility
#
# How many tokens does a word cost? The *fertility* of a tokenizer is the number of tokens per
# word of running text. A bigger vocabulary keeps more words whole, so fertility falls, but each
# extra entry is a row of the embedding table and appears less often in training. We train both
# tokenizers on the course corpus (WikiText-2 and Gutenberg books) with growing vocabularies and
# measure fertility on the held-out book.

# %%
import matplotlib.pyplot as plt

corpus_lines = (fetch("wikitext2/valid").read_text(encoding="utf-8").splitlines()
                + [line for b in (1342, 98, 1400, 76) for line in load_gutenberg(b).splitlines()])
corpus_lines = corpus_lines[: pick(quick=3000, full=25000)]   # about 2 MB in full mode
sizes = pick(quick=[500, 1000, 2000], full=[8000, 12000, 16000])
test_lines = load_gutenberg(2097).splitlines()[: pick(quick=500, full=None)]
n_words = sum(len(line.split()) for line in test_lines)
fertility = {"WordPiece": [], "byte-level BPE": []}
start = time.perf_counter()
for size in sizes:
    wp_tok = train_wordpiece_tokenizer(corpus_lines, vocab_size=size)
    bl_tok = train_byte_level_bpe(corpus_lines, vocab_size=size)
    for name, tok in [("WordPiece", wp_tok), ("byte-level BPE", bl_tok)]:
        n_tokens = sum(len(tok.encode(line)) for line in test_lines)
        fertility[name].append(n_tokens / n_words)
print(f"{len(corpus_lines)} training lines, {n_words} held-out words (split on whitespace), "
      f"{time.perf_counter() - start:.0f} s")
for name, values in fertility.items():
    print(f"{name:15}", "  ".join(f"{s}: {f:.3f}" for s, f in zip(sizes, values)))
    assert all(a >= b for a, b in zip(values, values[1:])), "fertility should fall with size"

fig, ax = plt.subplots(figsize=(5, 3))
for name, values in fertility.items():
    ax.plot(sizes, values, marker="o", label=name)
ax.set_xlabel("vocabulary size")
ax.set_ylabel("tokens per word")
ax.legend()
plt.show()

# %% [markdown]
# Both curves fall as the vocabulary grows. The two tokenizers do not count quite the same
# things (WordPiece drops spaces, byte-level BPE keeps them inside its tokens), but the gap at
# small sizes is mostly the training score: $P(ij)/(P(i)P(j))$ rewards pairs of *rare* symbols,
# so a small WordPiece vocabulary spends many entries on rare pieces and leaves common words split
# (look at "lik ##e" above). Hugging Face's WordPiece trainer sidesteps this by learning its merges
# with BPE's count rule and using WordPiece only for encoding; a vocabulary made that way is what
# {ref}`sec-tok-parity` loads, and our encoder treats it the same as one of ours.
#
# (sec-tok-summary)=
# ## Summary
#
# - BERT's tokenizer normalises (clean, space out Chinese characters, optionally lower-case and
#   strip accents), splits on whitespace and punctuation, and cuts each word greedily into the
#   longest WordPiece entries, with `[UNK]` for words it cannot cover.
# - Byte-level BPE works on UTF-8 bytes shown as printable characters, so it never needs `[UNK]`
#   and decodes any text back exactly.
# - Both keep, for each token, the span of the original text it came from.
# - BPE training merges the most frequent pair; WordPiece training merges the pair with the
#   highest $P(ij)/(P(i)P(j))$. Both are a few dozen lines with incremental pair counts.
# - Our tokenizers read and write the files Hugging Face uses (`vocab.txt`; `vocab.json` and
#   `merges.txt`) and give the same ids and offsets on every line checked in
#   {ref}`sec-tok-parity`; `to_hugging_face()` hands a vocabulary to the faster Rust code.
#   `benchmarks/bench_tokenizers.py` measures how much faster, in the same run.
#
# (sec-tok-exercises)=
# ## Exercises
#
# :::{exercise-start}
# :label: ex-tok-merge-step
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
# "café": c, a, f take one byte each and é (U+00E9) two: 5 tokens. "東京": two characters of
# three bytes each: 6 tokens. The emoji is five code points: three emoji of four bytes and two
# joiners (U+200D) of three bytes: 18 tokens for what a reader sees as one symbol. Merges learned
# on English text rarely cover such byte sequences, so the same content costs several times more
# tokens, and a fixed-length model sees less of it.

# %%
from tinybert.tokenizers.byte_level import BYTE_TO_CHAR, ByteLevelBPETokenizer

no_merges = ByteLevelBPETokenizer({c: b for b, c in BYTE_TO_CHAR.items()}, [])
counts = {text: len(no_merges.encode(text)) for text in ["café", "東京", "👩\u200d👩\u200d👧"]}
print(counts)
assert list(counts.values()) == [5, 6, 18]

# %% [markdown]
# ::::{solution-end}
# ::::
