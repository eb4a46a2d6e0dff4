"""Hand-written tests of book/tools/fit88.py: each rule, idempotence and the safety check."""
from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest

from book.tools import fit88  # noqa: E402

LIMIT = fit88.LIMIT


def fix(source: str, carry: bool = True) -> tuple[str, fit88.Result]:
    """Run the tool on source text; return the new text and the result."""
    source = textwrap.dedent(source)
    result = fit88.process_text(source, "t.py", carry=carry)
    new = result.new_text if result.changed else source
    assert not [e for e in result.errors if "safety" in e], result.errors
    return new, result


def long_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > LIMIT]


def values(source: str) -> dict:
    """Run a snippet and return its global names (for comparing string values)."""
    namespace: dict = {}
    exec(compile(source, "<snippet>", "exec"), namespace)
    namespace.pop("__builtins__", None)
    return namespace


def words(text: str) -> list[str]:
    return text.split()


def check_idempotent(new: str, carry: bool = True) -> None:
    again = fit88.process_text(new, "t.py", carry=carry)
    assert not again.changed, again.new_text


# --- rule 2: comment-only lines -----------------------------------------------------

LONG_COMMENT = (
    "# Two values worth knowing by heart: SiLU'(0) = 1/2, and SiLU' dips below 0 for "
    "negative inputs, which is why it is not monotonic at all."
)


def test_comment_line_is_rewrapped_with_its_indentation():
    src = f"def f():\n    {LONG_COMMENT}\n    return 1\n"
    new, result = fix(src)
    assert long_lines(new) == []
    comment_lines = [line for line in new.splitlines() if "#" in line]
    assert len(comment_lines) == 2
    assert all(line.startswith("    # ") for line in comment_lines)
    # Same words in the same order, none broken.
    joined = " ".join(line.strip()[2:] for line in comment_lines)
    assert words(joined) == words(LONG_COMMENT[2:])
    assert result.long_after == 0
    check_idempotent(new)


def test_comment_wrap_avoids_a_one_word_last_line():
    text = "word " * 17 + "last."  # 90 characters of text
    new, _ = fix(f"# {text}\nx = 1\n")
    lines = new.splitlines()
    assert len(lines[1]) - 2 >= fit88.MIN_TAIL


def test_comment_with_a_long_url_never_breaks_the_url():
    url = "https://example.org/" + "a" * 90
    src = f"# See {url} for the details of this.\nx = 1\n"
    new, result = fix(src)
    assert new == src  # bits of text around a URL on lines of their own read badly
    assert [p[2] for p in result.problems] == ["comment: a word longer than the limit"]


def test_comment_that_is_one_long_word_is_reported_and_unchanged():
    src = "# " + "x" * 100 + "\ny = 2\n"
    new, result = fix(src)
    assert new == src
    assert result.problems == [(1, 102, "comment: a word longer than the limit")]


def test_decorative_rule_is_shortened_not_wrapped():
    src = "# --- ex-ffn-silu " + "-" * 90 + "\nx = 1\n"
    new, _ = fix(src)
    first = new.splitlines()[0]
    assert len(first) == LIMIT and first.startswith("# --- ex-ffn-silu ---")


def test_comment_bullets_get_a_hanging_indent():
    src = "# - " + "item text " * 10 + "end\nx = 1\n"
    new, _ = fix(src)
    lines = new.splitlines()
    assert lines[0].startswith("# - ") and lines[1].startswith("#   ")
    assert not lines[1].startswith("#    ")


def test_directive_comments_are_left_alone():
    src = "# ruff: noqa: E501 " + "because " * 10 + "\nx = 1\n"
    new, result = fix(src)
    assert new == textwrap.dedent(src)
    assert result.problems[0][2] == "comment: tool directive"


# --- rule 3: trailing comments ------------------------------------------------------


def test_trailing_comment_moves_above_the_statement():
    src = """\
    def f(x):
        y = compute(x)  # a trailing comment long enough to push this line past the limit of 88 characters
        return y
    """
    new, _ = fix(src)
    assert new == textwrap.dedent("""\
    def f(x):
        # a trailing comment long enough to push this line past the limit of 88 characters
        y = compute(x)
        return y
    """)
    check_idempotent(new)


