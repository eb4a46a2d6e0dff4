"""Hand-written: make code lines fit in 88 characters without changing behaviour.

Usage: python -m book.tools.fit88 [--check] [--no-carry] FILES_OR_DIRS...
(`make format` runs ruff format, then this.)

Run it after ``ruff format`` (line length 88). ruff splits code, but not comments,
docstrings or long string literals. This tool handles those:

* comment-only lines are re-wrapped at spaces;
* a trailing comment that makes a line too long moves onto its own line(s) above;
* long docstring lines are split at the last space before the limit;
* long single-line string literals (any prefix, f-strings too) are split into
  implicitly concatenated pieces, wrapped in parentheses where needed.

Chapter files (jupytext py:percent notebooks, recognised by a ``# %%`` line) are
handled cell by cell: the jupytext header, the cell markers and markdown/raw cells
are never changed, and neither are commented-out IPython magics.

Lines the tool cannot fix are listed on stderr as ``path:line: N chars (why)``.
Every changed file (or notebook cell) is checked before it is written: the ASTs of
the old and the new source must be equal, after collapsing whitespace in docstrings
and merging adjacent constant parts of f-strings. If they differ, nothing is written
and the exit code is 1.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

LIMIT = 88
# The shortest text we like to leave alone on a new line; shorter leftovers are
# made longer by breaking one or more words earlier (when the first line stays
# at least half full).
MIN_TAIL = 12
MAX_PASSES = 50

# --- regular expressions ------------------------------------------------------------

# A jupytext percent cell marker: "# %%" alone or followed by a space and more.
CELL_MARKER_RE = re.compile(r"^#\s*%%(\s|$)")
# Cells whose content is not Python code.
TEXT_CELL_RE = re.compile(r"\[(markdown|md|raw)\]")
# A commented-out IPython magic or shell command in a notebook code cell.
MAGIC_RE = re.compile(r"^\s*#\s?[%!?]")
# Comments that tools read: they must stay on their line, exactly as they are.
DIRECTIVE_RE = re.compile(
    r"(^|#)\s*(noqa\b|type:|pragma\b|pylint:|fmt:|isort:|nosec\b|pyright:|mypy:"
    r"|ruff:|flake8:)",
    re.IGNORECASE,
)
CODING_RE = re.compile(r"^[ \t\f]*#.*?coding[:=]")
# A comment line: indentation, the hash mark(s), the spaces after them, the text.
COMMENT_RE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<mark>#+[:!]?)(?P<space> *)(?P<body>.*)$"
)
# A list item at the start of a comment or docstring line: "- ", "* ", "1. ", "2) ".
BULLET_RE = re.compile(r"^([-*+•]|\d+[.)])\s+(?=\S)")
# A decorative rule at the end of a comment, such as "# --- section -------".
RULE_RE = re.compile(r"([-=#*~_+])\1{3,}\s*$")
# Text that must not start a new comment line: jupytext would read "# %..." or
# "# !..." as a magic (and "# %%" as a cell marker); others are tool directives.
COMMENT_BAD_START_RE = re.compile(
    r"^([%!?]|(noqa|type:|pragma|pylint:|fmt:|isort:|nosec|pyright:|mypy:)"
    r"|coding[:=])",
    re.IGNORECASE,
)
# Text that must not start a new docstring line, because Markdown or reST would
# read it as a list item, a heading, a quote, a table, a directive or a field.
DOC_BAD_START_RE = re.compile(
    r"^([-*+>#|=•](\s|$)|\d+[.)](\s|$)|\.\.(\s|$)|:\w[^:]*:(\s|$)|[%!]|\"\"\"|''')"
)
# The prefix and opening quote of a string token.
STRING_START_RE = re.compile(r"^(?P<prefix>[A-Za-z]*)(?P<quote>'''|\"\"\"|'|\")")


# --- small helpers ------------------------------------------------------------------


def text_of(line: str) -> str:
    """The line without its line ending."""
    return line.rstrip("\r\n")


def eol_of(line: str) -> str:
    """The line ending of the line ('' for a last line without one)."""
    return line[len(text_of(line)) :]


def indent_of(text: str) -> str:
    """The leading whitespace of a line."""
    return text[: len(text) - len(text.lstrip(" \t"))]


def is_long(line: str) -> bool:
    return len(text_of(line)) > LIMIT


def backtick_mask(text: str) -> list[bool]:
    """For each character, whether it lies inside a `code span` (any number of
    backticks). Breaking inside a code span is allowed but avoided if possible."""
    inside = [False] * (len(text) + 1)
    state = False
    i = 0
    while i < len(text):
        if text[i] == "`":
            j = i
            while j < len(text) and text[j] == "`":
                j += 1
            state = not state
            i = j
            continue
        inside[i] = state
        i += 1
    return inside


def choose_break(
    text: str,
    start: int,
    stop: int | None = None,
    bad_start: re.Pattern | None = None,
    min_tail: int = 0,
) -> tuple[int, int] | None:
    """Where to break a line of prose at a run of spaces.

    `text` is the whole line; only space runs after column `start` (and ending
    before `stop`, if given) are considered. Returns (s, e): the first line is
    text[:s] and the rest starts at text[e:]. The first line is as long as possible
    but at most LIMIT characters. Never breaks after a backslash (that could turn
    into a line continuation inside a string) or where the rest would start with
    text matching `bad_start`. If the rest would be shorter than `min_tail`
    characters, an earlier break is chosen when the first line stays half full.
    None if there is no possible break before the limit.
    """
    end = len(text) if stop is None else stop
    runs = []
    for m in re.finditer(r"[ \t]+", text):
        s, e = m.span()
        if s <= start or e >= end or text[s - 1] == "\\":
            continue
        if bad_start is not None and bad_start.match(text[e:]):
            continue
        runs.append((s, e))
    if not runs:
        return None
    fitting = [r for r in runs if r[0] <= LIMIT]
    if not fitting:
        return None
    # Prefer not to break inside `code spans`, unless that makes the line too short.
    inside = backtick_mask(text)
    outside = [r for r in fitting if not inside[r[0]]]
    pool = fitting
    if outside and outside[-1][0] >= 0.6 * LIMIT:
        pool = outside
    best = pool[-1]
    if min_tail and len(text) - best[1] < min_tail:
        longer_tail = [
            r for r in pool if len(text) - r[1] >= min_tail and r[0] >= LIMIT // 2
        ]
        if longer_tail:
            best = longer_tail[-1]
    return best


def wrap_line(
    text: str,
    start: int,
    cont_prefix: str,
    bad_start: re.Pattern | None,
) -> list[str]:
    """Wrap one line of prose (a comment) into lines of at most LIMIT characters.

    Breaks only at spaces after column `start`; every new line starts with
    `cont_prefix`. The last line is still too long if no break was possible.
    """
    out = []
    while len(text) > LIMIT:
        brk = choose_break(text, start, bad_start=bad_start, min_tail=MIN_TAIL)
        if brk is None:
            break
        s, e = brk
        out.append(text[:s].rstrip())
        text = cont_prefix + text[e:]
        start = len(cont_prefix)
    out.append(text)
    return out


def char_col(lines: list[str], lineno: int, byte_col: int) -> int:
    """Convert an AST column (UTF-8 bytes) to a column in characters."""
    return len(lines[lineno - 1].encode("utf-8")[:byte_col].decode("utf-8", "replace"))


# --- the safety check ---------------------------------------------------------------


def docstring_nodes(tree: ast.AST, module_doc: bool) -> list[ast.Constant]:
    """The Constant nodes that are docstrings (of classes and functions, and of
    the module if `module_doc`)."""
    kinds = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    if module_doc:
        kinds += (ast.Module,)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, kinds) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.append(first.value)
    return found


def parse(source: str) -> ast.Module:
    """Parse like the compiler; top-level await is allowed (notebook cells)."""
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    return compile(source, "<fit88>", "exec", flags, dont_inherit=True)


def normalised_dump(source: str, module_doc: bool) -> str:
    """ast.dump of the source, with whitespace runs in docstrings collapsed and
    adjacent constant parts of f-strings merged (both are what the tool may change
    without changing behaviour)."""
    tree = parse(source)
    for node in docstring_nodes(tree, module_doc):
        node.value = " ".join(node.value.split())
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            merged: list[ast.expr] = []
            for part in node.values:
                if (
                    merged
                    and isinstance(part, ast.Constant)
                    and isinstance(merged[-1], ast.Constant)
                ):
                    merged[-1] = ast.Constant(value=merged[-1].value + part.value)
                else:
                    merged.append(part)
            node.values = merged
    return ast.dump(tree, include_attributes=False)


def same_behaviour(old: str, new: str, module_doc: bool) -> bool:
    """The safety check: do old and new source have the same normalised AST?"""
    try:
        return normalised_dump(old, module_doc) == normalised_dump(new, module_doc)
    except SyntaxError:
        return False


# --- analysing one unit (a whole file, or one notebook code cell) -------------------


@dataclass
class StringInfo:
    """A single-line string token and where it sits."""

    tok: tokenize.TokenInfo
    depth: int  # how many brackets are open around it
    first_on_row: bool  # nothing but indentation before it on its line
    after_open: bool  # directly after an opening bracket on the same line
    adjacent: bool  # next to another string (implicit concatenation)
    next_tok: tokenize.TokenInfo | None  # the next token that is not a comment


@dataclass
class Info:
    """What the tokenizer and the parser tell us about a unit's lines."""

    lines: list[str]
    module_doc: bool
    comment: dict = field(default_factory=dict)  # row -> COMMENT token
    only_comment: set = field(default_factory=set)  # rows holding only a comment
    unsafe_above: set = field(default_factory=set)  # rows no line may go above
    stmt_row: dict = field(default_factory=dict)  # row -> first row of statement
    strings: dict = field(default_factory=dict)  # row -> [StringInfo]
    multiline: dict = field(default_factory=dict)  # row -> multi-line STRING token
    docstrings: set = field(default_factory=set)  # (row, col) of docstring tokens
    protected: set = field(default_factory=set)  # (row, col) of docstrings to keep
    annotations: set = field(default_factory=set)  # (row, col) of string annotations
    fmt_off: set = field(default_factory=set)  # rows between fmt: off and fmt: on

    def __post_init__(self) -> None:
        source = "".join(self.lines)
        tree = parse(source)  # raises SyntaxError for code we must not touch
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        self._read_tree(tree)
        self._read_tokens(tokens)

    def _read_tree(self, tree: ast.Module) -> None:
        for node in docstring_nodes(tree, self.module_doc):
            col = char_col(self.lines, node.lineno, node.col_offset)
            self.docstrings.add((node.lineno, col))
        # A module that reads __doc__ (say, for its command-line help) may depend on
        # the line breaks of its docstring: keep that docstring as it is.
        first = tree.body[0] if tree.body else None
        if (
            self.module_doc
            and "__doc__" in "".join(self.lines)
            and isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            node = first.value
            col = char_col(self.lines, node.lineno, node.col_offset)
            self.docstrings.discard((node.lineno, col))
            self.protected.add((node.lineno, col))
        for node in ast.walk(tree):
            notes = []
            if isinstance(node, (ast.arg, ast.AnnAssign)):
                notes.append(node.annotation)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                notes.append(node.returns)
            for note in notes:
                for sub in ast.walk(note) if note is not None else []:
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                        col = char_col(self.lines, sub.lineno, sub.col_offset)
                        self.annotations.add((sub.lineno, col))

    def _read_tokens(self, tokens: list[tokenize.TokenInfo]) -> None:
        skip = {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT}
        skip |= {tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
        significant = [t for t in tokens if t.type not in skip]
        position = {id(t): i for i, t in enumerate(significant)}
        depth = 0
        stmt = None  # first row of the statement being read
        off = False
        prev = None
        for tok in tokens:
            row = tok.start[0]
            # A line break without an NL/NEWLINE token is a backslash continuation:
            # nothing may be inserted between those lines.
            if prev is not None and prev.type not in (tokenize.NL, tokenize.NEWLINE):
                for r in range(prev.end[0] + 1, tok.start[0] + 1):
                    self.unsafe_above.add(r)
            prev = tok
            if tok.type == tokenize.COMMENT:
                self.comment[row] = tok
                if not self.lines[row - 1][: tok.start[1]].strip():
                    self.only_comment.add(row)
                    low = tok.string.lower().replace(" ", "")
                    if low.startswith(("#fmt:off", "#yapf:disable")):
                        off = True
                    elif low.startswith(("#fmt:on", "#yapf:enable")):
                        off = False
                if off:
                    self.fmt_off.add(row)
                continue
            if tok.type in skip:
                if tok.type == tokenize.NEWLINE:
                    stmt = None
                continue
            if off:
                self.fmt_off.update(range(tok.start[0], tok.end[0] + 1))
            if stmt is None:
                stmt = row
            for r in range(tok.start[0], tok.end[0] + 1):
                self.stmt_row.setdefault(r, stmt)
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth -= 1
            elif tok.type == tokenize.STRING:
                self._read_string(tok, depth, significant, position[id(tok)])

    def _read_string(self, tok, depth, significant, i) -> None:
        row = tok.start[0]
        if tok.end[0] != row:
            # A multi-line string: no line may be inserted inside it.
            for r in range(row, tok.end[0] + 1):
                self.multiline[r] = tok
            self.unsafe_above.update(range(row + 1, tok.end[0] + 1))
            return
        before = significant[i - 1] if i > 0 else None
        after = significant[i + 1] if i + 1 < len(significant) else None
        adjacent = (before is not None and before.type == tokenize.STRING) or (
            after is not None and after.type == tokenize.STRING
        )
        after_open = (
            before is not None
            and before.type == tokenize.OP
            and before.string in "([{"
            and before.end[0] == row
        )
        info = StringInfo(
            tok=tok,
            depth=depth,
            first_on_row=not self.lines[row - 1][: tok.start[1]].strip(),
            after_open=after_open,
            adjacent=adjacent,
            next_tok=after,
        )
        self.strings.setdefault(row, []).append(info)


# --- the fixes -----------------------------------------------------------------------


@dataclass
class Edit:
    """Replace rows first..last (1-based, inclusive) by `new` lines."""

    first: int
    last: int
    new: list[str]


class Fixer:
    """Proposes fixes for the long lines of one unit."""

    def __init__(self, info: Info, chapter: bool, carry: bool) -> None:
        self.info = info
        self.lines = info.lines
        self.chapter = chapter
        self.carry = carry

    def propose(self, row: int) -> Edit | str:
        """An Edit that shortens line `row`, or a short reason why there is none."""
        info = self.info
        text = text_of(self.lines[row - 1])
        if row in info.fmt_off:
            return "inside fmt: off"
        for tok in [info.multiline.get(row)] + [
            s.tok for s in info.strings.get(row, [])
        ]:
            if tok is not None and tok.start in info.protected:
                return "docstring: the module reads __doc__"
        if row in info.multiline:
            tok = info.multiline[row]
            if tok.start in info.docstrings:
                return self.fix_docstring(row, tok)
            if row in info.comment and row == tok.end[0]:
                return self.move_comment(row)
            return "multi-line string"
        for s in info.strings.get(row, []):
            if s.tok.start in info.docstrings:
                return self.fix_docstring(row, s.tok)  # a one-line docstring
        if row in info.only_comment:
            return self.fix_comment_line(row)
        if row in info.comment:
            return self.move_comment(row)
        if row in info.strings:
            return self.fix_strings(row)
        if len(text) > LIMIT:
            return "code"
        return "fits"

    # -- rule 2: comment-only lines --

    def fix_comment_line(self, row: int) -> Edit | str:
        text = text_of(self.lines[row - 1])
        if row == 1 and text.startswith("#!"):
            return "comment: shebang"
        if row <= 2 and CODING_RE.match(text):
            return "comment: coding line"
        if self.chapter and MAGIC_RE.match(text):
            return "comment: notebook magic"
        if DIRECTIVE_RE.search(text):
            return "comment: tool directive"
        m = COMMENT_RE.match(text)
        if m is None or not m["body"]:
            return "comment"
        # A decorative rule ("# --- name ------") is shortened, not wrapped.
        rule = RULE_RE.search(text)
        if rule:
            excess = len(text.rstrip()) - LIMIT
            if len(rule.group(0).rstrip()) - excess >= 3:
                new = text.rstrip()[:LIMIT] + eol_of(self.lines[row - 1])
                return Edit(row, row, [new])
        new = self.wrap_comment(text)
        if any(len(line) > LIMIT for line in new):
            # Rather than leave a long word (say, a URL) with bits of text around it
            # on lines of their own, keep the comment as it is.
            return "comment: a word longer than the limit"
        end = eol_of(self.lines[row - 1]) or "\n"
        new = [line + end for line in new[:-1]] + [
            new[-1] + eol_of(self.lines[row - 1])
        ]
        return Edit(row, row, new)

    def wrap_comment(self, text: str) -> list[str]:
        """Wrap a whole comment line (indentation included) into several."""
        m = COMMENT_RE.match(text)
        space = m["space"] or " "
        prefix = m["indent"] + m["mark"] + m["space"]
        cont = m["indent"] + m["mark"] + space
        bullet = BULLET_RE.match(m["body"])
        start = len(prefix)
        if bullet:
            cont += " " * bullet.end()
            start += bullet.end()
        return wrap_line(text, start, cont, COMMENT_BAD_START_RE)

    # -- rule 3: trailing comments --

    def move_comment(self, row: int) -> Edit | str:
        info = self.info
        tok = info.comment[row]
        line = self.lines[row - 1]
        code = line[: tok.start[1]].rstrip()
        if DIRECTIVE_RE.search(tok.string):
            return "code with a tool directive comment"
        if len(code) > LIMIT and not self.has_splittable_string(row):
            return "code (with a trailing comment)"
        # Put the comment above this line if that is allowed here (inside brackets
        # it is), otherwise above the first line of the statement.
        target = row
        if row in info.unsafe_above or row in info.multiline:
            target = info.stmt_row.get(row, row)
            if target in info.unsafe_above:
                return "code (trailing comment cannot move)"
        indent = indent_of(text_of(self.lines[target - 1]))
        end = eol_of(line) or "\n"
        comment = self.wrap_comment(indent + tok.string)
        if any(len(c) > LIMIT for c in comment):
            return "trailing comment: a word longer than the limit"
        new = [c + end for c in comment]
        new += self.lines[target - 1 : row - 1]
        new.append(code + eol_of(line))
        return Edit(target, row, new)

    def has_splittable_string(self, row: int) -> bool:
        for s in self.info.strings.get(row, []):
            if " " in s.tok.string and s.tok.end[1] - s.tok.start[1] > MIN_TAIL:
                return True
        return False

    # -- rule 4: docstrings --

    def fix_docstring(self, row: int, tok: tokenize.TokenInfo) -> Edit | str:
        first, last = tok.start[0], tok.end[0]
        if text_of(self.lines[last - 1])[tok.end[1] :].strip():
            return "docstring: followed by code or a comment"
        kinds = docstring_line_kinds(self.lines[first - 1 : last], tok)
        kind = kinds[row - first]
        if kind == "code":
            return "docstring: code example or table"
        quote = STRING_START_RE.match(tok.string)
        open_len = len(quote.group(0))
        close_len = len(quote["quote"])
        out: list[str] = []
        cur = row  # the original row the text being split comes from
        text = text_of(self.lines[row - 1])
        start = tok.start[1] + open_len if row == first else len(indent_of(text))
        # The hanging indentation of list items.
        bullet = BULLET_RE.match(text[start:]) if kind == "prose" else None
        new_indent = indent_of(text)
        if bullet:
            start += bullet.end()
            new_indent = " " * start
        elif kind == "item":
            new_indent = indent_of(text)
        while len(text) > LIMIT:
            stop = None
            if cur == last:
                stop = len(text) - close_len
            nxt = cur + 1
            can_carry = (
                self.carry
                and nxt <= last
                and kinds[nxt - first] in ("prose", "item")
                and indent_of(text_of(self.lines[nxt - 1])) == new_indent
                and not text.endswith("\\")
                and not DOC_BAD_START_RE.match(text_of(self.lines[nxt - 1]).lstrip())
            )
            tail = 0 if can_carry else MIN_TAIL
            brk = choose_break(text, start, stop, DOC_BAD_START_RE, tail)
            if brk is None:
                break
            s, e = brk
            out.append(text[:s].rstrip())
            if can_carry:
                # The rest joins the next line of the same paragraph.
                following = text_of(self.lines[nxt - 1]).lstrip()
                text = new_indent + text[e:] + " " + following
                cur = nxt
            else:
                text = new_indent + text[e:]
            start = len(new_indent)
        out.append(text)
        if len(out) == 1 or any(len(line) > LIMIT for line in out):
            return "docstring: a word longer than the limit"
        end = eol_of(self.lines[row - 1]) or "\n"
        new = [line + end for line in out[:-1]]
        new.append(out[-1] + eol_of(self.lines[cur - 1]))
        return Edit(row, cur, new)

    # -- rule 5: string literals --

    def fix_strings(self, row: int) -> Edit | str:
        candidates = [
            s
            for s in self.info.strings[row]
            if s.tok.start not in self.info.docstrings
            and s.tok.start not in self.info.annotations
        ]
        # Try the literal that crosses the limit first, then the longest others.
        candidates.sort(
            key=lambda s: (
                not (s.tok.start[1] < LIMIT < s.tok.end[1]),
                s.tok.start[1] - s.tok.end[1],
            )
        )
        reason = "code"
        for s in candidates:
            result = self.split_literal(row, s)
            if isinstance(result, Edit):
                return result
            reason = result
        return reason

    def split_literal(self, row: int, s: StringInfo) -> Edit | str:
        line = self.lines[row - 1]
        text = text_of(line)
        end = eol_of(line) or "\n"
        tok = s.tok
        m = STRING_START_RE.match(tok.string)
        prefix, quote = m["prefix"], m["quote"]
        if len(quote) == 3:
            return "string: triple-quoted"
        before, after = text[: tok.start[1]], text[tok.end[1] :]
        indent = indent_of(text)
        if "\t" in before:
            return "string: tab indentation"
        # Only a literal that makes the line too long is split: it must be longer
        # than all the rest of the line together (ruff has already split the code).
        if len(tok.string) <= len(text.strip()) - len(tok.string):
            return "code"
        # Three layouts. "in place": the pieces go below each other, aligned with
        # the literal; possible inside brackets when the literal starts its line
        # (or sits in an implicit concatenation). "after bracket": the literal
        # follows an opening bracket; the pieces go on new lines, indented one
        # level more. "parens": the literal is wrapped in new parentheses.
        if s.depth > 0 and (s.first_on_row or s.adjacent):
            layout, col, pad = "in place", tok.start[1], tok.start[1]
        elif s.adjacent:
            return "string: implicit concatenation outside brackets"
        elif s.after_open:
            layout, col = "after bracket", len(indent) + 4
            pad = col
        else:
            layout, col = "parens", len(indent) + 4
            pad = col
        chain = [s]
        if layout == "in place":
            chain += self.following_pieces(s, prefix, quote)
            if len(chain) > 1 and not s.first_on_row:
                # As in `key="..."` followed by more pieces: ruff puts the pieces
                # below at the indentation of the line; so do we.
                pad = chain[1].tok.start[1]
        # Whether the text after the literal stays on the line of the last piece.
        closes = after[:1] in (")", "]", "}")
        keep_after = layout == "in place" or (layout == "after bracket" and not closes)
        prefixes = [STRING_START_RE.match(c.tok.string)["prefix"] for c in chain]
        bodies = [
            c.tok.string[len(p) + 1 : -1] for c, p in zip(chain, prefixes, strict=True)
        ]
        tails = [text_of(self.lines[c.tok.start[0] - 1])[c.tok.end[1] :] for c in chain]
        if not keep_after:
            tails[-1] = ""
        # With plain and f-string pieces mixed, the text is read as an f-string.
        prefix = next((p for p in prefixes if "f" in p.lower()), prefix)
        overhead = len(prefix) + 2
        rooms = (LIMIT - col - overhead, LIMIT - pad - overhead)
        flowed = flow_string(prefix, quote, bodies, tails, *rooms)
        if flowed is None and len(chain) > 1:
            # The rest cannot flow into the next piece (say, one that has no place
            # to split): give it a line of its own instead.
            chain, bodies, tails = chain[:1], bodies[:1], tails[:1]
            prefixes, prefix = prefixes[:1], prefixes[0]
            flowed = flow_string(prefix, quote, bodies, tails, *rooms)
        if flowed is None:
            return "string: no place to split it"
        pieces, used = flowed
        if len(set(prefixes[: used + 1])) == 1:
            prefix = prefixes[0]  # all the pieces used have the same prefix
        last_row = chain[used].tok.start[0]
        wrap = [prefix + quote + p + quote for p in pieces]
        if layout == "in place":
            new = [before + wrap[0] + end]
            new += [" " * pad + w + end for w in wrap[1:]]
        elif layout == "after bracket":
            new = [before.rstrip() + end] + [" " * pad + w + end for w in wrap]
        else:
            new = [before + "(" + end] + [" " * pad + w + end for w in wrap]
        if keep_after:
            new[-1] = new[-1][: -len(end)] + tails[used] + end
        elif layout == "after bracket":
            new.append(indent + after + end)
        else:
            new.append(indent + ")" + after + end)
        new[-1] = new[-1][: -len(end)] + eol_of(self.lines[last_row - 1])
        if new == self.lines[row - 1 : last_row]:
            return "string: no place to split it"
        if any(len(text_of(n)) > LIMIT for n in new):
            return "string: splitting it would not make the line fit"
        # Never accept a split that changes the value of the literal(s).
        if not same_literal([c.tok.string for c in chain[: used + 1]], wrap):
            return "string: split would change the value"
        return Edit(row, last_row, new)

    def following_pieces(self, s: StringInfo, prefix: str, quote: str) -> list:
        """The literals after `s` in the same implicit concatenation, one per line
        on the lines just below, with the same prefix and quote and nothing else
        on their lines: the rest of a split piece may flow into them."""
        found = []
        while len(found) < 100:
            row = s.tok.start[0]
            rest = text_of(self.lines[row - 1])[s.tok.end[1] :]
            nxt = s.next_tok
            if rest.strip() or nxt is None or nxt.start[0] != row + 1:
                break
            following = [c for c in self.info.strings.get(row + 1, []) if c.tok is nxt]
            if not following or not following[0].first_on_row:
                break
            m = STRING_START_RE.match(nxt.string)
            if m["quote"] != quote or nxt.start in self.info.annotations:
                break
            if m["prefix"].lower().replace("f", "") != prefix.lower().replace("f", ""):
                break
            # Plain and f-string pieces may be mixed if the plain ones hold no braces:
            # they then mean the same with an f prefix, which their pieces get.
            chain = [s.tok, *[c.tok for c in found], nxt]
            if len({is_fstring(c.string) for c in chain}) > 1:
                plain = [c.string for c in chain if not is_fstring(c.string)]
                if any("{" in t or "}" in t for t in plain):
                    break
            s = following[0]
            found.append(s)
        return found


def docstring_line_kinds(lines: list[str], tok: tokenize.TokenInfo) -> list[str]:
    """Classify each line of a docstring token.

    "prose": may be split and may take over text from the line above;
    "item": a continuation line of a list item (hanging indentation), treated as
    prose; "blank"; "code": a doctest, a fenced or literal block (after "::"),
    a table, or anything else indented deeper than the text; never changed.
    """
    texts = [text_of(line) for line in lines]
    # The text starts after the opening quotes on the first line.
    first_text = texts[0][tok.start[1] :]
    m = STRING_START_RE.match(first_text)
    bodies = [first_text[m.end() :]] + texts[1:]
    others = [t for t in texts[1:] if t.strip()]
    base = min((len(indent_of(t)) for t in others), default=len(indent_of(texts[0])))
    base = min(base, len(indent_of(texts[0])))
    kinds = []
    fence = False
    literal_at = None  # indentation of the line that ended with "::"
    doctest = False
    hang = None  # indentation of the current list item's continuation lines
    for i, body in enumerate(bodies):
        stripped = body.strip()
        ind = len(indent_of(texts[i])) if i else base
        if stripped.startswith(("```", "~~~")):
            fence = not fence
            kinds.append("code")
            continue
        if fence:
            kinds.append("code")
            continue
        if not stripped:
            kinds.append("blank")
            doctest = False
            hang = None
            continue
        if literal_at is not None and ind > literal_at:
            kinds.append("code")
            continue
        literal_at = None
        if stripped.startswith((">>>", "... ")) or stripped == "...":
            doctest = True
        table = stripped.startswith(("+-", "+=", "===", "---")) or (
            stripped.startswith("|") and stripped.endswith("|")
        )
        if doctest or table:
            kinds.append("code")
        elif ind == base:
            kinds.append("prose")
            bullet = BULLET_RE.match(stripped)
            hang = base + bullet.end() if bullet else None
        elif hang is not None and ind == hang:
            kinds.append("item")
        else:
            kinds.append("code")
        if stripped.endswith("::"):
            literal_at = ind
    return kinds


def flow_string(
    prefix: str,
    quote: str,
    bodies: list[str],
    tails: list[str],
    room_first: int,
    room: int,
) -> tuple[list[str], int] | None:
    """Split the text of a string literal into pieces that fit.

    `bodies` holds the text of the literal and of the literals that follow it in the
    same implicit concatenation (one per line); `tails` the code after each on its
    line. The first piece may have `room_first` characters, the others `room`
    (minus the tail of the line they end up on). What does not fit flows into the
    next literal, like a paragraph; it stops as soon as a piece fits. See
    string_cuts for where it may break. Returns (pieces, k): the pieces replace
    bodies[0..k]; or None if it cannot be done.
    """
    pieces: list[str] = []
    cur, k, width = bodies[0], 0, room_first
    while len(cur) + len(tails[k]) > width:
        found = [(c, nl) for c, nl in string_cuts(prefix, quote, cur) if c <= width]
        if not found:
            return None
        last = k + 1 == len(bodies)
        if last:
            # Avoid a very short last piece: break earlier if the piece before it
            # stays at least half full.
            longer_tail = [
                (c, nl)
                for c, nl in found
                if len(cur) - c >= MIN_TAIL
                and len(cur) - c + len(tails[k]) <= room
                and c >= width // 2
            ]
            found = longer_tail or found
        # Text with "\n" in it reads best cut after a "\n", if that is not too early.
        after_newline = [c for c, nl in found if nl and c >= width // 2]
        cut = after_newline[-1] if after_newline else found[-1][0]
        pieces.append(cur[:cut])
        if last:
            cur = cur[cut:]
        else:
            k += 1
            cur = cur[cut:] + bodies[k]
        width = room
    pieces.append(cur)
    return pieces, k


def string_cuts(prefix: str, quote: str, body: str) -> list[tuple[int, bool]]:
    """The places where the text of a literal may be cut, as (position, whether it
    is just after a "\n" escape).

    A cut goes just after a space that is followed by a non-space, or (except in raw
    strings) just after a "\n" escape that is not followed by another one. Both
    halves must be valid literals on their own, so a cut never falls inside an
    f-string replacement field or an escape sequence.
    """
    raw = "r" in prefix.lower()
    cuts = []
    for k in range(1, len(body)):
        if not body[:k].strip():
            continue
        space = body[k - 1] == " " and body[k] != " "
        newline = (
            not raw
            and k >= 2
            and body[k - 2 : k] == "\\n"
            and body[k : k + 2] != "\\n"
            and odd_backslashes_before(body, k - 1)
        )
        if (space or newline) and valid_cut(prefix, quote, body, k):
            cuts.append((k, newline))
    return cuts


def odd_backslashes_before(body: str, k: int) -> bool:
    """Whether the backslashes that end just before position k are an odd number
    (so the last of them starts an escape sequence)."""
    n = 0
    while k - n - 1 >= 0 and body[k - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def is_fstring(token: str) -> bool:
    return "f" in STRING_START_RE.match(token)["prefix"].lower()


def valid_cut(prefix: str, quote: str, body: str, cut: int) -> bool:
    """Whether the literal can be cut at `cut`: both halves must be literals."""
    for part in (body[:cut], body[cut:]):
        try:
            node = ast.parse(prefix + quote + part + quote, mode="eval")
        except SyntaxError:
            return False
        if not isinstance(node.body, (ast.Constant, ast.JoinedStr)):
            return False
    return True


def same_literal(original: list[str], pieces: list[str]) -> bool:
    """Whether the implicitly concatenated pieces have the value of the original
    literals."""
    try:
        old = normalised_dump("(\n" + "\n".join(original) + "\n)", False)
        new = normalised_dump("(\n" + "\n".join(pieces) + "\n)", False)
    except SyntaxError:
        return False
    return old == new


# --- processing units and files ------------------------------------------------------


@dataclass
class Unit:
    """A stretch of a file's lines: a whole file, a code cell, or text to keep."""

    first: int  # row in the file of its first line (1-based)
    lines: list[str]
    code: bool  # False: keep as is (jupytext header, markers, markdown cells)
    new: list[str] | None = None  # the fixed lines, if changed
    problems: list[tuple[int, int, str]] = field(default_factory=list)
    error: str | None = None


def split_units(lines: list[str]) -> tuple[list[Unit], bool]:
    """Split a file into units. Returns (units, is_chapter)."""
    if not any(CELL_MARKER_RE.match(line) for line in lines):
        return [Unit(1, lines, True)], False
    units: list[Unit] = []
    i = 0
    # The jupytext header: the first "# ---" ... "# ---" block.
    if lines and text_of(lines[0]).rstrip() == "# ---":
        j = 1
        while j < len(lines) and text_of(lines[j]).rstrip() != "# ---":
            j += 1
        units.append(Unit(1, lines[: j + 1], False))
        i = j + 1
    code = True  # lines before the first marker form a code cell
    start = i
    while i <= len(lines):
        if i == len(lines) or CELL_MARKER_RE.match(lines[i]):
            if i > start:
                units.append(Unit(start + 1, lines[start:i], code))
            if i == len(lines):
                break
            units.append(Unit(i + 1, [lines[i]], False))
            code = not TEXT_CELL_RE.search(lines[i])
            start = i + 1
        i += 1
    return units, True


def fix_unit(unit: Unit, chapter: bool, carry: bool) -> None:
    """Fix the long lines of one unit, in passes until nothing changes."""
    module_doc = not chapter
    lines = list(unit.lines)
    reasons: dict[int, str] = {}
    for _ in range(MAX_PASSES):
        try:
            info = Info(lines, module_doc)
        except (SyntaxError, tokenize.TokenError, ValueError) as exc:
            unit.error = f"cannot parse{' this cell' if chapter else ''} ({exc})"
            lines = list(unit.lines)
            break
        fixer = Fixer(info, chapter, carry)
        edits: list[Edit] = []
        taken: set[int] = set()
        reasons = {}
        # Bottom-up, so that earlier rows keep their numbers; one edit per row and
        # no overlapping edits within a pass.
        for row in range(len(lines), 0, -1):
            if not is_long(lines[row - 1]):
                continue
            result = fixer.propose(row)
            if isinstance(result, str):
                reasons[row] = result
                continue
            rows = set(range(result.first, result.last + 1))
            if result.new == lines[result.first - 1 : result.last]:
                reasons[row] = "no change possible"
                continue
            if rows & taken:
                reasons[row] = "pending"  # fixed in the next pass
                continue
            taken |= rows
            edits.append(result)
        if not edits:
            break
        for edit in sorted(edits, key=lambda e: -e.first):
            lines[edit.first - 1 : edit.last] = edit.new
    if lines != unit.lines:
        if same_behaviour("".join(unit.lines), "".join(lines), module_doc):
            unit.new = lines
        else:
            unit.error = "safety check failed: the AST would change; left unchanged"
            lines = list(unit.lines)
            reasons = {}
    default = "not analysed"
    if unit.error:
        default = "safety check failed" if "safety" in unit.error else "does not parse"
    for row, line in enumerate(lines, 1):
        if is_long(line):
            why = reasons.get(row, default)
            unit.problems.append((row, len(text_of(line)), why))


@dataclass
class Result:
    path: str
    long_before: int = 0
    long_after: int = 0
    changed: bool = False
    errors: list[str] = field(default_factory=list)
    problems: list[tuple[int, int, str]] = field(default_factory=list)
    new_text: str | None = None


def process_text(text: str, path: str = "<text>", carry: bool = True) -> Result:
    """Fix a file's text in memory."""
    result = Result(path)
    lines = text.splitlines(keepends=True)
    units, chapter = split_units(lines)
    out: list[str] = []
    for unit in units:
        if not unit.code:
            out.extend(unit.lines)
            continue
        result.long_before += sum(is_long(line) for line in unit.lines)
        fix_unit(unit, chapter, carry)
        first_row = len(out) + 1
        out.extend(unit.new if unit.new is not None else unit.lines)
        if unit.error:
            where = f"cell at line {unit.first}: " if chapter else ""
            result.errors.append(f"{path}:{unit.first}: {where}{unit.error}")
        for row, n, why in unit.problems:
            result.problems.append((first_row + row - 1, n, why))
        result.long_after += len(unit.problems)
    new_text = "".join(out)
    if new_text != text:
        result.changed = True
        result.new_text = new_text
    return result


def python_files(args: list[str]) -> list[Path]:
    """The files named, and the .py files under the directories named."""
    found = []
    for arg in args:
        p = Path(arg)
        if p.is_dir():
            for f in sorted(p.rglob("*.py")):
                if not any(part.startswith(".") for part in f.relative_to(p).parts):
                    found.append(f)
        else:
            found.append(p)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Make Python source lines fit in 88 characters."
    )
    parser.add_argument("--check", action="store_true", help="write nothing")
    parser.add_argument(
        "--no-carry",
        action="store_true",
        help="never move the rest of a split docstring line into the next line",
    )
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    status = 0
    for path in python_files(args.files):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"{path}: error: {exc}", file=sys.stderr)
            status = 1
            continue
        result = process_text(text, str(path), carry=not args.no_carry)
        for error in result.errors:
            print(f"error: {error}", file=sys.stderr)
            if "safety check" in error:
                status = 1
        if args.check:
            # List the long lines as they are now; the tool would fix some of them.
            lines = text.splitlines()
            if result.long_before:
                fixable = result.long_before - result.long_after
                for row in sorted(long_rows_in_code(text)):
                    n = len(lines[row - 1])
                    print(f"{path}:{row}: {n} chars", file=sys.stderr)
                print(
                    f"{path}: {result.long_before} lines over {LIMIT}, "
                    f"{fixable} fixable",
                    file=sys.stderr,
                )
                status = 1
            continue
        if result.changed:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(result.new_text)
            print(
                f"fixed {path}: {result.long_before} -> {result.long_after} long lines"
            )
        for row, n, why in result.problems:
            print(f"{path}:{row}: {n} chars ({why})", file=sys.stderr)
    return status


def long_rows_in_code(text: str) -> set[int]:
    """Rows (1-based) over the limit, outside markdown cells and jupytext headers."""
    lines = text.splitlines(keepends=True)
    units, _ = split_units(lines)
    rows = set()
    for unit in units:
        if unit.code:
            for i, line in enumerate(unit.lines):
                if is_long(line):
                    rows.add(unit.first + i)
    return rows


if __name__ == "__main__":
    sys.exit(main())
