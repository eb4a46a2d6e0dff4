"""Hand-written (not generated): the quizzes that end each chapter, with
immediate feedback.

A chapter's last cell builds its quiz and shows it::

    quiz = Quiz("ch03", [
        choice("Which axis does the softmax normalise?", ["queries", "keys"],
               answer="b"),
        number("The weight of *Thinking* on itself, to 3 decimals?", answer=0.881,
               decimals=3),
    ])
    quiz

In a notebook, answer with ``quiz.check(2, 0.881)``: it says at once whether the answer
is right. On the website the same quiz is a form that gives the feedback in the browser,
offline (``book/_ext/static/quiz.js``). Neither keeps the answer itself: a question
stores a short fingerprint of its correct answer, salted with the quiz and question, and
an attempt is right when its fingerprint matches. The student edition
(``book/tools/editions.py``) writes the fingerprint into the cell in place of the
answer, so the notebook a student gets does not contain the answers in plain text. A
number is right when it rounds to the answer at the requested decimals, or to one unit
of the last decimal next to it.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

__all__ = ["Quiz", "Question", "choice", "number", "fingerprint", "fnv1a"]

LETTERS = "abcdefgh"


def fnv1a(data: bytes) -> int:
    """The 32-bit FNV-1a hash of ``data``."""
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def fingerprint(quiz: str, index: int, canonical: str) -> str:
    """FNV-1a of ``quiz/index/canonical`` (UTF-8) as 8 hex digits; quiz.js has its twin.

    Not a secret (a multiple-choice answer can be found by trying): it keeps the answer
    out of plain sight.
    """
    return f"{fnv1a(f'{quiz}/{index}/{canonical}'.encode('utf-8')):08x}"


def _as_numbers(attempt) -> list[float]:
    """The numbers an attempt can mean: a number, a one-element tensor or array, or
    text ("0.881", "88.1%" for 88.1, "1,234.5"; with one comma and no point, both
    readings: "0,881" and "1,5" as decimal commas, "1,234" also as 1234)."""
    if hasattr(attempt, "item"):  # torch.tensor(0.881), np.float64(0.881)
        try:
            attempt = attempt.item()
        except (ValueError, RuntimeError):  # more than one element
            return []
    if isinstance(attempt, (int, float)) and not isinstance(attempt, bool):
        return [float(attempt)]
    text = str(attempt).strip().rstrip("%").replace(" ", "")
    readings = [text.replace(",", "")]
    if text.count(",") == 1 and "." not in text:
        readings.append(text.replace(",", "."))
    numbers = []
    for reading in readings:
        try:
            numbers.append(float(reading))
        except ValueError:
            pass
    return numbers


def _canonical_number(value: float, decimals: int) -> str:
    text = f"{float(value):.{decimals}f}"
    return "0" + text[2:] if text.startswith("-0") and not text.strip("-0.") else text


@dataclass
class Question:
    """One question: a multiple choice (``options``) or a number (``decimals``)."""

    prompt: str
    options: tuple[str, ...] = ()
    decimals: int | None = None
    answer: str | float | None = None  # the plain answer, in the chapter's own edition
    digest: str | None = None  # its fingerprint, in the student edition
    explain: str = ""  # shown after a right answer

    @property
    def kind(self) -> str:
        return "choice" if self.options else "number"

    def canonical(self, attempt) -> list[str]:
        """The forms of ``attempt`` whose fingerprint is compared (several for
        a number)."""
        if self.kind == "choice":
            # "b", "B", "(b)" and "b)" as the quiz prints its options, or 2
            text = str(attempt).strip().lower().lstrip("(").rstrip(")")
            if text.isdigit() and 1 <= int(text) <= len(self.options):
                text = LETTERS[int(text) - 1]
            return [text]
        unit = 10.0**-self.decimals
        return [
            _canonical_number(value + k * unit, self.decimals)
            for value in _as_numbers(attempt)
            for k in (0, -1, 1)
        ]


def choice(
    prompt: str,
    options: list[str],
    *,
    answer: str | None = None,
    digest: str | None = None,
    explain: str = "",
) -> Question:
    """A multiple-choice question; ``answer`` is the letter of the right option."""
    if not 2 <= len(options) <= len(LETTERS):
        raise ValueError(
            f"a choice needs 2 to {len(LETTERS)} options, got {len(options)}"
        )
    if answer is not None and answer not in LETTERS[: len(options)]:
        raise ValueError(f"answer {answer!r} is not one of the options' letters")
    return Question(prompt, tuple(options), None, answer, digest, explain)


def number(
    prompt: str,
    *,
    answer: float | None = None,
    decimals: int = 0,
    digest: str | None = None,
    explain: str = "",
) -> Question:
    """A question whose answer is a number, to be given with ``decimals`` decimals."""
    if isinstance(decimals, bool) or not isinstance(decimals, int) or decimals < 0:
        raise ValueError(f"decimals: expected a whole number >= 0, got {decimals!r}")
    return Question(prompt, (), decimals, answer, digest, explain)


class Quiz:
    """A chapter's quiz: questions numbered from 1, answered with ``check``."""

    def __init__(self, name: str, questions: list[Question]):
        self.name, self.questions = name, list(questions)
        for index, question in enumerate(self.questions, start=1):
            if question.answer is not None:
                canonical = (
                    str(question.answer)
                    if question.kind == "choice"
                    else _canonical_number(question.answer, question.decimals)
                )
                question.digest = fingerprint(name, index, canonical)
            if not question.digest:
                raise ValueError(f"{name} question {index}: give an answer or a digest")

    def is_right(self, index: int, attempt) -> bool:
        question = self._question(index)
        return any(
            fingerprint(self.name, index, form) == question.digest
            for form in question.canonical(attempt)
        )

    def check(self, index: int, attempt) -> bool:
        """Say at once whether ``attempt`` answers question ``index``; return it too."""
        question = self._question(index)
        if self.is_right(index, attempt):
            print(
                f"✓ Question {index}: right."
                + (f" {question.explain}" if question.explain else "")
            )
            return True
        hint = (
            f"give one of {', '.join(LETTERS[: len(question.options)])}"
            if question.kind == "choice"
            else f"give a number with {question.decimals} decimal(s)"
        )
        print(
            f"✗ Question {index}: not {attempt!r}. Read the section again and try "
            f"once more ({hint})."
        )
        return False

    def _question(self, index: int) -> Question:
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(
                f"{self.name}: the question is a whole number from 1 to "
                f"{len(self.questions)}, e.g. quiz.check(1, 'a'); got {index!r}"
            )
        if not 1 <= index <= len(self.questions):
            raise IndexError(
                f"{self.name} has questions 1 to {len(self.questions)}, not {index}"
            )
        return self.questions[index - 1]

    def __repr__(self) -> str:
        lines = [f"Quiz {self.name}: answer with quiz.check(question, answer)"]
        for index, question in enumerate(self.questions, start=1):
            lines.append(f"{index}. {question.prompt}")
            lines += [
                f"   ({letter}) {option}"
                for letter, option in zip(LETTERS, question.options)
            ]
            if question.kind == "number":
                lines.append(f"   (a number, {question.decimals} decimal(s))")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """A form for the website, where quiz.js makes it answer. How to answer
        is said once, by the paragraph that opens the chapter's Quiz section (in
        the notebook too), so the form does not repeat it."""
        esc = html.escape
        parts = [
            f'<div class="tinybert-quiz" data-quiz="{esc(self.name)}">',
            "<ol>",
        ]
        for index, q in enumerate(self.questions, start=1):
            decimals = "" if q.decimals is None else f' data-decimals="{q.decimals}"'
            parts.append(
                f'<li class="tinybert-question" data-index="{index}" '
                f'data-kind="{q.kind}" '
                f'data-digest="{esc(q.digest)}"{decimals} '
                f'data-explain="{esc(q.explain)}"><p>{esc(q.prompt)}</p>'
            )
            for letter, option in zip(LETTERS, q.options):
                parts.append(
                    f'<label><input type="radio" '
                    f'name="{esc(self.name)}-{index}" value="{letter}"> '
                    f'({letter}) {esc(option)}</label><br>'
                )
            if q.kind == "number":
                parts.append(
                    f'<input type="text" inputmode="decimal" size="12" '
                    f'aria-label="answer to question {index}"> '
                    f'<small>({q.decimals} decimal(s))</small>'
                )
            parts.append(
                '<button type="button">Check</button> '
                '<span class="tinybert-feedback" role="status"></span></li>'
            )
        parts += ["</ol>", "</div>"]
        return "\n".join(parts)
