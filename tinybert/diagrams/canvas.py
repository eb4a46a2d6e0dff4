"""Hand-written (not generated): the drawing vocabulary of the course's diagrams.

A `Canvas` is a white figure whose coordinates are inches, and it knows four things:
boxes with a label, arrows (straight or along a path), free text, and frames that group
boxes into a panel. The diagram modules beside this one draw with nothing else, so that
every figure of the book has the same look: dark ink on white, one pale fill per kind
of part (data, embeddings, attention, feed-forward, norms, heads, losses), readable in
the site's light and dark themes alike.

The figures are `Diagram`s, matplotlib Figures that pyplot never sees: nothing is
shown or kept open behind the caller's back, and a notebook displays one as a PNG when
a cell returns it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

INK = "#1f2328"  # lines and text
MUTED = "#57606a"  # shapes and notes beside the boxes
PAPER = "white"
FILL = {
    "data": "#eef1f4",
    "embedding": "#d8e7fb",
    "attention": "#fbe5b6",
    "feedforward": "#d3f0de",
    "norm": "#e7dcf8",
    "head": "#fcd9c6",
    "loss": "#f7cfd5",
    "segment_a": "#d8e7fb",
    "segment_b": "#fbe5b6",
    "frame": "#f8f9fa",
    "plain": "white",
}
SIZE = 10  # points: the text inside boxes
DPI = 150  # sharp on high-density screens; the page scales the image to its width


@dataclass(frozen=True)
class Box:
    """A drawn box: centre (x, y), width w and height h, in inches."""

    x: float
    y: float
    w: float
    h: float

    @property
    def top(self) -> tuple[float, float]:
        return (self.x, self.y + self.h / 2)

    @property
    def bottom(self) -> tuple[float, float]:
        return (self.x, self.y - self.h / 2)

    @property
    def left(self) -> tuple[float, float]:
        return (self.x - self.w / 2, self.y)

    @property
    def right(self) -> tuple[float, float]:
        return (self.x + self.w / 2, self.y)


class Diagram(Figure):
    """A Figure that a notebook shows as a PNG by itself: pyplot never sees it, so it
    does not wait for the inline backend, and nothing stays open."""

    def _repr_png_(self) -> bytes:
        png = io.BytesIO()
        self.savefig(
            png,
            format="png",
            facecolor=self.get_facecolor(),
            bbox_inches="tight",
            pad_inches=0.05,
        )
        return png.getvalue()


class Canvas:
    """A white figure ``width`` x ``height`` inches, drawn in inches from the lower
    left."""

    def __init__(self, width: float, height: float):
        self.figure = Diagram(figsize=(width, height), dpi=DPI, facecolor=PAPER)
        self.ax = self.figure.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(0, height)
        self.ax.set_axis_off()

    def box(self, x, y, w, h, label="", role="data", size=SIZE, dashed=False) -> Box:
        """A rounded box centred at (x, y) with ``label`` in its middle."""
        patch = FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.06",
            facecolor=FILL[role],
            edgecolor=INK,
            linewidth=1.0,
            linestyle="--" if dashed else "-",
        )
        self.ax.add_patch(patch)
        if label:
            self.text(x, y, label, size=size)
        return Box(x, y, w, h)

    def frame(self, x, y, w, h, title="", size=SIZE) -> Box:
        """A pale dashed panel that groups boxes, its ``title`` inside its top edge."""
        box = self.box(x, y, w, h, role="frame", dashed=True)
        if title:  # its lines' height in inches, below a small margin
            height = (title.count("\n") + 1) * size * 1.25 / 72
            self.text(x, y + h / 2 - 0.1 - height / 2, title, size=size, weight="bold")
        return box

    def circle(self, x, y, label="+", r=0.15, size=SIZE + 2) -> Box:
        """A small circle with an operator in it (+ for a sum, × for a product)."""
        self.ax.add_patch(Circle((x, y), r, facecolor=PAPER, edgecolor=INK, lw=1.0))
        self.text(x, y, label, size=size)
        return Box(x, y, 2 * r, 2 * r)

    def text(self, x, y, label, size=SIZE, color=INK, ha="center", weight="normal"):
        self.ax.text(
            x,
            y,
            label,
            ha=ha,
            va="center",
            fontsize=size,
            color=color,
            fontweight=weight,
            linespacing=1.25,
        )

    def note(self, x, y, label, size=SIZE - 1, ha="center"):
        """Small grey text: a shape, a size, a remark."""
        self.text(x, y, label, size=size, color=MUTED, ha=ha)

    def arrow(self, start, end, dashed=False, color=INK):
        """A straight arrow from ``start`` to ``end`` (points in inches)."""
        self.ax.add_patch(
            FancyArrowPatch(
                start,
                end,
                arrowstyle="-|>",
                mutation_scale=11,
                color=color,
                linewidth=1.1,
                linestyle="--" if dashed else "-",
                shrinkA=0,
                shrinkB=0,
            )
        )

    def path(self, points, dashed=False, color=INK):
        """Straight segments through ``points``; an arrowhead on the last one."""
        xs, ys = zip(*points[:-1])
        self.ax.plot(
            xs,
            ys,
            color=color,
            linewidth=1.1,
            linestyle="--" if dashed else "-",
            solid_capstyle="butt",
        )
        self.arrow(points[-2], points[-1], dashed=dashed, color=color)

    def done(self, height: float | None = None) -> Figure:
        """The figure, cut to ``height`` inches when the content ends lower."""
        if height is not None:
            self.figure.set_size_inches(self.figure.get_figwidth(), height)
            self.ax.set_ylim(0, height)
        return self.figure


def shape(letters: str, sizes) -> str:
    """``shape("B, T, D", (1, 11, 768))`` -> "(B, T, D) = (1, 11, 768)"."""
    return f"({letters}) = ({', '.join(str(s) for s in sizes)})"
