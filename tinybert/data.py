"""Hand-written module (not generated from a chapter): the course's data files, by name.

Every dataset in the course is an *original* file whose bytes can be downloaded
unchanged from a pinned upstream URL. This module is the one place that names those
files: where each one lives in the course's data folder, where it came from, its SHA-256
and size, its licence and how to cite it (the book's attribution page is generated from
``REGISTRY``). ``fetch(name)`` returns the path of a verified local copy. It looks in
``$TINYBERT_DATA_DIR`` first, then in the user cache, and only then downloads into the
cache. Files that tinybert derives from these (splits, subsets) are made by its own
code, so they are not listed here. The one pretrained model the course borrows,
all-MiniLM-L6-v2, is registered the same way, and ``fetch_group("minilm")``
returns its folder.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import http.client
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

__all__ = [
    "DataFile",
    "REGISTRY",
    "ChecksumError",
    "DataUnavailableError",
    "UnknownDataError",
    "names",
    "info",
    "fetch",
    "fetch_file",
    "fetch_group",
    "data_dir",
    "cache_dir",
    "sha256_of",
]


@dataclass(frozen=True)
class DataFile:
    """One original data file: where it lives locally, where it came from, how to
    credit it."""

    name: str  # registry name, e.g. "wikitext2/valid"
    # path inside the data folder, e.g. "pretraining/wikitext-2/valid.txt"
    relpath: str
    # upstream URL (pinned commit) serving exactly these bytes
    url: str
    sha256: str  # hex digest of the file
    size: int | None  # bytes; None where no size was recorded
    licence: str  # short SPDX-like identifier, e.g. "CC-BY-SA-4.0"
    citation: str  # who (year). Title.
    title: str = ""  # books only
    author: str = ""  # books only
    note: str = ""  # licence flags and caveats to print next to the credit
    # False: not in the course's offline data folder, download only
    offline_copy: bool = True


_ENTRIES: list[DataFile] = []
_GH = "https://raw.githubusercontent.com/"


def _group(prefix, folder, base_url, licence, citation, files, **extra):
    """Register files that share a folder, an upstream directory, a licence and a
    citation."""
    for short, filename, size, sha256 in files:
        _ENTRIES.append(
            DataFile(
                f"{prefix}/{short}",
                f"{folder}/{filename}",
                base_url + filename,
                sha256,
                size,
                licence,
                citation,
                **extra,
            )
        )


# WikiText-2, tokenised "v1" version, as copied into pytorch/examples.
_WT = (
    _GH
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
_group(
    "wikitext2",
    "pretraining/wikitext-2",
    _WT,
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
_group(
    "wikitext2",
    "pretraining/wikitext-2",
    _WT,
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
_group(
    "wikitext2",
    "pretraining/wikitext-2",
    _WT,
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

_group(
    "tinyshakespeare",
    "pretraining/tinyshakespeare",
    _GH
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

_PG_NOTE = (
    "Public domain in the US. The file carries the Project Gutenberg licence, "
    "whose trademark terms (section 1.E.8) apply to anyone who "
    "charges for copies."
)


def _book(ebook, filename, title, author, year, size, commit, sha256):
    """Register one Project Gutenberg eBook, as mirrored unchanged by
    GITenberg on GitHub.

    GITenberg names each repository after the title and the eBook number, with spaces
    and apostrophes turned into hyphens: "Pride and Prejudice", #1342 ->
    Pride-and-Prejudice_1342.
    """
    repo = title.replace(" ", "-").replace("'", "-") + f"_{ebook}"
    _ENTRIES.append(
        DataFile(
            f"gutenberg/{ebook}",
            f"pretraining/gutenberg/{filename}",
            f"{_GH}GITenberg/{repo}/{commit}/{filename}",
            sha256,
            size,
            "public-domain",
            f"{author} ({year}). {title}. Project Gutenberg eBook #{ebook}, "
            f"via GITenberg.",
            title=title,
            author=author,
            note=_PG_NOTE,
        )
    )


_AUSTEN, _DICKENS, _TWAIN, _DOYLE = (
    "Jane Austen",
    "Charles Dickens",
    "Mark Twain",
    "Arthur Conan Doyle",
)
_book(
    1342,
    "1342-0.txt",
    "Pride and Prejudice",
    _AUSTEN,
    1813,
    724_725,
    "81db45c9c48c592f0b77f01fc59e677ad0a5634e",
    ("48e0522844402a86a3ea98f0947ba85ea54838db3c59022299298ed968a5a163"),
)
_book(
    158,
    "158-0.txt",
    "Emma",
    _AUSTEN,
    1815,
    927_445,
    "9943f6422b9246e7ad37625d6bd014b035fbfdea",
    ("89b601ce13c21eca31766bdd1a554842fc9ecb7d3638cc769f41712a523e24cf"),
)
_book(
    105,
    "105.txt",
    "Persuasion",
    _AUSTEN,
    1817,
    495_015,
    "d408e95fc4098953e8dd8eb7cac6023802cb54f4",
    ("a773a0205cc090d3844408b157831a29263cc5207630c3a66b768216085ed91b"),
)
_book(
    98,
    "98-0.txt",
    "A Tale of Two Cities",
    _DICKENS,
    1859,
    804_335,
    "0f6111bc7237af7375295ec1754c2e57e19f67f1",
    ("2fcfa071498b30724bd1bd714ba89e38477d632b86d74e87559f6259d3917e36"),
)
_book(
    1400,
    "1400-0.txt",
    "Great Expectations",
    _DICKENS,
    1861,
    1_049_619,
    "889db0e100928a957f469bf834c564d04065c8e6",
    ("b58ce42c630e06314f2442d5937fa8a8556b6e3c5c16f4713c7332a4bb50b420"),
)
_book(
    730,
    "730.txt",
    "Oliver Twist",
    _DICKENS,
    1838,
    936_281,
    "1cec930d0fc567cb650136b3d20406b4ac97a6e5",
    ("439543573a12e30e9bc1472ca8d2754a0bc20d06cc529a0f3efb148816792a0d"),
)
_book(
    76,
    "76-0.txt",
    "Adventures of Huckleberry Finn",
    _TWAIN,
    1884,
    616_320,
    "8494afff3a26f95f37376f7a79a014cf818ccaba",
    ("cd9931183257a850178225bd5e25e4f2df0cbac544dfe9a49cd0ea5a210c24d9"),
)
_book(
    74,
    "74-0.txt",
    "The Adventures of Tom Sawyer",
    _TWAIN,
    1876,
    428_104,
    "9b4174649064f197ca27895d98806b4a8659722b",
    ("b1cd5782db259c00bc1a8fbb58238f285e40828cc858c1343f74a0a75157cc91"),
)
_book(
    86,
    "86-0.txt",
    "A Connecticut Yankee in King Arthur's Court",
    _TWAIN,
    1889,
    681_550,
    "0c41bb738e6886a324854da41c23eeb0149cf29a",
    ("63521eb6381e7fcbcaca584aa0b9c6fa4e5c6b37cb4af75f742715791a0aa35e"),
)
_book(
    1661,
    "1661.txt",
    "The Adventures of Sherlock Holmes",
    _DOYLE,
    1892,
    594_941,
    "7e5dd2703fbf503c004063e96ab7c61262375e5f",
    ("2a0ce5568625a304f54fbb6bfdeeadf527a1437254b5f0e06b5a9e233d4784a2"),
)
_book(
    2852,
    "2852-0.txt",
    "The Hound of the Baskervilles",
    _DOYLE,
    1902,
    352_886,
    "bb11a2bd7e3cda991b7f83936e811a0f472c089c",
    ("c8a61868388cafca2c76d1d82ee610d24b2bb09913ba6da936c4aca94eb1d1e4"),
)
_book(
    2097,
    "2097.txt",
    "The Sign of the Four",
    _DOYLE,
    1890,
    257_693,
    "c36c6c7a4e7e5f7b8d17c9b19299e8ff996b414c",
    ("940b404710fc5cc8b3e9b4d19f91c12d8b1657f960eda9dea65a049b3ca05220"),
)

_group(
    "banking77",
    "classification/banking77",
    _GH
    + "PolyAI-LDN/task-specific-datasets/"
    + "57ec275d8078af65b7731c2a98be812d844a6d6b/banking_data/",
    "CC-BY-4.0",
    "Iñigo Casanueva, Tadas Temčinas, Daniela Gerz, Matthew Henderson, "
    "Ivan Vulić (2020). Efficient Intent Detection with Dual Sentence Encoders.",
    [
        (
            "train",
            "train.csv",
            839_073,
            ("b06e26ac675513959a63135f11b94ea7786ed02da65db93a5650d8838cbc664b"),
        ),
        (
            "test",
            "test.csv",
            239_961,
            ("d12d6e3bc4c3103966ae786dc435913c0c563dfa328f5a3646d0e62cfeeb474d"),
        ),
        (
            "categories",
            "categories.json",
            2_036,
            ("53261da888122daf2d120d925458631d9619e15d82e56052e7a42e535ce32b63"),
        ),
    ],
)
_group(
    "poem_sentiment",
    "classification/poem_sentiment",
    _GH
    + "google-research-datasets/poem-sentiment/"
    + "612e9a1f86799126c68f0c5d9c3f1fc28f88068f/data/",
    "CC-BY-4.0",
    "Emily Sheng, David Uthus (2020). Investigating Societal Biases in "
    "a Poetry Composition System (the Poem Sentiment dataset).",
    [
        (
            "train",
            "train.tsv",
            40_567,
            ("09503a850796736a8e63504ae2c8de983f57dceebc2342ea93a7f7ad06af56d0"),
        ),
        (
            "dev",
            "dev.tsv",
            4_747,
            ("0770bd7b80e04c92da82e78f9f93ce35d38b334b4830fca2b9b4d7e174f152e5"),
        ),
        (
            "test",
            "test.tsv",
            4_556,
            ("a406d87b62a6b7c9615468a8b66e69c027fa8f2f03a4f8f6c79df26c260de620"),
        ),
    ],
)
_group(
    "sentence_polarity",
    "classification/sentence_polarity",
    _GH + ("nltk/nltk_data/5db857e6f7df11eabb5e5665836db9ec8df07e28/packages/corpora/"),
    "CC-BY-4.0",
    "Bo Pang, Lillian Lee (2005). Seeing stars: Exploiting class "
    "relationships for sentiment categorization with respect to rating scales. "
    "Sentence Polarity Dataset v1.0, as packaged by NLTK.",
    [
        (
            "zip",
            "sentence_polarity.zip",
            490_256,
            ("6e1ed4405b65c7eabf1d199a7f7c437091ac21da0ea7467b410a74062574566b"),
        ),
        (
            "xml",
            "sentence_polarity.xml",
            407,
            ("24920f85640238550649a583c1e3bb71ed53a1b3a004f0ddb6ae49051097364b"),
        ),
    ],
    note="Flagged: only the redistributor (NLTK) states CC BY 4.0; the authors' page "
    "states no licence. The .xml is NLTK's package metadata, which holds "
    "that statement.",
)
_group(
    "ud_ewt",
    "token_classification/ud_english_ewt",
    _GH
    + "UniversalDependencies/UD_English-EWT/"
    + "4c89b5833a70aa5ed3a00bad2f23f57992cc7df8/",
    "CC-BY-SA-4.0",
    "Natalia Silveira, Timothy Dozat, Marie-Catherine de Marneffe, "
    "Samuel Bowman, Miriam Connor, John Bauer, Christopher D. Manning (2014). A "
    "Gold Standard Dependency Corpus for English. Universal Dependencies English "
    "EWT, release 2.16.",
    [
        (
            "train",
            "en_ewt-ud-train.conllu",
            14_203_025,
            ("3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b"),
        ),
        (
            "dev",
            "en_ewt-ud-dev.conllu",
            1_805_545,
            ("531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6"),
        ),
        (
            "test",
            "en_ewt-ud-test.conllu",
            1_804_515,
            ("e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd"),
        ),
    ],
    note="The licence covers the annotations; portions of the underlying web text may "
    "be (c) Google, Yahoo!, the University of Pennsylvania or other "
    "original authors.",
)
_group(
    "uner_ewt",
    "token_classification/uner_english_ewt",
    _GH + "UniversalNER/UNER_English-EWT/8ed072de2fd24022cc62458997fe96a8fe191ea4/",
    "CC-BY-SA-4.0",
    "Stephen Mayhew, Terra Blevins, Shuheng Liu, Marek Šuppa, Hila "
    "Gonen, Joseph Marvin Imperial, Börje F. Karlsson, Peiqin Lin, Nikola Ljubešić, "
    "LJ Miranda, Barbara Plank, Arij Riabi, Yuval Pinter (2024). Universal NER: A "
    "Gold-Standard Multilingual Named Entity Recognition Benchmark. NAACL 2024. "
    "English-EWT.",
    [
        (
            "dev",
            "en_ewt-ud-dev.iob2",
            620_415,
            ("0cafd881cf31d39897b6d588420fab8fbbe4423d271725c59921ac9dd49c0713"),
        ),
        (
            "test",
            "en_ewt-ud-test.iob2",
            623_751,
            ("821ad826d5f503ac03b4edc3fbc2174f21fbb005ec25863caf2051c434616d6e"),
        ),
    ],
    note="The sentences are UD English-EWT's, so the note on its web text applies. The "
    "training file is not in the offline folder (dev and test only).",
)
_group(
    "squad1.1",
    "qa/squad_v1.1",
    _GH
    + ("rajpurkar/SQuAD-explorer/e0c66cfec263165fb3c15cb76a22175e371b71d7/dataset/"),
    "CC-BY-SA-4.0",
    "Pranav Rajpurkar, Jian Zhang, Konstantin Lopyrev, Percy Liang "
    "(2016). SQuAD: 100,000+ Questions for Machine Comprehension of Text.",
    [
        (
            "dev",
            "dev-v1.1.json",
            4_854_279,
            ("95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9"),
        ),
    ],
)

# A real pretrained encoder, registered like a dataset: Hugging Face's all-MiniLM-L6-v2
# (a BertModel,
# 6 layers, hidden 384, bert-base-uncased's vocabulary). The files of one model
# must sit side by
# side in one folder (config.json next to model.safetensors):
# fetch_group("minilm") returns it.
_MINILM = (
    "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/"
    "c9745ed1d9f207416be6d2e6f8de32d1f16199bf/"
)
_group(
    "minilm",
    "pretrained/all-MiniLM-L6-v2",
    _MINILM,
    "Apache-2.0",
    "Nils Reimers, Iryna Gurevych (2019). Sentence-BERT: Sentence Embeddings using "
    "Siamese BERT-Networks; and Wenhui Wang, Furu Wei, Li Dong, Hangbo Bao, Nan "
    "Yang, Ming Zhou (2020). MiniLM: Deep Self-Attention Distillation for "
    "Task-Agnostic Compression of Pre-Trained Transformers. The model: "
    "sentence-transformers/all-MiniLM-L6-v2.",
    [
        (
            "model",
            "model.safetensors",
            90_868_376,
            ("53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
        ),
        (
            "config",
            "config.json",
            612,
            ("953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
        ),
        (
            "vocab",
            "vocab.txt",
            231_508,
            ("07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
        ),
        (
            "tokenizer",
            "tokenizer.json",
            466_247,
            ("be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
        ),
        (
            "tokenizer_config",
            "tokenizer_config.json",
            350,
            "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        ),
        (
            "special_tokens_map",
            "special_tokens_map.json",
            112,
            "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
        ),
        (
            "modules",
            "modules.json",
            349,
            ("84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
        ),
        (
            "sentence_bert_config",
            "sentence_bert_config.json",
            53,
            "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
        ),
        (
            "config_sentence_transformers",
            "config_sentence_transformers.json",
            116,
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
        ),
        (
            "pooling_config",
            "1_Pooling/config.json",
            190,
            "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        ),
        (
            "model_card",
            "README.md",
            10_454,
            ("7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7"),
        ),
    ],
    note="Pretrained weights, not a dataset. Its training pairs include SQuAD 2.0 "
    "training (question, passage) pairs (model card); the course evaluates on "
    "SQuAD v1.1 dev articles.",
)

#: Every registered file, by name, in the order above. Read-only: build a DataFile
#: to try others.
REGISTRY = MappingProxyType({entry.name: entry for entry in _ENTRIES})
assert len(REGISTRY) == len(_ENTRIES), "two registry entries share a name"


class ChecksumError(ValueError):
    """A file's bytes are not the ones the registry pins: corrupt, truncated or
    another version."""


class DataUnavailableError(FileNotFoundError):
    """A registered file is not on this machine and could not be downloaded."""


class UnknownDataError(KeyError):
    """No registry entry has the name that was asked for."""

    def __str__(self) -> str:  # KeyError would print the message inside quotes
        return str(self.args[0])


def names(prefix: str = "") -> list[str]:
    """Registered names in registry order; ``names("gutenberg/")`` lists one
    dataset's files."""
    return [name for name in REGISTRY if name.startswith(prefix)]