def test_long_trailing_comment_is_wrapped_above():
    comment = "# " + "very " * 30 + "long"
    new, _ = fix(f"x = 1  {comment}\n")
    lines = new.splitlines()
    assert lines[-1] == "x = 1" and long_lines(new) == []
    assert all(line.startswith("# ") for line in lines[:-1])


def test_comment_inside_brackets_goes_above_its_own_line():
    src = """\
    values = [
        1,  # one: a comment inside brackets that is long enough to push the line over the limit
        2,
    ]
    """
    new, _ = fix(src)
    lines = new.splitlines()
    assert lines[1].startswith("    # one: a comment")
    assert "1," in [line.strip() for line in lines]
    assert lines[-1] == "]" and long_lines(new) == []
    assert values(new) == values(textwrap.dedent(src))


def test_comment_after_backslash_continuation_goes_above_the_statement():
    src = (
        "total = 1 + \\\n"
        "    2  # a comment after a backslash continuation, which must not be split, so it goes up\n"
    )
    new, _ = fix(src)
    assert new.splitlines()[0].startswith("# a comment after")
    assert new.splitlines()[1:] == ["total = 1 + \\", "    2"]


def test_comment_after_multiline_string_goes_above_the_statement():
    src = 'x = """\ntext\n"""  # a comment after a multi-line string, which is too long for the line, so it moves up there\n'
    new, _ = fix(src)
    assert new.splitlines()[0].startswith("# a comment after")
    assert values(new) == values(src)


def test_noqa_comment_stays_on_its_line():
    src = "from a_module_with_a_long_name import some_name, another_name, a_third  # noqa: E402 F401\n"
    new, result = fix(src)
    assert new == src
    assert result.problems[0][2] == "code with a tool directive comment"


def test_comment_is_not_moved_when_the_code_alone_is_too_long():
    code = "x = " + " + ".join(["value"] * 17)
    new, result = fix(f"{code}  # comment\n")
    assert new == f"{code}  # comment\n"
    assert result.problems[0][2] == "code (with a trailing comment)"


# --- rule 4: docstrings -------------------------------------------------------------


def test_one_line_docstring_is_split_at_the_last_space():
    src = '''\
    def f():
        """Raise ValueError unless x is (B, T, D) and context (B, S, D); attention checks the mask."""
        return 1
    '''
    new, _ = fix(src)
    assert new.splitlines()[1:3] == [
        '    """Raise ValueError unless x is (B, T, D) and context (B, S, D); attention checks',
        '    the mask."""',
    ]
    check_idempotent(new)


PARAGRAPH_DOC = '''\
"""Summary line.

Each ``check_*`` function calls the student's code on several inputs, including odd sizes and
edge cases, raises ``AssertionError`` saying what was expected and what came back, and prints a
line starting with a tick when everything passes.

A short paragraph that stays.
"""
'''


def test_docstring_paragraph_flows_into_the_next_line():
    new, _ = fix(PARAGRAPH_DOC)
    assert long_lines(new) == []
    assert words(new) == words(PARAGRAPH_DOC)
    # No short orphan lines in the paragraph: every line but the last is well filled.
    para = new.splitlines()[2:5]
    assert all(len(line) > 70 for line in para[:-1])
    assert new.splitlines()[-2] == "A short paragraph that stays."
    check_idempotent(new)


def test_docstring_no_carry_keeps_every_other_line_identical():
    new, _ = fix(PARAGRAPH_DOC, carry=False)
    old_lines = PARAGRAPH_DOC.splitlines()
    new_lines = new.splitlines()
    assert long_lines(new) == []
    # The two long lines became two lines each; all other lines are unchanged.
    assert len(new_lines) == len(old_lines) + 2
    for line in old_lines:
        if len(line) <= LIMIT:
            assert line in new_lines
    assert words(new) == words(PARAGRAPH_DOC)
    check_idempotent(new, carry=False)


