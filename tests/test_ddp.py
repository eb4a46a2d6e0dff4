"""Several processes (chapters/09_pretraining.md, "Several GPUs"): two CPU processes with the Gloo
backend, started with torch.multiprocessing on a free port, joined through init_distributed()
exactly as under torchrun. With dropout off,

- the DDP gradients equal those of one process on the combined batch (although the two halves
  hold different numbers of masked tokens, which is why the MLM loss is normalised globally);
- a short pretrain() run under DDP ends with the parameters of a one-process run on the combined
  batches, identical on both processes, and only rank 0 writes files.
"""
from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file

from tinybert.training.inputs import SpecialTokens
from tinybert.models.bert_heads import IGNORE_INDEX, BertForPreTraining
from tinybert.models.bert import BertConfig
from tinybert.pretraining.pretrain_loop import PretrainingConfig, pretrain
from tinybert.pretraining.objective import pretraining_losses
from tinybert.pretraining.examples import PretrainingBatches, PretrainingExample
from tinybert.training.inputs import encode_pair

SPECIAL = SpecialTokens(pad=7, unk=20, cls=3, sep=50, mask=98, vocab_size=99)
WORLD = 2


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_model() -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(BertConfig(vocab_size=99, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=23,
                                         pad_token_id=7, dropout=0.0, attention_dropout=0.0))


def examples(n: int = 48) -> list[PretrainingExample]:
    g = torch.Generator().manual_seed(0)
    ordinary = torch.tensor([i for i in range(99) if i not in SPECIAL.ids])
    out = []
    for i in range(n):
        la, lb = (int(x) for x in torch.randint(2, 10, (2,), generator=g))
        a, b = (ordinary[torch.randint(len(ordinary), (k,), generator=g)].tolist() for k in (la, lb))
        out.append(PretrainingExample(*encode_pair(a, b, SPECIAL, max_len=23), pair_label=i % 2))
    return out


def combined_batch() -> dict[str, torch.Tensor]:
    """One batch of 2 x 6 sequences; the two halves (rows 0, 2, 4... and 1, 3, 5...) differ in masked count."""
    return PretrainingBatches(examples(), SPECIAL, batch_size=12, seed=1)(0)


def run_config() -> PretrainingConfig:
    return PretrainingConfig(steps=3, lr=5e-3, warmup_fraction=0.0, log_every=1, eval_every=3, seed=0)


def _worker(rank: int, port: int, out: str) -> None:
    from torch.nn.parallel import DistributedDataParallel

    from tinybert.pretraining.distributed import init_distributed

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    context = init_distributed("gloo")
    try:
        assert (context.rank, context.world_size, context.is_main) == (rank, WORLD, rank == 0)
        # 1. one forward/backward: the gradients after DDP's all-reduce
        model = tiny_model()
        mine = {k: v[rank::WORLD] for k, v in combined_batch().items()}     # DistributedSampler-style
        net = DistributedDataParallel(model)
        loss, _, _ = pretraining_losses(net, mine, context)
        loss.backward()
        grads = {name: p.grad.contiguous() for name, p in model.named_parameters()}
        save_file(grads, os.path.join(out, f"grads{rank}.safetensors"))
        # 2. a short run of the real loop, each process on its shard of every global batch
        model = tiny_model()
        batches = PretrainingBatches(examples(), SPECIAL, batch_size=6, seed=2, dynamic_masking=False,
                                     rank=rank, world_size=WORLD)
        pretrain(model, batches, run_config(), device="cpu", dist=context,
                 checkpoint_dir=os.path.join(out, "ckpt"), metrics_path=os.path.join(out, f"metrics{rank}.json"),
                 eval_batches=[PretrainingBatches(examples(12), SPECIAL, batch_size=12, dynamic_masking=False)(0)])
        save_file({k: v.contiguous() for k, v in model.state_dict().items() if "decoder.weight" not in k},
                  os.path.join(out, f"params{rank}.safetensors"))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with the Gloo backend is not available")
    out = tmp_path_factory.mktemp("ddp")
    mp.spawn(_worker, args=(_free_port(), str(out)), nprocs=WORLD, join=True)
    return out


