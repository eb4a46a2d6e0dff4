"""Hand-written tests for tinybert.finetuning.features and tinybert.finetuning.recipes (chapter 10): inputs, label
alignment, batching, the training loop, prediction, and the `tinybert finetune` command."""
from __future__ import annotations

import pytest
import torch

from tinybert.models.registry import save_model
from tinybert.finetuning.features import (batches, encode_sentences, encode_tagged,
                                          first_piece_labels)
from tinybert.training.inputs import pad_features
from tinybert.training.inputs import encode_pair
from tinybert.training.inputs import SpecialTokens
from tinybert.finetuning.finetune_loop import finetune, predict
from tinybert.finetuning.heads import (QuestionAnswerer, SequenceClassifier,
                                       TokenClassifier, set_trainable_layers)
from tinybert.models.bert import BertConfig, BertModel
from tinybert.models.bert_heads import BertForPreTraining
from tinybert.finetuning.tagging_tasks import TaggedSentence
from tinybert.finetuning.text_tasks import TextExample
from tinybert.tokenizers.wordpiece_training import train_wordpiece_tokenizer

TEXTS = ["I am still waiting on my card?", "How do I top up my account with a transfer?",
         "Unbelievable! The exchange rate was wrong, again.", "with pale blue berries, in these peaceful shades",
         "Matt lives in Canada and Sinan lives in California"]


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece_tokenizer(TEXTS * 3, vocab_size=120, min_count=1)


def tiny_bert(vocab_size: int, **overrides) -> BertModel:
    torch.manual_seed(0)
    config = dict(vocab_size=vocab_size, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=64)
    return BertModel(BertConfig(**{**config, **overrides}))


# --- inputs ----------------------------------------------------------------------------------------

def test_fine_tuning_inputs_come_from_the_pretraining_builder(tokenizer):
    special = SpecialTokens.from_vocab(tokenizer.vocab)
    cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    assert encode_pair([11, 12], None, special, 8) == ([cls, 11, 12, sep], [0, 0, 0, 0])
    assert encode_pair([11], [21, 22], special, 8) == (
        [cls, 11, sep, 21, 22, sep], [0, 0, 0, 1, 1, 1])
    text = TextExample(TEXTS[1], 0)
    (feature,) = encode_sentences(tokenizer, [text], max_len=5)
    ids = tokenizer.encode(TEXTS[1]).ids
    assert feature["input_ids"] == [cls, *ids[:3], sep]


def test_a_vocabulary_without_special_tokens_is_named():
    with pytest.raises(ValueError, match=r"lacks the special tokens \['\[MASK\]'\]"):
        SpecialTokens.from_vocab({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4})


# --- batches ---------------------------------------------------------------------------------------

def test_pad_features():
    features = [{"input_ids": [2, 5, 3], "token_type_ids": [0, 0, 0], "labels": [-100, 4, -100],
                 "offsets": ["ignored"]},
                {"input_ids": [2, 6, 7, 8, 3], "token_type_ids": [0, 0, 0, 1, 1], "labels": [-100, 1, 2, 3, -100]}]
    batch = pad_features(features, pad_id=9)
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
    assert batch["input_ids"].tolist() == [[2, 5, 3, 9, 9], [2, 6, 7, 8, 3]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]]
    assert batch["attention_mask"].dtype == torch.bool
    assert batch["attention_mask"].tolist() == [[True] * 3 + [False] * 2, [True] * 5]
    assert batch["labels"].tolist() == [[-100, 4, -100, -100, -100], [-100, 1, 2, 3, -100]]
    spans = pad_features([{"input_ids": [2, 3], "token_type_ids": [0, 0], "start_positions": 1, "end_positions": 1},
                          {"input_ids": [2], "token_type_ids": [0], "start_positions": 0, "end_positions": 0}], 0)
    assert spans["start_positions"].tolist() == [1, 0] and spans["end_positions"].shape == (2,)


def test_batches_cover_every_feature_once_in_a_seeded_order():
    features = [{"input_ids": [i], "token_type_ids": [0], "labels": i} for i in range(13)]
    ordered = [b["labels"].tolist() for b in batches(features, 5, 0)]
    assert ordered == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12]]

    def shuffled(seed):
        g = torch.Generator().manual_seed(seed)
        return [x for b in batches(features, 5, 0, shuffle=True, generator=g) for x in b["labels"].tolist()]
    assert sorted(shuffled(0)) == list(range(13)) and shuffled(0) == shuffled(0) != shuffled(1)
    with pytest.raises(ValueError, match="no features"):
        next(batches([], 5, 0))


