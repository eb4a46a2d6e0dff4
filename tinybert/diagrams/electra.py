"""Hand-written (not generated): the diagram of ELECTRA (chapter 16).

Replaced-token detection: a small generator (a masked language model) fills the masked
positions with samples, and the discriminator labels every token of the result original
or replaced. The sizes come from the two `ElectraConfig`s; the tokens, the masked
positions and the samples from the caller.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from tinybert.diagrams.canvas import Canvas


def electra_diagram(generator, discriminator, tokens, samples, weight=50.0) -> Figure:
    """The generator and the discriminator of replaced-token detection.

    ``tokens`` are the original tokens, ``samples`` maps each masked position to the
    generator's sample there; a sample equal to the original is labelled original.
    """
    n = len(tokens)
    step = 1.0
    left = 2.35
    width = left + step * n + 2.6
    c = Canvas(width, 6.1)
    xs = [left + step * (i + 0.5) for i in range(n)]
    row = {"text": 0.45, "masked": 1.25, "sampled": 3.15, "label": 5.2}

    def tokens_row(y, words, roles, size=8):
        for x, word, role in zip(xs, words, roles):
            c.box(x, y, step - 0.1, 0.36, word, role, size=size)

    masked = ["[MASK]" if i in samples else t for i, t in enumerate(tokens)]
    sampled = [samples.get(i, t) for i, t in enumerate(tokens)]
    replaced = [s != t for s, t in zip(sampled, tokens)]
    tokens_row(row["text"], tokens, ["data"] * n)
    tokens_row(
        row["masked"], masked, ["head" if i in samples else "data" for i in range(n)]
    )
    tokens_row(row["sampled"], sampled, ["loss" if r else "data" for r in replaced])
    tokens_row(
        row["label"],
        ["replaced" if r else "original" for r in replaced],
        ["loss" if r else "feedforward" for r in replaced],
        size=7,
    )
    for x in xs:
        c.arrow((x, row["text"] + 0.18), (x, row["masked"] - 0.18))
    middle = left + step * n / 2
    body = step * n - 0.1
    g = c.box(
        middle,
        2.2,
        body,
        0.62,
        f"generator (a small MLM): N = {generator.n_layers}, "
        f"D = {generator.d_model}, H = {generator.n_heads}",
        "attention",
        size=8,
    )
    d = c.box(
        middle,
        4.2,
        body,
        0.62,
        f"discriminator: N = {discriminator.n_layers}, "
        f"D = {discriminator.d_model}, H = {discriminator.n_heads}",
        "attention",
        size=8,
    )
    for x in xs:
        c.arrow((x, row["masked"] + 0.18), (x, g.bottom[1]))
        c.arrow((x, g.top[1]), (x, row["sampled"] - 0.18))
        c.arrow((x, row["sampled"] + 0.18), (x, d.bottom[1]))
        c.arrow((x, d.top[1]), (x, row["label"] - 0.18))
    c.note(1.1, row["text"], "the text", size=8)
    c.note(1.1, row["masked"], "masked\n(15%)", size=8)
    c.note(1.1, row["sampled"], "samples at\nthe masks", size=8)
    c.note(1.1, row["label"], "label of\nevery token", size=8)
    shared = c.box(
        1.1,
        2.2,
        1.7,
        0.62,
        f"shared tables\nV × E = {generator.vocab_size} × {generator.embedding_size}",
        "embedding",
        size=7,
    )
    c.arrow(shared.right, g.left, dashed=True)
    x_up = (shared.right[0] + g.left[0]) / 2  # between the tables and the encoders
    c.path(
        [
            (shared.right[0], shared.y + 0.15),
            (x_up, shared.y + 0.15),
            (x_up, d.y),
            d.left,
        ],
        dashed=True,
    )
    right = left + step * n + 1.3
    c.box(right, 2.65, 2.3, 0.62, "MLM loss at the\nmasked positions", "loss", size=8)
    c.box(
        right,
        4.7,
        2.3,
        0.62,
        f"λ · binary CE at\nevery token, λ = {weight:g}",
        "loss",
        size=8,
    )
    c.note(right, 3.65, "no gradient flows\nthrough the samples", size=8)
    c.note(
        middle, 5.8, "the discriminator is kept; the generator is thrown away", size=8
    )
    return c.done()
