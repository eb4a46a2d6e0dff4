"""Hand-written (not generated): diagrams of BERT's variants (chapters 12, 13 and 15).

What RoBERTa changes against BERT, how DistilBERT's student learns from its teacher,
and the four models of the family side by side. The sizes come from the models'
configurations, the loss weights from the distillation code's own defaults.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from tinybert.diagrams.canvas import Canvas


def _rows(bert, roberta):
    """(what, BERT, RoBERTa): the configurations' differences, then the training's."""
    p = roberta.pad_token_id
    same = f"N = {bert.n_layers}, D = {bert.d_model}, H = {bert.n_heads}"
    return [
        (
            "layers",
            same,
            f"N = {roberta.n_layers}, D = {roberta.d_model}, H = {roberta.n_heads}",
        ),
        (
            "vocabulary",
            f"WordPiece, V = {bert.vocab_size:,}",
            f"byte-level BPE, V = {roberta.vocab_size:,}",
        ),
        ("input", "[CLS] A [SEP] B [SEP]", "<s> consecutive sentences </s>"),
        (
            "segment table",
            f"{bert.type_vocab_size} rows (A, B)",
            f"{roberta.type_vocab_size} row",
        ),
        (
            "positions",
            f"{bert.max_len} rows: 0, 1, 2, …",
            f"{roberta.max_len} rows: {p + 1}, {p + 2}, … (padding: {p})",
        ),
        ("LayerNorm ε", f"{bert.layer_norm_eps:g}", f"{roberta.layer_norm_eps:g}"),
        ("objective", "masked LM + next sentence", "masked LM only"),
        ("masking", "static: once, when written", "dynamic: new at every use"),
    ]


def roberta_bert_diagram(bert_config, roberta_config) -> Figure:
    """BERT and RoBERTa row by row; a row is filled where the two differ."""
    rows = _rows(bert_config, roberta_config)
    c = Canvas(8.6, 0.55 + 0.45 * len(rows))
    top = 0.3 + 0.45 * len(rows)
    c.text(3.85, top, "BERT", size=10, weight="bold")
    c.text(6.75, top, "RoBERTa", size=10, weight="bold")
    for i, (what, bert, roberta) in enumerate(rows):
        y = top - 0.45 * (i + 1)
        role = "plain" if bert == roberta else "head"
        c.text(0.15, y, what, size=9, ha="left")
        c.box(3.85, y, 2.75, 0.36, bert, "plain", size=8)
        c.box(6.75, y, 2.75, 0.36, roberta, role, size=8)
    return c.done()


def distillation_diagram(
    teacher_config, student_config, temperature, alpha, beta, gamma
) -> Figure:
    """One distillation step: the frozen teacher and the student read the same
    masked batch; three losses, weighted and summed."""
    c = Canvas(10.2, 4.3)
    T = temperature
    batch = c.box(0.8, 2.15, 1.3, 0.6, "masked batch\n(B, T)")
    teacher = c.box(
        4.9,
        3.8,
        5.6,
        0.5,
        f"teacher: N = {teacher_config.n_layers} "
        f"layers, D = {teacher_config.d_model}; frozen, no gradient",
        "attention",
    )
    student = c.box(
        4.9,
        0.5,
        5.6,
        0.5,
        f"student: N = {student_config.n_layers} "
        f"layers, D = {student_config.d_model}; layers copied from the "
        "teacher",
        "feedforward",
    )
    c.path([batch.top, (batch.x, teacher.y), teacher.left])
    c.path([batch.bottom, (batch.x, student.y), student.left])
    losses = [
        (3.0, f"1 − cos($h_s$, $h_t$)\nat every real token\n× γ = {gamma:g}", True),
        (
            5.1,
            f"T² · KL(teacher ‖ student)\nsoftmax(z / T), T = {T:g}\n× α = {alpha:g}",
            True,
        ),
        (7.2, f"cross-entropy\nwith the hidden tokens\n× β = {beta:g}", False),
    ]
    boxes = []
    for x, label, from_teacher in losses:
        box = c.box(x, 2.15, 1.75, 0.8, label, "loss", size=8)
        boxes.append(box)
        c.arrow((x, student.top[1]), box.bottom)
        if from_teacher:
            c.arrow((x, teacher.bottom[1]), box.top)
    for a, b in zip(boxes, boxes[1:]):
        c.circle((a.right[0] + b.left[0]) / 2, 2.15, r=0.11, size=9)
    total = c.box(9.3, 2.15, 1.3, 0.6, "loss", "loss")
    c.arrow(boxes[-1].right, total.left)
    c.note(3.08, 3.25, "hidden vectors $h_t$", ha="left")
    c.note(5.18, 3.25, "logits $z_t$ at the masked positions", ha="left")
    c.note(3.08, 1.05, "$h_s$", ha="left")
    c.note(5.18, 1.05, "$z_s$", ha="left")
    c.note(7.28, 1.05, "$z_s$, T = 1", ha="left")
    return c.done()


def _column(c: Canvas, x: float, name, config, parameters, objective, most) -> None:
    """One model, bottom to top: its embeddings, its layers (the box's height grows
    with the number of distinct layers), its pretraining objective."""
    E = getattr(config, "embedding_size", config.d_model)
    distinct = getattr(config, "n_groups", config.n_layers)
    c.text(x, 4.45, name, size=10, weight="bold")
    c.note(x, 4.1, f"{parameters / 1e6:.0f}M parameters")
    table = (
        f"V × D\n{config.vocab_size:,} × {config.d_model}"
        if E == config.d_model
        else f"V × E, then E × D\n{config.vocab_size:,} × {E} → {config.d_model}"
    )
    c.box(x, 0.45, 2.1, 0.6, table, "embedding", size=8)
    layers = (
        f"{config.n_layers} layers"
        if distinct == config.n_layers
        else f"{config.n_layers} layers, {distinct} set of weights"
        if distinct == 1
        else f"{config.n_layers} layers, {distinct} sets"
    )
    height = 0.65 + 1.0 * distinct / most
    box = c.box(
        x,
        0.95 + height / 2,
        2.1,
        height,
        f"{layers}\nD = {config.d_model}, H = {config.n_heads}, F = {config.d_ff}",
        "attention",
        size=8,
    )
    head = c.box(x, 3.35, 2.1, 0.6, objective, "head", size=8)
    c.arrow((x, 0.75), box.bottom)
    c.arrow(box.top, head.bottom)


def family_diagram(models) -> Figure:
    """The family side by side; ``models`` holds (name, config, parameters,
    pretraining objective) for each."""
    c = Canvas(2.4 * len(models) + 0.2, 4.7)
    most = max(getattr(m[1], "n_groups", m[1].n_layers) for m in models)
    for i, (name, config, parameters, objective) in enumerate(models):
        _column(c, 1.3 + 2.4 * i, name, config, parameters, objective, most)
    return c.done()
