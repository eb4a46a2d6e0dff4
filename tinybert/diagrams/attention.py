"""Hand-written (not generated): diagrams of attention (chapters 03-05).

Scaled dot-product attention with its shapes, multi-head attention with its heads, and
the three ways a position can enter a Transformer. Every size printed in a figure is
an argument, so a chapter draws the tensors it has just built.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from tinybert.diagrams.canvas import Canvas


def attention_diagram(batch: int, queries: int, keys: int, d_head: int) -> Figure:
    """softmax(Q Kᵀ / √Dh) V, left to right: each step and the shape of its result."""
    c = Canvas(10.0, 3.4)
    B, T, S, Dh = batch, queries, keys, d_head
    q = c.box(0.85, 2.45, 1.5, 0.6, f"Q  (B, T, Dh)\n({B}, {T}, {Dh})")
    k = c.box(0.85, 1.5, 1.5, 0.6, f"K  (B, S, Dh)\n({B}, {S}, {Dh})")
    v = c.box(0.85, 0.45, 1.5, 0.6, f"V  (B, S, Dh)\n({B}, {S}, {Dh})")
    row, steps = (
        1.95,
        [
            ("MatMul\n$QK^\\top$", "attention", f"scores (B, T, S)\n({B}, {T}, {S})"),
            (f"Scale\n÷ √Dh = ÷ √{Dh}", "attention", "keeps the scores'\nspread ≈ 1"),
            ("Mask\nFalse → −∞", "attention", "True = may\nattend"),
            ("Softmax\nover S", "attention", f"weights (B, T, S)\nrows sum to 1"),
            (
                "MatMul\nweights · V",
                "attention",
                f"output (B, T, Dh)\n({B}, {T}, {Dh})",
            ),
        ],
    )
    boxes = []
    for i, (label, role, result) in enumerate(steps):
        x = 2.45 + 1.42 * i
        boxes.append(c.box(x, row, 1.15, 0.62, label, role))
        c.note(x, row + 0.68, result)
    c.arrow(q.right, (boxes[0].left[0], row + 0.12))
    c.arrow(k.right, (boxes[0].left[0], row - 0.12))
    for a, b in zip(boxes, boxes[1:]):
        c.arrow(a.right, b.left)
    mask = c.box(
        boxes[2].x, 0.95, 1.35, 0.5, "mask, bool\n→ (B, T, S)", "data", dashed=True
    )
    c.arrow(mask.top, boxes[2].bottom, dashed=True)
    last = boxes[-1]
    c.path([v.right, (last.x, v.y), last.bottom])
    out = c.box(9.4, row, 0.9, 0.5, "output", "data")
    c.arrow(last.right, out.left)
    c.note(
        0.1,
        3.2,
        f"B = {B} sequences, T = {T} queries, S = {S} keys, "
        f"Dh = {Dh} features per query and key",
        ha="left",
    )
    return c.done()


def multihead_attention_diagram(
    d_model: int, n_heads: int, batch: int, length: int
) -> Figure:
    """Project, split into H heads of Dh = D / H, attend in every head, merge,
    project with Wᴼ."""
    c = Canvas(10.0, 4.0)
    B, T, D, H, Dh = batch, length, d_model, n_heads, d_model // n_heads
    mid = 1.95
    x = c.box(0.7, mid, 1.1, 0.75, f"x\n(B, T, D)\n({B}, {T}, {D})")
    projections = [
        c.box(2.25, mid + dy, 1.2, 0.56, f"{name}\n{D} → {D}", "feedforward")
        for dy, name in ((0.85, "$W^Q$"), (0.0, "$W^K$"), (-0.85, "$W^V$"))
    ]
    for p in projections:
        c.arrow(x.right, p.left)
    split = c.box(3.85, mid, 1.2, 2.5, f"split\ninto H = {H}\nheads", "data")
    for p in projections:
        c.arrow(p.right, (split.left[0], p.y))
    c.note(3.85, 0.35, f"(B, T, D) → (B, H, T, Dh)\n= ({B}, {H}, {T}, {Dh})")
    shown = list(range(H)) if H <= 4 else [0, 1, None, H - 1]
    heads = []
    for i, h in enumerate(shown):
        y = mid + 1.0 - 2.0 * i / (len(shown) - 1) if len(shown) > 1 else mid
        if h is None:
            c.text(5.55, y, "⋮", size=14)
            continue
        heads.append(
            c.box(
                5.55,
                y,
                1.6,
                0.48,
                f"head {h + 1}: attention\nQ, K, V of width {Dh}",
                "attention",
                size=8,
            )
        )
    for head in heads:
        c.arrow((split.right[0], head.y), head.left)
    merge = c.box(7.25, mid, 1.15, 2.5, "merge\n(concat\nthe heads)", "data")
    for head in heads:
        c.arrow(head.right, (merge.left[0], head.y))
    c.note(7.25, 0.35, f"(B, H, T, Dh) → (B, T, D)\n= ({B}, {T}, {D})")
    out_proj = c.box(8.55, mid, 0.9, 0.6, f"$W^O$\n{D} → {D}", "feedforward")
    c.arrow(merge.right, out_proj.left)
    out = c.box(9.55, mid, 0.75, 0.75, "output\n(B, T, D)")
    c.arrow(out_proj.right, out.left)
    c.note(
        0.1,
        3.75,
        f"D = {D}, H = {H}, Dh = D / H = {Dh}: one {D} × {D} matrix "
        f"holds the {H} heads' projections side by side",
        ha="left",
    )
    return c.done()


def positional_encoding_diagram(d_model: int, n_heads: int) -> Figure:
    """Where the position signal enters: added to the embeddings, added to the
    scores as a relative bias, or applied to queries and keys as a rotation."""
    c = Canvas(10.5, 3.9)
    D, H, Dh = d_model, n_heads, d_model // n_heads
    _added_to_embeddings(c, 1.75, D)
    _relative_bias(c, 5.25, H)
    _rotary(c, 8.75, H, Dh)
    return c.done()


def _added_to_embeddings(c: Canvas, x: float, D: int) -> None:
    c.frame(x, 1.95, 3.3, 3.7, "sinusoidal or learned:\nadded to the embeddings")
    tokens = c.box(x - 0.7, 0.55, 1.5, 0.45, "token ids (B, T)")
    embed = c.box(x - 0.7, 1.45, 1.5, 0.5, f"embedding\n(B, T, D = {D})", "embedding")
    positions = c.box(x + 0.85, 1.45, 1.2, 0.5, f"PE  (T, D = {D})", "embedding")
    plus = c.circle(x - 0.7, 2.25)
    layers = c.box(x - 0.7, 2.95, 1.5, 0.45, "the layers", "attention")
    c.arrow(tokens.top, embed.bottom)
    c.arrow(embed.top, plus.bottom)
    c.path([positions.top, (positions.x, plus.y), plus.right])
    c.arrow(plus.top, layers.bottom)
    c.note(x + 0.85, 0.65, "once, at\nthe input")


def _relative_bias(c: Canvas, x: float, H: int) -> None:
    c.frame(x, 1.95, 3.3, 3.7, "relative bias:\nadded to the scores")
    scores = c.box(
        x - 0.6, 0.6, 1.7, 0.55, f"q · k / √Dh\n(B, H = {H}, T, S)", "attention"
    )
    bias = c.box(x + 0.95, 1.45, 1.2, 0.55, f"b[j − i]\n(H = {H}, T, S)", "embedding")
    plus = c.circle(x - 0.6, 1.45)
    softmax = c.box(x - 0.6, 2.35, 1.5, 0.45, "softmax", "attention")
    c.arrow(scores.top, plus.bottom)
    c.arrow(bias.left, plus.right)
    c.arrow(plus.top, softmax.bottom)
    c.note(x, 3.05, "in every attention layer;\ndepends on the distance j − i")


def _rotary(c: Canvas, x: float, H: int, Dh: int) -> None:
    c.frame(x, 1.95, 3.3, 3.7, "RoPE: queries and keys\nrotated by their positions")
    q = c.box(
        x - 0.8,
        0.6,
        1.35,
        0.55,
        f"q at position m\n(B, {H}, T, {Dh})",
        "attention",
        size=8,
    )
    k = c.box(
        x + 0.8,
        0.6,
        1.35,
        0.55,
        f"k at position n\n(B, {H}, S, {Dh})",
        "attention",
        size=8,
    )
    rq = c.box(x - 0.8, 1.55, 1.35, 0.5, "rotate by $m\\theta_i$", "embedding", size=8)
    rk = c.box(x + 0.8, 1.55, 1.35, 0.5, "rotate by $n\\theta_i$", "embedding", size=8)
    dot = c.box(
        x, 2.45, 1.6, 0.45, "q · k: depends on\nm − n only", "attention", size=8
    )
    for a, b in ((q, rq), (k, rk)):
        c.arrow(a.top, b.bottom)
    c.arrow(rq.top, (dot.left[0] + 0.2, dot.bottom[1]))
    c.arrow(rk.top, (dot.right[0] - 0.2, dot.bottom[1]))
    c.note(
        x, 3.05, f"{Dh // 2} planes of 2 features per head,\none angle $\\theta_i$ each"
    )
