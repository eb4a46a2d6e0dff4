"""Hand-written: the course's models compute the same thing on the test device
as on the CPU.

The device comes from ``$TINYBERT_TEST_DEVICE`` (default ``cpu``: the CPU is compared
with itself, which still runs every line of these tests). ``make gpu-check``
(benchmarks/gpu_check.py) runs them on a lent GPU with ``TINYBERT_TEST_DEVICE=cuda``:

    TINYBERT_TEST_DEVICE=cuda python -m pytest -q -m device tests/test_device_parity.py

Each model is built on the CPU from a small odd-sized config (vocabulary 99, width 36
with 4 heads of 9, d_ff 37, batch 5, length 11, padding), copied to the device, and
given the same inputs. Tolerances, relative to the largest absolute value of
the CPU tensor:

- float32, forward (outputs, losses): ``FP32_FORWARD`` = 1e-5; backward (every
  parameter's gradient, against at least 1% of the model's largest gradient):
  ``FP32_BACKWARD`` = 1e-4, since a gradient sums over all positions in another order.
  TF32 is switched off for these tests (``torch.backends.cuda.matmul.allow_tf32``,
  ``torch.backends.cudnn.allow_tf32`` and ``set_float32_matmul_precision("highest")``,
  restored afterwards), so float32 matrix products are full float32 on
  Ampere and Hopper;
- mixed precision, ``torch.autocast(device.type, dtype=autocast_dtype(device))`` against
  the CPU's float32: ``AUTOCAST_TOL``, bfloat16 5e-2 for outputs and 0.25 for gradients,
  float16 1e-2 and 5e-2. Loose on purpose: a freshly initialised model's gradients are
  sums of small cancelling terms (the Transformer's reach 0.18 under bfloat16 on a CPU),
  and these checks are there to catch a wrong dtype, a lost mask or a NaN, which are
  errors of order 1. On the CPU, where ``autocast_dtype`` is None, bfloat16 autocast is
  tested instead.

With ``$TINYBERT_PARITY_REPORT`` set to a file name, the largest errors measured by each
test are written there as JSON (the GPU check keeps them, to calibrate these
tolerances).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from pathlib import Path

import pytest
import torch
from helpers import padded_batch

from tinybert.blocks.attention import (
    causal_mask,
    fast_scaled_dot_product_attention,
    scaled_dot_product_attention,
)
from tinybert.blocks.multihead import MultiHeadAttention
from tinybert.blocks.transformer import Transformer, TransformerConfig
from tinybert.models.registry import load_model, save_model
from tinybert.training.state import load_checkpoint
from tinybert.models.albert import AlbertConfig
from tinybert.models.albert_heads import AlbertForPreTraining
from tinybert.models.bert import BertConfig, BertModel
from tinybert.models.bert_heads import BertForPreTraining
from tinybert.models.distilbert import DistilBertConfig, DistilBertForMaskedLM
from tinybert.models.roberta import RobertaConfig, RobertaForMaskedLM
from tinybert.pretraining.examples import PretrainingBatches, PretrainingExample
from tinybert.pretraining.pretrain_loop import PretrainingConfig, pretrain
from tinybert.training.inputs import SpecialTokens
from tinybert.training.optim import autocast_dtype
from tinybert.training.inputs import encode_pair

pytestmark = [pytest.mark.device, pytest.mark.usefixtures("one_thread")]

DEVICE = torch.device(os.environ.get("TINYBERT_TEST_DEVICE", "").strip() or "cpu")
CPU = torch.device("cpu")
FP32_FORWARD, FP32_BACKWARD = 1e-5, 1e-4
# (forward, backward) under autocast: bfloat16 keeps 8 significant bits, float16 11
AUTOCAST_TOL = {torch.bfloat16: (5e-2, 2.5e-1), torch.float16: (1e-2, 5e-2)}
MIXED = (
    autocast_dtype(DEVICE) or torch.bfloat16
)  # CPU: bfloat16 autocast, to test the path
B, T, V, D, H, F = 5, 11, 99, 36, 4, 37
REPORT: dict[str, dict[str, float]] = {}


def _device_available() -> bool:
    if DEVICE.type == "cuda":
        return torch.cuda.is_available()
    if DEVICE.type == "mps":
        return torch.backends.mps.is_available()
    return True


if not _device_available():
    pytest.skip(
        f"TINYBERT_TEST_DEVICE={DEVICE} is not available here", allow_module_level=True
    )


@pytest.fixture(autouse=True, scope="module")
def full_float32_and_report():
    """No TF32 while these tests run; the errors they measured written at the end."""
    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
    torch.set_float32_matmul_precision(saved[2])
    target = os.environ.get("TINYBERT_PARITY_REPORT", "").strip()
    if target:
        Path(target).write_text(
            json.dumps(
                {"device": str(DEVICE), "mixed": str(MIXED), "errors": REPORT}, indent=1
            )
            + "\n"
        )


def relative_error(
    mine: torch.Tensor, reference: torch.Tensor, floor: float = 1e-6
) -> float:
    """max |mine - reference| / max(max |reference|, floor), on the CPU in float64."""
    mine, reference = mine.detach().double().cpu(), reference.detach().double().cpu()
    assert mine.shape == reference.shape, (mine.shape, reference.shape)
    return (
        (mine - reference).abs().max() / reference.abs().max().clamp(min=floor)
    ).item()


def gradient_error(mine: dict, reference: dict) -> float:
    """The largest relative_error over the parameters' gradients. A gradient that is
    zero in exact arithmetic (a key bias: softmax ignores a shift common to all keys) is
    measured against 1% of the largest gradient of the model instead of its own size."""
    scale = max(g.abs().max().item() for g in reference.values())
    return max(relative_error(mine[k], reference[k], 1e-2 * scale) for k in reference)


def record(request, **errors: float) -> None:
    entry = REPORT.setdefault(request.node.name, {})
    for key, value in errors.items():
        entry[key] = max(entry.get(key, 0.0), value)


def tensors_of(out) -> dict[str, torch.Tensor]:
    """The tensor outputs of a model, by name: a dataclass's fields, a tuple's items."""
    if isinstance(out, torch.Tensor):
        return {"output": out}
    if dataclasses.is_dataclass(out):
        items = {f.name: getattr(out, f.name) for f in dataclasses.fields(out)}
    else:
        items = {f"output[{i}]": x for i, x in enumerate(out)}
    return {k: v for k, v in items.items() if isinstance(v, torch.Tensor)}


def run(model: torch.nn.Module, inputs: dict, device: torch.device, dtype=None):
    """Outputs and parameter gradients of one forward + backward of a copy of ``model``
    on ``device``, under autocast to ``dtype`` when one is given. The backward pass
    starts from the model's loss when it has one, else from a fixed random projection of
    its outputs."""
    model = copy.deepcopy(model).to(device)
    moved = {
        k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()
    }
    with torch.autocast(
        device.type, dtype=dtype or torch.float32, enabled=dtype is not None
    ):
        outputs = tensors_of(model(**moved))
    loss = outputs.get("loss")
    if loss is None:
        g = torch.Generator().manual_seed(7)
        loss = sum(
            (x.float() * torch.randn(x.shape, generator=g).to(device)).sum()
            for x in outputs.values()
            if x.is_floating_point()
        )
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert grads, "nothing was differentiated"
    return outputs, grads


def check_parity(request, model, inputs, *, expect_loss: bool = False):
    """float32 on DEVICE == float32 on the CPU; autocast on DEVICE close to both."""
    model = model.eval()  # dropout is 0 in these configs; eval() to be sure
    cpu_out, cpu_grads = run(model, inputs, CPU)
    assert not expect_loss or "loss" in cpu_out
    dev_out, dev_grads = run(model, inputs, DEVICE)
    assert dev_out.keys() == cpu_out.keys() and dev_grads.keys() == cpu_grads.keys()
    assert all(x.device.type == DEVICE.type for x in dev_out.values())
    forward = max(relative_error(dev_out[k], cpu_out[k]) for k in cpu_out)
    backward = gradient_error(dev_grads, cpu_grads)
    assert max(x.abs().max().item() for x in cpu_grads.values()) > 0
    mixed_out, mixed_grads = run(model, inputs, DEVICE, MIXED)
    mixed_forward = max(relative_error(mixed_out[k], cpu_out[k]) for k in cpu_out)
    mixed_backward = gradient_error(mixed_grads, cpu_grads)
    record(
        request,
        fp32_forward=forward,
        fp32_backward=backward,
        mixed_forward=mixed_forward,
        mixed_backward=mixed_backward,
    )
    assert forward <= FP32_FORWARD, (
        f"float32 forward on {DEVICE}: relative error {forward:.2e}"
    )
    assert backward <= FP32_BACKWARD, (
        f"float32 gradients on {DEVICE}: relative error {backward:.2e}"
    )
    tol_forward, tol_backward = AUTOCAST_TOL[MIXED]
    assert mixed_forward <= tol_forward, (
        f"{MIXED} autocast forward: relative error {mixed_forward:.2e}"
    )
    assert mixed_backward <= tol_backward, (
        f"{MIXED} autocast gradients: relative error {mixed_backward:.2e}"
    )


# --- inputs ---------------------------------------------------------------------------


def padded_ids(pad_id: int = 0, first_id: int = 1, seed: int = 0):
    """helpers.padded_batch's ids, mask (as 0/1) and MLM labels, and sentence-pair
    labels."""
    ids, real, labels = padded_batch(
        B, T, V, seed=seed, pad_id=pad_id, first_id=first_id
    )
    pairs = torch.randint(0, 2, (B,), generator=torch.Generator().manual_seed(seed + 1))
    return ids, real.long(), labels, pairs


def segments() -> torch.Tensor:
    return (torch.arange(T) >= 5).long().expand(B, T).contiguous()  # A A A A A B ...


def bert_config(cls=BertConfig, **overrides):
    base = dict(
        vocab_size=V,
        d_model=D,
        n_layers=2,
        n_heads=H,
        d_ff=F,
        max_len=23,
        dropout=0.0,
        attention_dropout=0.0,
    )
    return cls(**{**base, **overrides})


def built(cls, config, seed: int = 0):
    torch.manual_seed(seed)
    return cls(config)


# --- blocks ---------------------------------------------------------------------------


class AttentionCore(torch.nn.Module):
    """The chapter 3 attention function as a module, so that check_parity can run it."""

    def __init__(self, fast: bool):
        super().__init__()
        self.fast = fast
        g = torch.Generator().manual_seed(3)
        self.q, self.k, self.v = (
            torch.nn.Parameter(torch.randn(B, H, n, 9, generator=g))
            for n in (T, 13, 13)
        )

    def forward(self, mask):
        attend = (
            fast_scaled_dot_product_attention
            if self.fast
            else scaled_dot_product_attention
        )
        output, _ = attend(self.q, self.k, self.v, mask)
        return output


@pytest.mark.parametrize("fast", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("masking", ["none", "causal+padding"])
def test_attention_core(request, fast, masking):
    mask = None
    if masking != "none":
        keys = (
            torch.arange(13)[None, :] < torch.tensor([13, 9, 4, 1, 7])[:, None]
        )  # (B, S)
        mask = causal_mask(T, 13) & keys[:, None, None, :]  # (B, 1, T, S)
    check_parity(request, AttentionCore(fast), {"mask": mask})


@pytest.mark.parametrize("fast", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_multihead_attention(request, fast, cross):
    torch.manual_seed(1)
    mha = MultiHeadAttention(D, H, fast=fast)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(B, T, D, generator=g)
    context = torch.randn(B, 13, D, generator=g) if cross else None
    mask = causal_mask(T, 13 if cross else T)
    check_parity(request, mha, {"x": x, "context": context, "mask": mask})


@dataclasses.dataclass
class Seq2SeqLoss:
    loss: torch.Tensor
    logits: torch.Tensor


class WithLoss(torch.nn.Module):
    """The Transformer and its next-token loss (a random projection of the logits would
    be a sum of random signs, whose gradient float16 and bfloat16 cannot get close)."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, src, tgt):
        logits = self.model(src, tgt[:, :-1]).logits  # (B, T-1, V)
        loss = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1).float(), tgt[:, 1:].flatten(), ignore_index=0
        )
        return Seq2SeqLoss(loss, logits)


