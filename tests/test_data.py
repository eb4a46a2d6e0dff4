"""Tests for tinybert.data: the registry agrees with the course's data files, and fetch() finds,
downloads and checks files in the documented order.

No test uses the network. Downloads come from file:// URLs of temporary files, and "no network"
is a closed port on this machine. Tests that compare the registry with the real data files need
$TINYBERT_DATA_DIR (CI sets it to ../shared/data) and are skipped without it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from pathlib import Path

import pytest

from tinybert import data
from tinybert.data import fetching
from tinybert.data import ChecksumError, DataFile, DataUnavailableError, UnknownDataError

NO_NETWORK = "http://127.0.0.1:9/nothing"  # port 9 (discard) is closed: the connection is refused
_DATA_DIR_VALUE = os.environ.get("TINYBERT_DATA_DIR", "").strip()
DATA_DIR = Path(_DATA_DIR_VALUE).expanduser().absolute() if _DATA_DIR_VALUE else None
# Where CI keeps the data folder relative to the repository (../shared/data), used only to find
# SHA256SUMS and SOURCES.md when TINYBERT_DATA_DIR is not set.
SIBLING_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
NOT_ORIGINALS = ("licenses/", "derived/", "make_subsets.py")
LICENCES = {"CC-BY-SA-3.0", "CC-BY-SA-4.0", "CC-BY-4.0", "public-domain", "BSD-3-Clause", "Apache-2.0"}


def sha256_hex(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def files_under(folder: Path) -> list[str]:
    """Every file below ``folder`` (relative, sorted)."""
    if not folder.exists():
        return []
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def leftovers(folder: Path) -> list[str]:
    """Every file *and folder* below ``folder``: what a failed download must not leave."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) if folder.exists() else []


def reference_folder() -> Path:
    """The folder holding SHA256SUMS and SOURCES.md, or skip when there is none."""
    for folder in (DATA_DIR, SIBLING_DATA_DIR):
        if folder is not None and (folder / "SHA256SUMS").is_file():
            return folder
    pytest.skip("no data folder with SHA256SUMS: set TINYBERT_DATA_DIR to the course's data folder")


def demo_entry(content: bytes, url: str = NO_NETWORK) -> DataFile:
    """A made-up registry entry whose pinned bytes are ``content``."""
    return DataFile(name="demo/hello", relpath="demo/sub/hello.txt", url=url,
                    sha256=hashlib.sha256(content).hexdigest(), size=len(content),
                    licence="CC0-1.0", citation="Nobody (2024). Hello.")


@pytest.fixture(autouse=True)
def network_state():
    """Every test starts (and leaves) with no remembered network failure."""
    fetching._offline.clear()
    yield
    fetching._offline.clear()


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """No data folder and an empty private cache, so a test sees only the files it makes."""
    monkeypatch.delenv("TINYBERT_DATA_DIR", raising=False)
    folder = tmp_path / "cache"
    monkeypatch.setenv("TINYBERT_CACHE_DIR", str(folder))
    return folder


# --- the registry itself --------------------------------------------------------------------

EXPECTED_NAMES = (
    ["wikitext2/valid", "wikitext2/test", "wikitext2/train", "wikitext2/readme", "tinyshakespeare/input"]
    + [f"gutenberg/{n}" for n in (1342, 158, 105, 98, 1400, 730, 76, 74, 86, 1661, 2852, 2097)]
    + ["banking77/train", "banking77/test", "banking77/categories",
       "poem_sentiment/train", "poem_sentiment/dev", "poem_sentiment/test",
       "sentence_polarity/zip", "sentence_polarity/xml",
       "ud_ewt/train", "ud_ewt/dev", "ud_ewt/test", "uner_ewt/dev", "uner_ewt/test",
       "squad1.1/dev"]
    + [f"minilm/{n}" for n in ("model", "config", "vocab", "tokenizer", "tokenizer_config",
                                "special_tokens_map", "modules", "sentence_bert_config",
                                "config_sentence_transformers", "pooling_config", "model_card")]
)
MINILM_URL = ("https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/"
              "c9745ed1d9f207416be6d2e6f8de32d1f16199bf/FILE")  # the pattern of SOURCES.md section 11