def info(name: str) -> DataFile:
    """The registry entry for ``name``, with a did-you-mean hint when there is none."""
    if name in REGISTRY:
        return REGISTRY[name]
    close = [entry.name for entry in REGISTRY.values() if entry.relpath == str(name)]
    close = close or difflib.get_close_matches(
        str(name), list(REGISTRY), n=5, cutoff=0.6
    )
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise UnknownDataError(
        f"no data file is registered under the name {name!r}.{hint} "
        "List the registered names with tinybert.data.names()."
    )


def data_dir() -> Path | None:
    """The offline data folder named by ``$TINYBERT_DATA_DIR``, or None when it
    is not set."""
    value = os.environ.get("TINYBERT_DATA_DIR", "").strip()
    return Path(value).expanduser().absolute() if value else None


def cache_dir() -> Path:
    """Where downloads go: ``$TINYBERT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/tinybert/data``, else ``~/.cache/tinybert/data``."""
    if os.environ.get("TINYBERT_CACHE_DIR", "").strip():
        return Path(os.environ["TINYBERT_CACHE_DIR"].strip()).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache"
    return Path(xdg).expanduser().absolute() / "tinybert" / "data"


# (path, mtime_ns, size) -> sha256 already computed
_DIGESTS: dict[tuple[str, int, int], str] = {}