def test_transformer(request):
    config = TransformerConfig(
        vocab_size=V,
        d_model=D,
        n_heads=H,
        n_layers=2,
        d_ff=F,
        dropout=0.0,
        max_len=23,
        pad_id=0,
    )
    src, _, _, _ = padded_ids(seed=1)
    tgt, _, _, _ = padded_ids(seed=2)
    check_parity(
        request,
        WithLoss(built(Transformer, config)),
        {"src": src, "tgt": tgt[:, :9]},
        expect_loss=True,
    )


# --- the BERT family ------------------------------------------------------------------


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "explicit"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_bert_model(request, fast, norm_first):
    ids, mask, _, _ = padded_ids()
    model = built(BertModel, bert_config(fast=fast, norm_first=norm_first))
    check_parity(
        request,
        model,
        {"input_ids": ids, "token_type_ids": segments(), "attention_mask": mask},
    )


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "explicit"])
def test_bert_for_pretraining(request, fast):
    ids, mask, labels, pairs = padded_ids(seed=3)
    model = built(BertForPreTraining, bert_config(fast=fast))
    check_parity(
        request,
        model,
        {
            "input_ids": ids,
            "token_type_ids": segments(),
            "attention_mask": mask,
            "mlm_labels": labels,
            "pair_labels": pairs,
        },
        expect_loss=True,
    )


