"""Unit tests for the training side of chapters/09_pretraining.md: the optimizer and its schedule,
checkpoints (round trip, corruption, interrupted saves), exact resumption, the loss and evaluation.

Tiny, odd sizes (vocab 99, d_model 32, 4 heads, d_ff 37, 2 layers, 23 positions) with dropout on.
"""
from __future__ import annotations

import json

import pytest
import torch

from tinybert.models.registry import save_model
from tinybert.training.inputs import SpecialTokens
from tinybert.models.bert_heads import IGNORE_INDEX, BertForPreTraining
from tinybert.models.bert import BertConfig, BertModel
from tinybert.pretraining.evaluation import evaluate_pretraining
from tinybert.pretraining.pretrain_loop import PretrainingConfig, pretrain
from tinybert.pretraining.objective import pretraining_losses
from tinybert.pretraining.examples import PretrainingBatches, PretrainingExample
from tinybert.training.inputs import encode_pair
from tinybert.training.state import Checkpoint, load_checkpoint, save_checkpoint
from tinybert.training.optim import autocast_dtype, linear_warmup_decay, make_optimizer

TINY = dict(vocab_size=99, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=23, pad_token_id=7)
SPECIAL = SpecialTokens(pad=7, unk=20, cls=3, sep=50, mask=98, vocab_size=99)


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_model(seed: int = 0, **overrides) -> BertForPreTraining:
    torch.manual_seed(seed)
    return BertForPreTraining(BertConfig(**{**TINY, **overrides}))


def examples(n: int = 60, seed: int = 0) -> list[PretrainingExample]:
    """Pairs of segments whose tokens follow Zipf's law (frequency ~ 1 / rank), like words do."""
    g = torch.Generator().manual_seed(seed)
    ordinary = torch.tensor([i for i in range(99) if i not in (7, 20, 3, 50, 98)])
    zipf = 1.0 / torch.arange(1, len(ordinary) + 1)
    out = []
    for i in range(n):
        la, lb = (int(x) for x in torch.randint(3, 11, (2,), generator=g))
        a = ordinary[torch.multinomial(zipf, la, replacement=True, generator=g)].tolist()
        b = ordinary[torch.multinomial(zipf, lb, replacement=True, generator=g)].tolist()
        out.append(PretrainingExample(*encode_pair(a, b, SPECIAL, max_len=23), pair_label=i % 2))
    return out


# --- optimizer and schedule -----------------------------------------------------------------------

def test_make_optimizer_groups():
    model = tiny_model()
    optimizer = make_optimizer(model, lr=1e-3)
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim == 2 for p in decay["params"]) and all(p.ndim == 1 for p in no_decay["params"])
    names = {id(p): n for n, p in model.named_parameters()}
    no_decay_names = {names[id(p)] for p in no_decay["params"]}
    assert any("norm" in n and n.endswith("weight") for n in no_decay_names)         # LayerNorm weights
    assert any(n.endswith("bias") for n in no_decay_names)
    assert "bert.embeddings.token_embeddings.weight" in {names[id(p)] for p in decay["params"]}
    listed = [id(p) for group in optimizer.param_groups for p in group["params"]]
    assert len(listed) == len(set(listed)) == len(list(model.parameters()))         # the tied weight once
    assert optimizer.defaults["eps"] == 1e-6 and optimizer.defaults["betas"] == (0.9, 0.999)
    with pytest.raises(ValueError):
        make_optimizer(model, lr=0.0)


def _lrs(warmup: int, total: int, steps: int) -> list[float]:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0)
    scheduler = linear_warmup_decay(optimizer, warmup, total)
    lrs = []
    for _ in range(steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


def test_linear_warmup_decay_values():
    lrs = _lrs(warmup=4, total=10, steps=12)
    assert lrs[:5] == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0])                    # up to the peak
    assert lrs[5:] == pytest.approx([2.0 * (10 - s) / 6 for s in range(5, 11)] + [0.0])   # down to 0
    assert _lrs(warmup=0, total=4, steps=5) == pytest.approx([2.0, 1.5, 1.0, 0.5, 0.0])


def test_linear_warmup_decay_matches_hugging_face():
    transformers = pytest.importorskip("transformers")
    for warmup, total in [(0, 7), (3, 7), (7, 7), (5, 13)]:
        reference = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0)
        hf = transformers.get_linear_schedule_with_warmup(reference, warmup, total)
        expected = []
        for _ in range(total + 2):
            expected.append(reference.param_groups[0]["lr"])
            reference.step()
            hf.step()
        assert _lrs(warmup, total, total + 2) == pytest.approx(expected, abs=1e-12)


