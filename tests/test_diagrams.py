"""Hand-written tests of tinybert.diagrams (issue 34): every diagram is a white
matplotlib Figure that pyplot never sees, its labels are the numbers of the
configuration it was given (change a size, the label changes), and its text stays on
the canvas, inside its box and clear of other text.
"""
from __future__ import annotations

import dataclasses
import io

import matplotlib
import matplotlib.image
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyBboxPatch

from tinybert import diagrams
from tinybert.blocks.transformer import TransformerConfig
from tinybert.models.albert import AlbertConfig
from tinybert.models.bert import BertConfig
from tinybert.models.distilbert import DistilBertConfig
from tinybert.models.electra import ElectraConfig
from tinybert.models.roberta import RobertaConfig

PAIR = "[CLS] paris is a beautiful city [SEP] i love paris [SEP]".split()
SEGMENTS = [0] * 7 + [1] * 4
QA = ("[CLS] where does matt live ? [SEP] matt lives in canada and sinan lives in "
      "california [SEP]").split()
QA_SEGMENTS = [0] * 7 + [1] * 10


def odd_bert(**changes) -> BertConfig:
    """Odd, distinct sizes, so that a label taken from the wrong field shows."""
    sizes = dict(vocab_size=99, d_model=36, n_layers=3, n_heads=4, d_ff=37, max_len=41)
    return BertConfig(**{**sizes, **changes})


def odd_albert(**changes) -> AlbertConfig:
    sizes = dict(vocab_size=99, d_model=36, n_layers=5, n_heads=4, d_ff=37,
                 embedding_size=13, max_len=41)
    return AlbertConfig(**{**sizes, **changes})


# name -> (draw(config), the config, the labels it must show); every config a dataclass
DRAWINGS = {
    "attention": (lambda c: diagrams.attention_diagram(c.n_layers, 5, 7, c.d_model),
                  odd_bert(), ["(3, 5, 36)", "(3, 7, 36)", "÷ √36"]),
    "multihead": (lambda c: diagrams.multihead_attention_diagram(c.d_model, c.n_heads,
                                                                 3, 7),
                  odd_bert(), ["36 → 36", "H = 4", "(3, 4, 7, 9)", "width 9"]),
    "positional": (lambda c: diagrams.positional_encoding_diagram(c.d_model, c.n_heads),
                   odd_bert(), ["D = 36", "H = 4", "(B, 4, T, 9)"]),
    "transformer": (diagrams.transformer_diagram,
                    TransformerConfig(vocab_size=99, d_model=36, n_heads=4, n_layers=3,
                                      d_ff=37),
                    ["V = 99, D = 36", "36 → 37 → 36", "× N\n= 3", "H = 4 heads, Dh = 9",
                     "linear 36 → 99"]),
    "encoder layer": (lambda c: diagrams.encoder_layer_diagram(c.d_model, c.n_heads,
                                                               c.d_ff),
                      odd_bert(), ["D = 36, H = 4", "36 → 37 → 36", "post-LN", "pre-LN"]),
    "bert input": (lambda c: diagrams.bert_input_diagram(c, PAIR, range(11), SEGMENTS),
                   odd_bert(), ["(99 × 36)", "(2 × 36)", "(41 × 36)", "(1, 11, 36)",
                                "beautiful", "E[4]"]),
    "pretraining heads": (lambda c: diagrams.pretraining_heads_diagram(
        c, [*PAIR[:5], "[MASK]", *PAIR[6:]], SEGMENTS, {5: "city"}),
        odd_bert(), ["N = 3 layers", "D = 36", "F = 37", "V = 99", "linear 36 → 2",
                     "target: city"]),
    "sentence": (lambda c: diagrams.sentence_classification_diagram(
        c, PAIR[:7], [0] * 7, 77, "card_arrival"), odd_bert(),
        ["linear 36 → 77", "N = 3 layers", "card_arrival"]),
    "pair": (lambda c: diagrams.sentence_pair_diagram(c, PAIR, SEGMENTS, 2),
             odd_bert(), ["linear 36 → 2", "H = 4"]),
    "tokens": (lambda c: diagrams.token_classification_diagram(
        c, PAIR[:7], [0] * 7, 17, [None, "PROPN", "AUX", "DET", "ADJ", "NOUN", None]),
        odd_bert(), ["linear 36 → 17", "PROPN", "NOUN"]),
    "span": (lambda c: diagrams.span_diagram(c, QA, QA_SEGMENTS, 10, 10), odd_bert(),
             ["linear 36 → 2", "start and end", "canada"]),
    "distillation": (lambda c: diagrams.distillation_diagram(
        c, DistilBertConfig(**{**c.to_dict(), "n_layers": 2,
                               "type_vocab_size": 1}), 3.0, 0.7, 0.2, 0.1),
        odd_bert(), ["N = 3 layers", "N = 2 layers", "T = 3", "α = 0.7", "β = 0.2",
                     "γ = 0.1"]),
    "albert embeddings": (diagrams.albert_embeddings_diagram, odd_albert(),
                          ["99 × 36", "99 × 13", "13 × 36", "rank ≤ 13"]),
    "albert sharing": (lambda c: diagrams.albert_sharing_diagram(
        c, AlbertConfig(**{**c.to_dict(), "n_groups": 2})),
        odd_albert(), ["G = 1, N = 5", "G = 2, N = 5", "depth 4", "weights 2"]),
    "sop and nsp": (diagrams.sop_nsp_diagram, odd_albert(), ["linear 36 → 2"]),
    "roberta": (lambda c: diagrams.roberta_bert_diagram(
        c, RobertaConfig(**{**c.to_dict(), "vocab_size": 98, "pad_token_id": 1,
                            "max_len": 43, "type_vocab_size": 1})),
        odd_bert(), ["V = 99", "V = 98", "41 rows", "43 rows: 2, 3", "N = 3, D = 36"]),
    "family": (lambda c: diagrams.family_diagram(
        [("BERT", c, 1.1e8, "MLM + NSP"),
         ("ALBERT", odd_albert(d_model=c.d_model), 1.2e7, "MLM + SOP")]),
        odd_bert(), ["99 × 36", "99 × 13 → 36", "3 layers", "5 layers, 1 set",
                     "110M", "12M"]),
    "electra": (lambda c: diagrams.electra_diagram(
        ElectraConfig(**{**c.to_dict(), "d_model": 12, "n_heads": 2, "d_ff": 29}), c,
        ["the", "chef", "cooked", "the", "meal"], {1: "chef", 3: "a"}),
        ElectraConfig(vocab_size=99, d_model=36, n_layers=3, n_heads=4, d_ff=37,
                      embedding_size=13, max_len=41),
        ["N = 3, D = 12, H = 2", "N = 3, D = 36, H = 4", "V × E = 99 × 13", "replaced",
         "original", "λ = 50"]),
}


