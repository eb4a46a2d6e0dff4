"""Clumsy and hostile use (issue 16): nothing lost, nothing silently wrong.

- `tinybert pretrain` never overwrites a run silently and checks its arguments first;
- multi-file saves are all or nothing: a failure (an exception, Ctrl-C, or a power cut
  that freezes the disk) at *every* file-system operation of a save leaves a loadable
  checkpoint;
- `load_pretrained` never trains by surprise;
- a batch without masked tokens gives no NaN, and a NaN loss stops training;
- command-line mistakes give a message and an exit code, not a traceback.

Tiny, odd sizes: vocab 99, d_model 32, 4 heads, d_ff 37, 1 layer, 23 positions.
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import tinybert.pretraining.pretrain_loop as pretrain_loop
import tinybert.pretraining.objective as pretrain_step
import tinybert.pretraining.run as pretrain_run
import tinybert.models.course_checkpoint as pretrained_module
from tinybert.__main__ import main
from tinybert.checkpoint.atomic import write_atomically
from tinybert.models.registry import load_model, save_model
from tinybert.training.inputs import SpecialTokens
from tinybert.models.albert import AlbertConfig
from tinybert.models.albert_heads import AlbertForPreTraining
from tinybert.models.bert_heads import IGNORE_INDEX, BertForMaskedLM, BertForPreTraining
from tinybert.models.bert import BertConfig
from tinybert.pretraining.run import pretrain_bert
from tinybert.pretraining.run_checks import RUN_FILES, check_run_folder, remove_run
from tinybert.pretraining.evaluation import evaluate_pretraining
from tinybert.pretraining.pretrain_loop import PretrainingConfig, SettingError, pretrain
from tinybert.pretraining.recipe import PretrainingRecipe
from tinybert.pretraining.examples import PretrainingBatches, PretrainingExample
from tinybert.training.inputs import encode_pair
from tinybert.models.course_checkpoint import load_pretrained
from tinybert.training.state import load_checkpoint, save_checkpoint
from tinybert.training.optim import make_optimizer

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(vocab_size=99, d_model=32, n_layers=1, n_heads=4, d_ff=37, max_len=23,
            pad_token_id=7)
SPECIAL = SpecialTokens(pad=7, unk=20, cls=3, sep=50, mask=98, vocab_size=99)


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_model(seed: int = 0) -> BertForPreTraining:
    torch.manual_seed(seed)
    return BertForPreTraining(BertConfig(**TINY))


def examples(n: int = 52, seed: int = 0) -> list[PretrainingExample]:
    g = torch.Generator().manual_seed(seed)
    ordinary = [i for i in range(99) if i not in (7, 20, 3, 50, 98)]
    out = []
    for i in range(n):
        la, lb = (int(x) for x in torch.randint(3, 11, (2,), generator=g))
        a = [ordinary[int(j)] for j in torch.randint(len(ordinary), (la,), generator=g)]
        b = [ordinary[int(j)] for j in torch.randint(len(ordinary), (lb,), generator=g)]
        ids, segments = encode_pair(a, b, SPECIAL, max_len=23)
        out.append(PretrainingExample(ids, segments, pair_label=i % 2))
    return out


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(),
                                                 b.state_dict().values()))


def listing(directory: Path) -> list[str]:
    """Every entry under ``directory``, hidden ones (temporary files) included."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


# --- 1. never overwrite silently ------------------------------------------------------

