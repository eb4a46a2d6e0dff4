"""tinybert: the library built, chapter by chapter, by the course *Transformers and BERT
from Scratch*.

Hand-written module. Most submodules are generated from the chapters (see each file's
header); edit the chapter, then run ``make export``.
"""

__version__ = "0.1.0"

# The main building blocks, importable as tinybert.<Name>.
from tinybert.blocks.multihead import MultiHeadAttention  # noqa: E402
from tinybert.blocks.transformer import Transformer, TransformerConfig  # noqa: E402
from tinybert.blocks.language_model import DecoderOnlyLM  # noqa: E402
from tinybert.models.bert import BertConfig, BertModel  # noqa: E402
from tinybert.models.bert_heads import BertForMaskedLM, BertForPreTraining
from tinybert.models.convert import from_hf, to_hf  # noqa: E402

__all__ = [
    "MultiHeadAttention",
    "Transformer",
    "TransformerConfig",
    "DecoderOnlyLM",
    "BertConfig",
    "BertModel",
    "BertForMaskedLM",
    "BertForPreTraining",
    "from_hf",
    "to_hf",
    "__version__",
]
