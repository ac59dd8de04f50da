"""Text tables within a width, Markdown tables, and the wrapping they use.

`text_table` aligns the columns of rows of cells within `width` (100 by default: a terminal or a
review tool), wrapping a cell too long for its column, the widest column narrowed first; a long
word (a path, an ARN) is broken after a `:` or `/`, or the table is shown as records. `noted_table`
puts a note under each row; `md_table` writes the rows as a Markdown table."""

from __future__ import annotations

import textwrap
from itertools import zip_longest
from typing import Sequence

Table = list[list[str]]  # rows as the reports build them
Rows = Sequence[Sequence[str]]  # what the tables take: rows of cells, the first row names the columns

WIDTH = 100  # a report's lines fit a terminal or a review tool this wide
NARROWEST = 12  # a column is wrapped no narrower than this (or its longest word)


def wrap(text: str, width: int, hanging: str = "", break_words: bool = False) -> list[str]:
    """`text` in lines of at most `width`, the lines after the first indented by `hanging`; [""]
    for empty text. A word longer than `width` stays whole, or with `break_words` is broken after
    a `:` or `/` where it can (ARNs, paths), so that the lines joined give the word back."""
    words = text.split()
    if not break_words or all(len(word) <= width for word in words):
        return textwrap.wrap(text, width, subsequent_indent=hanging, break_on_hyphens=False,
                             break_long_words=False) or [""]
    lines: list[str] = []
    line = ""
    for word in words:
        for k, piece in enumerate(_pieces(word, width)):
            glue = "" if k else " "
            if line and len(line) + len(glue) + len(piece) <= width:
                line += glue + piece
            else:
                lines += [line] if line else []
                line = piece
    return lines + [line]


def _pieces(word: str, width: int) -> list[str]:
    """`word` cut into pieces of at most `width`, each after the last `:` or `/` that fits."""
    pieces = []
    while len(word) > width:
        cut = max(word.rfind(":", 0, width), word.rfind("/", 0, width)) + 1 or width
        pieces.append(word[:cut])
        word = word[cut:]
    return [*pieces, word]


def paragraph(text: str, indent: str = "  ", width: int = WIDTH) -> list[str]:
    """A line of prose, indented, wrapped to `width`."""
    return [indent + line for line in wrap(text, width - len(indent))]


def _shrunk(natural: list[int], floors: list[int], budget: int) -> list[int] | None:
    """Column widths within `budget`: the widest column narrowed first, none below its floor;
    None when the floors alone exceed it."""
    widths = list(natural)
    while sum(widths) > budget:
        narrowable = [i for i, w in enumerate(widths) if w > floors[i]]
        if not narrowable:
            return None
        widest = max(narrowable, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def text_table(rows: Rows, indent: str = "  ", records: bool = False, width: int = WIDTH) -> list[str]:
    """Aligned columns within `width`: cells too long for their column wrap onto more lines, the
    widest column narrowed first. A table whose long words (paths, ARNs) cannot fit so is shown as
    records with `records` (the first row names the columns), else its long words are broken."""
    return [line for row in _table_rows(rows, indent, records, width) for line in row]


def _table_rows(rows: Rows, indent: str, records: bool, width: int) -> list[list[str]]:
    """The lines of `text_table`, a list for each row (one list of them all for records)."""
    columns = range(len(rows[0]))
    natural = [max(len(row[i]) for row in rows) for i in columns]
    budget = width - len(indent) - 2 * (len(natural) - 1)
    longest_word = [max((len(word) for row in rows for word in row[i].split()), default=0) for i in columns]
    widths = _shrunk(natural, [min(n, max(w, NARROWEST)) for n, w in zip(natural, longest_word, strict=True)],
                     budget)
    if widths is None and records:
        return [_records(rows, indent, width)]
    widths = widths or _shrunk(natural, [min(n, NARROWEST) for n in natural], budget) or natural
    lines = []
    for row in rows:
        cells = [wrap(cell, w, break_words=True) for cell, w in zip(row, widths, strict=True)]
        lines.append([(indent + "  ".join(p.ljust(w) for p, w in zip(parts, widths, strict=True))).rstrip()
                      for parts in zip_longest(*cells, fillvalue="")])
    return lines


def noted_table(rows: Rows, notes: Sequence[str], indent: str = "  ", width: int = WIDTH) -> list[str]:
    """`text_table` of `rows` with each row's note (if any) on lines of its own under it: a
    column of free text would squeeze the others."""
    lines = []
    for row, note in zip(_table_rows(rows, indent, False, width), notes, strict=True):
        lines += row + (paragraph(note, indent + "    ", width) if note else [])
    return lines


def _records(rows: Rows, indent: str, width: int) -> list[str]:
    """A table too wide for columns: each row its first cell, then each other cell under its
    column's name, wrapped."""
    names, *body = rows
    label = max(len(name) for name in names[1:])
    lines = []
    for row in body:
        lines += paragraph(row[0], indent, width)
        for name, cell in zip(names[1:], row[1:], strict=True):
            room = width - len(indent) - 4 - label
            if not cell:
                continue
            if max(len(word) for word in cell.split()) <= room:
                first, *more = wrap(cell, room)
                lines.append(f"{indent}  {name.ljust(label)}  {first}")
                lines += [f"{indent}  {' ' * label}  {line}" for line in more]
            else:  # a word too long to follow the name: the value on lines of its own
                lines.append(f"{indent}  {name}")
                lines += [f"{indent}    {line}" for line in wrap(cell, width - len(indent) - 4, break_words=True)]
    return lines


def md_table(rows: Rows) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(rows[0]), "|" + "|".join("---" for _ in rows[0]) + "|", *map(line, rows[1:])]