def test_ddp_gradients_equal_one_process_on_the_combined_batch(ddp_run):
    batch = combined_batch()
    counts = [(batch["mlm_labels"][r::WORLD] != IGNORE_INDEX).sum().item() for r in range(WORLD)]
    assert counts[0] != counts[1]                         # so a plain average of means would be wrong
    model = tiny_model()
    loss, _, _ = pretraining_losses(model, batch)
    loss.backward()
    expected = {name: p.grad.clone() for name, p in model.named_parameters()}
    for rank in range(WORLD):
        got = load_file(ddp_run / f"grads{rank}.safetensors")
        assert set(got) == set(expected)
        for name, grad in expected.items():
            torch.testing.assert_close(got[name], grad, rtol=1e-5, atol=1e-7, msg=name)
    # what DDP would compute with each process's own mean: measurably different
    naive = {name: torch.zeros_like(g) for name, g in expected.items()}
    for r in range(WORLD):
        model.zero_grad()
        model(**{k: v[r::WORLD] for k, v in batch.items()}).loss.backward()
        for name, p in model.named_parameters():
            naive[name] += p.grad / WORLD
    worst = max((naive[n] - expected[n]).abs().max().item() for n in expected)
    assert worst > 1e-4, worst


def test_ddp_training_equals_one_process_and_only_rank_0_writes(ddp_run):
    model = tiny_model()
    batches = PretrainingBatches(examples(), SPECIAL, batch_size=12, seed=2, dynamic_masking=False)
    pretrain(model, batches, run_config(), device="cpu")
    ranks = [load_file(ddp_run / f"params{r}.safetensors") for r in range(WORLD)]
    for name, value in ranks[0].items():
        assert torch.equal(value, ranks[1][name]), name                     # both processes agree exactly
        torch.testing.assert_close(value, model.state_dict()[name], rtol=1e-4, atol=1e-6, msg=name)
    assert (ddp_run / "metrics0.json").is_file() and not (ddp_run / "metrics1.json").exists()
    assert (ddp_run / "ckpt" / "training_state.json").is_file()


TINY_RUN = dict(overrides=dict(d_model=32, n_layers=1, n_heads=2, d_ff=37, max_len=32),
                batch_size=4, vocab_size=120, vocab_min_count=2, eval_batches=1,
                max_documents=2, steps=3)


def _run_worker(rank: int, port: int, out: str, changes: dict) -> None:
    import json

    from tinybert.pretraining.distributed import init_distributed
    from tinybert.pretraining.recipe import PretrainingRecipe
    from tinybert.pretraining.run import pretrain_bert

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    context = init_distributed("gloo")
    try:
        try:
            recipe = PretrainingRecipe(**{**TINY_RUN, **changes})
            history = pretrain_bert(os.path.join(out, "run"), recipe, device="cpu",
                                    dist=context)
            outcome = {"vocab_tokens": history["data"]["vocab_tokens"]}
        except ValueError as error:
            outcome = {"error": str(error)}
        with open(os.path.join(out, f"outcome{rank}.json"), "w") as file:
            json.dump(outcome, file)
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not os.environ.get("TINYBERT_DATA_DIR", "").strip(),
                    reason="TINYBERT_DATA_DIR is not set: no course documents offline")
def test_pretrain_bert_under_ddp_shares_the_vocabulary_and_fails_together(tmp_path):
    """Rank 0 trains the vocabulary and sends it to the others (nothing is written before
    the run is ready); a batch size the data cannot fill is refused in every process
    alike, so none waits for the others forever, and no folder is made."""
    import json

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with the Gloo backend is not available")
    outcomes = {}
    for case, changes in (("good", {}), ("bad", {"batch_size": 10_000})):
        (tmp_path / case).mkdir()
        mp.spawn(_run_worker, args=(_free_port(), str(tmp_path / case), changes),
                 nprocs=WORLD, join=True)
        outcomes[case] = [json.loads((tmp_path / case / f"outcome{r}.json").read_text())
                          for r in range(WORLD)]
    vocab = (tmp_path / "good" / "run" / "vocab.txt").read_text().splitlines()
    assert outcomes["good"] == [{"vocab_tokens": len(vocab)}] * WORLD
    assert (tmp_path / "good" / "run" / "model.safetensors").is_file()
    assert all(o["error"].startswith("batch_size: ") for o in outcomes["bad"]), outcomes["bad"]
    assert not (tmp_path / "bad" / "run").exists()