def test_docstring_code_examples_are_not_touched():
    src = '''\
    def f():
        """Compute things.

        Example::

            result = some_function(argument_one, argument_two, argument_three, argument_four, five)

        >>> some_function(argument_one, argument_two, argument_three, argument_four, 5, 6, 7, 8)
        42

        ```python
        also_code = some_function(argument_one, argument_two, argument_three, argument_four, five)
        ```
        """
    '''
    new, result = fix(src)
    assert new == textwrap.dedent(src)
    assert {p[2] for p in result.problems} == {"docstring: code example or table"}
    assert len(result.problems) == 3


def test_docstring_list_items_keep_a_hanging_indent():
    src = '''\
    def f():
        """Things.

        - a list item that is long enough that it has to be split somewhere before the end ok
        - another item
        """
    '''
    new, _ = fix(src)
    lines = new.splitlines()
    assert lines[3].startswith("    - a list item")
    assert lines[4].startswith("      ") and not lines[4].startswith("       ")
    assert lines[5] == "    - another item"


def test_docstring_split_never_starts_a_line_with_markup():
    # Breaking before "- 1" or "1." would start a list item in Markdown/reST.
    text = "x" * 60 + " aaaa bbbbbbbbbbbbbbbbbbb - 1 then some more words"
    new, _ = fix(f'"""{text}."""\n')
    for line in new.splitlines():
        assert not line.lstrip().startswith(("- ", "1. "))


def test_module_docstring_left_alone_when_the_file_reads___doc__():
    src = f'"""{"word " * 20}end."""\n\nDESCRIPTION = __doc__.splitlines()[0]\n'
    new, result = fix(src)
    assert new == src
    assert result.problems[0][2] == "docstring: the module reads __doc__"


def test_raw_docstring_with_backslashes():
    src = 'def f():\n    r"""A \\d+ pattern, a \\s* pattern, ' + "word " * 14 + 'end."""\n'
    new, _ = fix(src)
    assert long_lines(new) == []
    tree_old, tree_new = ast.parse(src), ast.parse(new)
    old_doc = ast.get_docstring(tree_old.body[0], clean=False)
    new_doc = ast.get_docstring(tree_new.body[0], clean=False)
    assert old_doc.split() == new_doc.split()


# --- rule 5: string literals --------------------------------------------------------


def test_fstring_with_conversion_and_format_spec():
    src = """\
    x = 3.5
    name = "n"
    def f():
        raise ValueError(
            f"mlp_parameter_count({name}): expected a Python int, got {type(x).__name__} {x!r:>10} more"
        )
    """
    new, _ = fix(src)
    lines = new.splitlines()
    assert long_lines(new) == []
    assert lines[4].strip().startswith('f"mlp_parameter_count({name})')
    assert lines[5].strip().startswith('f"')
    assert "{x!r:>10}" in new  # the replacement field is whole
    check_idempotent(new)


def test_fstring_never_split_inside_a_replacement_field():
    # Every space after column 40 is inside a field or a nested string.
    field = "{data['key with spaces'] if data else 'nothing at all here, nope'}"
    src = 'data = {}\nmessage = f"prefix text here: ' + field + ' and the end of it"\n'
    new, _ = fix(src)
    assert field in new
    assert values(new)["message"] == values(src)["message"]
    assert long_lines(new) == []


def test_fstring_with_nested_quotes_and_format_spec_values_match():
    src = (
        "width = 12\nd = {'a b': 1.5}\n"
        'msg = f"the value of d[\'a b\'] is {d[\'a b\']:>{width}.3f}, '
        'and this text goes on for quite a while {width!r} after that field"\n'
    )
    new, _ = fix(src)
    assert long_lines(new) == []
    assert values(new)["msg"] == values(src)["msg"]
    check_idempotent(new)


def test_string_outside_brackets_is_wrapped_in_parentheses():
    src = 'NOTE = "The CC BY-SA version is stated inconsistently upstream (3.0 or 4.0); credited as 3.0."\n'
    new, _ = fix(src)
    assert new == (
        "NOTE = (\n"
        '    "The CC BY-SA version is stated inconsistently upstream (3.0 or 4.0); "\n'
        '    "credited as 3.0."\n'
        ")\n"
    )
    assert values(new) == values(src)


