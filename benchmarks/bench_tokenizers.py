"""Chapter 07's tokenizers against Hugging Face's Rust `tokenizers`, timed in the same run.

Trains an 8k byte-level BPE and an 8k WordPiece vocabulary on about 2 MB of course text with
our code and with `tokenizers`, then encodes held-out text with both, checks that the encodings
are identical, and prints the times and their ratios (tinybert / tokenizers).
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
    parser.add_argument("--vocab-size", type=int, default=8000)
    args = parser.parse_args()

    wikitext = fetch("wikitext2/valid").read_text(encoding="utf-8")
    books = "".join(load_gutenberg(b) for b in (1342, 98, 1400, 76))
    text = (wikitext + books)[: int(args.megabytes * 1e6)]
    lines = text.splitlines()
    held_out = load_gutenberg(2097).splitlines()
    print(f"training text: {len(text.encode()) / 1e6:.2f} MB, {len(lines)} lines; "
          f"held out: {len(held_out)} lines")

    # --- byte-level BPE ---
    ours_s, ours = seconds(lambda: train_byte_level_bpe(lines, args.vocab_size))
    rust_trained = tokenizers.ByteLevelBPETokenizer()
    hf_s, _ = seconds(lambda: rust_trained.train_from_iterator(
        lines, vocab_size=args.vocab_size, min_frequency=2, show_progress=False))
    print(f"byte-level BPE train {args.vocab_size}: ours {ours_s:.2f} s, tokenizers {hf_s:.2f} s, "
          f"ratio {ours_s / hf_s:.1f}")
    rust = ours.to_hugging_face()
    ours_s, ours_enc = seconds(lambda: [ours.encode(t) for t in held_out])
    hf_s, hf_enc = seconds(lambda: rust.encode_batch(held_out))
    assert [e.ids for e in ours_enc] == [e.ids for e in hf_enc], "encodings differ"
    print(f"byte-level BPE encode: ours {ours_s:.2f} s, tokenizers {hf_s:.3f} s, "
          f"ratio {ours_s / hf_s:.1f} (identical ids on {len(held_out)} lines)")

    # --- WordPiece ---
    ours_s, ours = seconds(lambda: train_wordpiece_tokenizer(lines, args.vocab_size))
    rust_trained = tokenizers.BertWordPieceTokenizer()
    hf_s, _ = seconds(lambda: rust_trained.train_from_iterator(
        lines, vocab_size=args.vocab_size, min_frequency=2, show_progress=False))
    print(f"WordPiece train {args.vocab_size}: ours {ours_s:.2f} s, tokenizers {hf_s:.2f} s, "
          f"ratio {ours_s / hf_s:.1f}")
    rust = ours.to_hugging_face()
    ours_s, ours_enc = seconds(lambda: [ours.encode(t) for t in held_out])
    hf_s, hf_enc = seconds(lambda: rust.encode_batch(held_out, add_special_tokens=False))
    assert [e.ids for e in ours_enc] == [e.ids for e in hf_enc], "encodings differ"
    print(f"WordPiece encode: ours {ours_s:.2f} s, tokenizers {hf_s:.3f} s, "
          f"ratio {ours_s / hf_s:.1f} (identical ids on {len(held_out)} lines)")


if __name__ == "__main__":
    main()
