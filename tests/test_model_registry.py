"""Every model class the course saves loads in a new Python process
(tinybert.models.registry.MODEL_CLASS_MODULES, generated from chapters/08_bert.md)."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

import tinybert.models
from tinybert.models.registry import (
    MODEL_CLASS_MODULES,
    find_model_class,
    load_model,
    save_model,
)

ROOT = Path(__file__).resolve().parents[1]
# odd sizes, so that a swapped axis fails; the fields a config lacks are left out
TINY = dict(vocab_size=99, d_model=32, n_layers=3, n_heads=4, d_ff=37, max_len=23,
            embedding_size=16)
# the new process imports nothing of tinybert but load_model, then runs the model
FRESH = """
import sys
import torch
from safetensors.torch import load_file, save_file
from tinybert.models.registry import load_model

model = load_model(sys.argv[1])
inputs = load_file(sys.argv[2])
with torch.no_grad():
    out = model(inputs["input_ids"], attention_mask=inputs["attention_mask"])
tensors = {k: v for k, v in vars(out).items() if isinstance(v, torch.Tensor)}
save_file({k: v.contiguous() for k, v in tensors.items()}, sys.argv[3])
print(type(model).__module__, type(model).__name__)
"""


def tiny_model(name: str, **init_kwargs) -> nn.Module:
    cls = find_model_class(name)
    names = {f.name for f in dataclasses.fields(cls.config_class)}
    config = cls.config_class(**{k: v for k, v in TINY.items() if k in names})
    torch.manual_seed(0)
    model = cls(config, **init_kwargs).eval()
    with torch.no_grad():  # LayerNorms and biases away from their 1s and 0s
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return model


CASES = [(name, {}) for name in sorted(MODEL_CLASS_MODULES)] + [
    ("BertModel", {"add_pooler": False})
]


@pytest.mark.parametrize(("name", "init_kwargs"), CASES,
                         ids=[f"{n}{'-' if k else ''}{'-'.join(k)}" for n, k in CASES])
def test_every_course_class_loads_in_a_new_process(tmp_path, name, init_kwargs):
    model = tiny_model(name, **init_kwargs)
    save_model(model, tmp_path / "model")
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 99, (3, 7), generator=generator)  # no special tokens
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0  # padding in one row
    inputs = tmp_path / "inputs.safetensors"
    save_file({"input_ids": ids, "attention_mask": mask}, inputs)
    with torch.no_grad():
        out = model(ids, attention_mask=mask)
    expected = {k: v for k, v in vars(out).items() if isinstance(v, torch.Tensor)}

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", FRESH, str(tmp_path / "model"),
         str(inputs), str(tmp_path / "got.safetensors")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    cls = type(model)
    assert done.stdout.split() == [cls.__module__, name]
    got = load_file(tmp_path / "got.safetensors")
    assert expected and got.keys() == expected.keys()
    for key, tensor in expected.items():
        assert torch.equal(got[key], tensor), f"{name}: {key} differs"


def course_model_classes() -> dict[str, type]:
    """Every nn.Module in tinybert.models with a config_class and a forward of its
    own: the classes save_model can write (bases such as BertWithMLMHead have no
    forward)."""
    found = {}
    for info in pkgutil.iter_modules(tinybert.models.__path__):
        module = importlib.import_module(f"tinybert.models.{info.name}")
        for obj in vars(module).values():
            if (inspect.isclass(obj) and issubclass(obj, nn.Module)
                    and obj.__module__ == module.__name__
                    and hasattr(obj, "config_class")
                    and obj.forward is not nn.Module.forward):
                found[obj.__name__] = obj
    return found


def test_the_table_names_every_model_class_of_the_course():
    classes = course_model_classes()
    assert {"BertModel", "RobertaForMaskedLM", "AlbertForPreTraining"} <= set(classes)
    assert sorted(MODEL_CLASS_MODULES) == sorted(classes)
    for name, module in MODEL_CLASS_MODULES.items():
        assert classes[name].__module__ == module
        assert find_model_class(name) is classes[name]
        assert hasattr(classes[name].config_class, "from_dict")


def test_unknown_names_are_refused_with_the_known_ones(tmp_path):
    save_model(tiny_model("BertModel"), tmp_path)
    config = tmp_path / "config.json"
    config.write_text(config.read_text().replace('"BertModel"', '"GPT2Model"'))
    with pytest.raises(ValueError, match="unknown model_class 'GPT2Model'") as error:
        load_model(tmp_path)
    assert "RobertaForMaskedLM" in str(error.value)
    assert find_model_class("GPT2Model") is None


def test_a_readers_subclass_is_refused_until_registered(tmp_path, monkeypatch):
    import tinybert.models.registry as checkpoint

    monkeypatch.setattr(checkpoint, "MODEL_CLASSES", {})

    class MyBert(tinybert.models.BertModel):
        pass

    model = MyBert(tiny_model("BertModel").config)
    with pytest.raises(ValueError, match="MyBert is not registered"):
        save_model(model, tmp_path)
    checkpoint.register_model_class(MyBert)
    save_model(model, tmp_path)
    assert type(load_model(tmp_path)) is MyBert

    class BertModel(tinybert.models.BertModel):  # a course name for another class
        pass

    with pytest.raises(ValueError, match="already names"):
        checkpoint.register_model_class(BertModel)
    # as a notebook that defines the class again: load_model would build another one
    with pytest.raises(ValueError, match="rebuild tinybert.models.bert.BertModel"):
        save_model(BertModel(model.config), tmp_path)


# --- reliability probe, NaN hidden or produced -------------------------------------------


def test_the_pair_head_loss_is_zero_not_nan_when_no_pair_is_labelled():
    import torch

    from tinybert.models.bert import BertConfig
    from tinybert.models.bert_heads import BertForPreTraining

    config = BertConfig(vocab_size=99, d_model=32, n_layers=1, n_heads=4, d_ff=37,
                        max_len=16)
    model = BertForPreTraining(config)
    ids = torch.randint(5, 99, (3, 7))
    out = model(ids, pair_labels=torch.full((3,), -100))
    assert out.nsp_loss is not None and out.nsp_loss.item() == 0.0
    out.loss.backward()  # a loss of 0 that still has a graph
    labelled = model(ids, pair_labels=torch.tensor([0, -100, 1]))
    assert torch.isfinite(labelled.nsp_loss) and labelled.nsp_loss > 0


def test_load_model_refuses_nan_weights(tmp_path):
    import pytest
    import torch
    from safetensors.torch import load_file, save_file

    from tinybert.models.registry import load_model, save_model
    from tinybert.models.bert import BertConfig, BertModel

    config = BertConfig(vocab_size=99, d_model=32, n_layers=1, n_heads=4, d_ff=37,
                        max_len=16)
    folder = save_model(BertModel(config), tmp_path / "m")
    weights = folder / "model.safetensors"
    from safetensors import safe_open

    with safe_open(str(weights), "pt") as handle:
        header = handle.metadata()
    tensors = load_file(str(weights))
    name = sorted(tensors)[0]
    tensors[name] = torch.full_like(tensors[name], float("nan"))
    save_file(tensors, str(weights), metadata=header)
    with pytest.raises(ValueError, match="NaN or inf"):
        load_model(folder)


def test_a_huge_layer_norm_epsilon_is_refused():
    import pytest

    from tinybert.models.bert import BertConfig

    with pytest.raises(ValueError, match="layer_norm_eps"):
        BertConfig(vocab_size=99, d_model=32, n_layers=1, n_heads=4, d_ff=37,
                   layer_norm_eps=1e30)
    BertConfig(vocab_size=99, d_model=32, n_layers=1, n_heads=4, d_ff=37,
               layer_norm_eps=1e-5)


def test_a_damaged_previous_list_never_blocks_the_folder(tmp_path, capsys):
    """A power cut right after a save's rename could leave .previous/FILES.json empty:
    every later load and save of the folder then failed with a raw JSONDecodeError."""
    import torch

    from tinybert.models.registry import load_model, save_model
    from tinybert.models.bert import BertConfig, BertModel

    config = BertConfig(vocab_size=99, d_model=32, n_layers=1, n_heads=4, d_ff=37,
                        max_len=16)
    model = BertModel(config)
    folder = save_model(model, tmp_path / "m")
    kept = folder / ".previous"
    kept.mkdir()
    (kept / "FILES.json").write_text("")
    loaded = load_model(folder)
    ids = torch.randint(5, 99, (2, 5))
    with torch.no_grad():
        assert torch.equal(loaded(ids).last_hidden_state, model.eval()(ids).last_hidden_state)
    save_model(model, folder)  # a later save works, and clears .previous
    assert not kept.exists()
    assert "FILES.json is damaged" in capsys.readouterr().out


def test_float_labels_get_a_clear_error_in_the_heads():
    import pytest
    import torch

    from tinybert.finetuning.heads import SequenceClassifier, TokenClassifier
    from tinybert.models.bert import BertConfig, BertModel

    config = BertConfig(vocab_size=99, d_model=32, n_layers=1, n_heads=4, d_ff=37,
                        max_len=16)
    ids = torch.randint(5, 99, (2, 6))
    with pytest.raises(ValueError, match="expected integer class ids"):
        TokenClassifier(BertModel(config), 5)(ids, labels=torch.zeros(2, 6))
    with pytest.raises(ValueError, match="expected integer class ids"):
        SequenceClassifier(BertModel(config), 5)(ids, labels=torch.zeros(2))


def test_an_optimizer_state_loads_only_into_the_same_kind_of_optimizer(tmp_path):
    import pytest
    import torch

    from tinybert.training.state import load_checkpoint, save_checkpoint
    from tinybert.models.bert import BertConfig
    from tinybert.models.bert_heads import BertForPreTraining

    config = BertConfig(vocab_size=99, d_model=32, n_layers=1, n_heads=4, d_ff=37,
                        max_len=16)
    model = BertForPreTraining(config)
    adamw = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randint(5, 99, (2, 6))).mlm_logits.sum().backward()
    adamw.step()
    save_checkpoint(tmp_path / "state", model, step=1, optimizer=adamw)
    sgd = torch.optim.SGD(model.parameters(), lr=1e-3)
    with pytest.raises(ValueError, match="saved with a AdamW optimizer"):
        load_checkpoint(tmp_path / "state", model, optimizer=sgd)
    load_checkpoint(tmp_path / "state", model,
                    optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3))


def test_a_config_json_whose_config_is_not_an_object_is_named(tmp_path):
    import json

    import pytest

    from tinybert.models.registry import load_model, save_model
    from tinybert.models.bert import BertConfig, BertModel

    config = BertConfig(vocab_size=99, d_model=32, n_layers=1, n_heads=4, d_ff=37,
                        max_len=16)
    folder = save_model(BertModel(config), tmp_path / "m")
    meta = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**meta, "config": 5}))
    with pytest.raises(ValueError, match="config.json: corrupt"):
        load_model(folder)