def _finished_run(out: Path) -> None:
    out.mkdir(parents=True)
    (out / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    save_model(tiny_model(), out)
    (out / "metrics.json").write_text("{}\n")


def _partial_run(out: Path) -> None:
    out.mkdir(parents=True)
    (out / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    save_checkpoint(out / "training_state", tiny_model(), step=30)


def _vocabulary_only(out: Path) -> None:
    out.mkdir(parents=True)
    (out / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")


@pytest.mark.parametrize("make, what", [
    (_finished_run, "a finished run"),
    (_partial_run, "saved at step 30"),
    (_vocabulary_only, "before its first checkpoint"),
], ids=["finished", "partial", "vocabulary"])
def test_pretrain_refuses_a_folder_that_holds_a_run(tmp_path, capsys, make, what):
    out = tmp_path / "run"
    make(out)
    before = {name: (out / name).read_bytes() for name in listing(out)
              if (out / name).is_file()}
    with pytest.raises(FileExistsError, match=what) as error:
        check_run_folder(out)
    for needle in ("resume=True", "overwrite=True", "vocab.txt"):
        assert needle in str(error.value)
    assert "--" not in str(error.value)                  # the library knows no option
    assert main(["pretrain", "--out", str(out), "--steps", "3"]) == 2     # the CLI
    err = capsys.readouterr().err
    assert what in err and "--resume" in err and "--overwrite" in err
    assert "Traceback" not in err
    after = {name: (out / name).read_bytes() for name in listing(out)
             if (out / name).is_file()}
    assert after == before                                             # nothing touched
    assert check_run_folder(out, resume=True) == out                # may continue


def test_overwrite_deletes_the_run_and_nothing_else(tmp_path):
    out = tmp_path / "run"
    _partial_run(out)
    (out / "notes.txt").write_text("mine")
    (out / "metrics.json").write_text("{}")
    files = listing(out)
    assert check_run_folder(out, overwrite=True) == out
    assert listing(out) == files               # checking deletes nothing (issue H1)
    remove_run(out)                            # pretrain_bert does, once all is ready
    assert listing(out) == ["notes.txt"]
    assert not any((out / name).exists() for name in RUN_FILES)
    with pytest.raises(ValueError, match="exclude each other"):
        check_run_folder(out, resume=True, overwrite=True)


@pytest.mark.parametrize("make", [None, lambda out: out.mkdir(),
                                  lambda out: out.mkdir() or
                                  (out / "notes.txt").write_text("mine")],
                         ids=["missing", "empty", "no-run"])
def test_resume_needs_a_run_to_resume(tmp_path, capsys, make):
    """--resume on a folder without a run is an error, not a fresh run (M3)."""
    out = tmp_path / "run"
    if make is not None:
        make(out)
    before = listing(out) if out.exists() else None
    with pytest.raises(FileNotFoundError, match="nothing to resume"):
        check_run_folder(out, resume=True)
    # tiny settings: a regression would train, not wait for the default run
    assert main(["pretrain", "--out", str(out), *TINY_ARGS, "--steps", "1",
                 "--resume"]) == 2
    err = capsys.readouterr().err
    assert "nothing to resume" in err and "without --resume" in err
    assert "Traceback" not in err
    assert (listing(out) if out.exists() else None) == before    # nothing written


def test_option_prefixes_are_not_options(tmp_path, capsys):
    """--over is not --overwrite: an abbreviation must not reach a destructive flag
    (L10)."""
    tiny = [*TINY_ARGS, "--steps", "1"]      # a regression trains a tiny run
    for command, prefix in (
            (["pretrain", "--out", str(tmp_path / "run"), *tiny, "--over"], "--over"),
            (["pretrain", "--out", str(tmp_path / "run"), *tiny, "--res"], "--res"),
            (["finetune", "poem_sentiment", "--eval-examples", "4", "--epochs", "1",
              "--train-ex", "4"], "--train-ex")):
        with pytest.raises(SystemExit) as exit_:
            main(command)
        assert exit_.value.code == 2
        assert f"unrecognized arguments: {prefix}" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_save_model_refuses_an_empty_folder_name(tmp_path, monkeypatch):
    """save_model(model, "") would write into the current folder (M10)."""
    monkeypatch.chdir(tmp_path)
    for empty in ("", "  "):
        with pytest.raises(ValueError, match="expected a folder to save into, got ''"):
            save_model(tiny_model(), empty)
        with pytest.raises(ValueError, match="expected a folder"):
            save_checkpoint(empty, tiny_model(), step=1)
    assert listing(tmp_path) == []


def test_pretrain_refuses_an_empty_out_and_a_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["pretrain", "--out", ""])
    assert exit_.value.code == 2
    assert "--out: expected the folder" in capsys.readouterr().err
    with pytest.raises(ValueError, match="empty"):
        check_run_folder("")
    with pytest.raises(ValueError, match="empty"):
        pretrain_bert("  ", PretrainingRecipe(steps=3))
    a_file = tmp_path / "notes.txt"
    a_file.write_text("precious")
    assert main(["pretrain", "--out", str(a_file), "--steps", "3"]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert a_file.read_text() == "precious"


@pytest.mark.parametrize("args, message", [
    (["--set", "n_heads=7"], "divisible by n_heads = 7"),
    (["--set", "unknown=1"], "unknown BertConfig field(s) ['unknown']"),
    (["--set", "dropout=2"], "dropout"),
    (["--preset", "bert-huge"], "unknown BERT preset"),
    (["--mask-probability", "0"], "--mlm-probability: expected a number in (0, 1), got 0"),
    (["--lr", "-1"], "--lr: expected a number in (0, inf), got -1"),
])
def test_configuration_errors_come_first_and_leave_nothing(tmp_path, capsys, args,
                                                            message):
    out = tmp_path / "deep" / "run"
    assert main(["pretrain", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "deep").exists()                       # no folder made


def test_a_recipe_checks_itself_when_made(tmp_path, capsys):
    for kwargs in ({"batch_size": 0}, {"eval_every": 0}, {"checkpoint_every": -1},
                   {"steps": 0}, {"steps": 2.5}, {"log_every": 0},
                   {"vocab_min_count": -5}, {"max_documents": 0},
                   {"max_documents": -1}, {"max_documents": 1}, {"seed": -1},
                   {"seed": 2**64}, {"adam_beta2": 1.5}, {"adam_beta2": float("nan")},
                   {"lr": float("inf")}, {"lr": 0}, {"warmup_fraction": 1.5},
                   {"weight_decay": -0.1}, {"max_grad_norm": 0},
                   {"mlm_probability": 1.0}, {"vocab_score": "freq"},
                   {"objective": "nsp"}, {"overrides": [("n_layers", 2)]}):
        name = next(iter(kwargs))
        with pytest.raises(SettingError, match=f"^{name}: expected") as caught:
            PretrainingRecipe(**kwargs)
        assert caught.value.name == name
        with pytest.raises(SettingError, match=f"^{name}: expected"):
            replace(PretrainingRecipe(), **kwargs)                # no way around it
    with pytest.raises(dataclasses.FrozenInstanceError):
        PretrainingRecipe().lr = 1.0                               # frozen once checked
    # the command line names its option, and makes no folder
    assert main(["pretrain", "--out", str(tmp_path / "run"), "--batch-size", "0"]) == 2
    assert "--batch-size: expected an integer >= 1, got 0" in capsys.readouterr().err
    for kwargs in ({"stop_after": 0}, {"stop_after": 5}):          # run controls
        with pytest.raises(ValueError, match="stop_after: expected"):
            pretrain_bert(tmp_path / "run", PretrainingRecipe(steps=4), **kwargs)
    with pytest.raises(TypeError, match="takes a PretrainingRecipe"):
        pretrain_bert(tmp_path / "run", {"steps": 4})
    assert not (tmp_path / "run").exists()


# --- 2. saves are all or nothing ------------------------------------------------------

class PowerCut(BaseException):
    """Raised at the chosen file-system operation; a BaseException, like Ctrl-C."""


class Disk:
    """Count a save's file-system operations and fail at operation number ``fail_at``
    (or at the first one for which ``when(name, args)`` is true).

    ``freeze=False``: that one operation raises (an error, a full disk, Ctrl-C) and the
    code's own clean-up runs. ``freeze=True``: from that operation on, every operation
    raises, as if the power had been cut: the disk keeps what a crash there leaves.
    """

    OS_CALLS = ("replace", "rename", "link", "unlink", "mkdir", "rmdir", "fsync")

    def __init__(self, fail_at: int | None = None, *, freeze: bool = False, when=None):
        import safetensors.torch

        self.count, self.fail_at, self.when = 0, fail_at, when
        self.freeze, self.cut = freeze, False
        self.patch = pytest.MonkeyPatch()
        for name in self.OS_CALLS:
            self.patch.setattr(os, name, self._wrap(name, getattr(os, name)))
        self.patch.setattr(safetensors.torch, "save_file",
                           self._wrap("save_file", safetensors.torch.save_file))
        self.patch.setattr(pathlib.Path, "write_text",
                           self._wrap("write_text", pathlib.Path.write_text))

    def _wrap(self, name, function):
        def wrapped(*args, **kwargs):
            self.count += 1
            chosen = self.count == self.fail_at or (self.when is not None
                                                    and self.when(name, args))
            if self.cut or chosen:
                self.cut = self.freeze
                raise PowerCut(f"operation {self.count}: {name}")
            return function(*args, **kwargs)
        return wrapped

    def __enter__(self) -> Disk:
        return self

    def __exit__(self, *exc) -> None:
        self.patch.undo()


def _count_operations(save) -> int:
    with Disk() as disk:
        save()
    return disk.count


def _save_model_case(directory: Path, seed: int):
    model = tiny_model(seed)
    return model, lambda: save_model(model, directory)


def _save_checkpoint_case(directory: Path, seed: int):
    model = tiny_model(seed)
    optimizer = make_optimizer(model, lr=1e-3)
    batch = PretrainingBatches(examples(), SPECIAL, batch_size=13, seed=seed)(0)
    model(**batch).loss.backward()
    optimizer.step()
    return model, lambda: save_checkpoint(directory, model, optimizer=optimizer,
                                          step=seed)


def _load(kind: str, directory: Path):
    """The model in ``directory`` and its step (seed), loaded as resuming loads it."""
    if kind == "save_model":
        return load_model(directory), None
    fresh = tiny_model(99)
    optimizer = make_optimizer(fresh, lr=1e-3)
    checkpoint = load_checkpoint(directory, fresh, optimizer=optimizer)
    return checkpoint.model, checkpoint.step


CASES = {"save_model": _save_model_case, "save_checkpoint": _save_checkpoint_case}


@pytest.mark.parametrize("kind", sorted(CASES))
@pytest.mark.parametrize("freeze", [False, True], ids=["exception", "power-cut"])
def test_a_failure_at_every_operation_of_a_save_leaves_a_loadable_checkpoint(
        tmp_path, kind, freeze):
    probe = tmp_path / "probe"
    CASES[kind](probe, 1)[1]()
    total = _count_operations(CASES[kind](probe, 2)[1])
    assert total >= 8, total
    outcomes = set()
    for k in range(1, total + 1):
        directory = tmp_path / f"at-{k}"
        old, save_old = CASES[kind](directory, 1)
        save_old()
        files = listing(directory)
        new, save_new = CASES[kind](directory, 2)
        with Disk(k, freeze=freeze), pytest.raises(PowerCut):
            save_new()
        loaded, step = _load(kind, directory)
        if same_weights(loaded, old):             # cut before the new set was complete
            outcomes.add("old")
            assert step in (None, 1), (k, step)
        else:                                     # or after: the new set is complete
            assert same_weights(loaded, new) and step in (None, 2), k
            outcomes.add("new")
        if not freeze:     # clean-up ran: nothing left but what the next save removes
            rest = [f for f in listing(directory) if not f.startswith(".saving-")]
            assert rest == files, k
        third, save_third = CASES[kind](directory, 3)  # the next save repairs all
        save_third()
        assert same_weights(_load(kind, directory)[0], third), k
        assert listing(directory) == files, k
    assert outcomes == {"old", "new"}


@pytest.mark.parametrize("freeze", [False, True], ids=["exception", "power-cut"])
def test_an_interrupted_first_save_leaves_no_half_checkpoint(tmp_path, freeze):
    total = _count_operations(_save_model_case(tmp_path / "probe", 1)[1])
    outcomes = set()
    for k in range(1, total + 1):
        directory = tmp_path / f"at-{k}"
        new, save_new = _save_model_case(directory, 2)
        with Disk(k, freeze=freeze), pytest.raises(PowerCut):
            save_new()
        try:
            assert same_weights(load_model(directory), new), k   # done before the cut
            outcome, files = "new", ["config.json", "model.safetensors"]
        except FileNotFoundError:                              # or no checkpoint at all
            outcome, files = "none", []
        outcomes.add(outcome)
        if not freeze and directory.exists():   # the clean-up ran: only what the next
            rest = [f for f in listing(directory)  # save removes is left over
                    if not f.startswith(".saving-")]
            assert rest == files, k
    assert outcomes == {"none", "new"}


def test_resume_after_a_save_was_cut_short(tmp_path, monkeypatch):
    """A run whose second checkpoint save dies still resumes, from its first checkpoint,
    and ends with exactly the parameters of a run that was never interrupted."""
    def run(directory, **kwargs):
        model = tiny_model(0)
        batches = PretrainingBatches(examples(), SPECIAL, batch_size=13, seed=3)
        config = PretrainingConfig(steps=6, lr=3e-3, warmup_fraction=0.2, eval_every=6,
                                   checkpoint_every=2, seed=5)
        pretrain(model, batches, config, device="cpu", checkpoint_dir=directory,
                 **kwargs)
        return model

    straight = run(tmp_path / "straight")
    import tinybert.training.state as training_state
    original, calls, swapped = training_state.save_files, [], []

    def swapping_in(name, args):                 # the second staged file is renamed in
        swapped.extend(args[:1] if name == "replace" and ".saving-" in str(args[0]) and
                       ".saving-" not in str(args[1]) else [])
        return len(swapped) == 2

    def dies_in_second_save(directory, writers):
        calls.append(1)
        if len(calls) == 2:
            with Disk(freeze=True, when=swapping_in):
                original(directory, writers)
        return original(directory, writers)

    monkeypatch.setattr(training_state, "save_files", dies_in_second_save)
    with pytest.raises(PowerCut):
        run(tmp_path / "cut")
    monkeypatch.setattr(training_state, "save_files", original)
    assert len(swapped) == 2 and (tmp_path / "cut" / ".previous").is_dir()
    assert load_checkpoint(tmp_path / "cut").step == 2
    resumed = run(tmp_path / "cut", resume=True)
    assert same_weights(resumed, straight)


def test_saved_files_have_the_usual_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        save_model(tiny_model(), tmp_path / "model")
        save_checkpoint(tmp_path / "state", tiny_model(), step=1)
        write_atomically(tmp_path / "metrics.json",
                          lambda tmp: Path(tmp).write_text("{}"))
    finally:
        os.umask(umask)
    modes = {str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777)
             for p in tmp_path.rglob("*") if p.is_file()}
    assert len(modes) == 7 and modes == dict.fromkeys(modes, "0o644")


# --- 3. loading never trains by surprise ----------------------------------------------

def _tiny_pretrained(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += [f"t{i}" for i in range(94)]
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in tokens))
    save_model(tiny_model(), directory)


@pytest.fixture
def no_training(monkeypatch):
    """pretrain_bert replaced by a recorder: loading must never call it."""
    calls = []
    monkeypatch.setattr(pretrain_run, "pretrain_bert",
                        lambda out_dir, **kwargs: calls.append(out_dir))
    return calls


def test_load_pretrained_never_trains(tmp_path, monkeypatch, no_training):
    named = tmp_path / "my-run"
    with pytest.raises(FileNotFoundError, match="my-run does not exist.*pretrain"):
        load_pretrained(tmp_path / "my-run")
    assert not named.exists()
    named.mkdir()
    with pytest.raises(FileNotFoundError,
                       match="lacks model.safetensors, config.json, vocab.txt"):
        load_pretrained(named)
    (named / "vocab.txt").write_text("[PAD]\n")
    with pytest.raises(FileNotFoundError,
                       match=r"lacks model.safetensors, config.json \("):
        load_pretrained(named)
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        load_pretrained(named / "vocab.txt")
    with pytest.raises(ValueError, match="empty"):
        load_pretrained("")
    with pytest.raises(TypeError):
        load_pretrained(named, train_if_missing=True)          # no such option any more
    monkeypatch.setattr(pretrained_module, "shipped_checkpoint",
                        lambda: tmp_path / "not-shipped")
    with pytest.raises(FileNotFoundError, match="not-shipped does not exist"):
        load_pretrained()
    assert no_training == [] and listing(named) == ["vocab.txt"]
    assert not (tmp_path / "not-shipped").exists()


# --- 5. no NaN with exit code 0 -------------------------------------------------------

def _unmasked_batch() -> dict[str, torch.Tensor]:
    batch = PretrainingBatches(examples(), SPECIAL, batch_size=13, seed=0)(0)
    return {**batch, "mlm_labels": torch.full_like(batch["mlm_labels"], IGNORE_INDEX)}


@pytest.mark.parametrize("make", [
    lambda: tiny_model(),
    lambda: BertForMaskedLM(BertConfig(**TINY)),
    lambda: AlbertForPreTraining(AlbertConfig(**TINY, embedding_size=16)),
], ids=["BertForPreTraining", "BertForMaskedLM", "AlbertForPreTraining"])
def test_a_batch_without_masked_tokens_contributes_nothing(make):
    model, batch = make(), _unmasked_batch()
    inputs = [batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]]
    if isinstance(model, BertForMaskedLM):
        loss = model(*inputs, labels=batch["mlm_labels"]).loss
    else:
        loss = model(*inputs, mlm_labels=batch["mlm_labels"]).mlm_loss
    assert loss.item() == 0.0
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_a_sentence_of_unlabelled_tokens_contributes_nothing_to_a_tagger():
    from tinybert.finetuning.heads import TokenClassifier
    from tinybert.models.bert import BertModel

    torch.manual_seed(0)
    tagger = TokenClassifier(BertModel(BertConfig(**TINY)), 5)
    ids = torch.randint(5, 99, (2, 6))
    unlabelled = torch.full((2, 6), IGNORE_INDEX)
    loss = tagger(ids, labels=unlabelled).loss
    assert loss.item() == 0.0
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in tagger.parameters()
               if p.grad is not None)
    tagger.eval()                       # no dropout: the two calls below agree
    labelled = unlabelled.clone()
    labelled[0, 1] = 3                  # one labelled token: its cross-entropy, as before
    expected = torch.nn.functional.cross_entropy(tagger(ids).logits[0, 1][None],
                                                 torch.tensor([3]))
    assert tagger(ids, labels=labelled).loss.item() == pytest.approx(expected.item())


