"""tinybert: the library built, chapter by chapter, by the course *Transformers and BERT
from Scratch*.

Hand-written module. Most submodules are generated from the chapters (see each file's
header); edit the chapter, then run ``make export``. ``import tinybert`` is light: the
names below, and the subpackages, are imported on first use (``tinybert.BertModel``,
``tinybert.models``), so that ``import tinybert.data`` needs no torch.
"""

from tinybert.reexport import lazy_reexports

__version__ = "0.1.0"

# The main building blocks, importable as tinybert.<Name>: the module that defines each
_MODULES = {
    "blocks.multihead": ["MultiHeadAttention"],
    "blocks.transformer": ["Transformer", "TransformerConfig"],
    "blocks.language_model": ["DecoderOnlyLM"],
    "models.bert": ["BertConfig", "BertModel"],
    "models.bert_heads": ["BertForMaskedLM", "BertForPreTraining"],
    "models.convert": ["from_hf", "to_hf"],
}
SUBPACKAGES = (
    "blocks",
    "checkpoint",
    "commands",
    "corpus",
    "data",
    "diagrams",
    "exercises",
    "finetuning",
    "models",
    "pretraining",
    "shipped",
    "tokenizers",
    "training",
    "runtime",
)
__all__ = sorted(name for names in _MODULES.values() for name in names)
__all__.append("__version__")
__getattr__, __dir__ = lazy_reexports(__name__, _MODULES, SUBPACKAGES)
