"""Hand-written (not generated): the course's architecture diagrams, drawn by code.

Each function takes a configuration or explicit sizes and returns a matplotlib
`Figure` whose labels are those numbers (D = 256, H = 4, ...), so a figure cannot
drift from the model it describes. Drawing is not what the course teaches, so this
subpackage is written by hand rather than exported from a chapter; the chapters call
it in cells whose code is hidden on the website. `canvas` holds the drawing
vocabulary, the other modules one group of chapters each.
"""

from tinybert.diagrams.albert import (
    albert_embeddings_diagram,
    albert_sharing_diagram,
    sop_nsp_diagram,
)
from tinybert.diagrams.attention import (
    attention_diagram,
    multihead_attention_diagram,
    positional_encoding_diagram,
)
from tinybert.diagrams.bert import bert_input_diagram, pretraining_heads_diagram
from tinybert.diagrams.electra import electra_diagram
from tinybert.diagrams.finetuning import (
    sentence_classification_diagram,
    sentence_pair_diagram,
    span_diagram,
    token_classification_diagram,
)
from tinybert.diagrams.transformer import encoder_layer_diagram, transformer_diagram
from tinybert.diagrams.variants import (
    distillation_diagram,
    family_diagram,
    roberta_bert_diagram,
)

__all__ = [
    "albert_embeddings_diagram",
    "albert_sharing_diagram",
    "attention_diagram",
    "bert_input_diagram",
    "distillation_diagram",
    "electra_diagram",
    "encoder_layer_diagram",
    "family_diagram",
    "multihead_attention_diagram",
    "positional_encoding_diagram",
    "pretraining_heads_diagram",
    "roberta_bert_diagram",
    "sentence_classification_diagram",
    "sentence_pair_diagram",
    "sop_nsp_diagram",
    "span_diagram",
    "token_classification_diagram",
    "transformer_diagram",
]