def test_evaluation_skips_batches_without_masked_tokens():
    model = tiny_model()
    held = PretrainingBatches(examples(26, seed=1), SPECIAL, batch_size=13,
                              dynamic_masking=False)
    alone = evaluate_pretraining(model, [held(0)])
    mixed = evaluate_pretraining(model, [held(0), _unmasked_batch()])
    for key in ("mlm_loss", "mlm_accuracy", "mlm_tokens"):
        assert mixed[key] == pytest.approx(alone[key]), key
    assert mixed["pairs"] == 2 * alone["pairs"]
    with pytest.raises(ValueError, match="no masked token"):
        evaluate_pretraining(model, [_unmasked_batch()])


def test_a_nan_loss_stops_training_and_keeps_the_last_good_checkpoint(tmp_path,
                                                                       monkeypatch):
    original, calls = pretrain_step.pretraining_losses, []

    def nan_at_step_4(model, batch, dist):
        calls.append(1)
        loss, mlm, nsp = original(model, batch, dist)
        return (loss * float("nan"), mlm, nsp) if len(calls) == 4 else (loss, mlm, nsp)

    monkeypatch.setattr(pretrain_step, "pretraining_losses", nan_at_step_4)
    model = tiny_model()
    batches = PretrainingBatches(examples(), SPECIAL, batch_size=13, seed=3)
    config = PretrainingConfig(steps=8, lr=3e-3, eval_every=8, checkpoint_every=3)
    with pytest.raises(FloatingPointError,
                       match=r"step 4: the training loss is nan.*\(step 3\)"):
        pretrain(model, batches, config, device="cpu", checkpoint_dir=tmp_path)
    saved = load_checkpoint(tmp_path)
    assert saved.step == 3
    assert all(torch.isfinite(p).all() for p in saved.model.parameters())
    assert all(torch.isfinite(p).all() for p in model.parameters())  # no NaN update