def test_module_starts_with_hand_written_docstring():
    first_line = Path(data.__file__).read_text(encoding="utf-8").splitlines()[0]
    assert first_line.startswith('"""Hand-written module'), first_line


def test_registry_has_exactly_the_expected_names():
    assert sorted(data.names()) == sorted(EXPECTED_NAMES)
    assert data.names() == list(data.REGISTRY)
    assert data.names("gutenberg/") == [n for n in EXPECTED_NAMES if n.startswith("gutenberg/")]


@pytest.mark.parametrize("name", EXPECTED_NAMES)
def test_entry_is_well_formed(name):
    entry = data.info(name)
    assert entry.name == name
    assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256), entry.sha256
    # Pinned: raw GitHub content (or a Hugging Face model file) at a full 40-hex commit, ending in
    # the file's own name.
    assert (re.fullmatch(r"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/[0-9a-f]{40}/\S+", entry.url)
            or re.fullmatch(r"https://huggingface\.co/[\w.-]+/[\w.-]+/resolve/[0-9a-f]{40}/\S+", entry.url))
    assert entry.url.rsplit("/", 1)[1] == entry.relpath.rsplit("/", 1)[1]
    assert entry.licence in LICENCES
    assert re.search(r"\(\d{4}\)", entry.citation), entry.citation  # "Who (year). Title."
    if entry.offline_copy:
        assert isinstance(entry.size, int) and entry.size > 0
    assert not entry.relpath.startswith(("/", "derived/", "licenses/")) and ".." not in entry.relpath


def test_relpaths_are_unique_and_only_wikitext_train_is_online_only():
    relpaths = [entry.relpath for entry in data.REGISTRY.values()]
    assert len(relpaths) == len(set(relpaths))
    assert [e.name for e in data.REGISTRY.values() if not e.offline_copy] == ["wikitext2/train"]


def test_gutenberg_books_have_title_and_author():
    books = [data.info(name) for name in data.names("gutenberg/")]
    assert len(books) == 12
    for book in books:
        assert book.title and book.title in book.citation
        assert book.author and book.author in book.citation
        assert book.licence == "public-domain"
    authors = sorted(book.author for book in books)
    assert authors == sorted(["Jane Austen", "Charles Dickens", "Mark Twain", "Arthur Conan Doyle"] * 3)
    assert data.info("gutenberg/1342").title == "Pride and Prejudice"


def test_datafile_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.info("squad1.1/dev").sha256 = "0" * 64


# --- the registry against the real data folder ----------------------------------------------

@pytest.mark.parametrize("name", EXPECTED_NAMES)
def test_entry_matches_file_in_data_dir(name):
    if DATA_DIR is None:
        pytest.skip("TINYBERT_DATA_DIR is not set, so there are no data files to compare with")
    entry = data.info(name)
    if not entry.offline_copy:
        pytest.skip(f"{name} is not available offline (download only)")
    path = DATA_DIR / entry.relpath
    if not path.is_file():
        pytest.skip(f"{path} is not in this data folder")
    assert path.stat().st_size == entry.size, f"{name}: size of {path}"
    assert sha256_hex(path) == entry.sha256, f"{name}: sha256 of {path}"


def test_registry_covers_every_original_in_sha256sums():
    folder = reference_folder()
    sums = {}
    for line in (folder / "SHA256SUMS").read_text(encoding="utf-8").splitlines():
        digest, relpath = line.split(maxsplit=1)
        if not relpath.startswith(NOT_ORIGINALS):
            sums[relpath] = digest
    offline = {e.relpath: e.sha256 for e in data.REGISTRY.values() if e.offline_copy}
    assert sorted(offline) == sorted(sums)
    assert offline == sums
    online_only = [e.relpath for e in data.REGISTRY.values() if not e.offline_copy]
    assert online_only and not set(online_only) & set(sums)