def test_return_of_a_long_string():
    src = """\
    def f():
        return "a very long string returned from the function, which is much too long for one line"
    """
    new, _ = fix(src)
    assert new.splitlines()[1] == "    return ("
    assert new.splitlines()[-1] == "    )"
    assert long_lines(new) == []
    ns_old, ns_new = values(textwrap.dedent(src)), values(new)
    assert ns_old["f"]() == ns_new["f"]()


def test_raise_and_assert_with_long_messages():
    src = """\
    def f(x):
        assert x, f"the value {x} should be positive, and here is some more text to make it long"
        raise RuntimeError("this message is long enough that the whole raise line goes over 88")
    """
    new, _ = fix(src)
    assert long_lines(new) == []
    assert "    assert x, (" in new.splitlines()
    # Directly after an opening bracket: no extra parentheses, pieces one level in.
    assert "    raise RuntimeError(" in new.splitlines()
    assert "((" not in new
    compile(new, "t", "exec")
    check_idempotent(new)


def test_strings_inside_calls_are_split_in_place():
    src = """\
    print(
        "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk llll mmmm nnnn oooo pppp qqqq",
        1,
    )
    """
    new, _ = fix(src)
    lines = new.splitlines()
    assert lines[1].startswith('    "aaaa') and lines[2].startswith('    "')
    assert lines[2].endswith('",')
    assert long_lines(new) == []


def test_dict_literal_values_and_keyword_arguments():
    src = """\
    d = {
        "key": "a rather long value string that will not fit on the line with its key at all",
        "k2": 1,
    }
    call = dict(
        key="a rather long value string that will not fit on the line with its key at all, no",
    )
    """
    new, _ = fix(src)
    assert long_lines(new) == []
    assert '    "key": (' in new.splitlines()
    assert "    key=(" in new.splitlines()
    assert values(new) == values(textwrap.dedent(src))
    check_idempotent(new)


def test_prefixes_and_quotes_are_kept():
    src = """\
    a = [
        rb'raw bytes \\d with some words that go on and on and on and on until past the limit',
        Rf'{1} raw f-string \\s with some words that go on and on and on until past the limit',
        b"bytes with some words that go on and on and on and on and on and on past the limit",
        u"unicode prefix with some words that go on and on and on and on and on past the limit",
    ]
    """
    new, _ = fix(src)
    assert long_lines(new) == []
    lines = [line.strip() for line in new.splitlines()[1:-1]]
    assert sum(line.startswith("rb'") for line in lines) == 2
    assert sum(line.startswith("Rf'") for line in lines) == 2
    assert sum(line.startswith('b"') for line in lines) == 2
    assert sum(line.startswith('u"') for line in lines) == 2
    assert values(new) == values(textwrap.dedent(src))


def test_escape_sequences_survive():
    src = 'x = ["line one\\n and \\t tabs \\N{EM DASH} and \\u00e9 and words to make it long enough ok"]\n'
    new, _ = fix(src)
    assert long_lines(new) == []
    assert "\\N{EM DASH}" in new
    assert values(new) == values(src)


def test_existing_implicit_concatenation_flows_into_the_next_piece():
    src = """\
    x = f(
        "Bo Pang, Lillian Lee (2005). Seeing stars: Exploiting class relationships for "
        "sentiment categorization with respect to rating scales. Sentence Polarity Dataset v1.0, "
        "as packaged by NLTK.",
    )
    """
    new, _ = fix(src.replace("f(", "str("))
    assert long_lines(new) == []
    # No short "Dataset v1.0, " piece on its own: the rest joined the next piece.
    assert len(new.splitlines()) == len(textwrap.dedent(src).splitlines())
    assert values(new) == values(textwrap.dedent(src).replace("f(", "str("))


def test_string_that_cannot_be_split_is_reported():
    src = 'URL = ["https://example.org/' + "a" * 90 + '"]\n'
    new, result = fix(src)
    assert new == src
    assert result.problems[0][2] == "string: no place to split it"


def test_string_annotations_are_not_split():
    src = 'x: "Dict[str, int] | List[Tuple[int, int, int, int, int, int, int, int, int, int, int]]" = 1\n'
    new, _ = fix(src)
    assert new == src


