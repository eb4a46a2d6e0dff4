"""Broken Hugging Face folders (`tinybert finetune --from-hf DIR`, load_hf_bert) give an
error that names the file, never a raw traceback (reliability probe: fromhf.*)."""
import json
import pickle

import pytest

from tinybert.__main__ import main
from tinybert.models.pretrained_encoder import load_hf_bert

CONFIG = {"model_type": "bert", "vocab_size": 8, "hidden_size": 8, "num_hidden_layers": 1,
          "num_attention_heads": 2, "intermediate_size": 16}
VOCAB = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\n"


class Payload:
    def __reduce__(self):
        import os

        return (os.system, ("echo PWNED > /dev/null",))


def folder(tmp_path, config=None, weights=None):
    d = tmp_path / "hf"
    d.mkdir()
    (d / "vocab.txt").write_text(VOCAB)
    (d / "config.json").write_text(config if config is not None else json.dumps(CONFIG))
    name, data = weights or ("model.safetensors", b"\x00" * 4096)
    (d / name).write_bytes(data)
    return d


@pytest.mark.parametrize("config, weights, expected", [
    ("{not json", None, "config.json: corrupt"),
    ("[1, 2]", None, "config.json: corrupt; expected a JSON object"),
    (None, ("model.safetensors", b"\x08\x00\x00\x00\x00\x00\x00\x00{}"[:6]),
     "model.safetensors: not a readable safetensors file"),
    (None, ("pytorch_model.bin", pickle.dumps(Payload())),
     "pytorch_model.bin: not a file of tensors"),
], ids=["config-not-json", "config-list", "truncated-weights", "pickle-bin"])
def test_a_broken_folder_is_named(tmp_path, capsys, config, weights, expected):
    d = folder(tmp_path, config, weights)
    with pytest.raises(ValueError, match=expected.replace("(", r"\(")):
        load_hf_bert(d)
    assert main(["finetune", "banking77", "--from-hf", str(d)]) != 0
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and "weights_only=False" not in err