def test_urls_are_those_given_in_sources_md():
    text = (reference_folder() / "SOURCES.md").read_text(encoding="utf-8")
    # The Gutenberg table: | file | book | GITenberg repo | commit | bytes | sha256 | git blob |
    rows = re.findall(r"^\| (\S+\.txt) \| [^|]+ \| (\S+) \| ([0-9a-f]{40}) \| (\d+) \| ([0-9a-f]{64}) \|",
                      text, flags=re.MULTILINE)
    assert len(rows) == 12
    by_relpath = {e.relpath: e for e in data.REGISTRY.values()}
    for filename, repo, commit, size, sha256 in rows:
        entry = by_relpath[f"pretraining/gutenberg/{filename}"]
        assert entry.url == f"https://raw.githubusercontent.com/GITenberg/{repo}/{commit}/{filename}"
        assert (entry.size, entry.sha256) == (int(size), sha256)
    assert MINILM_URL in text
    for name in data.names("minilm/"):   # the model's files: the pattern, FILE = path in the folder
        entry = data.info(name)
        in_folder = entry.relpath.removeprefix("pretrained/all-MiniLM-L6-v2/")
        assert entry.url == MINILM_URL.replace("FILE", in_folder), entry.url
        assert f"`{in_folder}`" in text and entry.sha256 in text, name
    for entry in data.REGISTRY.values():  # every other URL's folder, commit included, is in the text
        if not entry.name.startswith(("gutenberg/", "minilm/")):
            assert entry.url.rsplit("/", 1)[0] + "/" in text, entry.url
    assert data.info("wikitext2/train").url in text and data.info("wikitext2/train").sha256 in text


def test_fetch_by_name_finds_the_real_file_in_data_dir():
    if DATA_DIR is None:
        pytest.skip("TINYBERT_DATA_DIR is not set")
    path = data.fetch("wikitext2/readme")
    assert path == DATA_DIR / "pretraining/wikitext-2/README"
    assert path.read_bytes().startswith(b"This is raw data from the wikitext-2 dataset.")


def test_fetch_group_returns_the_model_folder_in_data_dir():
    if DATA_DIR is None:
        pytest.skip("TINYBERT_DATA_DIR is not set")
    if not (DATA_DIR / "pretrained/all-MiniLM-L6-v2/model.safetensors").is_file():
        pytest.skip("this data folder has no pretrained/all-MiniLM-L6-v2")
    folder = data.fetch_group("minilm")
    assert folder == DATA_DIR / "pretrained/all-MiniLM-L6-v2"
    for name in data.names("minilm/"):
        assert (DATA_DIR / data.info(name).relpath).is_relative_to(folder)
    assert (folder / "1_Pooling" / "config.json").is_file()


