"""Hand-written: the registry's text corpora: WikiText-2, tinyshakespeare and the
Project Gutenberg books, each pinned by URL and SHA-256. The books' entries are in
``tinybert.data.gutenberg``; ``ENTRIES`` lists them all, the books last."""

from __future__ import annotations

from tinybert.data import gutenberg
from tinybert.data.entry import GH, DataFile, group

ENTRIES: list[DataFile] = []

# WikiText-2, tokenised "v1" version, as copied into pytorch/examples.
_WT = (
    GH
    + "pytorch/examples/77f55b912142e11fcfdf5b530231fb9c52f181e8/"
    + "word_language_model/data/wikitext-2/"
)
_WT_CITE = (
    "Stephen Merity, Caiming Xiong, James Bradbury, Richard Socher (2016). "
    "Pointer Sentinel Mixture Models (the WikiText dataset). Text "
    "from Wikipedia."
)
_WT_NOTE = (
    "The CC BY-SA version is stated inconsistently upstream (3.0 or 4.0); "
    "credited as 3.0."
)


def _wikitext(licence, citation, files, **extra) -> list[DataFile]:
    """Files of the WikiText-2 folder of pytorch/examples."""
    return group(
        "wikitext2", "pretraining/wikitext-2", _WT, licence, citation, files, **extra
    )


ENTRIES += _wikitext(
    "CC-BY-SA-3.0",
    _WT_CITE,
    [
        (
            "valid",
            "valid.txt",
            1_121_681,
            ("f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8"),
        ),
        (
            "test",
            "test.txt",
            1_256_449,
            ("d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"),
        ),
    ],
    note=_WT_NOTE,
)
ENTRIES += _wikitext(
    "CC-BY-SA-3.0",
    _WT_CITE,
    [
        (
            "train",
            "train.txt",
            None,
            ("9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f"),
        ),
    ],
    note=_WT_NOTE + " About 10.8 MB, size not recorded; the sha256 is published by "
    "several projects but could not be checked offline.",
    offline_copy=False,
)
ENTRIES += _wikitext(
    "BSD-3-Clause",
    "PyTorch examples contributors (2025). pytorch/examples: "
    "word_language_model/data/wikitext-2/README.",
    [
        (
            "readme",
            "README",
            159,
            ("ed96062abea03d4f4e8ca80f0caad8b07ec59687b8064319c7ee6f6d900b6286"),
        ),
    ],
    note="A three-line note from pytorch/examples (BSD-3-Clause), not WikiText itself.",
)

ENTRIES += group(
    "tinyshakespeare",
    "pretraining/tinyshakespeare",
    GH
    + "karpathy/char-rnn/6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e/"
    + "data/tinyshakespeare/",
    "public-domain",
    "Andrej Karpathy (2015). char-rnn: tinyshakespeare, a subset "
    "of the works of William Shakespeare.",
    [
        (
            "input",
            "input.txt",
            1_115_394,
            ("86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"),
        ),
    ],
    note=(
        "Shakespeare's text is public domain; the char-rnn README says MIT but has no "
        "LICENSE file."
    ),
)

# the Project Gutenberg books, after the other corpora
ENTRIES += gutenberg.ENTRIES