def test_linear_warmup_decay_errors():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    for warmup, total in [(5, 4), (-1, 4), (0, 0), (1.5, 4)]:
        with pytest.raises(ValueError):
            linear_warmup_decay(optimizer, warmup, total)


def test_autocast_dtype():
    assert autocast_dtype("cpu") is None
    if torch.cuda.is_available():
        assert autocast_dtype("cuda") in (torch.bfloat16, torch.float16)


@pytest.mark.parametrize("capability, expected", [((7, 5), torch.float16), ((8, 0), torch.bfloat16),
                                                  ((9, 0), torch.bfloat16), ((6, 1), torch.float16)])
def test_autocast_dtype_wants_native_bfloat16(monkeypatch, capability, expected):
    """bfloat16 only from compute capability 8.0 (Ampere): a T4 (7.5) says
    is_bf16_supported() through emulation, and must get float16 (with a GradScaler)."""
    asked = []
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability",
                        lambda device=None: asked.append(device) or capability)
    assert autocast_dtype("cuda:1") is expected
    assert asked == [torch.device("cuda:1")]
    assert autocast_dtype("mps") is None and autocast_dtype("cpu") is None
    # the loop scales the loss exactly when the type is float16
    scaler = torch.amp.GradScaler("cpu", enabled=expected == torch.float16)
    assert scaler.is_enabled() == (capability < (8, 0))


# --- loss and evaluation --------------------------------------------------------------------------

def test_pretraining_losses_match_the_model():
    model = tiny_model(dropout=0.0, attention_dropout=0.0)
    batch = PretrainingBatches(examples(), SPECIAL, batch_size=13, seed=0)(0)
    loss, mlm, pair = pretraining_losses(model, batch)
    out = model(**batch)
    assert torch.allclose(loss, out.loss) and torch.allclose(mlm, out.mlm_loss) and torch.allclose(pair, out.nsp_loss)
    assert loss.requires_grad and not mlm.requires_grad


def test_evaluate_pretraining_against_full_logits():
    model = tiny_model()
    model.train()
    batches = [PretrainingBatches(examples(), SPECIAL, batch_size=13, seed=s, dynamic_masking=False)(0)
               for s in range(3)]
    metrics = evaluate_pretraining(model, batches)
    assert model.training                                   # the mode is restored
    model.eval()
    correct = total = nsp_correct = pairs = 0
    loss_sum = 0.0
    with torch.no_grad():
        for batch in batches:
            out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])   # (B, T, V)
            chosen = batch["mlm_labels"] != IGNORE_INDEX
            logits, targets = out.mlm_logits[chosen], batch["mlm_labels"][chosen]
            correct += (logits.argmax(-1) == targets).sum().item()
            loss_sum += torch.nn.functional.cross_entropy(logits, targets, reduction="sum").item()
            total += len(targets)
            nsp_correct += (out.nsp_logits.argmax(-1) == batch["pair_labels"]).sum().item()
            pairs += len(batch["pair_labels"])
    assert metrics["mlm_tokens"] == total and metrics["pairs"] == pairs == 39
    assert metrics["mlm_accuracy"] == pytest.approx(correct / total)
    assert metrics["mlm_loss"] == pytest.approx(loss_sum / total, rel=1e-5)
    assert metrics["pair_accuracy"] == pytest.approx(nsp_correct / pairs)


# --- checkpoints ----------------------------------------------------------------------------------

def _trained(steps: int = 2):
    model = tiny_model()
    optimizer = make_optimizer(model, lr=1e-3)
    scheduler = linear_warmup_decay(optimizer, 1, 10)
    batches = PretrainingBatches(examples(), SPECIAL, batch_size=13, seed=0)
    for step in range(steps):
        pretraining_losses(model, batches(step))[0].backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
    return model, optimizer, scheduler