def test_triple_quoted_non_docstring_is_left_alone():
    src = 'x = """\n' + "word " * 20 + '\n"""\n'
    new, result = fix(src)
    assert new == src
    assert result.problems[0][2] == "multi-line string"


# --- chapter files (jupytext py:percent) --------------------------------------------

CHAPTER = """\
# ---
# jupyter:
#   jupytext:
#     formats: md:myst,py:percent
#     a_very_long_header_key: a header value that is long enough to go past the limit of 88
# ---

# %% [markdown]
# # A markdown cell with a long line: these lines must never change, however long they are.
#
# Every Transformer, and therefore every BERT, is built mostly from two kinds of layers here.

# %%
x = 1  # a trailing comment in a code cell, long enough to go past the limit of 88 characters
# %time y = some_magic_that_is_long(argument_one, argument_two, argument_three, arg_four)
# !pip install something-with-a-long-name another-package-name yet-another-package-name-2

# %% tags=["hide-input"]
def f():
    \"\"\"A docstring in a code cell that is long enough to go past the limit of 88 chars.\"\"\"
    return "a string in a code cell that is long enough to go past the limit of 88 c"

# %% [markdown]
# Another markdown cell, also long enough to be over the limit of 88 characters wide, yes.

# %%
await_this = 1
"""


def test_chapter_markdown_cells_header_and_magics_are_unchanged():
    new, result = fix(CHAPTER)
    old_lines = CHAPTER.splitlines()
    new_lines = new.splitlines()
    keep = [line for line in old_lines if line.startswith(("# ", "#\n")) and
            "trailing" not in line and "%%" not in line]
    for line in keep:
        assert line in new_lines
    # Markers, header and magics are byte-identical.
    for line in old_lines:
        if line.startswith(("# %%", "# ---", "# %time", "# !pip")):
            assert line in new_lines
    # The code cells are fixed.
    code_long = [
        line for line in new_lines if len(line) > LIMIT and not line.startswith("#")
    ]
    assert code_long == []
    assert "x = 1" in new_lines
    # Only the magics stay long in code cells (markdown cells are not counted).
    reasons = [p[2] for p in result.problems]
    assert reasons == ["comment: notebook magic", "comment: notebook magic"]
    check_idempotent(new)


def test_chapter_cell_that_does_not_parse_alone_is_left_untouched():
    src = (
        "# %%\n"
        "for i in range(3):\n"
        "# %%\n"
        "    print('a long string in a cell that does not parse alone, so it goes past the limit')\n"
        "# %%\n"
        "x = 'another long string in a fine cell, long enough to go past the limit, yes'\n"
    )
    new, result = fix(src)
    assert new.splitlines()[:5] == src.splitlines()[:5]
    assert long_lines(new) == [src.splitlines()[3]]
    assert any("cannot parse this cell" in e for e in result.errors)
    assert [p[2] for p in result.problems] == ["does not parse"]


def test_chapter_comment_wrap_never_creates_a_magic_or_marker_line():
    text = "x" * 78 + " %%time and !pip are not magics here"
    new, _ = fix(f"# %%\n# {text}\ny = 1\n")
    for line in new.splitlines()[1:]:
        assert not line.startswith(("# %", "# !"))


# --- rule 6, 7, 8: reporting, the safety check, the command line ---------------------


def test_safety_check_catches_a_broken_transformation(monkeypatch, tmp_path):
    # A deliberately broken split: it drops the last character of the last piece.
    real = fit88.flow_string

    def broken(*args, **kwargs):
        result = real(*args, **kwargs)
        if result is None:
            return None
        pieces, k = result
        return pieces[:-1] + [pieces[-1][:-1]], k

    monkeypatch.setattr(fit88, "flow_string", broken)
    monkeypatch.setattr(fit88, "same_literal", lambda old, new: True)
    src = 'x = "a string that is long enough to be split somewhere, past the limit of 88 characters wide"\n'
    path = tmp_path / "m.py"
    path.write_text(src)
    assert fit88.main([str(path)]) == 1
    assert path.read_text() == src  # nothing written


