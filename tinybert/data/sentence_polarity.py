"""Hand-written: the Sentence Polarity Dataset's train, validation and test splits,
read from the registry's zip (``sentence_polarity/zip``).

The dataset has no official split. The course's rule (SOURCES.md section 9) sends line
``i`` (0-based) of each polarity file to validation when ``i % 10 == 8``, to test when
``i % 10 == 9`` and to training otherwise. Rows keep the order of ``i``, the positive
line before the negative one, as in the course data's ``derived/`` files.
"""

from __future__ import annotations

import zipfile

from tinybert.data.fetching import fetch_file
from tinybert.data.task_files import ENTRIES

__all__ = ["POLARITY_LABELS", "SPLITS", "read_sentence_polarity"]

#: label 0 is negative, label 1 is positive
POLARITY_LABELS = ("negative", "positive")

#: the split names that the readers of derived tasks accept
SPLITS = ("train", "validation", "test")

_ZIP = next(entry for entry in ENTRIES if entry.name == "sentence_polarity/zip")


def check_split(split: str) -> None:
    """Raise ValueError unless ``split`` is one of SPLITS."""
    if split not in SPLITS:
        raise ValueError(
            f"split must be one of {', '.join(map(repr, SPLITS))}, got {split!r}"
        )


def read_sentence_polarity(split: str) -> list[tuple[str, int]]:
    """The ``(text, label)`` pairs of one split ("train", "validation" or "test"),
    label 1 for positive and 0 for negative, text stripped of surrounding whitespace.

    8,530 training pairs, 1,066 for validation and 1,066 for test.
    """
    check_split(split)
    wanted = {"validation": 8, "test": 9}.get(split)
    with zipfile.ZipFile(fetch_file(_ZIP)) as archive:
        # both files end with a newline: drop the empty string after it
        positive, negative = (
            archive.read(f"sentence_polarity/rt-polarity.{kind}")
            .decode("utf-8")
            .removesuffix("\n")
            .split("\n")
            for kind in ("pos", "neg")
        )
    if len(positive) != len(negative):
        raise ValueError(
            f"{_ZIP.relpath}: {len(positive)} positive and {len(negative)} negative "
            "lines; the polarity files should pair up line by line"
        )
    pairs = []
    for i, lines in enumerate(zip(positive, negative)):
        in_split = i % 10 == wanted if wanted is not None else i % 10 < 8
        if in_split:
            pairs += [(line.strip(), label) for line, label in zip(lines, (1, 0))]
    return pairs
