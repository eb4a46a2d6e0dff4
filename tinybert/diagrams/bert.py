"""Hand-written (not generated): diagrams of BERT (chapters 08 and 09).

BERT's input embeddings for a tokenized pair, and the two pretraining heads on top of
the encoder. Both take the configuration and the tokens a chapter has, so the table
sizes and the tokens in the figure are the model's.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from tinybert.diagrams.canvas import Canvas

LEFT = 2.1  # inches: the column of row labels


def column_width(labels) -> float:
    """Wide enough for the longest label at the tokens' font size."""
    return max(0.62, 0.075 * max(len(label) for label in labels) + 0.18)


def token_row(c: Canvas, y: float, tokens, segments, width: float, x0: float = LEFT):
    """One box per token, filled by segment (A or B); returns the columns' centres."""
    xs = [x0 + width * (i + 0.5) for i in range(len(tokens))]
    for x, token, segment in zip(xs, tokens, segments):
        c.box(
            x, y, width - 0.08, 0.38, token, ("segment_a", "segment_b")[segment], size=8
        )
    return xs


def bert_input_diagram(config, tokens, token_ids, segments) -> Figure:
    """x_t = LayerNorm(E_token[w_t] + E_segment[s_t] + E_position[t]), one column per
    token of the pair."""
    n = len(tokens)
    width = column_width([*tokens, *(f"E[{i}]" for i in token_ids)])
    c = Canvas(LEFT + n * width + 0.15, 4.0)
    xs = token_row(c, 3.55, tokens, segments, width)
    D = config.d_model
    rows = [
        (
            f"token embeddings\n({config.vocab_size} × {D})",
            [f"E[{i}]" for i in token_ids],
            "embedding",
        ),
        (
            f"segment embeddings\n({config.type_vocab_size} × {D})",
            [("$E_A$", "$E_B$")[s] for s in segments],
            None,
        ),
        (
            f"position embeddings\n({config.max_len} × {D})",
            [f"$E_{{{t}}}$" for t in range(n)],
            "embedding",
        ),
    ]
    c.text(LEFT / 2, 3.55, "input", size=9, weight="bold")
    for r, (header, cells, role) in enumerate(rows):
        y = 2.75 - 0.75 * r
        c.text(LEFT / 2, y, header, size=8)
        if r:
            c.text(LEFT - 0.1, y + 0.375, "+", size=12, weight="bold")
        for x, label, segment in zip(xs, cells, segments):
            fill = role or ("segment_a", "segment_b")[segment]
            c.box(x, y, width - 0.08, 0.42, label, fill, size=8)
    bar = c.box(
        LEFT + n * width / 2,
        0.4,
        n * width - 0.08,
        0.45,
        f"sum → LayerNorm → dropout:  x  (B, T, D) = (1, {n}, {D})",
        "norm",
    )
    c.text(LEFT - 0.1, 0.4, "=", size=12, weight="bold")
    for x in xs:
        c.arrow((x, 1.25 - 0.21), (x, bar.top[1]))
    return c.done()


def pretraining_heads_diagram(config, tokens, segments, targets: dict) -> Figure:
    """The encoder with BERT's two heads: the masked-LM head at the masked positions
    (``targets``: position -> the hidden token), the next-sentence head on [CLS]."""
    n, width, x0 = len(tokens), column_width(tokens), 1.75
    c = Canvas(x0 + n * width + 0.15, 5.4)
    xs = token_row(c, 0.35, tokens, segments, width, x0)
    mid, span = x0 + n * width / 2, n * width - 0.08
    D = config.d_model
    embed = c.box(
        mid,
        1.15,
        span,
        0.42,
        f"input embeddings: token + segment + position, LayerNorm  →  (B, T, D = {D})",
        "embedding",
    )
    encoder = c.box(
        mid,
        2.0,
        span,
        0.55,
        f"encoder: N = {config.n_layers} layers, "
        f"D = {D}, H = {config.n_heads}, F = {config.d_ff}",
        "attention",
    )
    c.arrow((mid, 0.54), embed.bottom)
    c.arrow(embed.top, encoder.bottom)
    for t, x in enumerate(xs):
        c.box(x, 2.8, width - 0.2, 0.34, f"$h_{{{t}}}$", "data", size=8)
        c.arrow((x, encoder.top[1]), (x, 2.63))
    _nsp_head(c, xs[0], D)
    _mlm_head(c, xs, width, targets, config)
    return c.done()


def _nsp_head(c: Canvas, cls: float, D: int) -> None:
    """Left of the tokens: the pooler and the next-sentence layer, fed by [CLS]."""
    pooler = c.box(0.8, 3.75, 1.4, 0.45, "pooler\ntanh(W h + b)", "head", size=8)
    nsp = c.box(0.8, 4.55, 1.4, 0.45, f"next sentence\nlinear {D} → 2", "head", size=8)
    c.path([(cls, 2.97), (cls, 3.25), (pooler.x, 3.25), pooler.bottom])
    c.arrow(pooler.top, nsp.bottom)
    c.note(nsp.x, 5.1, "IsNext (0) or NotNext (1)")


def _mlm_head(c: Canvas, xs, width: float, targets: dict, config) -> None:
    """Over every column, fed by the masked positions only."""
    head = c.box(
        (xs[0] + xs[-1]) / 2,
        3.95,
        xs[-1] - xs[0] + width - 0.08,
        0.75,
        "masked-LM head, at the masked positions only:\n"
        f"dense {config.d_model} → {config.d_model}, GELU, LayerNorm, "
        f"× Eᵀ (tied) + c\n→ V = {config.vocab_size} scores",
        "head",
        size=8,
    )
    for position, token in sorted(targets.items()):
        x = xs[position]
        c.arrow((x, 2.97), (x, head.bottom[1]))
        c.arrow((x, head.top[1]), (x, 4.75))
        c.note(x, 4.95, f"target: {token}")
