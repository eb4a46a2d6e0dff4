"""Chapter 08's BertForMaskedLM against Hugging Face's, timed in the same process.

Both models compute the same function: Hugging Face's is built from the same config, and ours
gets its weights through tinybert.models.convert.from_hf (checked before timing). They see the same
batches (15% of the positions labelled, the rest -100) and are timed alternately, ours then
theirs, several times; the medians are compared. A training step is forward + backward + an
AdamW step; inference is a forward pass without labels (full (B, T, V) logits) under
torch.inference_mode. Ratios are throughputs, ours / theirs: above 1 means ours is faster.

``--recipe course`` times the course checkpoint's pretraining recipe instead (chapter 09): our
model with pre-LN layers, no dropout and 20% of the positions labelled, against Hugging Face's
BertForMaskedLM of the same shape with no dropout on the same batches (Hugging Face's BERT is
post-LN only, so the two compute slightly different functions and no equality is checked).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from tinybert.models.convert import from_hf
from tinybert.models.bert import BertConfig
from tinybert.runtime import get_device, seed_everything


def make_batch(config: BertConfig, batch_size: int, seq_len: int, device, generator,
               labelled_share: float = 0.15) -> dict:
    ids = torch.randint(5, config.vocab_size, (batch_size, seq_len), generator=generator)
    segments = (torch.arange(seq_len) >= seq_len // 2).long().expand(batch_size, seq_len).contiguous()
    labelled = torch.rand(batch_size, seq_len, generator=generator) < labelled_share
    labels = torch.where(labelled, ids, torch.full_like(ids, -100))
    mask = torch.ones_like(ids)
    return {k: v.to(device) for k, v in dict(ids=ids, segments=segments, mask=mask, labels=labels).items()}


def ours_step(model, optimizer, b):
    loss = model(b["ids"], b["segments"], b["mask"], labels=b["labels"]).loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def theirs_step(model, optimizer, b):
    loss = model(input_ids=b["ids"], token_type_ids=b["segments"], attention_mask=b["mask"], labels=b["labels"]).loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def ours_infer(model, b):
    with torch.inference_mode():
        return model(b["ids"], b["segments"], b["mask"]).logits


def theirs_infer(model, b):
    with torch.inference_mode():
        return model(input_ids=b["ids"], token_type_ids=b["segments"], attention_mask=b["mask"]).logits


def timed(fn, device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def alternate(ours_fn, theirs_fn, repeats: int, warmup: int, device) -> tuple[float, float]:
    """Median seconds of ours and theirs, run alternately so that both see the same machine load."""
    for _ in range(warmup):
        ours_fn()
        theirs_fn()
    t_ours, t_theirs = [], []
    for _ in range(repeats):
        t_ours.append(timed(ours_fn, device))
        t_theirs.append(timed(theirs_fn, device))
    return statistics.median(t_ours), statistics.median(t_theirs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu, cuda, mps (default: automatic)")
    parser.add_argument("--recipe", choices=("bert", "course"), default="bert",
                        help="bert: post-LN, dropout 0.1, 15%% labelled (default); course: the "
                        "course checkpoint's pre-LN, no-dropout, 20%% recipe")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 32 (bert), 64 (course)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5, help="timed steps of each model (alternating)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--teaching-path", action="store_true",
                        help="our explicit chapter 3/4 attention instead of SDPA + fused QKV")
    parser.add_argument("--compile", action="store_true", help="torch.compile our layers and MLM head (not theirs)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: PyTorch's)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    import transformers

    device = get_device(args.device)
    seed_everything(0)
    course = args.recipe == "course"
    args.batch_size = args.batch_size or (64 if course else 32)
    dropout = 0.0 if course else 0.1
    config = BertConfig(vocab_size=8192, d_model=256, n_layers=4, n_heads=4, d_ff=1024, max_len=args.seq_len,
                        fast=not args.teaching_path, dropout=dropout, attention_dropout=dropout)
    from dataclasses import replace

    from tinybert.models.convert_names import bert_config_to_hf
    from tinybert.models.bert_heads import BertForMaskedLM

    theirs = transformers.BertForMaskedLM(bert_config_to_hf(config)).to(device)
    if course:                                               # pre-LN: no Hugging Face equivalent
        ours = BertForMaskedLM(replace(config, norm_first=True)).to(device)
    else:
        ours = from_hf(theirs)
    if ours.config.fast != config.fast:                      # from_hf builds the default (fast) path
        for layer in ours.bert.encoder.layers:
            layer.fast = layer.attention.fast = config.fast
    g = torch.Generator().manual_seed(0)
    share = 0.2 if course else 0.15
    batch = make_batch(config, args.batch_size, args.seq_len, device, g, labelled_share=share)

    theirs.eval(), ours.eval()
    if not course:
        with torch.no_grad():                                 # the same function, before any timing
            loss_ours = ours(batch["ids"], batch["segments"], batch["mask"], labels=batch["labels"]).loss
            loss_theirs = theirs(input_ids=batch["ids"], token_type_ids=batch["segments"],
                                 attention_mask=batch["mask"], labels=batch["labels"]).loss
        assert abs(loss_ours.item() - loss_theirs.item()) < 1e-4, (loss_ours.item(), loss_theirs.item())
    theirs.train(), ours.train()
    opt_ours = torch.optim.AdamW(ours.parameters(), lr=1e-4)
    opt_theirs = torch.optim.AdamW(theirs.parameters(), lr=1e-4)
    if args.compile:                  # the layers and the head; input checks and label selection stay eager
        for layer in ours.bert.encoder.layers:
            layer.compile()
        ours.mlm_head.compile()
    run_ours = ours

    tokens = args.batch_size * args.seq_len
    print(f"device: {device}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"threads {torch.get_num_threads()}")
    print(f"config: V={config.vocab_size} D={config.d_model} N={config.n_layers} H={config.n_heads} "
          f"F={config.d_ff}; batch {args.batch_size} x {args.seq_len} tokens, {share:.0%} labelled, "
          f"dropout {dropout}; recipe {args.recipe}{' (ours pre-LN)' if course else ''}; "
          f"Hugging Face attention: {theirs.config._attn_implementation}; ours: "
          f"{'SDPA + fused QKV' if config.fast else 'explicit (teaching path)'}"
          f"{', torch.compile' if args.compile else ''}; {args.repeats} alternating repeats, median")
    t_ours, t_theirs = alternate(lambda: ours_step(run_ours, opt_ours, batch),
                                 lambda: theirs_step(theirs, opt_theirs, batch), args.repeats, args.warmup, device)
    print(f"training step   ours {tokens / t_ours:9.0f} tok/s  Hugging Face {tokens / t_theirs:9.0f} tok/s  "
          f"ours/theirs {t_theirs / t_ours:5.2f}")
    ours.eval(), theirs.eval()
    t_ours, t_theirs = alternate(lambda: ours_infer(run_ours, batch), lambda: theirs_infer(theirs, batch),
                                 args.repeats, args.warmup, device)
    print(f"inference       ours {tokens / t_ours:9.0f} tok/s  Hugging Face {tokens / t_theirs:9.0f} tok/s  "
          f"ours/theirs {t_theirs / t_ours:5.2f}")


if __name__ == "__main__":
    main()