def _stat_key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size


def sha256_of(path: Path) -> str:
    """SHA-256 of a file, remembered per (path, mtime, size): a second fetch does not
    re-read it."""
    key = _stat_key(Path(path))
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def _verify(entry: DataFile, path: Path, what_to_do: str) -> None:
    """Raise ChecksumError unless ``path`` holds exactly the bytes that
    ``entry`` pins."""
    actual = sha256_of(path)
    if actual != entry.sha256:
        raise ChecksumError(
            f"{entry.name!r} at {path} is not the expected file: sha256 expected "
            f"{entry.sha256}, got {actual} (size expected {entry.size}, got "
            f"{path.stat().st_size}). The original is {entry.url}. {what_to_do}"
        )


def _download(entry: DataFile, target: Path, timeout: float) -> None:
    """Download ``entry.url`` to a temporary file beside ``target``, check it,
    then rename it.

    The temporary file sits in the target's own folder so that ``os.replace`` is an
    atomic rename: nobody ever sees a half-written file under the final name. A failure
    leaves nothing behind, not even the folders made for the file.
    """
    created = [
        folder
        for folder in (target.parent, *target.parent.parents)
        if not folder.exists()
    ]
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".part"
    )
    try:
        digest = hashlib.sha256()
        with (
            os.fdopen(handle, "wb") as out,
            urllib.request.urlopen(entry.url, timeout=timeout) as response,
        ):
            for block in iter(lambda: response.read(1 << 20), b""):
                digest.update(block)
                out.write(block)
        if digest.hexdigest() != entry.sha256:
            raise ChecksumError(
                f"downloaded {entry.name!r} ({entry.relpath}) from {entry.url}, but "
                f"its sha256 is {digest.hexdigest()}, expected {entry.sha256}. The "
                f"download was discarded."
            )
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        # deepest first; rmdir refuses any folder that is not empty
        for folder in created:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    _DIGESTS[_stat_key(target)] = entry.sha256


