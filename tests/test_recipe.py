"""The pretraining recipe is one frozen object from the command line to the loop
(issue 36): a setting is named in one place, the recipe's field, and the command line's
option, the saved metrics.json and the resume check all follow from that field."""
from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import re
from pathlib import Path

import pytest

from tinybert.commands.pretrain_arguments import add_arguments, flag, recipe_from_args
from tinybert.pretraining.pretrain_loop import PretrainingConfig
from tinybert.pretraining.recipe import PretrainingRecipe
from tinybert.pretraining.run import pretrain_bert
from tinybert.pretraining.settings import SettingError, fixed_settings, setting


needs_data = pytest.mark.skipif(not os.environ.get("TINYBERT_DATA_DIR", "").strip(),
                                reason="TINYBERT_DATA_DIR is not set: no course documents")
PACKAGE = Path(__file__).resolve().parents[1] / "tinybert"
TINY = dict(overrides=dict(d_model=32, n_layers=1, n_heads=2, d_ff=37, max_len=32),
            batch_size=8, vocab_size=120, vocab_min_count=2, eval_batches=1,
            max_documents=2, steps=4, eval_every=2)


def _parser(recipe_class=PretrainingRecipe) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tinybert pretrain")
    add_arguments(parser, recipe_class)
    return parser


@dataclasses.dataclass(frozen=True)
class WithLabelSmoothing(PretrainingRecipe):
    """The recipe with one field more, added as a maintainer would add it."""

    label_smoothing: float = setting(0.0, "share of the MLM target spread over the vocab")


def test_the_command_line_defaults_are_the_recipes():
    args = _parser().parse_args(["--out", "o"])
    assert recipe_from_args(args) == PretrainingRecipe()
    for field in dataclasses.fields(PretrainingRecipe):
        assert flag(field.name) in _parser().format_help(), field.name


@needs_data
def test_a_new_field_is_an_option_a_saved_value_and_a_resume_check(tmp_path):
    parser = _parser(WithLabelSmoothing)
    assert "--label-smoothing" in parser.format_help()
    assert "share of the MLM target spread over the vocab" in parser.format_help()
    tiny = [a for key, value in TINY.items() if key != "overrides"
            for a in (flag(key), str(value))]
    tiny += [a for key, value in TINY["overrides"].items() for a in ("--set", f"{key}={value}")]
    args = parser.parse_args(["--out", "o", *tiny, "--label-smoothing", "0.1"])
    recipe = recipe_from_args(args, WithLabelSmoothing)
    assert recipe.label_smoothing == 0.1 and recipe.steps == 4
    out = tmp_path / "run"
    pretrain_bert(out, recipe, stop_after=2, device="cpu")
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["config"] == dataclasses.asdict(recipe)             # saved whole
    assert saved["config"]["label_smoothing"] == 0.1
    other = dataclasses.replace(recipe, label_smoothing=0.2)
    with pytest.raises(ValueError, match="label_smoothing: saved 0.1, now 0.2"):
        pretrain_bert(out, other, resume=True, device="cpu")
    # the settings marked may_change may change, the others may not
    pretrain_bert(out, dataclasses.replace(recipe, eval_every=4), resume=True,
                  device="cpu")
    assert json.loads((out / "metrics.json").read_text())["config"]["eval_every"] == 4


def test_a_bad_setting_on_the_command_line_names_its_option():
    parser = _parser()
    for argv, option in ((["--warmup", "2"], "--warmup-fraction"),
                         (["--mask-probability", "1"], "--mlm-probability"),
                         (["--set", "n_heads=7"], "--set"),
                         (["--eval-batches", "0"], "--eval-batches")):
        with pytest.raises(ValueError, match=f"^{option}: ") as caught:
            recipe_from_args(parser.parse_args(["--out", "o", *argv]))
        assert "Traceback" not in str(caught.value)


def test_only_the_fields_marked_may_change_may_change_on_resume():
    recipe = PretrainingRecipe()
    may = {f.name for f in dataclasses.fields(recipe) if f.metadata["may_change"]}
    assert may == {"log_every", "eval_every", "checkpoint_every", "mixed_precision"}
    assert set(fixed_settings(recipe)) == {f.name for f in dataclasses.fields(recipe)} - may
    assert set(fixed_settings(PretrainingConfig())) <= set(fixed_settings(recipe))


def test_every_setting_has_help_and_a_default():
    for cls in (PretrainingConfig, PretrainingRecipe):
        for field in dataclasses.fields(cls):
            assert len(field.metadata.get("help", "").split()) >= 3, field.name
        cls()                                           # every default is a valid recipe
    with pytest.raises(SettingError):
        PretrainingRecipe(objective="nsp")


def test_no_library_module_knows_a_command_line_option():
    """Only the command line (tinybert/commands, tinybert/__main__.py) spells options:
    the library names its arguments, and the commands say them as options."""
    option = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in ("commands", "exercises") or relative.name == "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found += [f"{relative}:{node.lineno}: {m}" for m in option.findall(node.value)]
    assert not found, found