def test_checkpoint_round_trip(tmp_path):
    model, optimizer, scheduler = _trained()
    generator = torch.Generator().manual_seed(42)
    torch.manual_seed(123)
    expected_draw = torch.rand(3)
    torch.manual_seed(123)
    save_checkpoint(tmp_path, model, optimizer=optimizer, scheduler=scheduler, step=2,
                    extra={"note": "hello", "history": [1, 2]}, generator=generator)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json", "model.safetensors", "training_state.json", "training_state.safetensors"]  # no temp files
    expected_gen = torch.rand(2, generator=generator)
    torch.rand(5)                                           # move the global RNG on
    fresh = tiny_model(seed=9)
    fresh_optimizer = make_optimizer(fresh, lr=1e-3)
    fresh_scheduler = linear_warmup_decay(fresh_optimizer, 1, 10)
    fresh_generator = torch.Generator()
    checkpoint = load_checkpoint(tmp_path, fresh, optimizer=fresh_optimizer, scheduler=fresh_scheduler,
                                 generator=fresh_generator)
    assert isinstance(checkpoint, Checkpoint) and checkpoint.model is fresh
    assert checkpoint.step == 2 and checkpoint.extra == {"note": "hello", "history": [1, 2]}
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    saved, loaded = optimizer.state_dict(), fresh_optimizer.state_dict()
    assert saved["param_groups"] == loaded["param_groups"]
    for index, values in saved["state"].items():
        for key, value in values.items():
            assert torch.equal(value, loaded["state"][index][key]), (index, key)
    assert fresh_scheduler.state_dict() == scheduler.state_dict()
    assert torch.equal(torch.rand(3), expected_draw)           # the global RNG is restored
    assert torch.equal(torch.rand(2, generator=fresh_generator), expected_gen)
    alone = load_checkpoint(tmp_path)                           # no model given: a new one is built
    assert isinstance(alone.model, BertForPreTraining) and alone.model.config == model.config


def test_checkpoint_errors(tmp_path):
    model, optimizer, scheduler = _trained(1)
    with pytest.raises(FileNotFoundError, match="training_state.json"):
        load_checkpoint(tmp_path / "missing")
    save_checkpoint(tmp_path, model, optimizer=optimizer, scheduler=scheduler, step=1)
    # a model of another size
    with pytest.raises(ValueError, match="config"):
        load_checkpoint(tmp_path, tiny_model(d_model=36))
    # a model of another class
    with pytest.raises(ValueError, match="BertModel"):
        load_checkpoint(tmp_path, BertModel(BertConfig(**TINY)))
    # an optimizer over other parameters
    other = tiny_model(n_layers=1)
    with pytest.raises(ValueError):
        load_checkpoint(tmp_path, optimizer=make_optimizer(other, lr=1e-3))
    # an interrupted save: the model files were replaced, the training state was not
    save_model(model, tmp_path)
    with pytest.raises(ValueError, match="different saves"):
        load_checkpoint(tmp_path)
    # a corrupt (truncated) training-state file
    save_checkpoint(tmp_path, model, optimizer=optimizer, step=1)
    path = tmp_path / "training_state.safetensors"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="corrupt or truncated"):
        load_checkpoint(tmp_path)
    # a corrupt JSON file
    save_checkpoint(tmp_path, model, step=1)
    (tmp_path / "training_state.json").write_text("{not json")
    with pytest.raises(ValueError, match="corrupt; expected a JSON object with step and save_id"):
        load_checkpoint(tmp_path)
    # JSON without the step
    save_checkpoint(tmp_path, model, step=1)
    state = json.loads((tmp_path / "training_state.json").read_text())
    del state["step"]
    (tmp_path / "training_state.json").write_text(json.dumps(state))
    with pytest.raises(ValueError, match=r"step and save_id \(\['step'\]\)"):
        load_checkpoint(tmp_path)
    # the tensors file gone
    save_checkpoint(tmp_path, model, step=1)
    (tmp_path / "training_state.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="not a training checkpoint"):
        load_checkpoint(tmp_path)
    # extra must be JSON
    with pytest.raises(ValueError, match="JSON"):
        save_checkpoint(tmp_path, model, extra={"tensor": torch.zeros(1)})


def test_checkpoint_without_optimizer_cannot_restore_one(tmp_path):
    model, _, _ = _trained(1)
    save_checkpoint(tmp_path, model, step=5)
    assert load_checkpoint(tmp_path).step == 5
    with pytest.raises(ValueError, match="without an optimizer"):
        load_checkpoint(tmp_path, optimizer=make_optimizer(tiny_model(), lr=1e-3))


# --- the loop: resuming is exact ------------------------------------------------------------------

def _run(tmp_path, *, stop_after=None, resume=False, init_seed=0):
    model = tiny_model(seed=init_seed)                       # dropout 0.1 on: the RNG matters
    batches = PretrainingBatches(examples(), SPECIAL, batch_size=13, seed=3)   # 4 steps per epoch
    held = [PretrainingBatches(examples(26, seed=1), SPECIAL, batch_size=13, dynamic_masking=False)(0)]
    config = PretrainingConfig(steps=9, lr=3e-3, warmup_fraction=0.2, log_every=2, eval_every=4, seed=5)
    history = pretrain(model, batches, config, eval_batches=held, device="cpu", checkpoint_dir=tmp_path / "ckpt",
                       resume=resume, stop_after=stop_after, metrics_path=tmp_path / "metrics.json")
    return model, history


def test_resume_gives_exactly_the_uninterrupted_parameters(tmp_path):
    straight, history = _run(tmp_path / "a")
    _, partial = _run(tmp_path / "b", stop_after=6)
    assert json.loads((tmp_path / "b" / "ckpt" / "training_state.json").read_text())["step"] == 6
    resumed, resumed_history = _run(tmp_path / "b", resume=True, init_seed=1)   # other initial weights
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    assert [r["step"] for r in resumed_history["eval"]] == [4, 8, 9]
    assert resumed_history["eval"] == history["eval"]
    assert partial["eval"] == history["eval"][:1]
    # without resume the second run starts again from scratch and differs
    fresh, _ = _run(tmp_path / "c", stop_after=6)
    assert not all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), straight.state_dict().values()))