OFFLINE_RETRY_SECONDS = 120.0
# after a download fails for want of a network: {"since": monotonic time, "error": text}
_offline: dict = {}


class _StillOffline(ConnectionError):
    """Raised instead of a download while a recent network failure says there is
    no network."""


def _is_network_failure(error: BaseException) -> bool:
    """True when ``error`` says the network is unreachable (no DNS, refused, timed out),
    not that the server answered badly (an HTTP status) or that a local file could not
    be written."""
    if isinstance(error, (urllib.error.HTTPError, _StillOffline)):
        return False
    return isinstance(error, (urllib.error.URLError, TimeoutError, ConnectionError))


def _check_network(url: str) -> None:
    """Fail at once, without waiting for another timeout, if a download failed for want
    of a network less than OFFLINE_RETRY_SECONDS ago; local (file:) URLs are
    always tried."""
    if not url.startswith(("http:", "https:")) or not _offline:
        return
    waited = time.monotonic() - _offline["since"]
    if waited < OFFLINE_RETRY_SECONDS:
        raise _StillOffline(
            f"not tried: a download {waited:.0f} s ago failed "
            f"({_offline['error']}), so the network looks unreachable; "
            f"tinybert tries again "
            f"{OFFLINE_RETRY_SECONDS - waited:.0f} s from now"
        )
    _offline.clear()