def test_safety_check_in_a_chapter_cell(monkeypatch):
    real = fit88.flow_string

    def broken(*args, **kwargs):
        result = real(*args, **kwargs)
        return None if result is None else ([p.upper() for p in result[0]], result[1])

    monkeypatch.setattr(fit88, "flow_string", broken)
    monkeypatch.setattr(fit88, "same_literal", lambda old, new: True)
    src = (
        "# %%\nx = 1\n# %%\n"
        'y = "a string that is long enough to be split somewhere, past the limit of 88 characters wide"\n'
    )
    result = fit88.process_text(src, "c.py")
    assert any("safety check failed" in e for e in result.errors)
    assert not result.changed
    assert [p[2] for p in result.problems] == ["safety check failed"]


def test_normalised_dump_merges_fstring_constants_and_docstring_space():
    a = 'def f():\n    """a  b\n    c"""\n    return f"x {1} " f"y"\n'
    b = 'def f():\n    """a b c"""\n    return f"x {1} y"\n'
    assert fit88.same_behaviour(a, b, module_doc=True)
    assert not fit88.same_behaviour(a, b.replace("y", "z"), module_doc=True)
    # Whitespace in ordinary strings is not ignored.
    assert not fit88.same_behaviour('x = "a b"\n', 'x = "a  b"\n', module_doc=True)


def test_check_mode_writes_nothing_and_exits_1(tmp_path, capsys):
    path = tmp_path / "m.py"
    src = f"{LONG_COMMENT}\nx = 1\n"
    path.write_text(src)
    assert fit88.main(["--check", str(path)]) == 1
    assert path.read_text() == src
    err = capsys.readouterr().err
    assert f"{path}:1: {len(LONG_COMMENT)} chars" in err


