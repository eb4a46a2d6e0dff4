"""Hand-written (not generated): where ``tinybert finetune`` gets the encoder it
fine-tunes, other than the course's own checkpoint.

``load_hf`` reads a Hugging Face BERT from a local folder (chapter 08's
``load_hf_bert``, no ``transformers`` needed) or, given a hub name, through
``from_hub`` (``transformers`` and chapter 08's ``from_hf``); ``encoder_of`` takes the
BertModel out of a loaded checkpoint's model. Used by ``tinybert.commands.finetune``.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["HUB_NAME", "encoder_of", "from_hub", "load_hf"]

# "bert-base-uncased", "org/name"
HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def from_hub(name: str):
    """(encoder, tokenizer) of a BERT on the Hugging Face hub, through
    ``transformers``."""
    import json
    import warnings

    from tinybert.models.convert import from_hf
    from tinybert.tokenizers.wordpiece import WordPieceTokenizer

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import transformers
        from huggingface_hub import hf_hub_download
    except ImportError as error:
        raise ValueError(
            f"{name!r} is not a local folder, and loading it from the "
            f"Hugging Face hub needs transformers ({error}); install it "
            f"with pip install 'tinybert[hf]', or pass a "
            f"local folder"
        ) from None
    try:
        config = transformers.AutoConfig.from_pretrained(name)
        if config.model_type != "bert":
            raise ValueError(
                f"{name!r} is not a BERT: its config says model_type "
                f"{config.model_type!r}; expected 'bert'"
            )
        hf_model = transformers.BertModel.from_pretrained(name)
        vocab = hf_hub_download(name, "vocab.txt")
        try:
            options = json.loads(
                Path(hf_hub_download(name, "tokenizer_config.json")).read_text()
            )
        except Exception:  # optional: many BERT repositories have none
            options = {}
    # transformers' way of saying "not found / offline"
    except OSError as error:
        raise FileNotFoundError(
            f"could not load {name!r} from the Hugging Face hub, and there is no local "
            f"folder of that name ({str(error).splitlines()[0]}). Check the name, go "
            f"online once (the files are cached), or pass a local folder with "
            f"config.json, model.safetensors and vocab.txt"
        ) from None
    tokenizer = WordPieceTokenizer.from_file(
        vocab,
        lowercase=options.get("do_lower_case", True),
        strip_accents=options.get("strip_accents"),
        handle_chinese_chars=options.get("tokenize_chinese_chars", True),
    )
    encoder = from_hf(hf_model).eval()
    if len(tokenizer) != encoder.config.vocab_size:
        raise ValueError(
            f"{name!r}: vocab.txt has {len(tokenizer):,} tokens but the "
            f"model's vocab_size is {encoder.config.vocab_size:,}"
        )
    return encoder, tokenizer


def load_hf(name_or_dir: str):
    """(encoder, tokenizer, description) from a local Hugging Face folder or a
    hub name."""
    from tinybert.models.pretrained_encoder import load_hf_bert

    path = Path(name_or_dir).expanduser()
    if path.exists() or not HUB_NAME.fullmatch(name_or_dir):
        # also explains a missing or incomplete folder
        loaded = load_hf_bert(path)
        return (
            loaded.model,
            loaded.tokenizer,
            (f"the Hugging Face folder {loaded.directory}"),
        )
    encoder, tokenizer = from_hub(name_or_dir)
    return encoder, tokenizer, f"{name_or_dir} from the Hugging Face hub"


def encoder_of(model):
    """The BertModel to fine-tune: the checkpoint's model itself when it was saved
    without heads, else its ``.bert``; any other model is a clear error."""
    from tinybert.models.bert import BertModel

    if isinstance(model, BertModel):
        return model
    if isinstance(getattr(model, "bert", None), BertModel):
        return model.bert
    raise ValueError(
        f"the checkpoint holds a {type(model).__name__}, which has no "
        f"BERT encoder to fine-tune; expected a BertModel or a model with "
        f"one in its .bert (BertForPreTraining, BertForMaskedLM)"
    )