def fetch_file(entry: DataFile, *, timeout: float = 60.0) -> Path:
    """Path of a verified local copy of ``entry``: data folder, then cache,
    then download.

    Takes a DataFile rather than a name so that any entry can be fetched, including one
    made up for a test. A bad file in ``$TINYBERT_DATA_DIR`` is the user's to fix, so it
    is reported, never deleted; a bad file in the cache is tinybert's own, so it is
    replaced. After a download fails for want of a network, later downloads fail at once
    for OFFLINE_RETRY_SECONDS instead of each waiting ``timeout`` seconds again.
    """
    root = data_dir()
    # a typo must not turn into a download
    if root is not None and not root.is_dir():
        what = "is a file" if root.exists() else "does not exist"
        raise DataUnavailableError(
            f"TINYBERT_DATA_DIR is {os.environ['TINYBERT_DATA_DIR'].strip()!r}, which "
            f"{what}; expected the course's data folder (the one with SOURCES.md), "
            f"which holds {entry.relpath}. Fix the variable, or unset it to use the "
            f"cache ({cache_dir()}) and downloads."
        )
    if root is not None and (root / entry.relpath).is_file():
        path = root / entry.relpath
        _verify(
            entry,
            path,
            f"Replace it with the original, or delete it to use the "
            f"cache ({path} is in TINYBERT_DATA_DIR, which tinybert "
            f"never modifies).",
        )
        return path
    cached = cache_dir() / entry.relpath
    if cached.is_file():
        try:
            _verify(entry, cached, "Deleting the cached copy and downloading it again.")
            return cached
        except ChecksumError as error:
            warnings.warn(str(error), stacklevel=2)
            cached.unlink()
    try:
        _check_network(entry.url)
        _download(entry, cached, timeout)
    except (OSError, http.client.HTTPException) as error:
        if _is_network_failure(error) and entry.url.startswith(("http:", "https:")):
            _offline.update(since=time.monotonic(), error=str(error))
        looked = f"{root / entry.relpath}" if root else "TINYBERT_DATA_DIR (not set)"
        offline = (
            ""
            if entry.offline_copy
            else (" This file is not in the course's offline data folder.")
        )
        raise DataUnavailableError(
            f"data file {entry.name!r} ({entry.relpath}) is not on this machine and "
            f"could not be downloaded from {entry.url} ({error}). Looked in {looked} "
            f"and {cached}.{offline} Set TINYBERT_DATA_DIR to a folder that contains "
            f"{entry.relpath}, or go online and try again."
        ) from error
    return cached