def test_roberta(request):
    ids, mask, labels, _ = padded_ids(pad_id=1, first_id=3, seed=4)
    config = bert_config(
        RobertaConfig, max_len=T + 2, type_vocab_size=1, pad_token_id=1
    )
    check_parity(
        request,
        built(RobertaForMaskedLM, config),
        {"input_ids": ids, "attention_mask": mask, "labels": labels},
        expect_loss=True,
    )


def test_distilbert(request):
    ids, mask, labels, _ = padded_ids(seed=5)
    config = bert_config(DistilBertConfig, type_vocab_size=1)
    check_parity(
        request,
        built(DistilBertForMaskedLM, config),
        {"input_ids": ids, "attention_mask": mask, "labels": labels},
        expect_loss=True,
    )


@pytest.mark.parametrize("groups", [1, 2])
def test_albert(request, groups):
    ids, mask, labels, pairs = padded_ids(seed=6)
    config = bert_config(
        AlbertConfig,
        n_layers=4,
        embedding_size=8,
        n_groups=groups,
        classifier_dropout=0.0,
    )
    check_parity(
        request,
        built(AlbertForPreTraining, config),
        {
            "input_ids": ids,
            "token_type_ids": segments(),
            "attention_mask": mask,
            "mlm_labels": labels,
            "pair_labels": pairs,
        },
        expect_loss=True,
    )