def test_the_command_line_reports_a_diverged_run(tmp_path, monkeypatch, capsys):
    def diverges(out_dir, *args, **kwargs):
        raise FloatingPointError("step 7: the training loss is nan")

    monkeypatch.setattr(pretrain_run, "pretrain_bert", diverges)
    assert main(["pretrain", "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "tinybert pretrain: error: step 7: the training loss is nan" in err


# --- 6. command-line errors are messages ----------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--batch-size", "0"], "--batch-size: expected an integer >= 1, got 0"),
    (["--eval-every", "0"], "--eval-every: expected an integer >= 1, got 0"),
    (["--checkpoint-every", "-5"],
     "--checkpoint-every: expected an integer >= 0, got -5"),
    (["--steps", "ten"], "--steps: expected an integer, got 'ten'"),
    (["--stop-after", "0"], "--stop-after: expected an integer >= 1, got 0"),
])
def test_bad_numbers_are_usage_errors(tmp_path, capsys, args, message):
    assert _code(["pretrain", "--out", str(tmp_path / "run"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_missing_device_is_a_message(tmp_path, capsys):
    assert main(["pretrain", "--out", str(tmp_path / "run"), "--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("variable, make, message", [
    ("TINYBERT_DATA_DIR", lambda tmp: tmp / "nowhere", "does not exist"),
    ("TINYBERT_DATA_DIR",
     lambda tmp: (tmp / "a-file").write_text("x") and tmp / "a-file", "is a file"),
    ("TINYBERT_QUICK", lambda tmp: "maybe", "TINYBERT_QUICK must be one of"),
])
def test_doctor_says_why_the_set_up_is_broken(tmp_path, monkeypatch, capsys, variable,
                                              make, message):
    monkeypatch.delenv("TINYBERT_DEVICE", raising=False)
    monkeypatch.setenv(variable, str(make(tmp_path)))
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert message in out and f"status   check: {variable}" in out


def test_a_bad_quick_setting_is_a_message_for_every_command():
    env = {**os.environ, "TINYBERT_QUICK": "maybe"}
    command = [sys.executable, "-m", "tinybert", "finetune", "--task", "x"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=120)
    assert result.returncode == 2
    assert "TINYBERT_QUICK must be one of" in result.stderr
    assert "Traceback" not in result.stderr


def test_resume_with_other_settings_names_each_difference(tmp_path):
    """Item 4: a resumed run must be the run that was interrupted."""
    def run(*, resume=False, batch_size=13, model_seed=0, dropout=None, **changes):
        model = tiny_model(model_seed)
        if dropout is not None:
            model = BertForPreTraining(BertConfig(**{**TINY, "dropout": dropout}))
        batches = PretrainingBatches(examples(), SPECIAL, batch_size=batch_size, seed=3)
        settings = dict(steps=6, lr=3e-3, warmup_fraction=0.2, eval_every=6,
                        checkpoint_every=2, seed=5)
        config = PretrainingConfig(**{**settings, **changes})
        pretrain(model, batches, config, device="cpu", checkpoint_dir=tmp_path / "run",
                 resume=resume, stop_after=None if resume else 2)
        return model

    run()                                                      # stopped after step 2
    cases = [({"lr": 1e-3}, "lr: saved 0.003, now 0.001"),
             ({"steps": 8}, "steps: saved 6, now 8"),
             ({"seed": 6}, "seed: saved 5, now 6"),
             ({"batch_size": 12}, "batch_size: saved 13, now 12"),
             ({"dropout": 0.0}, "model dropout: saved 0.1, now 0.0")]
    for changes, named in cases:
        with pytest.raises(ValueError, match="cannot resume") as caught:
            run(resume=True, **changes)
        assert named in str(caught.value), (changes, str(caught.value))
    with pytest.raises(ValueError) as caught:                  # all differences at once
        run(resume=True, lr=1e-3, seed=6)
    assert "lr: saved" in str(caught.value) and "seed: saved" in str(caught.value)
    assert load_checkpoint(tmp_path / "run").step == 2          # nothing was written
    run(resume=True, eval_every=3, checkpoint_every=3)        # logging may change
    assert load_checkpoint(tmp_path / "run").step == 6


# --- 4. resume is faithful: Ctrl-C, the logged loss, metrics.json, the recipe ---

def _straight_and_config(**changes):
    settings = dict(steps=9, lr=3e-3, warmup_fraction=0.2, log_every=4, eval_every=3,
                    checkpoint_every=0, seed=5)
    return PretrainingConfig(**{**settings, **changes})


def _tiny_pretrain(directory, *, model_seed=0, **kwargs):
    model = tiny_model(model_seed)
    batches = PretrainingBatches(examples(), SPECIAL, batch_size=13, seed=3)
    held = [PretrainingBatches(examples(13, seed=1), SPECIAL, 13,
                               dynamic_masking=False)(0)]
    config = _straight_and_config(**kwargs.pop("config", {}))
    history = pretrain(model, batches, config, eval_batches=held, device="cpu",
                       checkpoint_dir=directory, **kwargs)
    return model, history


def _without_time(history: dict) -> dict:
    return {key: value for key, value in history.items() if key != "seconds"}


def test_ctrl_c_saves_the_step_and_resumes_exactly(tmp_path, monkeypatch):
    """A real SIGINT in the middle of step 6 (of a 4-step logging window): the step
    finishes, is saved, and the resumed run logs and ends as an uninterrupted one."""
    import signal

    from tinybert.pretraining.interrupts import TrainingInterrupted

    straight, straight_history = _tiny_pretrain(tmp_path / "straight")
    original, calls = pretrain_step.pretraining_losses, []

    def ctrl_c_in_step_6(model, batch, dist):
        calls.append(1)
        if len(calls) == 6:
            os.kill(os.getpid(), signal.SIGINT)
        return original(model, batch, dist)

    monkeypatch.setattr(pretrain_step, "pretraining_losses", ctrl_c_in_step_6)
    with pytest.raises(TrainingInterrupted) as stopped:
        _tiny_pretrain(tmp_path / "run", metrics_path=tmp_path / "metrics.json")
    monkeypatch.setattr(pretrain_step, "pretraining_losses", original)
    assert stopped.value.step == 6 and stopped.value.directory == tmp_path / "run"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    saved = load_checkpoint(tmp_path / "run")
    running = saved.extra["running"]          # loss, mlm, pair sums; steps; steps with pairs
    assert saved.step == 6 and len(running) == 5 and running[3] == 2     # steps 5 and 6
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert [r["step"] for r in on_disk["eval"]] == [3, 6]           # up to the stop
    resumed, history = _tiny_pretrain(tmp_path / "run", model_seed=1, resume=True,
                                      metrics_path=tmp_path / "metrics.json")
    assert same_weights(resumed, straight)
    assert _without_time(history) == _without_time(straight_history)
    assert [r["step"] for r in history["train"]] == [4, 8]


@pytest.mark.parametrize("stop", [1, 2, 3, 5, 7])
def test_the_logged_loss_does_not_depend_on_where_a_run_stopped(tmp_path, stop):
    straight, straight_history = _tiny_pretrain(tmp_path / "straight")
    _tiny_pretrain(tmp_path / "run", stop_after=stop)
    resumed, history = _tiny_pretrain(tmp_path / "run", model_seed=1, resume=True)
    assert same_weights(resumed, straight)
    assert history["train"] == straight_history["train"]   # the same floats, exactly
    assert history["eval"] == straight_history["eval"]


def test_metrics_json_never_contradicts_itself_after_a_crash(tmp_path, monkeypatch):
    """A run that crashed at step 8 had written evaluations up to step 6 but saved its
    checkpoint at step 4; resumed with evaluations every 2 steps, metrics.json holds
    each step once, in order, and says how often the run now evaluates."""
    metrics = tmp_path / "metrics.json"
    original, calls = pretrain_step.pretraining_losses, []

    def crash_at_step_8(model, batch, dist):
        calls.append(1)
        if len(calls) == 8:
            raise RuntimeError("out of memory")
        return original(model, batch, dist)

    monkeypatch.setattr(pretrain_step, "pretraining_losses", crash_at_step_8)
    with pytest.raises(RuntimeError):
        _tiny_pretrain(tmp_path / "run", metrics_path=metrics,
                       config={"checkpoint_every": 4})
    monkeypatch.setattr(pretrain_step, "pretraining_losses", original)
    assert [r["step"] for r in json.loads(metrics.read_text())["eval"]] == [3, 6]

    seen = []
    real_evaluate = pretrain_loop.evaluate_pretraining

    def evaluate_and_read(*args, **kwargs):           # what metrics.json says meanwhile
        seen.append([r["step"] for r in json.loads(metrics.read_text())["eval"]])
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(pretrain_loop, "evaluate_pretraining", evaluate_and_read)
    _, history = _tiny_pretrain(tmp_path / "run", resume=True, metrics_path=metrics,
                                config={"checkpoint_every": 4, "eval_every": 2})
    assert seen[0] == [3]                        # step 6 of the crashed run is gone
    on_disk = json.loads(metrics.read_text())
    steps = [r["step"] for r in on_disk["eval"]]
    assert steps == [3, 6, 8, 9] and steps == sorted(set(steps))
    assert on_disk["config"]["eval_every"] == 2 == history["config"]["eval_every"]
    assert [r["step"] for r in on_disk["train"]] == [4, 8]


HAS_DATA = bool(os.environ.get("TINYBERT_DATA_DIR", "").strip())
needs_data = pytest.mark.skipif(not HAS_DATA, reason="TINYBERT_DATA_DIR is not set: "
                                "the course documents are not available offline")
TINY_RECIPE = dict(overrides=dict(d_model=32, n_layers=1, n_heads=2, d_ff=37, max_len=32),
                   batch_size=8, vocab_size=120, vocab_min_count=2, eval_batches=1,
                   max_documents=2)


def run_tiny(out, *, resume=False, stop_after=None, **settings):
    """pretrain_bert on the CPU with TINY_RECIPE, changed by ``settings``."""
    recipe = PretrainingRecipe(**{**TINY_RECIPE, **settings})
    return pretrain_bert(out, recipe, resume=resume, stop_after=stop_after,
                         device="cpu")
TINY_ARGS = ["--set", "d_model=32", "--set", "n_layers=1", "--set", "n_heads=2",
             "--set", "d_ff=37", "--set", "max_len=32", "--batch-size", "8",
             "--vocab-size", "120", "--vocab-min-count", "2", "--eval-batches", "1",
             "--max-documents", "2", "--device", "cpu", "--threads", "1"]


@needs_data
def test_resume_with_another_data_recipe_is_refused(tmp_path):
    out = tmp_path / "run"
    run_tiny(out, steps=4, stop_after=2)
    before = {name: (out / name).read_bytes() for name in listing(out)
              if (out / name).is_file()}
    cases = [({"max_documents": 3}, "max_documents: saved 2, now 3"),
             ({"vocab_size": 150}, "vocab_size: saved 120, now 150"),
             ({"vocab_min_count": 3}, "vocab_min_count: saved 2, now 3"),
             ({"mlm_probability": 0.2}, "mlm_probability: saved 0.15, now 0.2"),
             ({"objective": "mlm"}, "objective: saved 'mlm+nsp', now 'mlm'"),
             ({"dynamic_masking": False}, "dynamic_masking: saved True, now False"),
             ({"task_text": True}, "task_text: saved False, now True")]
    for changes, named in cases:
        with pytest.raises(ValueError, match="another recipe") as caught:
            run_tiny(out, steps=4, resume=True, **changes)
        assert named in str(caught.value), (changes, str(caught.value))
    with pytest.raises(ValueError) as caught:              # every difference at once
        run_tiny(out, steps=4, resume=True, vocab_size=150, max_documents=3)
    assert "vocab_size: saved" in str(caught.value)
    assert "max_documents: saved" in str(caught.value)
    after = {name: (out / name).read_bytes() for name in listing(out)
             if (out / name).is_file()}
    assert after == before                                         # nothing touched
    run_tiny(out, steps=4, resume=True)
    assert load_checkpoint(out / "training_state").step == 4


@needs_data
def test_a_vocabulary_left_before_the_first_checkpoint_keeps_its_recipe(tmp_path,
                                                                        monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    out = tmp_path / "run"
    monkeypatch.setattr(pretrain_run, "tokenize_documents", interrupted)
    with pytest.raises(KeyboardInterrupt):                 # before the folder is written
        run_tiny(out, steps=4)
    assert not out.exists()
    monkeypatch.undo()
    monkeypatch.setattr(pretrain_run, "pretrain", interrupted)   # in the loop's start-up
    with pytest.raises(KeyboardInterrupt):
        run_tiny(out, steps=4)
    monkeypatch.undo()
    assert (out / "vocab.txt").is_file() and not (out / "training_state").exists()
    with pytest.raises(ValueError, match="vocab_size: saved 120, now 150"):
        run_tiny(out, steps=4, resume=True, vocab_size=150)


def test_a_vocabulary_too_small_for_the_special_tokens_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), *TINY_ARGS, "--steps", "1",
                 "--vocab-size", "5"]) == 2
    err = capsys.readouterr().err
    assert "--vocab-size: expected more than the 5 special tokens [PAD], [UNK]" in err
    assert "got 5" in err and "Traceback" not in err
    assert not out.exists()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A tiny finished run, made once; tests copy it."""
    if not HAS_DATA:
        pytest.skip("TINYBERT_DATA_DIR is not set")
    out = tmp_path_factory.mktemp("finished") / "run"
    run_tiny(out, steps=2)
    return out


def _code(argv: list[str]) -> int:
    """The exit code of ``tinybert ARGV``, from a return or an argparse exit."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code


def _contents(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in listing(directory)
            if (directory / name).is_file()}


@needs_data
@pytest.mark.parametrize("args, flag", [
    (["--adam-beta2", "1.5"], "--adam-beta2"),
    (["--adam-beta2", "nan"], "--adam-beta2"),
    (["--seed", "99999999999999999999999"], "--seed"),
    (["--seed", "-1"], "--seed"),
    (["--set", "max_len=3"], "--set: objective 'mlm+nsp' needs max_len >= 5"),
    (["--set", "vocab_size=50"], "--set: vocab_size comes from the trained vocab"),
    (["--set", "pad_token_id=4"], "--set: pad_token_id comes from the trained"),
    (["--set", "type_vocab_size=1"], "--set: objective 'mlm+nsp' needs max_len >= 5 "
                                     "(the special tokens and a token of each segment) "
                                     "and type_vocab_size >= 2"),
    (["--vocab-min-count", "-5"], "--vocab-min-count"),
    (["--max-documents", "0"], "--max-documents"),
    (["--max-documents", "-1"], "--max-documents"),
    (["--max-documents", "1"], "--max-documents"),      # NSP needs two documents
    (["--batch-size", "100000"], "--batch-size"),        # more than the data holds
    (["--stop-after", "5"], "--stop-after"),             # after the last step
    (["--lr", "inf"], "--lr"),
], ids=lambda value: value if isinstance(value, str) else "_".join(value))
def test_bad_values_leave_the_folder_as_it_was_even_with_overwrite(
        tmp_path, capsys, finished_run, args, flag):
    """H1 + H3: every value is checked, and the data read, before a file is written or
    deleted; the message names the option. --overwrite keeps the old run, a new folder
    is not created, and the corrected command then runs."""
    import shutil

    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    before = _contents(out)
    command = ["pretrain", *TINY_ARGS, "--steps", "2"]
    assert _code([*command, "--out", str(out), "--overwrite", *args]) == 2
    err = capsys.readouterr().err
    assert flag in err and "Traceback" not in err, err
    assert _contents(out) == before                         # the old run is intact
    assert _code([*command, "--out", str(tmp_path / "new"), *args]) == 2
    assert not (tmp_path / "new").exists()                  # nothing blocks a rerun
    capsys.readouterr()


@needs_data
def test_missing_data_leave_the_folder_as_it_was(tmp_path, capsys, monkeypatch,
                                                 finished_run):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    before = _contents(out)
    monkeypatch.setenv("TINYBERT_DATA_DIR", str(tmp_path / "dta"))   # a typo
    command = ["pretrain", *TINY_ARGS, "--steps", "2"]
    assert main([*command, "--out", str(out), "--overwrite"]) == 2
    assert "TINYBERT_DATA_DIR" in capsys.readouterr().err
    assert _contents(out) == before
    assert main([*command, "--out", str(tmp_path / "new")]) == 2
    assert not (tmp_path / "new").exists()


@needs_data
def test_ctrl_c_before_an_overwriting_run_is_ready_keeps_the_old_run(
        tmp_path, capsys, monkeypatch, finished_run):
    """--overwrite deletes the old run only once the new one is ready to start: Ctrl-C
    while the vocabulary is trained leaves it, and the message says so."""
    import shutil

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    before = _contents(out)
    monkeypatch.setattr(pretrain_run, "train_wordpiece_tokenizer", ctrl_c)
    argv = ["pretrain", "--out", str(out), *TINY_ARGS, "--steps", "3", "--overwrite"]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "untouched" in err and "--resume" not in err and "--overwrite" in err
    assert _contents(out) == before
    monkeypatch.undo()
    assert main(argv) == 0                               # the same command replaces it
    assert json.loads((out / "metrics.json").read_text())["config"]["steps"] == 3


@needs_data
def test_a_run_stopped_early_is_not_finished(tmp_path, capsys):
    """M2: --stop-after before the last step leaves a partial run (no model), says how
    to continue it, and the command it prints finishes the run."""
    import shlex

    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), *TINY_ARGS, "--steps", "4",
                 "--stop-after", "2"]) == 0
    printed = capsys.readouterr().out
    assert "stopped after step 2 of 4" in printed and "not finished" in printed
    assert not (out / "model.safetensors").exists()
    with pytest.raises(FileExistsError, match=r"partial run \(saved at step 2\)"):
        check_run_folder(out)
    with pytest.raises(ValueError, match="after the saved step 2"):
        run_tiny(out, steps=4, resume=True, stop_after=2)
    again = shlex.split(printed.split("continue it with:\n", 1)[1].splitlines()[0])
    assert again[-1] == "--resume" and "--stop-after" not in again
    assert main(again[again.index("pretrain"):]) == 0
    assert "done in" in capsys.readouterr().out
    assert load_model(out) is not None and load_checkpoint(out / "training_state").step == 4