def fetch(name: str, *, timeout: float = 60.0) -> Path:
    """Path of a verified local copy of the registered file ``name``, e.g.
    ``fetch("squad1.1/dev")``."""
    return fetch_file(info(name), timeout=timeout)


def fetch_group(prefix: str, *, timeout: float = 60.0) -> Path:
    """Fetch every file registered under ``prefix/`` and return the one folder that
    holds them all.

    For files that only make sense together, such as a model's weights, config and
    vocabulary: ``fetch_group("minilm")`` is the all-MiniLM-L6-v2 folder, ready for a
    loader that reads ``folder / "config.json"``. When some files are in
    ``$TINYBERT_DATA_DIR`` and the others had to be downloaded into the cache, the
    verified data-folder files are copied into the cache too, so that the folder
    returned is complete.
    """
    entries = [info(name) for name in names(f"{prefix}/")]
    if not entries:
        raise UnknownDataError(
            f"no data files are registered under "
            f"{prefix!r}/; registered "
            f"groups: {', '.join(dict.fromkeys(n.split('/')[0] for n in REGISTRY))}"
        )
    folder = Path(os.path.commonpath([entry.relpath for entry in entries]))
    paths = [fetch_file(entry, timeout=timeout) for entry in entries]
    roots = {
        path.parents[len(Path(entry.relpath).parts) - 1]
        for entry, path in zip(entries, paths)
    }
    if len(roots) == 1:
        return roots.pop() / folder
    # mixed: complete the copy in the cache
    for entry, path in zip(entries, paths):
        target = cache_dir() / entry.relpath
        if path != target:
            target.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(
                dir=target.parent, prefix=f".{target.name}."
            )
            os.close(handle)
            try:
                shutil.copyfile(path, temporary)
                os.replace(temporary, target)  # atomic, as for a download
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
                raise
    return cache_dir() / folder