def test_shuffled_batches_group_similar_lengths():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(3, 60, (200,), generator=g).tolist()
    features = [{"input_ids": [1] * n, "token_type_ids": [0] * n} for n in lengths]
    shuffled = list(batches(features, 8, 0, shuffle=True, generator=g))
    padding = sum((~b["attention_mask"]).sum().item() for b in shuffled)
    in_file_order = sum((~b["attention_mask"]).sum().item() for b in batches(features, 8, 0))
    assert sum(b["attention_mask"].sum().item() for b in shuffled) == sum(lengths)
    assert padding < 0.2 * in_file_order
    first_lengths = [b["attention_mask"].sum(1).max().item() for b in shuffled[:6]]
    assert first_lengths != sorted(first_lengths)              # the batches themselves are shuffled


# --- the loop and prediction -----------------------------------------------------------------------

def _contains_seven(n: int, seed: int = 0):
    """Sequences of ids 5..12; the label says whether id 7 occurs: a task a tiny model learns fast."""
    g = torch.Generator().manual_seed(seed)
    features = []
    for _ in range(n):
        ids = torch.randint(5, 13, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g).tolist()
        features.append({"input_ids": [2, *ids, 3], "token_type_ids": [0] * (len(ids) + 2), "labels": int(7 in ids)})
    return features


def test_finetune_learns_and_follows_the_schedule():
    torch.manual_seed(0)
    model = SequenceClassifier(tiny_bert(13), 2)
    features = _contains_seven(96)
    result = finetune(model, features, pad_id=0, epochs=10, batch_size=16, lr=5e-3, warmup_fraction=0.1)
    assert len(result.losses) == len(result.learning_rates) == 10 * 6
    assert sum(result.losses[-6:]) < 0.3 * sum(result.losses[:6])
    rates = result.learning_rates
    peak = rates.index(max(rates))
    assert rates[0] == 0.0 and max(rates) == pytest.approx(5e-3) and peak == 6
    assert all(a <= b for a, b in zip(rates[:peak], rates[1:peak + 1]))            # warm-up
    assert all(a >= b for a, b in zip(rates[peak:], rates[peak + 1:]))              # decay
    assert result.trainable_parameters == sum(p.numel() for p in model.parameters()) and result.seconds > 0
    assert not model.training                                                      # left in eval mode
    predictions = torch.stack(predict(model, _contains_seven(64, seed=1), pad_id=0)).argmax(-1)
    truth = torch.tensor([f["labels"] for f in _contains_seven(64, seed=1)])
    assert (predictions == truth).float().mean() > 0.8


def test_finetune_leaves_frozen_parameters_alone():
    model = SequenceClassifier(tiny_bert(13), 2)
    set_trainable_layers(model, 0)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    result = finetune(model, _contains_seven(32), pad_id=0, epochs=2, batch_size=8, lr=1e-2)
    assert result.trainable_parameters == 32 * 2 + 2
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]) != name.startswith("classifier."), name


def test_finetune_stops_when_the_loss_is_no_longer_finite():
    """H2: a learning rate far too large turns the loss to NaN; the loop raises, naming
    the step and the learning rate, before it updates the weights with it."""
    torch.manual_seed(0)
    model = SequenceClassifier(tiny_bert(13), 2)
    with pytest.raises(FloatingPointError,
                       match=r"step \d+ of 12: the training loss is (nan|inf) with lr = 1e\+06"):
        finetune(model, _contains_seven(32), pad_id=0, epochs=3, batch_size=8, lr=1e6)
    assert all(torch.isfinite(p).all() for p in model.parameters())   # no NaN update