@needs_data
@pytest.mark.parametrize("damage", ["state file", "state folder"])
def test_resume_refuses_a_run_whose_saved_state_is_gone(tmp_path, capsys, damage):
    """R1: with training_state/training_state.json (or the whole folder) removed after a
    checkpoint, --resume used to start again from step 0, exit 0 and report the fresh
    run as the continuation. It is refused, naming the file, and nothing is trained."""
    import shutil

    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), *TINY_ARGS, "--steps", "4",
                 "--stop-after", "2"]) == 0
    capsys.readouterr()
    if damage == "state file":
        (out / "training_state" / "training_state.json").unlink()
    else:
        shutil.rmtree(out / "training_state")
    metrics = (out / "metrics.json").read_bytes()
    assert main(["pretrain", "--out", str(out), *TINY_ARGS, "--steps", "4",
                 "--resume"]) != 0
    err = capsys.readouterr().err
    assert "--overwrite" in err and ("training_state.json: missing" in err
                                     or "training state" in err)
    assert "Traceback" not in err
    assert (out / "metrics.json").read_bytes() == metrics  # the log is kept
    assert not (out / "model.safetensors").exists()


@needs_data
@pytest.mark.parametrize("name, text", [
    ("training_state.json", "{oops"),
    ("training_state.json", "[1, 2]"),
    ("training_state.json", '{"step": 2, "save_id": "x", "extra": 5}'),
    ("config.json", "[]"),
    ("config.json", '{"model_class": "BertForPreTraining", "config": 5}'),
])
def test_resume_with_a_damaged_state_file_names_the_file(tmp_path, capsys, name, text):
    """R3/R4: a garbage training_state.json or config.json gave a message naming no
    file, or a raw AttributeError."""
    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), *TINY_ARGS, "--steps", "4",
                 "--stop-after", "2"]) == 0
    capsys.readouterr()
    (out / "training_state" / name).write_text(text)
    assert main(["pretrain", "--out", str(out), *TINY_ARGS, "--steps", "4",
                 "--resume"]) != 0
    err = capsys.readouterr().err
    assert name in err and "Traceback" not in err, err


