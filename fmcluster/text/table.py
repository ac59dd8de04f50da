"""Text tables within a width, Markdown tables, and the wrapping they use.

`text_table` aligns the columns of rows of cells within `width` (100 by default: a terminal or a
review tool), wrapping a cell too long for its column, the widest column narrowed first; a long
word (a path, an ARN) is broken after a `:` or `/`, or the table is shown as records; `Columns`
says which columns may narrow, and how far, where their words break and which align right.
`noted_table` puts a note under each row (or hung under a column); `table_rows` gives each row's
lines, for a caller that puts lines of its own under them; `md_table` writes the rows as a Markdown
table. The tables of plan, preflight, verify, destroy and capacity are laid out here."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Collection, Mapping, Optional, Sequence

Table = list[list[str]]  # rows as the reports build them
Rows = Sequence[Sequence[str]]  # what the tables take: rows of cells, the first row names the columns

WIDTH = 100  # a report's lines fit a terminal or a review tool this wide
NARROWEST = 12  # a column is wrapped no narrower than this (or its longest word)


def wrap(text: str, width: int, hanging: str = "", break_words: bool = False, breaks: str = ":/") -> list[str]:
    """`text` in lines of at most `width`, the lines after the first indented by `hanging`; [""]
    for empty text. A word longer than `width` stays whole, or with `break_words` is broken after
    one of `breaks` where it can (a `:` or `/`: ARNs, paths; a `,`: lists), so that the lines
    joined give the word back."""
    words = text.split()
    if not break_words or all(len(word) <= width - len(hanging) for word in words):
        return textwrap.wrap(text, width, subsequent_indent=hanging, break_on_hyphens=False,
                             break_long_words=False) or [""]
    lines: list[str] = []
    line = ""
    for word in words:
        for k, piece in enumerate(_pieces(word, width - len(hanging) if lines or line else width, breaks)):
            glue = "" if k else " "
            if line and len(line) + len(glue) + len(piece) <= width:
                line += glue + piece
            else:
                lines += [line] if line else []
                line = (hanging if lines else "") + piece
    return lines + [line]


def _pieces(word: str, width: int, breaks: str) -> list[str]:
    """`word` cut into pieces of at most `width`, each after the last of `breaks` that fits."""
    pieces = []
    while len(word) > width:
        cut = max(word.rfind(c, 0, width) for c in breaks) + 1 or width
        pieces.append(word[:cut])
        word = word[cut:]
    return [*pieces, word]


def paragraph(text: str, indent: str = "  ", width: int = WIDTH, hanging: str = "",
              break_words: bool = False) -> list[str]:
    """A line of prose, indented, wrapped to `width` (the lines after the first indented by
    `hanging` more; a word too long broken with `break_words`)."""
    return [indent + line for line in wrap(text, width - len(indent), hanging, break_words)]


@dataclass(frozen=True)
class Columns:
    """How a table's columns give way to its width. `narrow`: the columns that may be narrowed,
    each to no less than its figure (a column that may not keeps its widest cell, and the line may
    run past the width); None: any column, to no less than its longest word (or NARROWEST).
    `breaks`: after which characters a word too long for a column's width breaks (":/" where not
    named). `right`: the columns aligned right."""

    narrow: Optional[Mapping[int, int]] = None
    breaks: Mapping[int, str] = field(default_factory=dict)
    right: Collection[int] = ()


ANY = Columns()


def _shrunk(natural: list[int], floors: list[int], budget: int) -> list[int]:
    """Column widths within `budget`, the widest column narrowed first, none below its floor (so
    over `budget` when the floors are)."""
    widths = list(natural)
    while sum(widths) > budget:
        narrowable = [i for i, w in enumerate(widths) if w > floors[i]]
        if not narrowable:
            break
        widest = max(narrowable, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def fits(rows: Rows, indent: str = "  ", width: int = WIDTH) -> bool:
    """Whether the rows fit within `width` with no cell wrapped."""
    return len(indent) + sum(_natural(rows)) + 2 * (len(rows[0]) - 1) <= width


def _natural(rows: Rows) -> list[int]:
    return [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]


def text_table(rows: Rows, indent: str = "  ", records: bool = False, width: int = WIDTH,
               columns: Columns = ANY) -> list[str]:
    """Aligned columns within `width`: cells too long for their column wrap onto more lines, the
    widest column narrowed first (of those `columns` lets narrow). A table whose long words
    (paths, ARNs) cannot fit so is shown as records with `records` (the first row names the
    columns), else its long words are broken."""
    return [line for row in table_rows(rows, indent, width, columns, records) for line in row]


def table_rows(rows: Rows, indent: str = "  ", width: int = WIDTH, columns: Columns = ANY,
               records: bool = False) -> list[list[str]]:
    """The lines of `text_table`, a list for each row (one list of them all for records): for a
    caller that puts lines of its own under a row."""
    widths = _widths(rows, indent, width, columns, records)
    return [_records(rows, indent, width)] if widths is None else _laid_out(rows, widths, indent, columns)


def _widths(rows: Rows, indent: str, width: int, columns: Columns, records: bool) -> Optional[list[int]]:
    """The columns' widths; None where the table is to be shown as records."""
    natural = _natural(rows)
    budget = width - len(indent) - 2 * (len(natural) - 1)
    if columns.narrow is not None:
        return _shrunk(natural, [min(n, columns.narrow.get(i, n)) for i, n in enumerate(natural)], budget)
    longest_word = [max((len(word) for row in rows for word in row[i].split()), default=0)
                    for i in range(len(natural))]
    widths = _shrunk(natural, [min(n, max(w, NARROWEST)) for n, w in zip(natural, longest_word, strict=True)],
                     budget)
    if sum(widths) <= budget:
        return widths
    if records:
        return None
    widths = _shrunk(natural, [min(n, NARROWEST) for n in natural], budget)
    return widths if sum(widths) <= budget else natural


def _laid_out(rows: Rows, widths: list[int], indent: str, columns: Columns) -> list[list[str]]:
    lines = []
    for row in rows:
        cells = [[cell] if len(cell) <= w else wrap(cell, w, break_words=True, breaks=columns.breaks.get(i, ":/"))
                 for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        lines.append([(indent + "  ".join(p.rjust(w) if i in columns.right else p.ljust(w)
                                          for i, (p, w) in enumerate(zip(parts, widths, strict=True)))).rstrip()
                      for parts in zip_longest(*cells, fillvalue="")])
    return lines


def noted_table(rows: Rows, notes: Sequence[str], indent: str = "  ", width: int = WIDTH,
                columns: Columns = ANY, under: Optional[int] = None, hanging: str = "") -> list[str]:
    """`text_table` of `rows` with each row's note (if any) on lines of its own under it: a
    column of free text would squeeze the others. The notes are indented four spaces in from the
    table, or hang under the column `under` (wrapped to the line's end, or to the column where
    that is wider; their lines after the first indented by `hanging` more)."""
    widths = _widths(rows, indent, width, columns, False) or []
    at = len(indent) + sum(widths[:under]) + 2 * under if under is not None else 0
    lines = []
    for row, note in zip(_laid_out(rows, widths, indent, columns), notes, strict=True):
        if note and under is not None:
            room = max(width - at, widths[under])
            row = row + [" " * at + line for line in wrap(note, room, hanging, break_words=True)]
        elif note:
            row = row + paragraph(note, indent + "    ", width)
        lines += row
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