def test_fetch_group_completes_a_folder_split_between_data_dir_and_cache(tmp_path, monkeypatch,
                                                                        cache):
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    entries = {}
    for short, relpath, content in [("a", "grp/model/a.txt", b"in the data folder\n"),
                                    ("b", "grp/model/sub/b.txt", b"downloaded\n")]:
        (upstream / relpath.rsplit("/", 1)[1]).write_bytes(content)
        entries[f"grp/{short}"] = DataFile(
            f"grp/{short}", relpath, (upstream / relpath.rsplit("/", 1)[1]).as_uri(),
            hashlib.sha256(content).hexdigest(), len(content), "CC0-1.0", "Nobody (2024). Hi.")
    monkeypatch.setattr(data, "REGISTRY", {**data.REGISTRY, **entries})
    monkeypatch.setenv("TINYBERT_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "data/grp/model").mkdir(parents=True)
    (tmp_path / "data/grp/model/a.txt").write_bytes(b"in the data folder\n")
    folder = data.fetch_group("grp")
    assert folder == cache / "grp/model"
    assert (folder / "a.txt").read_bytes() == b"in the data folder\n"
    assert (folder / "sub/b.txt").read_bytes() == b"downloaded\n"
    assert files_under(cache) == ["grp/model/a.txt", "grp/model/sub/b.txt"]  # no temporary left
    assert (tmp_path / "data/grp/model/a.txt").exists()                     # data dir untouched


def test_fetch_group_of_an_unknown_prefix_lists_the_groups():
    with pytest.raises(UnknownDataError, match="minilm"):
        data.fetch_group("no-such-group")


# --- where fetch() looks ---------------------------------------------------------------------

def test_data_dir_wins_over_cache(tmp_path, monkeypatch, cache):
    entry = demo_entry(b"hello\n")
    for folder in (tmp_path / "data", cache):
        (folder / entry.relpath).parent.mkdir(parents=True)
        (folder / entry.relpath).write_bytes(b"hello\n")
    monkeypatch.setenv("TINYBERT_DATA_DIR", str(tmp_path / "data"))
    assert data.fetch_file(entry) == tmp_path / "data" / entry.relpath


def test_cache_is_used_when_data_dir_lacks_the_file(tmp_path, monkeypatch, cache):
    entry = demo_entry(b"hello\n")
    (cache / entry.relpath).parent.mkdir(parents=True)
    (cache / entry.relpath).write_bytes(b"hello\n")
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("TINYBERT_DATA_DIR", str(tmp_path / "data"))
    assert data.fetch_file(entry) == cache / entry.relpath
    monkeypatch.delenv("TINYBERT_DATA_DIR")
    assert data.fetch_file(entry) == cache / entry.relpath


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_data_dir_that_is_not_a_folder_is_an_error_not_a_download(tmp_path, monkeypatch,
                                                                      cache, kind):
    source = tmp_path / "upstream.txt"
    source.write_bytes(b"hello\n")
    entry = demo_entry(b"hello\n", url=source.as_uri())        # a download would work
    target = tmp_path / "datta"                                 # a typo
    if kind == "file":
        target.write_text("not a folder\n")
    monkeypatch.setenv("TINYBERT_DATA_DIR", str(target))
    with pytest.raises(DataUnavailableError) as caught:
        data.fetch_file(entry)
    message = str(caught.value)
    for part in (str(target), "does not exist" if kind == "missing" else "is a file",
                 entry.relpath, "unset it"):
        assert part in message
    assert leftovers(cache) == [] and not (cache / entry.relpath).exists()


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYBERT_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("TINYBERT_CACHE_DIR")
    assert data.cache_dir() == tmp_path / "xdg" / "tinybert" / "data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data.cache_dir() == tmp_path / "home" / ".cache" / "tinybert" / "data"


# --- downloading -----------------------------------------------------------------------------

def test_download_lands_in_cache_verified(tmp_path, cache):
    source = tmp_path / "upstream.txt"
    source.write_bytes(b"the right bytes\n")
    entry = demo_entry(b"the right bytes\n", url=source.as_uri())
    path = data.fetch_file(entry)
    assert path == cache / entry.relpath
    assert path.read_bytes() == b"the right bytes\n"
    assert files_under(cache) == [entry.relpath]  # no temporary file left beside it
    source.unlink()  # the second fetch must come from the cache, not the URL
    assert data.fetch_file(entry) == path


def test_a_download_has_the_usual_permissions(tmp_path, cache):
    """Written with checkpoint.atomic.write_atomically: 0644 under umask 022, not the
    0600 of a private temporary file."""
    source = tmp_path / "upstream.txt"
    source.write_bytes(b"the right bytes\n")
    umask = os.umask(0o022)
    try:
        path = data.fetch_file(demo_entry(b"the right bytes\n", url=source.as_uri()))
    finally:
        os.umask(umask)
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_download_with_wrong_bytes_raises_and_leaves_nothing(tmp_path, cache):
    source = tmp_path / "upstream.txt"
    source.write_bytes(b"tampered bytes\n")
    entry = demo_entry(b"the right bytes\n", url=source.as_uri())
    with pytest.raises(ChecksumError) as caught:
        data.fetch_file(entry)
    message = str(caught.value)
    for part in (entry.name, entry.sha256, sha256_hex(source), entry.url):
        assert part in message
    assert isinstance(caught.value, ValueError)
    assert leftovers(cache) == []


def test_fetch_by_name_downloads_a_registered_entry(tmp_path, monkeypatch, cache):
    source = tmp_path / "upstream.txt"
    source.write_bytes(b"registered\n")
    entry = demo_entry(b"registered\n", url=source.as_uri())
    monkeypatch.setattr(data, "REGISTRY", {**data.REGISTRY, entry.name: entry})
    assert data.fetch("demo/hello").read_bytes() == b"registered\n"


def test_missing_file_without_network_says_what_to_do(cache):
    entry = dataclasses.replace(data.info("squad1.1/dev"), url=NO_NETWORK)
    with pytest.raises(DataUnavailableError) as caught:
        data.fetch_file(entry, timeout=5)
    message = str(caught.value)
    for part in ("squad1.1/dev", "qa/squad_v1.1/dev-v1.1.json", NO_NETWORK, "TINYBERT_DATA_DIR"):
        assert part in message
    assert str(cache / entry.relpath) in message  # where it looked
    assert "Set TINYBERT_DATA_DIR to a folder that contains qa/squad_v1.1/dev-v1.1.json" in message
    assert isinstance(caught.value, FileNotFoundError)
    assert leftovers(cache) == []


def refuse_connections(monkeypatch, calls: list | None = None) -> None:
    """Make every download fail the way an unreachable network does (whatever proxies are set)."""
    def refused(url, timeout):
        if calls is not None:
            calls.append(url)
        raise fetching.urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
    monkeypatch.setattr(fetching.urllib.request, "urlopen", refused)


def test_after_a_network_failure_later_downloads_fail_at_once(monkeypatch, cache):
    calls = []
    refuse_connections(monkeypatch, calls)
    with pytest.raises(DataUnavailableError):
        data.fetch_file(demo_entry(b"x\n"))
    other = dataclasses.replace(data.info("squad1.1/dev"), url="https://example.invalid/dev.json")
    with pytest.raises(DataUnavailableError) as caught:
        data.fetch_file(other)
    assert calls == [NO_NETWORK]                                   # the second download was not tried
    message = str(caught.value)
    for part in ("not tried", "Connection refused", "tries again", "Set TINYBERT_DATA_DIR"):
        assert part in message
    assert leftovers(cache) == []


def test_local_urls_are_tried_while_the_network_is_unreachable(tmp_path, monkeypatch, cache):
    with monkeypatch.context() as patched:                         # the real urlopen again afterwards
        refuse_connections(patched)
        with pytest.raises(DataUnavailableError):
            data.fetch_file(demo_entry(b"x\n"))
    source = tmp_path / "upstream.txt"
    source.write_bytes(b"local bytes\n")
    assert fetching._offline                                           # still remembered
    assert data.fetch_file(demo_entry(b"local bytes\n", url=source.as_uri())).read_bytes() == b"local bytes\n"


def test_downloads_are_tried_again_after_the_retry_interval(monkeypatch, cache):
    calls = []
    refuse_connections(monkeypatch, calls)
    with pytest.raises(DataUnavailableError):
        data.fetch_file(demo_entry(b"x\n"))
    start = fetching._offline["since"]
    monkeypatch.setattr(fetching.time, "monotonic", lambda: start + data.OFFLINE_RETRY_SECONDS + 1)
    with pytest.raises(DataUnavailableError):
        data.fetch_file(demo_entry(b"x\n"))
    assert calls == [NO_NETWORK, NO_NETWORK]


def test_an_http_error_is_not_taken_for_a_missing_network(monkeypatch, cache):
    def not_found(url, timeout):
        raise fetching.urllib.error.HTTPError(url, 404, "Not Found", {}, None)
    monkeypatch.setattr(fetching.urllib.request, "urlopen", not_found)
    with pytest.raises(DataUnavailableError) as caught:
        data.fetch_file(demo_entry(b"x\n", url="https://example.invalid/gone.txt"))
    assert "404" in str(caught.value)
    assert fetching._offline == {}


# --- corrupt local copies --------------------------------------------------------------------

def test_corrupt_file_in_data_dir_is_reported_and_kept(tmp_path, monkeypatch, cache):
    entry = demo_entry(b"hello\n")
    path = tmp_path / "data" / entry.relpath
    path.parent.mkdir(parents=True)
    path.write_bytes(b"HELLO\n")
    monkeypatch.setenv("TINYBERT_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(ChecksumError) as caught:
        data.fetch_file(entry)
    message = str(caught.value)
    for part in (str(path), entry.sha256, sha256_hex(path), "TINYBERT_DATA_DIR", entry.url):
        assert part in message
    assert path.read_bytes() == b"HELLO\n"  # the user's file is untouched


def test_corrupt_cached_file_is_replaced_by_a_fresh_download(tmp_path, cache):
    source = tmp_path / "upstream.txt"
    source.write_bytes(b"hello\n")
    entry = demo_entry(b"hello\n", url=source.as_uri())
    (cache / entry.relpath).parent.mkdir(parents=True)
    (cache / entry.relpath).write_bytes(b"truncat")
    with pytest.warns(UserWarning, match="Deleting the cached copy"):
        path = data.fetch_file(entry)
    assert path.read_bytes() == b"hello\n"
    assert files_under(cache) == [entry.relpath]


def test_verification_is_remembered_until_mtime_or_size_changes(tmp_path, cache):
    entry = demo_entry(b"hello\n")
    path = cache / entry.relpath
    path.parent.mkdir(parents=True)
    path.write_bytes(b"hello\n")
    assert data.fetch_file(entry) == path
    stat = path.stat()
    path.write_bytes(b"jello\n")  # same size; put the old mtime back
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert data.fetch_file(entry) == path  # not re-hashed: the remembered result stands
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with pytest.raises(DataUnavailableError), pytest.warns(UserWarning):
        data.fetch_file(entry, timeout=5)  # now re-hashed, found corrupt, removed, not re-downloadable
    assert files_under(cache) == []


# --- names ---------------------------------------------------------------------------------

def test_unknown_name_suggests_close_matches():
    with pytest.raises(UnknownDataError) as caught:
        data.fetch("wikitext2/vaild")
    assert isinstance(caught.value, KeyError)
    message = str(caught.value)
    assert "'wikitext2/vaild'" in message and "'wikitext2/valid'" in message and "names()" in message


def test_unknown_name_that_is_a_relpath_suggests_its_name():
    with pytest.raises(UnknownDataError, match="'banking77/train'"):
        data.info("classification/banking77/train.csv")


def test_unknown_name_without_close_match_still_says_how_to_list():
    with pytest.raises(UnknownDataError, match=r"names\(\)") as caught:
        data.info("imagenet")
    assert "Did you mean" not in str(caught.value)


def test_info_exposes_licence_and_citation():
    squad = data.info("squad1.1/dev")
    assert squad.licence == "CC-BY-SA-4.0" and "Rajpurkar" in squad.citation
    assert data.info("banking77/train").licence == "CC-BY-4.0"
    assert data.info("wikitext2/valid").relpath == "pretraining/wikitext-2/valid.txt"
