"""Chapter 07's tokenizers against Hugging Face's Rust `tokenizers`, timed in the same run.

Trains byte-level BPE and WordPiece vocabularies (8k entries by default) on about 2 MB of course
text with our code and with `tokenizers`, then encodes held-out text with both backends of
`encode_batch` (our Python code, and the Rust tokenizer for the same vocabulary), checks that the
encodings are identical, and prints the times and their ratios (tinybert / tokenizers).

    .venv/bin/python benchmarks/bench_tokenizers.py                      # 8k on 2 MB
    .venv/bin/python benchmarks/bench_tokenizers.py --vocab-size 8000 30000 --megabytes 5.4

Note that the two WordPiece trainers do different work: ours merges by WordPiece's score
count(ij) / (count(i) count(j)), Hugging Face's by BPE's count.
"""
from __future__ import annotations

import argparse
import time

import tokenizers

from tinybert.corpus import load_gutenberg
from tinybert.data import fetch
from tinybert.tokenizers.byte_level import train_byte_level_bpe
from tinybert.tokenizers.wordpiece_training import train_wordpiece_tokenizer


def seconds(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=2.0, help="training text size")
    parser.add_argument("--vocab-size", type=int, nargs="+", default=[8000])
    args = parser.parse_args()

    corpus = [fetch("wikitext2/valid").read_text(encoding="utf-8"),   # the chapter's corpus,
              *(load_gutenberg(b) for b in (1342, 98, 1400, 76)),     # in this order: 5.4 MB
              fetch("wikitext2/test").read_text(encoding="utf-8")]
    text = "".join(corpus)[: int(args.megabytes * 1e6)]
    lines = text.splitlines()
    held_out = load_gutenberg(2097).splitlines()
    print(f"training text: {len(text.encode()) / 1e6:.2f} MB, {len(lines)} lines; "
          f"held out: {len(held_out)} lines")

    trainers = {
        "byte-level BPE": (lambda size: train_byte_level_bpe(lines, size),
                           tokenizers.ByteLevelBPETokenizer, {}),
        "WordPiece": (lambda size: train_wordpiece_tokenizer(lines, size),
                      tokenizers.BertWordPieceTokenizer, {"add_special_tokens": True}),
    }
    for name, (train_ours, rust_class, kwargs) in trainers.items():
        for size in args.vocab_size:
            ours_s, ours = seconds(lambda: train_ours(size))
            rust_trained = rust_class()
            hf_s, _ = seconds(lambda: rust_trained.train_from_iterator(
                lines, vocab_size=size, min_frequency=2, show_progress=False))
            print(f"{name} train {size}: ours {ours_s:.2f} s ({len(ours)} entries), "
                  f"tokenizers {hf_s:.2f} s ({rust_trained.get_vocab_size()} entries), "
                  f"ratio {ours_s / hf_s:.1f}")
        # encode_batch with both backends, on the vocabulary trained last
        py_s, py_enc = seconds(lambda: ours.encode_batch(held_out, backend="python", **kwargs))
        rs_s, rs_enc = seconds(lambda: ours.encode_batch(held_out, backend="tokenizers", **kwargs))
        assert py_enc == rs_enc, "the two backends give different encodings"
        print(f"{name} encode_batch: python {py_s:.2f} s, tokenizers {rs_s:.3f} s, "
              f"ratio {py_s / rs_s:.1f} (identical ids, tokens and offsets on "
              f"{len(held_out)} lines)")


if __name__ == "__main__":
    main()
