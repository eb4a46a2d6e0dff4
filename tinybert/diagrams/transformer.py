"""Hand-written (not generated): diagrams of the Transformer (chapter 06).

The encoder-decoder model drawn from a `TransformerConfig`, and one encoder layer with
its norms after (post-LN) and before (pre-LN) the sub-layers. Both are drawn bottom to
top, the way the data flows and the way the paper's Figure 1 is drawn.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from tinybert.diagrams.canvas import Box, Canvas

WIDTH = 2.3  # inches: the width of a sub-layer's box


def sublayer(
    c: Canvas, x: float, y: float, label: str, role: str, norm_first: bool
) -> tuple[float, Box]:
    """One sub-layer F with its residual connection and LayerNorm, entered at (x, y).

    post-LN: LN(x + F(x)); pre-LN: x + F(LN(x)). Returns the height where its output
    leaves and F's box (cross-attention draws its second input into it).
    """
    side = x - WIDTH / 2 - 0.22
    if norm_first:
        norm = c.box(x, y + 0.3, WIDTH * 0.6, 0.28, "LayerNorm", "norm", size=8)
        f = c.box(x, y + 0.83, WIDTH, 0.5, label, role)
        add = c.circle(x, y + 1.35, r=0.13)
        c.arrow((x, y), norm.bottom)
        c.arrow(norm.top, f.bottom)
        c.arrow(f.top, add.bottom)
        c.path([(x, y + 0.08), (side, y + 0.08), (side, add.y), add.left])
        return add.top[1], f
    f = c.box(x, y + 0.4, WIDTH, 0.5, label, role)
    norm = c.box(x, y + 1.0, WIDTH, 0.3, "Add & LayerNorm", "norm", size=8)
    c.arrow((x, y), f.bottom)
    c.arrow(f.top, norm.bottom)
    c.path([(x, y + 0.08), (side, y + 0.08), (side, norm.y), norm.left])
    return norm.top[1], f


def _stack(c, x, y, layers, norm_first, final_norm, title, side) -> tuple[float, list]:
    """A frame around one layer's sub-layers, its title and "× N" beside it; returns
    the top and the sub-layers' boxes."""
    step = 1.48 if norm_first else 1.15
    height = len(layers) * step + (len(layers) - 1) * 0.12 + 0.3
    c.frame(x - 0.1, y + height / 2, WIDTH + 0.75, height)
    top, boxes = y + 0.15, []
    for label, role in layers:
        top, f = sublayer(c, x, top, label, role, norm_first)
        boxes.append(f)
        top += 0.12
    c.text(x + side * (WIDTH / 2 + 0.9), y + height / 2, title, size=10, weight="bold")
    top = y + height
    if final_norm:
        norm = c.box(x, top + 0.35, WIDTH * 0.6, 0.28, "LayerNorm", "norm", size=8)
        c.arrow((x, top), norm.bottom)
        top = norm.top[1]
    return top, boxes


def _inputs(c, x, label, config, position_side) -> float:
    """Token ids -> scaled embedding + sinusoidal positions; returns the top."""
    tokens = c.box(x, 0.35, WIDTH, 0.38, label, size=9)
    embed = c.box(
        x,
        1.05,
        WIDTH,
        0.5,
        f"embedding (V = {config.vocab_size}, D = {config.d_model})\n× √D",
        "embedding",
        size=8,
    )
    plus = c.circle(x, 1.72)
    px = x + position_side * (WIDTH / 2 + 0.55)
    positions = c.box(
        px, 1.72, 0.95, 0.45, "sinusoidal\npositions", "embedding", size=8
    )
    c.arrow(tokens.top, embed.bottom)
    c.arrow(embed.top, plus.bottom)
    c.arrow(
        positions.left if position_side > 0 else positions.right,
        plus.right if position_side > 0 else plus.left,
    )
    return plus.top[1]


def transformer_diagram(config) -> Figure:
    """The encoder-decoder Transformer of a TransformerConfig: N encoder layers, N
    decoder layers with masked self-attention and cross-attention, embeddings shared
    with the output layer."""
    D, H, F, N = config.d_model, config.n_heads, config.d_ff, config.n_layers
    pre = config.norm_first
    c = Canvas(8.6, 12.0)
    final = config.uses_final_norm
    enc_x, dec_x = 2.55, 6.05
    attention = f"multi-head self-attention\nH = {H} heads, Dh = {D // H}"
    ffn = (f"feed-forward\n{D} → {F} → {D}", "feedforward")
    y = _inputs(c, enc_x, "source tokens (B, S)", config, -1)
    c.arrow((enc_x, y), (enc_x, y + 0.35))
    enc_top, _ = _stack(
        c,
        enc_x,
        y + 0.35,
        [(attention, "attention"), ffn],
        pre,
        final,
        f"encoder\n× N\n= {N}",
        -1,
    )
    y = _inputs(c, dec_x, "target tokens, shifted right (B, T)", config, 1)
    c.arrow((dec_x, y), (dec_x, y + 0.35))
    dec_top, (_, cross, _) = _stack(
        c,
        dec_x,
        y + 0.35,
        [
            (f"masked self-attention\n(causal), H = {H}", "attention"),
            ("cross-attention\nK, V from the encoder", "attention"),
            ffn,
        ],
        pre,
        final,
        f"decoder\n× N\n= {N}",
        1,
    )
    memory = c.box(enc_x, enc_top + 0.55, WIDTH, 0.42, f"memory (B, S, D = {D})")
    c.arrow((enc_x, enc_top), memory.bottom)
    c.path([memory.right, (4.3, memory.y), (4.3, cross.y), cross.left])
    linear = c.box(
        dec_x,
        dec_top + 0.5,
        WIDTH,
        0.45,
        f"linear {D} → {config.vocab_size}\n(weights = the embedding)",
        "head",
        size=8,
    )
    c.arrow((dec_x, dec_top), linear.bottom)
    softmax = c.box(dec_x, linear.y + 0.65, WIDTH, 0.32, "softmax", "head", size=8)
    c.arrow(linear.top, softmax.bottom)
    out = c.box(
        dec_x,
        softmax.y + 0.55,
        WIDTH,
        0.38,
        "next-token probabilities (B, T, V)",
        size=8,
    )
    c.arrow(softmax.top, out.bottom)
    return c.done(height=out.top[1] + 0.15)


def encoder_layer_diagram(d_model: int, n_heads: int, d_ff: int) -> Figure:
    """One encoder layer twice: post-LN (the paper, BERT) and pre-LN (GPT-2 and most
    later models)."""
    c = Canvas(8.4, 4.7)
    D, H, F = d_model, n_heads, d_ff
    layers = [
        (f"multi-head self-attention\nD = {D}, H = {H}", "attention"),
        (f"feed-forward\n{D} → {F} → {D}", "feedforward"),
    ]
    for x, pre, title, remark in (
        (2.1, False, "post-LN: x = LN(x + F(x))", "the paper, BERT"),
        (
            6.3,
            True,
            "pre-LN: x = x + F(LN(x))",
            "GPT-2; the stack ends with a LayerNorm",
        ),
    ):
        c.text(x, 4.5, title, size=10, weight="bold")
        c.note(x, 4.22, remark)
        c.box(x, 0.3, 1.6, 0.38, "x (B, T, D)")
        y = 0.49
        for label, role in layers:
            y, _ = sublayer(c, x, y, label, role, pre)
            y += 0.12
        c.arrow((x, y - 0.12), (x, y + 0.25))
        c.note(x + 0.25, y + 0.2, "(B, T, D)", ha="left")
    return c.done()