# --- Hugging Face on the device -------------------------------------------------------


def test_hugging_face_bert_on_the_device(request):
    """transformers' BertForPreTraining (built from a config, never downloaded) and
    ours, converted by from_hf, both on the device: the same logits and losses."""
    transformers = pytest.importorskip("transformers")
    from tinybert.models.convert import from_hf

    torch.manual_seed(0)
    hf_config = transformers.BertConfig(
        vocab_size=V,
        hidden_size=D,
        num_attention_heads=H,
        num_hidden_layers=2,
        intermediate_size=F,
        max_position_embeddings=23,
    )
    hf = transformers.BertForPreTraining(hf_config)
    g = torch.Generator().manual_seed(100)
    with torch.no_grad():  # move every parameter off its initialisation
        for p in hf.parameters():
            p.add_(torch.randn(p.shape, generator=g) * (0.3 if p.dim() == 1 else 0.05))
    ours = from_hf(hf.eval()).eval().to(DEVICE)
    hf = hf.to(DEVICE)
    ids, mask, labels, pairs = (x.to(DEVICE) for x in padded_ids(seed=7))
    seg = segments().to(DEVICE)
    with torch.no_grad():
        theirs = hf(
            input_ids=ids,
            token_type_ids=seg,
            attention_mask=mask,
            labels=labels,
            next_sentence_label=pairs,
        )
        full = ours(ids, seg, mask)
        mine = ours(ids, seg, mask, mlm_labels=labels, pair_labels=pairs)
    real = mask.bool()
    errors = {
        "mlm_logits": relative_error(
            full.mlm_logits[real], theirs.prediction_logits[real]
        ),
        "nsp_logits": relative_error(mine.nsp_logits, theirs.seq_relationship_logits),
        "loss": relative_error(mine.loss, theirs.loss),
    }
    record(request, **{f"hf_{k}": v for k, v in errors.items()})
    assert theirs.prediction_logits.device.type == DEVICE.type
    assert max(errors.values()) <= FP32_FORWARD, errors