def test_check_mode_exits_0_on_a_clean_file(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    assert fit88.main(["--check", str(path)]) == 0


def test_write_mode_reports_changed_files_and_remaining_lines(tmp_path, capsys):
    path = tmp_path / "m.py"
    path.write_text(f"{LONG_COMMENT}\nURL = ['https://example.org/{'a' * 90}']\n")
    assert fit88.main([str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == f"fixed {path}: 2 -> 1 long lines"
    assert f"{path}:3: " in err and "(string: no place to split it)" in err


def test_directories_are_searched_for_python_files(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(f"{LONG_COMMENT}\n")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "b.py").write_text(f"{LONG_COMMENT}\n")
    assert fit88.main([str(tmp_path)]) == 0
    assert long_lines((tmp_path / "pkg" / "a.py").read_text()) == []
    assert long_lines((tmp_path / ".hidden" / "b.py").read_text()) != []


# --- idempotence and a mixed file ---------------------------------------------------

MIXED = '''\
"""Module docstring whose first line is rather long, long enough to need a split at some space.

Each ``check_*`` function calls the student's code on several inputs, including odd sizes and
edge cases, raises ``AssertionError`` saying what was expected and what came back, and prints a
line starting with a tick when everything passes.
"""

# --- ex-ffn-cross-entropy ------------------------------------------------------------------------
NO_NETWORK = "the network is not reachable from here, so the data must be on disk already"  # port


def f(x, width=3):
    """Raise ValueError unless x is (B, T, D) and context (B, S, D); attention checks the mask."""
    # Two values worth knowing by heart: SiLU'(0) = 1/2, and SiLU' dips below 0 for negative inputs.
    y = str(x)  # a trailing comment that is long enough to push this line over the limit of 88
    d = {
        "key": "a rather long value string that will not fit on the line with its key at all",
        "k2": [
            1,  # a comment inside brackets that is long enough to push the line over the limit
        ],
    }
    msg = (
        f"mlp_parameter_count({x}): expected a Python int, got {type(x).__name__} {x!r:>10} ok"
        f"another piece {y} that is long enough to flow into, and then some more words here"
    )
    return str(d) + msg


def g():
    return "a very long string returned from the function, which is much too long for one line"
'''


def test_mixed_file_is_fixed_behaviour_kept_and_idempotent():
    new, result = fix(MIXED)
    assert long_lines(new) == []
    assert result.long_after == 0
    assert values(new)["f"](7) == values(MIXED)["f"](7)
    check_idempotent(new)


@pytest.mark.parametrize(
    "source", [MIXED, CHAPTER, PARAGRAPH_DOC], ids=["mixed", "chapter", "paragraph"]
)
@pytest.mark.parametrize("carry", [True, False])
def test_idempotent(source, carry):
    once = fit88.process_text(source, "t.py", carry=carry)
    text = once.new_text if once.changed else source
    twice = fit88.process_text(text, "t.py", carry=carry)
    assert not twice.changed


def test_output_is_stable_under_ruff_format(tmp_path):
    """ruff format (line length 88, quotes preserved) leaves the tool's output as is."""
    subprocess = pytest.importorskip("subprocess")
    new, _ = fix(MIXED)
    path = tmp_path / "m.py"
    path.write_text(new)
    cmd = [sys.executable, "-m", "ruff", "format", "--line-length", "88"]
    cmd += ["--config", 'format.quote-style="preserve"', "--check", str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if "No module named ruff" in done.stderr:
        pytest.skip("ruff is not installed")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_tool_itself_fits():
    source = Path(fit88.__file__).read_text()
    assert long_lines(source) == []
    assert not fit88.process_text(source, "fit88.py").changed


def test_docstring_followed_by_a_comment_is_left_alone():
    src = 'def f():\n    """' + "word " * 16 + 'end."""  # a comment\n'
    new, result = fix(src)
    assert new == src
    assert result.problems[0][2] == "docstring: followed by code or a comment"


def test_strings_with_newlines_are_cut_after_a_newline():
    src = (
        'def f():\n    source = "def f(x):\\n    y = 1\\n    ### BEGIN SOLUTION\\n'
        '    return x + y\\n    ### END SOLUTION\\n"\n'
    )
    new, _ = fix(src)
    assert new.splitlines()[2] == (
        '        "def f(x):\\n    y = 1\\n    ### BEGIN SOLUTION\\n    return x + y\\n"'
    )
    assert new.splitlines()[3] == '        "    ### END SOLUTION\\n"'
    assert values(new)["f"].__code__.co_consts == values(src)["f"].__code__.co_consts


def test_raw_strings_are_not_cut_after_backslash_n():
    src = 'x = [r"a\\n' + "b" * 60 + "\\n" + "c" * 20 + ' and some words after it"]\n'
    new, _ = fix(src)
    assert values(new) == values(src)
    for line in new.splitlines():
        assert not line.rstrip(",").endswith('\\n"')


def test_plain_and_fstring_pieces_flow_into_each_other():
    src = """\
    cases = [1, 2]
    msg = (
        f"✓ smoothed_cross_entropy matches nn.CrossEntropyLoss(label_smoothing=...) on {len(cases)} cases, "
        "ignores ignore_index positions and has the same gradient"
    )
    """
    new, _ = fix(src)
    assert long_lines(new) == []
    assert values(new)["msg"] == values(textwrap.dedent(src))["msg"]
    assert len(new.splitlines()) == len(textwrap.dedent(src).splitlines())


def test_plain_piece_with_braces_does_not_join_an_fstring():
    src = """\
    n = 3
    msg = (
        f"this f-string piece is long enough that it must be split, with {n} in it, yes "
        "and this plain one has {braces} that must stay literal braces"
    )
    """
    new, _ = fix(src)
    assert long_lines(new) == []
    assert values(new)["msg"] == values(textwrap.dedent(src))["msg"]
    assert '    "and this plain one has {braces} that must stay literal braces"' in new


def test_short_literal_on_a_long_code_line_is_not_wrapped():
    src = "def fwalk(top='.', topdown=True, onerror=None, *, follow_symlinks=False, dir_fd=None, x=1):\n    pass\n"
    new, result = fix(src)
    assert new == src
    assert result.problems[0][2] == "code"


def test_docstring_line_with_a_long_url_is_left_alone():
    url = "https://example.org/" + "a" * 80
    src = f'def f():\n    """See\n    {url} here.\n    """\n'
    new, result = fix(src)
    assert new == src
    assert result.problems[0][2] == "docstring: a word longer than the limit"