@pytest.mark.parametrize("kwargs, message", [
    ({"lr": float("inf")}, "lr: expected a positive finite number, got inf"),
    ({"lr": float("nan")}, "lr: expected a positive finite number, got nan"),
    ({"lr": 0.0}, "lr: expected a positive finite number"),
    ({"max_grad_norm": -1.0}, "max_grad_norm: expected a positive finite number"),
    ({"max_grad_norm": float("nan")}, "max_grad_norm: expected a positive finite"),
    ({"max_grad_norm": float("inf")}, "max_grad_norm: expected a positive finite"),
    ({"batch_size": 0}, "batch_size: expected an integer >= 1, got 0"),
    ({"batch_size": -1}, "batch_size: expected an integer >= 1, got -1"),
    ({"batch_size": 2.5}, "batch_size: expected an integer >= 1, got 2.5"),
    ({"epochs": 0}, "epochs: expected an integer >= 1, got 0"),
    ({"warmup_fraction": 1.0}, r"warmup_fraction: expected a number in \[0, 1\), got 1.0"),
    ({"warmup_fraction": -0.1}, "warmup_fraction: expected a number in"),
    ({"warmup_fraction": float("nan")}, "warmup_fraction: expected a number in"),
])
def test_finetune_checks_its_numbers_first(kwargs, message):
    """M9: each bad number is named, before any step (the weights are untouched)."""
    model = SequenceClassifier(tiny_bert(13), 2)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match=message):
        finetune(model, _contains_seven(16), pad_id=0, **{"lr": 1e-3, **kwargs})
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_predict_checks_its_batch_size():
    model = SequenceClassifier(tiny_bert(13), 2)
    for batch_size in (0, -1):
        with pytest.raises(ValueError, match="batch_size: expected an integer >= 1"):
            predict(model, _contains_seven(4), pad_id=0, batch_size=batch_size)


def test_sentences_labelled_minus_100_carry_no_loss():
    """M9: the label error invites -100 ("to ignore a position"); a sentence labelled so
    contributes nothing, and a batch of them gives a loss of 0, not NaN."""
    torch.manual_seed(0)
    model = SequenceClassifier(tiny_bert(13), 3)
    features = [{**f, "labels": -100 if i % 2 else f["labels"]}
                for i, f in enumerate(_contains_seven(16))]
    result = finetune(model, features, pad_id=0, epochs=2, batch_size=4, lr=1e-3)
    assert all(torch.isfinite(torch.tensor(result.losses)))
    model.eval()
    ids = torch.randint(5, 13, (2, 6))
    assert model(ids, labels=torch.tensor([-100, -100])).loss.item() == 0.0
    one = model(ids, labels=torch.tensor([1, -100])).loss
    alone = torch.nn.functional.cross_entropy(model(ids[:1]).logits, torch.tensor([1]))
    assert one.item() == pytest.approx(alone.item(), rel=1e-5)


def test_predict_removes_padding_and_does_not_depend_on_the_batch():
    features = _contains_seven(13)
    lengths = [len(f["input_ids"]) for f in features]
    for model, shape in [(SequenceClassifier(tiny_bert(13), 3), lambda n: (3,)),
                         (TokenClassifier(tiny_bert(13), 5), lambda n: (n, 5)),
                         (QuestionAnswerer(tiny_bert(13)), lambda n: (n, 2))]:
        one_by_one = predict(model, features, pad_id=0, batch_size=1)
        all_at_once = predict(model, features, pad_id=0, batch_size=13)
        assert [tuple(x.shape) for x in all_at_once] == [shape(n) for n in lengths]
        for a, b in zip(one_by_one, all_at_once):
            assert torch.allclose(a, b, atol=1e-5)


# --- recipes and the command line ------------------------------------------------------------------

def test_task_data_errors():
    from tinybert.finetuning.recipes import task_data
    with pytest.raises(ValueError, match="unknown task 'imdb'"):
        task_data("imdb", "train")
    with pytest.raises(ValueError, match="split must be"):
        task_data("banking77", "dev")