# --- 8. fault injection through the command line --------------------------------------

def _compare_runs(a: Path, b: Path) -> None:
    """Bit-identical weights, and the same metrics.json but for the seconds it took."""
    assert same_weights(load_model(a), load_model(b))
    assert (a / "vocab.txt").read_bytes() == (b / "vocab.txt").read_bytes()
    metrics = [_without_time(json.loads((d / "metrics.json").read_text()))
               for d in (a, b)]
    assert metrics[0] == metrics[1]


@needs_data
def test_sigint_through_the_command_line_then_resume_is_bit_identical(tmp_path):
    """`tinybert pretrain` in a process of its own, stopped by a real SIGINT while it
    works; the command it prints continues the run to exactly the uninterrupted result,
    wherever the signal landed."""
    import re
    import shlex
    import signal

    args = [*TINY_ARGS, "--steps", "300", "--eval-every", "100"]
    assert main(["pretrain", "--out", str(tmp_path / "straight"), *args]) == 0
    command = [sys.executable, "-m", "tinybert", "pretrain", "--out",
               str(tmp_path / "run"), *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = []
    for line in process.stdout:          # text mode: the progress bar's \r ends a line
        lines.append(line)
        if re.search(r"pretraining:.* [1-9]\d*/300", line):     # training has begun
            break
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=120)
    output = "".join(lines) + rest
    assert process.returncode == 130, output
    assert "Traceback" not in output
    step = int(re.search(r"interrupted after step (\d+);", output).group(1))
    assert 1 <= step < 300 and "Continue the run with:" in output, output
    again = output.split("Continue the run with:\n", 1)[1].splitlines()[0].strip()
    argv = shlex.split(again)
    assert argv[:4] == ["python", "-m", "tinybert", "pretrain"]
    assert argv[-1] == "--resume"
    assert main(argv[3:]) == 0
    _compare_runs(tmp_path / "straight", tmp_path / "run")


