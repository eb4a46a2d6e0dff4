"""Hand-written: the registry's Project Gutenberg books, twelve novels by Austen,
Dickens, Twain and Conan Doyle, each pinned by URL and SHA-256 as GITenberg mirrors them
unchanged; ``book`` makes the entry of one eBook. ``tinybert.data.corpus_files`` lists
them after the other text corpora."""

from __future__ import annotations

from tinybert.data.entry import GH, DataFile

ENTRIES: list[DataFile] = []

_PG_NOTE = (
    "Public domain in the US. The file carries the Project Gutenberg licence, "
    "whose trademark terms (section 1.E.8) apply to anyone who "
    "charges for copies."
)


def book(ebook, filename, title, author, year, size, commit, sha256) -> DataFile:
    """The entry of one Project Gutenberg eBook, as mirrored unchanged by
    GITenberg on GitHub.

    GITenberg names each repository after the title and the eBook number, with spaces
    and apostrophes turned into hyphens: "Pride and Prejudice", #1342 ->
    Pride-and-Prejudice_1342.
    """
    repo = title.replace(" ", "-").replace("'", "-") + f"_{ebook}"
    return DataFile(
        f"gutenberg/{ebook}",
        f"pretraining/gutenberg/{filename}",
        f"{GH}GITenberg/{repo}/{commit}/{filename}",
        sha256,
        size,
        "public-domain",
        f"{author} ({year}). {title}. Project Gutenberg eBook #{ebook}, via GITenberg.",
        title=title,
        author=author,
        note=_PG_NOTE,
    )


_AUSTEN, _DICKENS, _TWAIN, _DOYLE = (
    "Jane Austen",
    "Charles Dickens",
    "Mark Twain",
    "Arthur Conan Doyle",
)
ENTRIES.append(
    book(
        1342,
        "1342-0.txt",
        "Pride and Prejudice",
        _AUSTEN,
        1813,
        724_725,
        "81db45c9c48c592f0b77f01fc59e677ad0a5634e",
        ("48e0522844402a86a3ea98f0947ba85ea54838db3c59022299298ed968a5a163"),
    )
)

ENTRIES.append(
    book(
        158,
        "158-0.txt",
        "Emma",
        _AUSTEN,
        1815,
        927_445,
        "9943f6422b9246e7ad37625d6bd014b035fbfdea",
        ("89b601ce13c21eca31766bdd1a554842fc9ecb7d3638cc769f41712a523e24cf"),
    )
)

ENTRIES.append(
    book(
        105,
        "105.txt",
        "Persuasion",
        _AUSTEN,
        1817,
        495_015,
        "d408e95fc4098953e8dd8eb7cac6023802cb54f4",
        ("a773a0205cc090d3844408b157831a29263cc5207630c3a66b768216085ed91b"),
    )
)

ENTRIES.append(
    book(
        98,
        "98-0.txt",
        "A Tale of Two Cities",
        _DICKENS,
        1859,
        804_335,
        "0f6111bc7237af7375295ec1754c2e57e19f67f1",
        ("2fcfa071498b30724bd1bd714ba89e38477d632b86d74e87559f6259d3917e36"),
    )
)

ENTRIES.append(
    book(
        1400,
        "1400-0.txt",
        "Great Expectations",
        _DICKENS,
        1861,
        1_049_619,
        "889db0e100928a957f469bf834c564d04065c8e6",
        ("b58ce42c630e06314f2442d5937fa8a8556b6e3c5c16f4713c7332a4bb50b420"),
    )
)

ENTRIES.append(
    book(
        730,
        "730.txt",
        "Oliver Twist",
        _DICKENS,
        1838,
        936_281,
        "1cec930d0fc567cb650136b3d20406b4ac97a6e5",
        ("439543573a12e30e9bc1472ca8d2754a0bc20d06cc529a0f3efb148816792a0d"),
    )
)

ENTRIES.append(
    book(
        76,
        "76-0.txt",
        "Adventures of Huckleberry Finn",
        _TWAIN,
        1884,
        616_320,
        "8494afff3a26f95f37376f7a79a014cf818ccaba",
        ("cd9931183257a850178225bd5e25e4f2df0cbac544dfe9a49cd0ea5a210c24d9"),
    )
)

ENTRIES.append(
    book(
        74,
        "74-0.txt",
        "The Adventures of Tom Sawyer",
        _TWAIN,
        1876,
        428_104,
        "9b4174649064f197ca27895d98806b4a8659722b",
        ("b1cd5782db259c00bc1a8fbb58238f285e40828cc858c1343f74a0a75157cc91"),
    )
)

ENTRIES.append(
    book(
        86,
        "86-0.txt",
        "A Connecticut Yankee in King Arthur's Court",
        _TWAIN,
        1889,
        681_550,
        "0c41bb738e6886a324854da41c23eeb0149cf29a",
        ("63521eb6381e7fcbcaca584aa0b9c6fa4e5c6b37cb4af75f742715791a0aa35e"),
    )
)

ENTRIES.append(
    book(
        1661,
        "1661.txt",
        "The Adventures of Sherlock Holmes",
        _DOYLE,
        1892,
        594_941,
        "7e5dd2703fbf503c004063e96ab7c61262375e5f",
        ("2a0ce5568625a304f54fbb6bfdeeadf527a1437254b5f0e06b5a9e233d4784a2"),
    )
)

ENTRIES.append(
    book(
        2852,
        "2852-0.txt",
        "The Hound of the Baskervilles",
        _DOYLE,
        1902,
        352_886,
        "bb11a2bd7e3cda991b7f83936e811a0f472c089c",
        ("c8a61868388cafca2c76d1d82ee610d24b2bb09913ba6da936c4aca94eb1d1e4"),
    )
)

ENTRIES.append(
    book(
        2097,
        "2097.txt",
        "The Sign of the Four",
        _DOYLE,
        1890,
        257_693,
        "c36c6c7a4e7e5f7b8d17c9b19299e8ff996b414c",
        ("940b404710fc5cc8b3e9b4d19f91c12d8b1657f960eda9dea65a049b3ca05220"),
    )
)