def test_training_lowers_the_loss(tmp_path):
    model = tiny_model()
    batches = PretrainingBatches(examples(), SPECIAL, batch_size=13, seed=0)
    held = [PretrainingBatches(examples(26, seed=1), SPECIAL, batch_size=13, dynamic_masking=False)(0)]
    before = evaluate_pretraining(model, held)["mlm_loss"]
    history = pretrain(model, batches, PretrainingConfig(steps=20, lr=3e-3, eval_every=20), eval_batches=held,
                       device="cpu")
    assert history["eval"][-1]["mlm_loss"] < before - 0.5        # it learns at least the token frequencies
    assert len(history["train"]) == 2 and history["train"][0]["lr"] > 0


def test_make_optimizer_falls_back_to_foreach_where_no_fused_kernel_exists(monkeypatch):
    """Before PyTorch 2.4 a CPU has no fused AdamW: AdamW(fused=True) raises
    RuntimeError, and make_optimizer must then give the batched (foreach) update."""
    real = torch.optim.AdamW

    def old_adamw(params, **options):
        if options.get("fused"):
            raise RuntimeError("`fused=True` requires all the params to be floating point "
                               "Tensors of supported devices: ['cuda']")
        return real(params, **options)

    monkeypatch.setattr(torch.optim, "AdamW", old_adamw)
    optimizer = make_optimizer(torch.nn.Linear(2, 2), lr=1e-3)
    assert isinstance(optimizer, real)
    assert all(g["foreach"] and not g["fused"] for g in optimizer.param_groups)
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.01, 0.0]


def test_make_optimizer_updates_as_a_loop_over_the_tensors():
    """fused=True runs the update in one kernel; it must give the numbers of a plain loop
    over the tensors (foreach=False, fused=False), up to float32 rounding."""
    def trained(fused: bool) -> list[torch.Tensor]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.LayerNorm(16),
                                    torch.nn.Linear(16, 50))
        optimizer = make_optimizer(model, lr=1e-2)
        if not fused:
            groups = [{"params": g["params"], "weight_decay": g["weight_decay"]}
                      for g in optimizer.param_groups]
            optimizer = torch.optim.AdamW(groups, lr=1e-2, eps=1e-6, foreach=False,
                                          fused=False)
            assert not any(g["fused"] or g["foreach"] for g in optimizer.param_groups)
        generator = torch.Generator().manual_seed(0)
        for _ in range(5):
            x = torch.randint(0, 50, (8, 6), generator=generator)
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return [p.detach().clone() for p in model.parameters()]

    assert make_optimizer(torch.nn.Linear(2, 2), lr=1e-3).param_groups[0]["fused"] is True
    for fused, looped in zip(trained(True), trained(False)):
        torch.testing.assert_close(fused, looped, rtol=1e-5, atol=1e-6)
        assert not torch.equal(fused, torch.zeros_like(fused))
