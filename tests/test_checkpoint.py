"""Saving and loading models (tinybert.models.registry, generated from chapters/08_bert.md)."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

import tinybert.models.registry as checkpoint
from tinybert.models.registry import load_model, register_model_class, save_model
from tinybert.checkpoint.files import unique_state_dict
from tinybert.models.bert import BertConfig, BertModel
from tinybert.models.bert_heads import BertForMaskedLM, BertForPreTraining

TINY = dict(vocab_size=99, d_model=32, n_layers=3, n_heads=4, d_ff=37, max_len=23)


def tiny(cls=BertForPreTraining, seed: int = 0, **kwargs):
    torch.manual_seed(seed)
    return cls(BertConfig(**TINY), **kwargs)


def same_state(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("cls", [BertModel, BertForMaskedLM, BertForPreTraining])
def test_round_trip(tmp_path, cls):
    model = tiny(cls)
    assert save_model(model, tmp_path / "ckpt") == tmp_path / "ckpt"
    loaded = load_model(tmp_path / "ckpt")
    assert type(loaded) is cls and loaded.config == model.config and not loaded.training
    assert same_state(model, loaded)
    ids = torch.randint(0, 99, (13, 7))
    with torch.no_grad():
        a, b = model.eval()(ids), loaded(ids)
    tensors = [k for k, v in vars(a).items() if isinstance(v, torch.Tensor)]
    assert tensors and all(torch.equal(getattr(a, k), getattr(b, k)) for k in tensors)


def test_tied_weights_are_stored_once_and_tied_after_loading(tmp_path):
    save_model(tiny(BertForMaskedLM), tmp_path)
    with safe_open(tmp_path / "model.safetensors", framework="pt") as f:
        keys = set(f.keys())
    assert "bert.embeddings.token_embeddings.weight" in keys
    assert "mlm_head.decoder.weight" not in keys
    loaded = load_model(tmp_path)
    assert loaded.mlm_head.decoder.weight is loaded.bert.embeddings.token_embeddings.weight
    assert len(unique_state_dict(loaded)) == len(loaded.state_dict()) - 1


def test_config_json(tmp_path):
    model = tiny(BertForPreTraining)
    save_model(model, tmp_path)
    meta = json.loads((tmp_path / "config.json").read_text())
    assert meta["model_class"] == "BertForPreTraining"
    assert BertConfig.from_dict(meta["config"]) == model.config
    with safe_open(tmp_path / "model.safetensors", framework="pt") as f:
        assert f.metadata()["save_id"] == meta["save_id"]


def test_bert_model_without_pooler_round_trips(tmp_path):
    save_model(tiny(BertModel, add_pooler=False), tmp_path)
    assert load_model(tmp_path).pooler is None


def test_explicit_model_class_and_overwrite(tmp_path):
    save_model(tiny(BertForMaskedLM, seed=1), tmp_path)
    second = tiny(BertForMaskedLM, seed=2)
    save_model(second, tmp_path)                                  # overwrite in place
    assert same_state(load_model(tmp_path, BertForMaskedLM), second)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    with pytest.raises(ValueError, match="does not fit BertForPreTraining.*missing \\['bert.pooler"):
        load_model(tmp_path, BertForPreTraining)


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json: no such file"):
        load_model(tmp_path / "nowhere")
    save_model(tiny(), tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors: no such file"):
        load_model(tmp_path)


def test_corrupt_weights(tmp_path):
    save_model(tiny(), tmp_path)
    path = tmp_path / "model.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])          # truncated
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        load_model(tmp_path)
    path.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        load_model(tmp_path)


def test_corrupt_config(tmp_path):
    save_model(tiny(), tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="expected a JSON object with model_class and config"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_class": "BertModel"}))
    with pytest.raises(ValueError, match="expected a JSON object with model_class and config"):
        load_model(tmp_path)


def test_unknown_class(tmp_path):
    save_model(tiny(), tmp_path)
    meta = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**meta, "model_class": "GPT5"}))
    with pytest.raises(ValueError, match="unknown model_class 'GPT5'.*BertForPreTraining"):
        load_model(tmp_path)


def test_weights_that_do_not_fit_the_config(tmp_path):
    save_model(tiny(), tmp_path)
    meta = json.loads((tmp_path / "config.json").read_text())
    meta["config"]["d_ff"] = 41
    (tmp_path / "config.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="does not fit.*feed_forward.expand.weight: file \\(37, 32\\), model \\(41, 32\\)"):
        load_model(tmp_path)
    meta["config"]["d_ff"], meta["config"]["n_layers"] = 37, 2
    (tmp_path / "config.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="unexpected \\['bert.encoder.layers.2"):
        load_model(tmp_path)


def test_files_from_two_saves_are_detected(tmp_path):
    save_model(tiny(seed=1), tmp_path / "a")
    save_model(tiny(seed=2), tmp_path / "b")
    (tmp_path / "a" / "config.json").write_bytes((tmp_path / "b" / "config.json").read_bytes())
    with pytest.raises(ValueError, match="different saves"):
        load_model(tmp_path / "a")


def test_a_crash_while_saving_leaves_the_old_checkpoint(tmp_path, monkeypatch):
    old = tiny(seed=1)
    save_model(old, tmp_path)
    import safetensors.torch

    def crash(tensors, path, metadata=None):
        with open(path, "wb") as f:
            f.write(b"half a file")
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(safetensors.torch, "save_file", crash)
    with pytest.raises(KeyboardInterrupt):
        save_model(tiny(seed=2), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]  # no temp files
    assert same_state(load_model(tmp_path), old)


def test_registering_model_classes(monkeypatch):
    monkeypatch.setattr(checkpoint, "MODEL_CLASSES", dict(checkpoint.MODEL_CLASSES))

    class NoConfig(torch.nn.Module):
        pass

    with pytest.raises(ValueError, match="config_class"):
        register_model_class(NoConfig)

    class Subclass(BertModel):
        pass

    assert register_model_class(Subclass) is Subclass
    assert checkpoint.MODEL_CLASSES["Subclass"] is Subclass


def test_unregistered_models_are_refused(tmp_path):
    class Unregistered(BertModel):
        pass

    with pytest.raises(ValueError, match="Unregistered is not registered"):
        save_model(Unregistered(BertConfig(**TINY)), tmp_path)
    assert not any(tmp_path.iterdir())
