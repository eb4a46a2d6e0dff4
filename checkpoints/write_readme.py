"""Hand-written: write <checkpoint folder>/README.md from the run's own files.

Everything in the README that is a number comes from the run's files (config.json, metrics.json,
train.log, model.safetensors) or is computed here from the saved weights (the fill-in-the-blank
guesses); only the notes on the machine are given on the command line. Usage, from the
repository root:

    python checkpoints/write_readme.py tinybert/shipped/bert-mini --wall 4710 \\
        --machine "a 2-core CPU shared with other jobs"
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from tinybert.data import info
from tinybert.blocks.feedforward import count_parameters
from tinybert.training.inputs import SpecialTokens
from tinybert.models.course_checkpoint import load_pretrained
from tinybert.pretraining.documents import TRAIN_BOOKS, encode_sentence

PROBES = ["Istanbul is a great [MASK] to visit.",
          "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
          "must be in want of a [MASK].",
          "She opened the [MASK] and looked out into the garden.",
          "He was born in [MASK] and died in 1850."]


def fill_mask(pretrained, text: str, k: int = 5) -> list[list[str]]:
    """The k most likely tokens at each [MASK] of ``text``."""
    special = SpecialTokens.from_vocab(pretrained.tokenizer.vocab)
    ids = [special.cls]
    for i, piece in enumerate(text.split("[MASK]")):
        ids += ([special.mask] if i else []) + encode_sentence(pretrained.tokenizer, piece)
    input_ids = torch.tensor([ids + [special.sep]])                          # (1, T)
    with torch.no_grad():
        logits = pretrained.model(input_ids).mlm_logits[0]                   # (T, V)
    positions = (input_ids[0] == special.mask).nonzero().flatten()
    return [[pretrained.tokenizer.id_to_token[i] for i in logits[p].topk(k).indices.tolist()] for p in positions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the checkpoint folder, e.g. tinybert/shipped/bert-mini")
    parser.add_argument("--wall", type=float, required=True, help="wall-clock seconds of the whole command")
    parser.add_argument("--machine", required=True, help="where it ran, in words")
    parser.add_argument("--note", default="", help="a paragraph on how the settings were chosen")
    args = parser.parse_args()

    run = args.run
    metrics = json.loads((run / "metrics.json").read_text())
    log = (run / "train.log").read_text().replace("\r", "\n").splitlines()
    command = next(line.removeprefix("command: ") for line in log if line.startswith("command: "))
    header = next(line for line in log if line.startswith("processes: "))
    pretrained = load_pretrained(run)
    # a run's metrics.json keeps its whole recipe in "config" and the data's sizes in
    # "data"; runs made before the recipe was one object split them ("recipe")
    train = metrics["config"]
    recipe = {**metrics.get("recipe", {}), **train, **metrics.get("data", {})}
    config = pretrained.config
    held_out = recipe.get("held_out_batches", recipe["eval_batches"])  # older runs
    steps, batch = train["steps"], recipe["batch_size"] * recipe["processes"]
    size_mb = (run / "model.safetensors").stat().st_size / 1e6
    books = ", ".join(f"*{info(f'gutenberg/{number}').title}* ({number})" for number in TRAIN_BOOKS)
    evals = metrics["eval"]
    every = max(1, len(evals) // 12)
    shown = [e for i, e in enumerate(evals) if (i + 1) % every == 0 or i == len(evals) - 1]
    final = evals[-1]
    nsp = "nsp_accuracy" in final
    objective = recipe.get("objective", "mlm+nsp")
    mask_share = recipe.get("mlm_probability", 0.15)
    what = "pairs" if objective == "mlm+nsp" else "sequences"

    lines = [
        f"# {run.name}: the course's own pretrained BERT",
        "",
        "A `BertForPreTraining` (chapter 08) pretrained by chapter 09's code with the "
        + ("masked-language-model and next-sentence losses." if nsp else
           "masked-language-model loss alone (its pooler and NSP head are untrained)."),
        "`tinybert.models.course_checkpoint.load_pretrained()` loads it. This README is",
        f"written by `python checkpoints/write_readme.py {run}` from the files below.",
        "",
        "| file | what |",
        "|---|---|",
        f"| `model.safetensors`, `config.json` | the weights ({count_parameters(pretrained.model):,} parameters, "
        f"{size_mb:.1f} MB, tied MLM decoder stored once) and `{{\"model_class\", \"config\"}}` |",
        f"| `vocab.txt` | the uncased WordPiece vocabulary ({len(pretrained.tokenizer)} tokens) |",
        "| `train.log` | everything the command printed |",
        f"| `metrics.json` | the training losses (every {train['log_every']} steps) and held-out evaluations |",
        "| `loss_curves.png` | the same, plotted |",
        "",
        "The resumable state (optimizer moments, scheduler, step) was written to `training_state/`, which",
        "is not shipped (it is git-ignored and twice the model's size).",
        "",
        "## The command",
        "",
        "Run from the repository root, with the course data offline (`TINYBERT_DATA_DIR` pointing at",
        "`../shared/data`, byte-identical to the registry's downloads), exactly as `train.log` records it:",
        "",
        "```bash",
        command,
        "```",
        "",
        "The run wrote into the folder named by `--out`; the shipped files were copied from there.",
        f"From the log: {header}.",
        "",
        f"Model: {config.n_layers} layers, d_model {config.d_model}, {config.n_heads} heads, d_ff {config.d_ff}, "
        f"max_len {config.max_len}, vocabulary {config.vocab_size}, dropout {config.dropout}, "
        f"{'pre-LN' if config.norm_first else 'post-LN'} layers.",
        f"Optimisation: AdamW (weight decay {train['weight_decay']}, none on biases and LayerNorm, "
        f"beta2 {train.get('adam_beta2', 0.999)}), peak learning "
        f"rate {train['lr']:g}, linear warm-up over {train['warmup_fraction']:.0%} of the {steps:,} steps then "
        f"linear decay to 0, gradient clipping at {train['max_grad_norm']}, {batch} sequences of at most "
        f"{config.max_len} tokens per step, {'dynamic' if recipe['dynamic_masking'] else 'static'} masking "
        f"({mask_share:.0%} of the tokens; 80% [MASK], 10% random, 10% unchanged), "
        + ("50/50 next-sentence pairs" if objective == "mlm+nsp" else
           "single segments of up to max_len - 2 tokens of one document, no NSP")
        + ", float32 on the CPU.",
        "",
        "## Data",
        "",
        "- Training: the 60 articles of WikiText-2's validation split (`fetch(\"wikitext2/valid\")`, `<unk>`",
        f"  mapped to `[UNK]`) and the bodies of the course's training books, in documents of 64 sentences: {books}.",
        "  The course's other four books are not in the corpus.",
        *(["- Task-adaptive text (`--task-text`, `task_documents()`): the unlabelled *training* texts of",
           "  chapter 10's tasks (Banking77's training questions except the tenth used for validation,",
           "  UD English-EWT's training sentences, the paragraphs of the SQuAD training articles)."]
          if recipe.get("task_text") else []),
        f"  {recipe['train_pairs']:,} training {what}; {steps:,} steps of {batch} {what} is "
        f"{steps * batch / recipe['train_pairs']:.1f} epochs.",
        "- Held-out: WikiText-2's test split (`fetch(\"wikitext2/test\")`); every evaluation uses the same",
        f"  {held_out * recipe['batch_size']} {what} with fixed masks (15%, "
        f"{final['mlm_tokens']:,} masked tokens).",
        f"- Vocabulary: `train_wordpiece_tokenizer` (chapter 07) on the training documents, size "
        f"{recipe.get('vocab_tokens', recipe['vocab_size'])}, "
        f"`min_count={recipe['vocab_min_count']}`, "
        f"`score=\"{recipe.get('vocab_score', 'likelihood')}\"`.",
        "",
        "## The machine and the time",
        "",
        f"{args.machine}; torch {torch.__version__}. Wall clock of the whole command: {args.wall:.0f} s "
        f"({args.wall / 60:.0f} min); the training loop itself: {metrics['seconds']:.0f} s "
        f"({metrics['seconds'] / steps:.2f} s per step).",
        *([""] + [args.note] if args.note else []),
        "",
        "## Results (held-out, from `metrics.json`)",
        "",
        "| step | MLM loss | MLM accuracy |" + (" NSP loss | NSP accuracy |" if nsp else ""),
        "|---|---|---|" + ("---|---|" if nsp else ""),
        *[f"| {e['step']} | {e['mlm_loss']:.3f} | {e['mlm_accuracy']:.1%} |"
          + (f" {e['nsp_loss']:.3f} | {e['nsp_accuracy']:.1%} |" if nsp else "") for e in shown],
        "",
        f"Final: held-out MLM loss **{final['mlm_loss']:.3f}**, MLM accuracy **{final['mlm_accuracy']:.1%}**"
        + (f", NSP accuracy **{final['nsp_accuracy']:.1%}**." if nsp else "."),
        "",
        f"This is a small model trained briefly: {steps * batch:,} sequences, as many as BERT-base saw in its "
        f"first {steps * batch / 256:.0f} steps of 256. Chapter 09 compares it with the simplest baseline "
        "(always the most frequent token) on the same masked tokens.",
        "",
        "## Fill in the blanks",
        "",
        "The five most likely tokens at each `[MASK]`, computed from the saved weights by this script:",
        "",
        *[f"- {text} → {', '.join('/'.join(g) for g in fill_mask(pretrained, text))}" for text in PROBES],
        "",
    ]
    (run / "README.md").write_text("\n".join(lines))
    print(f"wrote {run / 'README.md'}")


if __name__ == "__main__":
    main()
