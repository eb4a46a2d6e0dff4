"""Hand-written (not generated): diagrams of ALBERT (chapter 14).

Its factorised embeddings (a V × E table, then an E × D projection) against BERT's one
V × D table, its layers that share one set of weights, and sentence-order prediction
against BERT's next-sentence prediction. The sizes come from an `AlbertConfig`.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from tinybert.diagrams.canvas import Canvas


def _millions(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n < 1e7 else f"{n / 1e6:.1f}M"


def albert_embeddings_diagram(config) -> Figure:
    """BERT's V × D token table beside ALBERT's V × E table and E × D projection,
    the tables' widths drawn to scale."""
    V, E, D = config.vocab_size, config.embedding_size, config.d_model
    c = Canvas(9.0, 3.9)
    full = 1.8  # inches for a width of D
    c.text(2.0, 3.65, "one table of width D, as in BERT", size=10, weight="bold")
    c.box(
        2.0,
        1.85,
        full,
        2.6,
        f"token table\nV × D\n{V:,} × {D:,}\n\n{_millions(V * D)} numbers",
        "embedding",
    )
    c.text(
        6.2, 3.65, "ALBERT: a narrow table, then a projection", size=10, weight="bold"
    )
    narrow = max(full * E / D, 0.5)
    table = c.box(4.9 + narrow / 2, 1.85, narrow, 2.6, "V × E", "embedding", size=8)
    c.note(table.x, 0.3, f"{V:,} × {E}\n= {_millions(V * E)}")
    projection = c.box(
        7.55, 2.3, full, 0.5, f"P: E × D = {E} × {D}", "feedforward", size=8
    )
    c.note(7.55, 1.8, f"{_millions(E * D + D)} with its bias")
    c.arrow(table.right, projection.left)
    c.note(
        7.55,
        1.05,
        f"E = {E}, D = {D}: the table's product\nwith P is V × D of rank ≤ {E}",
    )
    c.note(
        7.55, 0.35, f"{_millions(V * D)} → {_millions(V * E + E * D + D)} parameters"
    )
    return c.done()


def albert_sharing_diagram(*configs) -> Figure:
    """For each config, its N depths and the G sets of weights they run: depth i runs
    set i·G // N. G = 1 is ALBERT, G = N is BERT."""
    N = max(config.n_layers for config in configs)
    height = 1.0 + 0.3 * N
    c = Canvas(3.3 * len(configs), height)
    for k, config in enumerate(configs):
        x0, G, n = 3.3 * k, config.n_groups, config.n_layers
        title = {1: "ALBERT", n: "as BERT"}.get(G, f"{G} groups")
        c.text(
            x0 + 1.65,
            height - 0.25,
            f"G = {G}, N = {n} ({title})",
            size=9,
            weight="bold",
        )
        y_of = [0.3 + 0.3 * i for i in range(n)]
        for i, y in enumerate(y_of):
            c.box(x0 + 0.75, y, 1.0, 0.24, f"depth {i}", "data", size=7)
        groups_top, groups_bottom = y_of[-1] + 0.12, y_of[0] - 0.12
        step = (groups_top - groups_bottom) / G
        for g in range(G):
            y = groups_bottom + step * (g + 0.5)
            c.box(
                x0 + 2.55,
                y,
                1.1,
                min(step - 0.08, 0.9),
                f"weights {g + 1}",
                "attention",
                size=7,
            )
        for i, y in enumerate(y_of):
            g = i * G // n
            c.arrow(
                (x0 + 1.25, y),
                (x0 + 2.0, groups_bottom + step * (g + 0.5)),
                color="#57606a",
            )
    return c.done()


def _pair(c: Canvas, x: float, y: float, first, second, label: str) -> None:
    """[CLS] first [SEP] second [SEP] -> label, one box per part."""
    parts = [("[CLS]", "data"), first, ("[SEP]", "data"), second, ("[SEP]", "data")]
    widths = [0.52, 0.8, 0.52, 0.8, 0.52]
    left = x
    for (text, role), w in zip(parts, widths):
        c.box(left + w / 2, y, w - 0.05, 0.36, text, role, size=8)
        left += w
    c.arrow((left + 0.05, y), (left + 0.3, y))
    c.text(left + 0.35, y, label, size=8, ha="left")


def _document(c: Canvas, x: float, y: float, label: str, role: str, n: int) -> None:
    c.note(x, y, label, ha="left")
    for i in range(n):
        c.box(x + 1.25 + 0.45 * i, y, 0.4, 0.3, str(i + 1), role, size=8)


def sop_nsp_diagram(config) -> Figure:
    """The two pair tasks on the same head (pooled [CLS], linear D -> 2): NSP's
    negative comes from another document, SOP's is the same two segments swapped."""
    c = Canvas(9.6, 3.9)
    a2, a3 = ("segment 2", "segment_a"), ("segment 3", "segment_a")
    other = ("other doc.", "segment_b")
    c.frame(2.4, 2.05, 4.6, 3.5, "next-sentence prediction (BERT)")
    _document(c, 0.35, 3.05, "a document:", "segment_a", 4)
    _document(c, 0.35, 2.65, "another one:", "segment_b", 3)
    _pair(c, 0.3, 1.95, a2, a3, "0: IsNext")
    _pair(c, 0.3, 1.25, a2, other, "1: NotNext")
    c.note(2.4, 0.6, "a random segment from another\ndocument: its topic gives it away")
    c.frame(7.2, 2.05, 4.6, 3.5, "sentence-order prediction (ALBERT)")
    _document(c, 5.15, 3.05, "a document:", "segment_a", 4)
    _pair(c, 5.1, 1.95, a2, a3, "0: in order")
    _pair(c, 5.1, 1.25, a3, a2, "1: swapped")
    c.note(7.2, 0.6, "the same two segments, swapped:\nonly their order tells")
    c.note(4.8, 0.12, f"both: the pooled [CLS] vector → linear {config.d_model} → 2")
    return c.done()