@needs_data
def test_a_run_interrupted_at_every_file_it_writes_resumes_exactly(tmp_path,
                                                                    monkeypatch):
    """Ctrl-C as the run writes its n-th file (vocabulary, metrics, each file of each
    checkpoint, the final model), for every n: --resume ends with the same files."""
    import tinybert.checkpoint.atomic as checkpoint

    run = dict(steps=4, eval_every=2, checkpoint_every=2)
    run_tiny(tmp_path / "straight", **run)
    original, written = checkpoint._create, []

    def interrupted_at(n):
        def create(path, write):
            written.append(path.name)
            if len(written) == n:
                raise KeyboardInterrupt(f"Ctrl-C at file {n}: {path.name}")
            return original(path, write)
        return create

    monkeypatch.setattr(checkpoint, "_create", interrupted_at(0))
    run_tiny(tmp_path / "count", **run)
    total = len(written)
    assert total >= 14, written
    for n in range(1, total + 1):
        written.clear()
        monkeypatch.setattr(checkpoint, "_create", interrupted_at(n))
        with pytest.raises(KeyboardInterrupt):
            run_tiny(tmp_path / f"at-{n}", **run)
        monkeypatch.setattr(checkpoint, "_create", original)
        # as `tinybert pretrain` advises: --resume once something was saved
        saved = any((tmp_path / f"at-{n}" / name).exists() for name in RUN_FILES)
        assert saved == (n > 1), n
        run_tiny(tmp_path / f"at-{n}", resume=saved, **run)
        _compare_runs(tmp_path / "straight", tmp_path / f"at-{n}")


@needs_data
def test_finetune_stopped_by_ctrl_c_says_so_without_a_traceback(monkeypatch, capsys):
    """Reliability probe finetune.ctrl-c: a raw KeyboardInterrupt traceback."""
    import functools

    import tinybert.finetuning.recipes as recipes

    @functools.wraps(recipes.finetune_task)  # the command takes its defaults from it
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(recipes, "finetune_task", interrupted)
    assert main(["finetune", "banking77", "--train-examples", "8", "--eval-examples",
                 "8", "--epochs", "1"]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "nothing was written" in err


def test_more_threads_than_cores_is_refused(capsys):
    """Reliability probe pretrain.threads-huge: --threads 100000 crashed torch."""
    with pytest.raises(SystemExit) as stop:
        main(["pretrain", "--out", "unused", "--threads", "100000"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--threads: expected at most" in err and "Traceback" not in err