# --- the pretraining loop and checkpoints on the device -------------------------------

SPECIAL = SpecialTokens(pad=7, unk=20, cls=3, sep=50, mask=98, vocab_size=V)


def toy_examples(n: int, seed: int) -> list[PretrainingExample]:
    g = torch.Generator().manual_seed(seed)
    ordinary = torch.tensor([i for i in range(V) if i not in (7, 20, 3, 50, 98)])
    out = []
    for i in range(n):
        la, lb = (int(x) for x in torch.randint(3, 11, (2,), generator=g))
        a = ordinary[torch.randint(len(ordinary), (la,), generator=g)].tolist()
        b = ordinary[torch.randint(len(ordinary), (lb,), generator=g)].tolist()
        out.append(
            PretrainingExample(*encode_pair(a, b, SPECIAL, max_len=23), pair_label=i % 2)
        )
    return out


def short_run(device, tmp_path, mixed_precision: bool):
    model = built(BertForPreTraining, bert_config(pad_token_id=7))
    batches = PretrainingBatches(toy_examples(40, 0), SPECIAL, batch_size=8, seed=1)
    held = [
        PretrainingBatches(
            toy_examples(16, 1), SPECIAL, batch_size=16, dynamic_masking=False
        )(0)
    ]
    config = PretrainingConfig(
        steps=6,
        lr=3e-3,
        warmup_fraction=0.2,
        log_every=3,
        eval_every=3,
        mixed_precision=mixed_precision,
    )
    history = pretrain(
        model,
        batches,
        config,
        eval_batches=held,
        device=device,
        checkpoint_dir=tmp_path / "run",
    )
    return model, history


def test_pretrain_runs_on_the_device(request, tmp_path):
    """A few steps of chapter 9's loop on the device: in float32 the losses are the
    CPU's within 1e-3 (the masks are drawn on the CPU, dropout is 0); with mixed
    precision it trains, and its checkpoint loads onto the device."""
    model, history = short_run(DEVICE, tmp_path / "fp32", mixed_precision=False)
    assert next(model.parameters()).device.type == DEVICE.type
    _, reference = short_run(CPU, tmp_path / "cpu", mixed_precision=False)
    ours = torch.tensor(
        [r["loss"] for r in history["train"]] + [r["mlm_loss"] for r in history["eval"]]
    )
    theirs = torch.tensor(
        [r["loss"] for r in reference["train"]]
        + [r["mlm_loss"] for r in reference["eval"]]
    )
    error = relative_error(ours, theirs)
    record(request, fp32_losses=error)
    # 1e-3: six AdamW steps turn rounding-sized gradient differences into updates of
    # up to the learning rate wherever a gradient is near zero
    assert len(history["eval"]) == 2 and error <= 1e-3, (ours, theirs)
    checkpoint = load_checkpoint(tmp_path / "fp32" / "run", map_location=DEVICE)
    assert checkpoint.step == 6
    _, mixed = short_run(DEVICE, tmp_path / "mixed", mixed_precision=True)
    losses = [r["loss"] for r in mixed["train"]] + [
        r["mlm_loss"] for r in mixed["eval"]
    ]
    assert all(torch.isfinite(torch.tensor(losses))), losses
    assert abs(mixed["eval"][-1]["mlm_loss"] - reference["eval"][-1]["mlm_loss"]) < 0.1


def test_save_and_load_model_to_the_device(tmp_path):
    model = built(BertForPreTraining, bert_config()).to(DEVICE)
    save_model(model, tmp_path / "model")
    loaded = load_model(tmp_path / "model", map_location=DEVICE)
    assert type(loaded) is BertForPreTraining and not loaded.training
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert b.device.type == DEVICE.type and torch.equal(a, b), name
    ids, mask, _, _ = (x.to(DEVICE) for x in padded_ids(seed=8))
    with torch.no_grad():
        before = model.eval()(ids, None, mask).mlm_logits
        after = loaded(ids, None, mask).mlm_logits
    assert relative_error(after, before) <= FP32_FORWARD
