"""Hand-written tests for reading Hugging Face BERT folders into tinybert (chapter 08's
``load_hf_bert`` and ``load_minilm``) and for ``tinybert finetune --from-hf``.

Parity is checked against ``transformers`` and ``tokenizers`` reading the *same local folder*
(nothing is downloaded): the real all-MiniLM-L6-v2 from the course's data registry when the data
is available, and tiny random models saved with ``save_pretrained`` otherwise. The loader itself
needs no ``transformers``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

from tinybert.models.pretrained_encoder import (
    PretrainedEncoder,
    load_hf_bert,
    load_minilm,
)
from tinybert.data import DataUnavailableError, fetch, fetch_group
from tinybert.models.bert import BertModel
from tinybert.tokenizers.wordpiece import SPECIAL_TOKENS

with warnings.catch_warnings():                 # transformers' progress bars warn about widgets
    warnings.simplefilter("ignore")
    transformers = pytest.importorskip("transformers")


def _course_data(call):
    try:
        return call()
    except DataUnavailableError as error:       # offline with no data folder: say so, don't error
        pytest.skip(f"course data unavailable: {error}")


@pytest.fixture(scope="module")
def minilm() -> PretrainedEncoder:
    _course_data(lambda: fetch_group("minilm"))
    return load_minilm()


def _pair_batch(tokenizer, pairs):
    """[CLS] A [SEP] B [SEP] for each pair, padded: ids, token types and mask, each (B, T)."""
    cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    rows, types = [], []
    for a, b in pairs:
        ids_a, ids_b = tokenizer.encode(a).ids, tokenizer.encode(b).ids if b else []
        row = [cls, *ids_a, sep] + ([*ids_b, sep] if b else [])
        rows.append(row)
        types.append([0] * (len(ids_a) + 2) + [1] * (len(row) - len(ids_a) - 2))
    T = max(len(row) for row in rows)
    pad = tokenizer.vocab["[PAD]"]
    ids = torch.tensor([row + [pad] * (T - len(row)) for row in rows])
    token_types = torch.tensor([t + [0] * (T - len(t)) for t in types])
    mask = (torch.arange(T)[None, :] < torch.tensor([len(r) for r in rows])[:, None]).long()
    return ids, token_types, mask


def _max_differences(ours: BertModel, theirs, ids, token_types, mask) -> tuple[float, float]:
    with torch.no_grad():
        a = ours(ids, token_types, mask)
        b = theirs(input_ids=ids, token_type_ids=token_types, attention_mask=mask)
    real = mask.bool()                           # what a model writes at padding is never used
    hidden = (a.last_hidden_state[real] - b.last_hidden_state[real]).abs().max().item()
    pooled = (a.pooler_output - b.pooler_output).abs().max().item()
    return hidden, pooled


# --- the real all-MiniLM-L6-v2 --------------------------------------------------------------

def test_minilm_is_the_expected_bert(minilm):
    config = minilm.config
    assert isinstance(minilm.model, BertModel) and minilm.model.pooler is not None
    assert (config.n_layers, config.d_model, config.n_heads, config.d_ff) == (6, 384, 12, 1536)
    assert config.vocab_size == len(minilm.tokenizer) == 30_522 and minilm.tokenizer.lowercase
    assert config.layer_norm_eps == 1e-12 and config.activation == "gelu"
    assert sum(p.numel() for p in minilm.model.parameters()) == 22_713_216
    assert not minilm.model.training
    assert minilm.directory == fetch_group("minilm")


def test_minilm_matches_transformers_exactly(minilm):
    hf_model = transformers.BertModel.from_pretrained(str(minilm.directory)).eval()
    pairs = [("I love my pet python.", "It sleeps all day under the lamp."),
             ("The bank lent him money.", "He paid it back within a year, with interest."),
             ("Short.", ""),
             ("Ünïcödé café, naïve résumé!", "東京 is big; 1,000,000 people?")]
    ids, token_types, mask = _pair_batch(minilm.tokenizer, pairs)
    assert (token_types == 1).any() and (mask == 0).any()       # both segments, and padding
    hidden, pooled = _max_differences(minilm.model, hf_model, ids, token_types, mask)
    print(f"all-MiniLM-L6-v2, tinybert vs transformers: last_hidden_state max |diff| {hidden:.2e}, "
          f"pooler_output max |diff| {pooled:.2e}")
    assert hidden <= 1e-6 and pooled <= 1e-6


ODD_STRINGS = [
    "", " ", "   leading and trailing   ", "UPPER lower MiXeD", "café naïve résumé Ångström",
    "Straße ß ﬁ ligature", "東京タワー and 北京 and 서울", "emoji 🙂👍🏽 and ♥", "tab\tnew\nline\r\nend",
    "control\x00chars\x07here", "zero\u200bwidth\u00a0space", "don't won't y'all 'quoted'",
    "e-mail: someone@example.com, https://example.org/a?b=c&d=e#f", "3.14159 1,000,000 $5.00 50%",
    "hyphen-ated words -- dashes — and – en", "((nested [brackets] {braces}))", "...!!!???",
    "a" * 120, "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "Ελληνικά и русский текст", "עברית ערבית عربى", "##hash ##tags", "[bracketed] <angled>", "C++ C# F# .NET node.js", "x²+y²=z² ½ ¾ №", "ﾊﾝｶｸ half-width",
]


def test_wordpiece_ids_match_hugging_face_on_varied_text(minilm):
    # Special tokens typed in the text ("[MASK]") are left out: Hugging Face's tokenizer reads
    # them as special tokens, ours as text (chapter 08 assembles such ids by hand).
    path = _course_data(lambda: fetch("ud_ewt/dev"))
    sentences = [line[len("# text = "):] for line in path.read_text(encoding="utf-8").splitlines()
                 if line.startswith("# text = ")]
    lines = sentences[::max(1, len(sentences) // 180)][:180] + ODD_STRINGS
    assert len(lines) >= 200
    hf_tokenizer = transformers.BertTokenizerFast.from_pretrained(str(minilm.directory))
    different = [(line, minilm.tokenizer.encode(line, add_special_tokens=True).ids,
                  hf_tokenizer(line)["input_ids"]) for line in lines]
    different = [d for d in different if d[1] != d[2]]
    print(f"WordPiece ids equal to Hugging Face's on {len(lines) - len(different)} of {len(lines)} lines")
    assert not different, different[:3]


# --- tiny random models saved by transformers (no course data needed) -----------------------

VOCAB = list(dict.fromkeys(
    [*SPECIAL_TOKENS, *(chr(c) for c in range(ord("a"), ord("z") + 1)),
     *(f"##{chr(c)}" for c in range(ord("a"), ord("z") + 1)), *".,?!'-0123456789",
     "the", "my", "card", "to", "is", "how", "do", "can", "you", "account", "money", "##ing",
     "##ed", "not", "what", "why", "have"]))


def _tiny_folder(path, cls=None, vocab=VOCAB):
    """A random transformers BERT with odd sizes and noisy weights, saved with a vocab.txt."""
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=37,
                                     max_position_embeddings=64)
    model = (cls or transformers.BertModel)(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(path)
    (path / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    return model


@pytest.mark.parametrize("cls_name, weights", [("BertModel", "safetensors"),
                                               ("BertModel", "bin"),
                                               ("BertForMaskedLM", "safetensors"),
                                               ("BertForPreTraining", "safetensors"),
                                               ("BertForSequenceClassification", "safetensors")])
def test_folder_loads_the_encoder_with_hugging_faces_outputs(tmp_path, cls_name, weights):
    hf_model = _tiny_folder(tmp_path, getattr(transformers, cls_name))
    if weights == "bin":                         # as older transformers versions saved them
        from safetensors.torch import load_file
        torch.save(load_file(tmp_path / "model.safetensors"), tmp_path / "pytorch_model.bin")
        (tmp_path / "model.safetensors").unlink()
    loaded = load_hf_bert(tmp_path)
    encoder = hf_model if cls_name == "BertModel" else hf_model.bert
    assert (loaded.model.pooler is not None) == (encoder.pooler is not None)
    ids, token_types, mask = _pair_batch(loaded.tokenizer, [("how do i top up my card?", "i can"),
                                                            ("what is the money", "")])
    if encoder.pooler is None:
        with torch.no_grad():
            a = loaded.model(ids, token_types, mask).last_hidden_state
            b = encoder(input_ids=ids, token_type_ids=token_types, attention_mask=mask).last_hidden_state
        assert (a[mask.bool()] - b[mask.bool()]).abs().max() <= 1e-6
    else:
        hidden, pooled = _max_differences(loaded.model, encoder, ids, token_types, mask)
        assert hidden <= 1e-6 and pooled <= 1e-6


def test_tokenizer_follows_the_folders_tokenizer_config(tmp_path):
    _tiny_folder(tmp_path)
    assert load_hf_bert(tmp_path).tokenizer.lowercase                  # default: uncased
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    cased = load_hf_bert(tmp_path).tokenizer
    assert not cased.lowercase and cased.encode("The").tokens == ["[UNK]"]


def test_folders_that_are_not_a_usable_bert_are_refused_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder.*config.json"):
        load_hf_bert(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="lacks config.json, vocab.txt, model.safetensors"):
        load_hf_bert(tmp_path)
    _tiny_folder(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    with pytest.raises(ValueError, match=f"{tmp_path} does not hold a BERT.*'roberta'.*expected "
                                         "model_type 'bert'"):
        load_hf_bert(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB[:-1]), encoding="utf-8")
    with pytest.raises(ValueError, match=f"vocab.txt has {len(VOCAB) - 1} tokens but config.json "
                                         f"says vocab_size {len(VOCAB)}"):
        load_hf_bert(tmp_path)
    (tmp_path / "vocab.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"lacks vocab.txt"):
        load_hf_bert(tmp_path)


def test_a_folder_with_wrong_tensors_names_the_weights_file(tmp_path):
    from safetensors.torch import load_file, save_file

    _tiny_folder(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["encoder.layer.1.output.dense.bias"]
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="model.safetensors: cannot convert.*output.dense.bias"):
        load_hf_bert(tmp_path)


# --- tinybert finetune --from-hf -----------------------------------------------------------

def _main(*argv):
    from tinybert.__main__ import main
    return main(["finetune", *argv])


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    _course_data(lambda: fetch("banking77/train"))
    folder = tmp_path_factory.mktemp("tiny-hf-bert")
    _tiny_folder(folder)
    return folder


@pytest.mark.parametrize("extra", [[], ["--random-init"]])
def test_finetune_from_a_local_hugging_face_folder(hf_folder, capsys, extra):
    code = _main("banking77", "--from-hf", str(hf_folder), "--train-examples", "40",
                 "--eval-examples", "20", "--epochs", "1", "--batch-size", "16", *extra)
    out = capsys.readouterr().out
    assert code == 0, out
    assert str(hf_folder) in out and ("random initialisation" in out) == bool(extra)
    accuracy = float(out.split("validation: accuracy ")[1].split()[0].rstrip(","))
    assert 0.0 <= accuracy <= 1.0


def test_finetune_from_hf_refuses_bad_input_with_a_message(tmp_path, capsys):
    assert _main("banking77", "--from-hf", str(tmp_path / "missing")) == 2
    assert "missing is not a folder" in capsys.readouterr().err
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "vocab.txt").write_text("[UNK]\n")
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert _main("banking77", "--from-hf", str(tmp_path)) == 2
    assert "does not hold a BERT" in capsys.readouterr().err
    assert _main("banking77", "--from-hf", str(tmp_path), "--checkpoint", str(tmp_path)) == 2
    assert "--from-hf and --checkpoint" in capsys.readouterr().err


def test_finetune_from_an_unreachable_hub_name_says_what_to_do(capsys, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")          # never touch the network in tests
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)   # (read at import)
    assert _main("banking77", "--from-hf", "tinybert-tests/no-such-model") == 2
    out = capsys.readouterr().err
    assert "could not load 'tinybert-tests/no-such-model' from the Hugging Face hub" in out
    assert "local folder" in out


def test_finetune_errors_are_messages_not_tracebacks(tmp_path):
    result = subprocess.run([sys.executable, "-m", "tinybert", "finetune", "banking77", "--from-hf",
                             str(tmp_path / "missing")], capture_output=True, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)
    assert result.returncode == 2   # errors go to stderr, as a usage error
    assert "Traceback" not in result.stdout + result.stderr
    assert "is not a folder" in result.stderr