def texts(figure: Figure) -> str:
    return "\n".join(t.get_text() for t in figure.findobj(matplotlib.text.Text))


def layout_problems(figure: Figure, pad: float = 1.0) -> list[str]:
    """Text off the canvas, text wider than the box it sits in, texts that overlap."""
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)
    page = figure.bbox
    labels = {t: t.get_window_extent(renderer) for t in figure.findobj(matplotlib.text.Text)
              if t.get_text().strip()}
    boxes = [p.get_window_extent(renderer) for p in figure.findobj(
        lambda a: isinstance(a, (FancyBboxPatch, Circle)))]

    def inside(inner, outer):
        return (inner.x0 >= outer.x0 - pad and inner.x1 <= outer.x1 + pad
                and inner.y0 >= outer.y0 - pad and inner.y1 <= outer.y1 + pad)

    found = []
    for text, extent in labels.items():
        if not inside(extent, page):
            found.append(f"off the canvas: {text.get_text()!r}")
        anchor = text.get_transform().transform(text.get_position())
        holders = [b for b in boxes if b.contains(*anchor)]
        if holders and not inside(extent, min(holders, key=lambda b: b.width * b.height)):
            found.append(f"wider than its box: {text.get_text()!r}")
    items = list(labels.items())
    for i, (a, extent_a) in enumerate(items):
        for b, extent_b in items[i + 1:]:
            if extent_a.overlaps(extent_b):
                found.append(f"overlapping: {a.get_text()!r} and {b.get_text()!r}")
    return found


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_a_diagram_shows_its_configurations_numbers(name):
    draw, config, labels = DRAWINGS[name]
    figure = draw(config)
    assert isinstance(figure, Figure)
    said = texts(figure)
    for label in labels:
        assert label in said, f"{name}: {label!r} is not in the figure's text:\n{said}"


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_a_diagram_follows_its_configuration(name):
    """Another width, another figure: no number is typed into the drawing code."""
    draw, config, _ = DRAWINGS[name]
    wider = dataclasses.replace(config, d_model=44, n_heads=4)
    before, after = texts(draw(config)), texts(draw(wider))
    if name not in ("albert sharing",):  # it draws depths and groups, not widths
        assert "36" in before and "36" not in after and "44" in after, name


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_a_diagram_keeps_its_text_on_the_canvas_and_apart(name):
    draw, config, _ = DRAWINGS[name]
    assert layout_problems(draw(config)) == []