def test_command_line_help(capsys):
    from tinybert.__main__ import main
    with pytest.raises(SystemExit) as exit_info:
        main(["finetune", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in ("banking77", "squad", "--random-init", "--trainable-layers", "--train-examples"):
        assert option in text


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from tinybert.data import DataUnavailableError
    from tinybert.finetuning.text_tasks import read_poem_sentiment
    try:
        verses = [e.text for e in read_poem_sentiment("train")]
    except DataUnavailableError as error:
        pytest.skip(f"course data unavailable: {error}")
    tokenizer = train_wordpiece_tokenizer(verses, vocab_size=300)
    directory = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=64)
    save_model(BertForPreTraining(config), directory)
    tokenizer.save(directory / "vocab.txt")
    return directory


@pytest.mark.parametrize("extra", [[], ["--random-init", "--trainable-layers", "1"]])
def test_command_line_tiny_run(tiny_checkpoint, capsys, extra):
    from tinybert.__main__ import main
    code = main(["finetune", "poem_sentiment", "--checkpoint", str(tiny_checkpoint), "--train-examples", "24",
                 "--eval-examples", "16", "--epochs", "1", "--batch-size", "8", *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "validation: accuracy" in out and "for 3 steps" in out
    accuracy = float(out.split("validation: accuracy ")[1].split()[0].rstrip(","))
    assert 0.0 <= accuracy <= 1.0


def test_finetune_task_is_fixed_by_its_seed_whatever_ran_before(tiny_checkpoint):
    """The seed fixes the new head's weights and dropout: the same call gives the same
    model and score after unrelated random draws, and another seed gives another head."""
    from tinybert.models.registry import load_model
    from tinybert.finetuning.recipes import finetune_task
    from tinybert.tokenizers.wordpiece import WordPieceTokenizer

    tokenizer = WordPieceTokenizer.from_file(tiny_checkpoint / "vocab.txt", lowercase=True)

    def run(seed, draws):
        torch.manual_seed(123 + draws)
        torch.rand(draws)  # whatever ran before
        encoder = load_model(tiny_checkpoint).bert
        return finetune_task("poem_sentiment", encoder, tokenizer, train_examples=16,
                             eval_examples=8, epochs=1, batch_size=8, seed=seed)

    first, again, other = run(0, 1), run(0, 1000), run(1, 1)
    assert first.metrics == again.metrics
    assert first.result.losses == again.result.losses
    for (name, a), b in zip(first.model.state_dict().items(),
                            again.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert not torch.equal(first.model.classifier.weight, other.model.classifier.weight)


def test_command_line_reports_bad_input(tiny_checkpoint, tmp_path, capsys):
    """L1: errors go to stderr, as tinybert pretrain's do, with exit code 2."""
    from tinybert.__main__ import main
    assert main(["finetune", "banking77", "--checkpoint", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "tinybert finetune: error: no pretrained checkpoint" in captured.err
    assert captured.out == ""
    assert main(["finetune", "poem_sentiment", "--checkpoint", str(tiny_checkpoint), "--train-examples", "8",
                 "--trainable-layers", "7"]) == 2
    assert "--trainable-layers: expected 0..2, the layers of the encoder; got 7" in capsys.readouterr().err
    assert main(["finetune", "poem_sentiment", "--checkpoint", str(tiny_checkpoint),
                 "--from-hf", str(tmp_path)]) == 2
    assert "give one of them" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--epochs", "abc"], "argument --epochs: expected an integer, got 'abc'"),
    (["--batch-size", "2.5"], "argument --batch-size: expected an integer, got '2.5'"),
    (["--train-examples", "0"], "argument --train-examples: expected an integer >= 1, got 0"),
    (["--lr", "inf"], "argument --lr: expected a positive finite number, got 'inf'"),
    (["--lr", "nan"], "argument --lr: expected a positive finite number, got 'nan'"),
    (["--seed", "-1"], "argument --seed: expected an integer from 0 to 2**64 - 1, got -1"),
    (["--seed", "99999999999999999999999"], "argument --seed: expected an integer from 0 to"),
    (["--trainable-layers", "-1"], "argument --trainable-layers: expected an integer >= 0"),
])
def test_command_line_bad_numbers_are_usage_errors(capsys, args, message):
    """M6, L1: a message that says what is expected (no traceback, no function name)."""
    from tinybert.__main__ import main
    with pytest.raises(SystemExit) as exit_:    # small sizes: a regression runs quickly
        main(["finetune", "poem_sentiment", "--train-examples", "4", "--eval-examples", "4",
              "--epochs", "1", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "_positive_int" not in err


@pytest.mark.parametrize("args, message", [
    (["ud_pos", "--pooling", "pooler"], "--pooling applies to banking77 and poem_sentiment, not ud_pos"),
    (["squad", "--pooling", "mean"], "--pooling applies to"),
    (["squad", "--test"], "--test: squad has no separate test split"),
])
def test_command_line_refuses_options_that_would_be_ignored(capsys, args, message):
    """M7: an option the task does not use is an error, not silently ignored."""
    from tinybert.__main__ import main
    assert main(["finetune", *args, "--train-examples", "4", "--eval-examples", "4",
                 "--epochs", "1"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_command_line_refuses_more_examples_than_a_set_holds(tiny_checkpoint, capsys):
    """M7: --eval-examples (or --train-examples) beyond the set is an error that says how
    many there are, from finetune_task, before any training."""
    from tinybert.__main__ import main
    code = main(["finetune", "poem_sentiment", "--checkpoint", str(tiny_checkpoint), "--train-examples", "8",
                 "--eval-examples", "100000", "--epochs", "1", "--batch-size", "8"])
    captured = capsys.readouterr()
    assert code == 2, captured.out
    assert ("tinybert finetune: error: --eval-examples: expected at most 105, "
            "the validation examples of poem_sentiment; got 100,000") in captured.err
    assert "trained" not in captured.out


def test_command_line_reads_each_split_once(tiny_checkpoint, capsys, monkeypatch):
    """The command counts nothing itself: finetune_task reads the training and the
    evaluation split, once each, and checks the counts asked for."""
    from collections import Counter

    from tinybert.__main__ import main
    from tinybert.finetuning import recipes

    reads, task_data = Counter(), recipes.task_data

    def counting(task, split):
        reads[task, split] += 1
        return task_data(task, split)

    monkeypatch.setattr(recipes, "task_data", counting)
    assert main(["finetune", "poem_sentiment", "--checkpoint", str(tiny_checkpoint),
                 "--train-examples", "8", "--eval-examples", "8", "--epochs", "1"]) == 0
    assert reads == {("poem_sentiment", "train"): 1, ("poem_sentiment", "validation"): 1}
    capsys.readouterr()


def test_command_line_defaults_are_finetune_tasks(tiny_checkpoint, capsys, monkeypatch):
    """Every option that is a finetune_task keyword defaults to that keyword's default
    (the same call from Python and from the command line gives the same model), and the
    help says so."""
    import argparse
    import functools
    import inspect
    from types import SimpleNamespace

    from tinybert.__main__ import main
    from tinybert.commands import finetune as command
    from tinybert.finetuning import recipes

    keywords = {name: p.default
                for name, p in inspect.signature(recipes.finetune_task).parameters.items()
                if p.kind is p.KEYWORD_ONLY}
    assert command.library_defaults() == keywords
    calls = []

    @functools.wraps(recipes.finetune_task)  # its signature: the command reads it
    def recording(task, encoder, tokenizer, **options):
        calls.append(options)
        result = SimpleNamespace(trainable_parameters=1, losses=[1.0], seconds=0.0)
        return SimpleNamespace(result=result, metrics={"accuracy": 0.5})

    monkeypatch.setattr(recipes, "finetune_task", recording)
    assert main(["finetune", "poem_sentiment", "--checkpoint", str(tiny_checkpoint)]) == 0
    (given,) = calls
    given.pop("desc")  # the progress bar's label: the task's name
    assert given == {name: keywords[name] for name in given}
    # every option of the parser that is a keyword, and --test for eval_split
    assert {"epochs", "lr", "batch_size", "seed", "train_examples", "eval_examples",
            "trainable_layers", "pooling", "eval_split"} <= set(given)
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    for action in parser._actions:
        if action.dest in keywords and action.dest != "pooling":  # None: the library's
            assert action.default == keywords[action.dest], action.dest
    help_text = " ".join(parser.format_help().split())
    for name in ("epochs", "lr", "batch_size", "seed", "pooling"):
        assert f"(default: {keywords[name]})" in help_text, name
    capsys.readouterr()


def test_command_line_reports_a_diverged_run(tiny_checkpoint, capsys):
    """H2: NaN is a failure (exit 1, like a diverged pretraining run), not a result."""
    from tinybert.__main__ import main
    code = main(["finetune", "poem_sentiment", "--checkpoint", str(tiny_checkpoint), "--train-examples", "8",
                 "--eval-examples", "8", "--epochs", "1", "--batch-size", "4", "--lr", "1e6"])
    captured = capsys.readouterr()
    assert code == 1, captured.out
    assert "tinybert finetune: error: step 2 of 2: the training loss is" in captured.err
    assert "lr = 1e+06" in captured.err and "validation:" not in captured.out


def test_command_line_fine_tunes_a_headless_checkpoint_and_refuses_others(
        tiny_checkpoint, tmp_path, capsys):
    import shutil

    from tinybert.__main__ import main
    from tinybert.models.registry import MODEL_CLASSES, load_model, register_model_class
    from tinybert.models.albert import AlbertConfig, AlbertModel
    from tinybert.models.albert_heads import AlbertForPreTraining

    headless = tmp_path / "headless"
    save_model(load_model(tiny_checkpoint).bert, headless)       # a BertModel alone
    shutil.copy(tiny_checkpoint / "vocab.txt", headless / "vocab.txt")
    code = main(["finetune", "poem_sentiment", "--checkpoint", str(headless),
                 "--train-examples", "8", "--eval-examples", "8", "--epochs", "1"])
    assert code == 0, capsys.readouterr().out
    vocab = len((tiny_checkpoint / "vocab.txt").read_text().splitlines())
    config = AlbertConfig(vocab_size=vocab, d_model=32, n_layers=1, n_heads=4, d_ff=37,
                          max_len=64, embedding_size=16)
    albert = tmp_path / "albert"          # a BertModel by the variants' extension point
    save_model(AlbertModel(config), albert)
    shutil.copy(tiny_checkpoint / "vocab.txt", albert / "vocab.txt")
    assert main(["finetune", "poem_sentiment", "--checkpoint", str(albert),
                 "--train-examples", "8", "--eval-examples", "8", "--epochs", "1"]) == 0
    with_heads = tmp_path / "albert_heads"  # ALBERT with its pretraining heads
    save_model(AlbertForPreTraining(config), with_heads)
    shutil.copy(tiny_checkpoint / "vocab.txt", with_heads / "vocab.txt")
    assert main(["finetune", "poem_sentiment", "--checkpoint", str(with_heads),
                 "--train-examples", "8", "--eval-examples", "8", "--epochs", "1"]) == 0

    class NoEncoder(torch.nn.Module):  # a registered model with no BERT inside
        config_class = BertConfig

        def __init__(self, config):
            super().__init__()
            self.config, self.linear = config, torch.nn.Linear(2, 2)

    register_model_class(NoEncoder)
    other = tmp_path / "other"
    save_model(NoEncoder(BertConfig(vocab_size=vocab, d_model=32, n_layers=1, n_heads=4,
                                    d_ff=37, max_len=64)), other)
    shutil.copy(tiny_checkpoint / "vocab.txt", other / "vocab.txt")
    capsys.readouterr()
    try:
        assert main(["finetune", "poem_sentiment", "--checkpoint", str(other)]) == 2
    finally:
        MODEL_CLASSES.pop("NoEncoder")
    err = capsys.readouterr().err
    assert "NoEncoder" in err and "expected a BertModel" in err


def test_ner_tags_gives_one_tag_per_word_and_is_fixed_by_its_seed(tiny_checkpoint):
    """ner_tags (the ladder's NER run): a BIO tag of NER_TAGS for every word of every test
    sentence, O for the words cut off by max_len, and the same tags for the same seed."""
    from tinybert.models.registry import load_model
    from tinybert.finetuning.ladder import LadderArm, ner_tags
    from tinybert.finetuning.tagging_tasks import NER_TAGS, TaggedSentence
    from tinybert.tokenizers.wordpiece import WordPieceTokenizer

    tokenizer = WordPieceTokenizer.from_file(tiny_checkpoint / "vocab.txt", lowercase=True)
    arm = LadderArm(lambda seed: load_model(tiny_checkpoint).bert, tokenizer, "mean")
    words = "the king of france spoke to the people of paris".split()
    train = [TaggedSentence(words, [0, 0, 0, 5, 0, 0, 0, 0, 0, 5])] * 4
    max_len = load_model(tiny_checkpoint).config.max_len
    test = [TaggedSentence(["paris"], [5]), TaggedSentence(["the"] * (2 * max_len), [0] * (2 * max_len))]
    first = ner_tags(arm, train, test, lr=1e-3, seed=0, epochs=1)
    assert [len(tags) for tags in first] == [1, 2 * max_len]
    assert all(tag in NER_TAGS for tags in first for tag in tags)
    assert first[1][max_len:] == ["O"] * max_len  # past max_len: cut off
    torch.rand(5)  # whatever ran before
    assert ner_tags(arm, train, test, lr=1e-3, seed=0, epochs=1) == first


@pytest.mark.parametrize("n_labels", [0, -1, True, 2.0])
def test_heads_refuse_a_label_count_that_is_not_a_positive_int(n_labels):
    """L8: a head with no class (or a float count) is an error, named, at construction."""
    for head in (SequenceClassifier, TokenClassifier):
        with pytest.raises(ValueError, match=r"n_labels: expected a positive int"):
            head(tiny_bert(13), n_labels)


def test_mean_pooling_refuses_a_sequence_without_a_real_token():
    """L8: a mean over no token would give NaN logits; the row is named instead."""
    model = SequenceClassifier(tiny_bert(13), 2, pooling="mean").eval()
    ids = torch.randint(5, 13, (3, 4))
    mask = torch.ones(3, 4, dtype=torch.long)
    mask[1] = 0
    with pytest.raises(ValueError, match=r"got none in rows \[1\]"):
        model(ids, attention_mask=mask)
    mask[1, 0] = 1
    assert torch.isfinite(model(ids, attention_mask=mask).logits).all()
