"""Hand-written (not generated): diagrams of the four fine-tuning set-ups (chapter 10).

The same encoder under four heads, as in Figure 4 of the BERT paper: a sentence or a
pair classified from [CLS], a tag for every token, and the start and end of an answer
span. Each figure draws the tokens of a real example, the encoder's sizes from its
configuration and the head's number of outputs.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from tinybert.diagrams.bert import column_width, token_row
from tinybert.diagrams.canvas import Canvas

LIMIT = 13  # columns: longer inputs keep their start and their last token
X0 = 0.3


def shorten(tokens, segments, labels=None, limit: int = LIMIT):
    """At most ``limit`` columns: the first tokens, "…", the last one."""
    labels = list(labels) if labels is not None else [None] * len(tokens)
    if len(tokens) <= limit:
        return list(tokens), list(segments), labels
    keep = list(range(limit - 2)) + [len(tokens) - 1]
    cut = keep[:-1] + [None] + keep[-1:]
    return (
        [tokens[i] if i is not None else "…" for i in cut],
        [segments[i if i is not None else limit - 3] for i in cut],
        [labels[i] if i is not None else None for i in cut],
    )


def _encoder(config, tokens, segments, reads, height=4.4):
    """Tokens, the encoder and its output vectors; the head reads the columns in
    ``reads`` (the others are drawn dashed). Returns the canvas and the columns."""
    width = column_width(tokens)
    c = Canvas(X0 + len(tokens) * width + 0.3, height)
    xs = token_row(c, 0.35, tokens, segments, width, X0)
    mid, span = X0 + len(tokens) * width / 2, len(tokens) * width - 0.08
    encoder = c.box(
        mid,
        1.2,
        span,
        0.6,
        f"pretrained encoder: N = {config.n_layers} "
        f"layers, D = {config.d_model}, H = {config.n_heads}",
        "attention",
    )
    c.arrow((mid, 0.54), encoder.bottom)
    for i, (x, token) in enumerate(zip(xs, tokens)):
        if token == "…":
            continue
        c.box(x, 2.05, width - 0.2, 0.34, "h", "data", size=8, dashed=i not in reads)
        c.arrow((x, encoder.top[1]), (x, 1.88))
    return c, xs


def _classifier(config, tokens, segments, n_labels, label, task) -> Figure:
    tokens, segments, _ = shorten(tokens, segments)
    c, xs = _encoder(config, tokens, segments, reads={0})
    x = xs[0] + 0.55
    pooler = c.box(x, 2.9, 1.5, 0.42, "pooler tanh(W h + b)", "head", size=8)
    head = c.box(
        x, 3.55, 1.5, 0.42, f"linear {config.d_model} → {n_labels}", "head", size=8
    )
    c.path([(xs[0], 2.22), (xs[0], 2.5), (x, 2.5), pooler.bottom])
    c.arrow(pooler.top, head.bottom)
    said = f": {label}" if label is not None else ""
    c.note(x + 0.85, 3.55, f"{n_labels} scores, one per {task}{said}", ha="left")
    c.note(
        x + 0.85, 2.9, "reads [CLS] only: its vector summarises the input", ha="left"
    )
    return c.done(height=3.95)


def sentence_classification_diagram(
    config, tokens, segments, n_labels: int, label=None
) -> Figure:
    """[CLS] text [SEP] -> the pooled [CLS] vector -> one score per class."""
    return _classifier(config, tokens, segments, n_labels, label, "class")


def sentence_pair_diagram(
    config, tokens, segments, n_labels: int, label=None
) -> Figure:
    """[CLS] A [SEP] B [SEP] -> the pooled [CLS] vector -> one score per class."""
    return _classifier(config, tokens, segments, n_labels, label, "class of the pair")


def token_classification_diagram(
    config, tokens, segments, n_labels: int, labels
) -> Figure:
    """Every token's vector -> one score per tag; ``labels`` holds each token's tag, or
    None where the token carries no label (special tokens, later pieces of a word)."""
    tokens, segments, labels = shorten(tokens, segments, labels)
    reads = {i for i, label in enumerate(labels) if label is not None}
    c, xs = _encoder(config, tokens, segments, reads, height=4.0)
    mid = (xs[0] + xs[-1]) / 2
    head = c.box(
        mid,
        2.9,
        xs[-1] - xs[0] + 0.5,
        0.5,
        f"the same linear {config.d_model} → {n_labels} at every token;\n"
        "a word's tag is read from its first piece",
        "head",
        size=8,
    )
    for x, label in zip(xs, labels):
        if label is not None:
            c.arrow((x, 2.22), (x, head.bottom[1]))
            c.arrow((x, head.top[1]), (x, 3.5))
            c.text(x, 3.7, label, size=8, weight="bold")
    return c.done()


def span_diagram(config, tokens, segments, start: int, end: int) -> Figure:
    """Every paragraph token's vector -> a start score and an end score; the answer
    runs from the best start to the best end."""
    tokens, segments, _ = shorten(tokens, segments, limit=max(LIMIT, end + 3))
    paragraph = {
        i
        for i, (token, s) in enumerate(zip(tokens, segments))
        if s == 1 and token not in ("[SEP]", "…")
    }
    c, xs = _encoder(config, tokens, segments, paragraph, height=4.2)
    first, last = xs[min(paragraph)], xs[-1]
    head = c.box(
        (first + last) / 2,
        2.92,
        last - first + 0.5,
        0.6,
        f"linear {config.d_model} → 2 at each paragraph token:\n"
        "a start and an end score;\nsoftmax over the positions",
        "head",
        size=8,
    )
    for i in paragraph:
        c.arrow((xs[i], 2.22), (xs[i], head.bottom[1]))
    marks = {start: "start and end"} if start == end else {start: "start", end: "end"}
    for i, word in marks.items():
        c.arrow((xs[i], head.top[1]), (xs[i], 3.8))
        c.text(xs[i], 4.0, word, size=8, weight="bold")
    return c.done()