@pytest.mark.parametrize("preset", ["base", "big"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_the_transformer_at_the_papers_sizes_in_both_norm_placements(preset, norm_first):
    config = TransformerConfig.from_preset(preset, norm_first=norm_first)
    figure = diagrams.transformer_diagram(config)
    said = texts(figure)
    assert f"{config.d_model} → {config.d_ff} → {config.d_model}" in said
    assert ("LayerNorm" in said) and (("Add & LayerNorm" in said) != norm_first)
    assert layout_problems(figure) == []


@pytest.mark.parametrize("preset", ["bert-mini", "bert-base-uncased", "bert-large-cased"])
def test_bert_diagrams_at_the_published_sizes(preset):
    config = BertConfig.preset(preset)
    for figure in (diagrams.bert_input_diagram(config, PAIR, range(11), SEGMENTS),
                   diagrams.pretraining_heads_diagram(config, PAIR, SEGMENTS, {9: "x"}),
                   diagrams.multihead_attention_diagram(config.d_model, config.n_heads,
                                                        1, 11)):
        assert f"{config.d_model}" in texts(figure)
        assert layout_problems(figure) == []


def test_long_inputs_are_shortened_to_their_start_and_their_last_token():
    tokens = ["[CLS]", *(f"w{i}" for i in range(30)), "[SEP]"]
    figure = diagrams.sentence_classification_diagram(odd_bert(), tokens,
                                                      [0] * len(tokens), 3)
    said = texts(figure)
    assert "w0" in said and "…" in said and "[SEP]" in said and "w29" not in said
    assert layout_problems(figure) == []


def test_the_layout_check_finds_what_it_looks_for():
    from tinybert.diagrams.canvas import Canvas

    c = Canvas(3, 2)
    c.box(1, 1, 0.5, 0.3, "a label far too long for its box")
    c.text(2.9, 1.9, "off the edge")
    c.text(1, 1.05, "on top")
    found = {problem.split(":")[0] for problem in layout_problems(c.done())}
    assert found == {"wider than its box", "off the canvas", "overlapping"}


def test_figures_are_white_and_never_reach_pyplot():
    import matplotlib.pyplot as plt

    open_before = plt.get_fignums()
    figure = diagrams.attention_diagram(2, 3, 4, 8)
    assert plt.get_fignums() == open_before, "a diagram registered a pyplot figure"
    assert matplotlib.colors.to_rgba(figure.get_facecolor()) == (1.0, 1.0, 1.0, 1.0)
    png = figure._repr_png_()  # what a notebook shows, with no inline backend needed
    assert png.startswith(b"\x89PNG") and figure.axes
    pixel = matplotlib.image.imread(io.BytesIO(png))[0, 0]
    assert tuple(pixel) == (1.0, 1.0, 1.0, 1.0), "the corner must be opaque white"


# --- the chapters' diagram cells -------------------------------------------------------------

def _diagram_cells():
    """(chapter, cell) for every code cell that draws with tinybert.diagrams."""
    from book.tools.chapters import chapters

    return [(chapter, cell) for chapter in chapters() for cell in chapter.read().cells
            if cell.cell_type == "code" and "tinybert.diagrams" in cell.source]


def test_every_diagram_cell_is_a_named_figure_with_a_caption_and_alt_text():
    import ast
    import re

    cells = _diagram_cells()
    names = []
    for chapter, cell in cells:
        where = f"{chapter.relpath}: {cell.source.splitlines()[-1]!r}"
        tags = cell.metadata.get("tags", [])
        assert {"diagram", "hide-input"} <= set(tags), f"{where}: tags {tags}"
        options = cell.metadata.get("mystnb", {})
        name = options.get("figure", {}).get("name", "")
        caption = options.get("figure", {}).get("caption", "").strip()
        alt = options.get("image", {}).get("alt", "").strip()
        assert re.fullmatch(r"fig-[a-z0-9-]+", name), f"{where}: figure name {name!r}"
        assert len(caption) >= 40, f"{where}: caption {caption!r}"
        assert len(alt) >= 80 and not re.fullmatch(r"\S*[/\\.]\S*", alt), f"{where}: {alt!r}"
        assert f"{{numref}}`{name}`" in chapter.path.read_text(), \
            f"{where}: the prose never cites {name}"
        # it only draws: no assert, so that it may stay out of the budget's fingerprint
        assert not any(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(
            cell.source))), f"{where}: a diagram cell holds an assert"
        names.append(name)
    assert len(names) == len(set(names)), f"a figure name is used twice: {sorted(names)}"
    assert len(names) >= 14, names
    numbers = {chapter.number for chapter, _ in cells}
    assert set(range(3, 15)) - {7, 9} | {16} <= numbers, sorted(numbers)


def test_the_diagram_tag_is_only_on_diagram_cells():
    from book.tools.chapters import chapters

    for chapter in chapters():
        for cell in chapter.read().cells:
            if "diagram" in cell.get("metadata", {}).get("tags", []):
                assert "from tinybert.diagrams import" in cell.source, chapter.relpath


def test_a_diagram_cell_does_not_change_the_chapters_budget_fingerprint(tmp_path):
    from book.tools import budget
    from book.tools.chapters import Chapter

    head = "---\nkernelspec:\n  display_name: Python 3\n  language: python\n" \
           "  name: python3\n---\n# Tiny\n\n```{code-cell} ipython3\nx = 1\n```\n"
    cell = ("\n```{code-cell} ipython3\n---\ntags: [diagram, hide-input]\n---\n"
            "from tinybert.diagrams import attention_diagram\n\n"
            "attention_diagram(1, 2, 3, 4)\n```\n")
    path = tmp_path / "01_tiny.md"
    path.write_text(head)
    before = budget.code_sha256(Chapter(path))
    path.write_text(head + cell)
    assert budget.code_sha256(Chapter(path)) == before
    path.write_text(head + cell.replace("diagram, ", ""))
    assert budget.code_sha256(Chapter(path)) != before  # untagged, it is code like any
