"""tinybert: the library built, chapter by chapter, by the course *Transformers and BERT from Scratch*.

Hand-written module. Most submodules are generated from the chapters (see each file's header);
edit the chapter, then run ``make export``.
"""
__version__ = "0.1.0"

from tinybert.multihead import MultiHeadAttention  # noqa: E402  (tinybert.MultiHeadAttention)

__all__ = ["MultiHeadAttention", "__version__"]
