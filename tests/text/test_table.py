"""The text tables of the commands' reports (fmcluster.text.table): columns aligned within a
width, long cells wrapped, long words broken or the table shown as records, notes under rows, and
Markdown tables."""

from __future__ import annotations

from fmcluster.text import table


def test_a_table_too_wide_wraps_its_cells_or_shows_records():
    """Long cells wrap within their column; a column of words too long to wrap (paths) turns the
    table into records; a long word in a table without names is broken after a `:` or `/`."""
    rows = [["item", "note"], ["node group gpu", "a note " * 30], ["cpu", "short"]]
    lines = table.text_table(rows)
    assert max(map(len, lines)) <= 100 < max(len("  ".join(row)) for row in rows)
    assert lines[1].startswith("  node group gpu  a note a note") and lines[2].startswith(" " * 18 + "note a")
    assert lines[-1] == "  cpu             short"
    paths = [["image", "base", "slurm", "groups"], ["x86", "/aws/" + "x" * 60 + "/ami-id", "/opt/" + "y" * 40, "a"]]
    assert table.text_table(paths, records=True) == [
        "  x86", f"    base    /aws/{'x' * 60}/ami-id", f"    slurm   /opt/{'y' * 40}", "    groups  a"]
    arn = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/" + "p" * 60
    broken = table.text_table([["reservation", arn, "-", "-", "-"]])
    assert max(map(len, broken)) <= 100 and "".join(line[15:].split("  ")[0] for line in broken) == arn
    assert broken[0].split()[1].endswith("training-plan/")


def test_a_table_that_fits_is_aligned_as_it_is():
    """Columns as wide as their widest cell, two spaces apart, no trailing spaces; the width and
    the indent are the caller's."""
    rows = [["STATUS", "CHECK", "RESULT"], ["pass", "quota", "ok"], ["warn", "az", ""]]
    assert table.text_table(rows, indent="") == ["STATUS  CHECK  RESULT", "pass    quota  ok", "warn    az"]
    narrow = table.text_table([["a", "one two three four five six"]], indent="", width=20)
    assert narrow == ["a  one two three", "   four five six"] and table.WIDTH == 100


def test_notes_go_under_their_rows():
    """A note is wrapped under its row, four spaces in from the table's indent; a row without one
    gets no line of its own."""
    lines = table.noted_table([["stack", "time"], ["NAME-network", "3 min"], ["NAME-cluster", "25 min"]],
                              ["", "", "the node groups " * 10], width=60)
    assert lines[:3] == ["  stack         time", "  NAME-network  3 min", "  NAME-cluster  25 min"]
    assert len(lines) > 4 and max(map(len, lines)) <= 60
    assert all(line.startswith("      ") and line[6] != " " for line in lines[3:])
    assert " ".join(line.strip() for line in lines[3:]) == ("the node groups " * 10).strip()


def test_prose_wraps_with_its_indent():
    assert table.wrap("", 10) == [""]
    assert table.wrap("fmcluster plan: a name that is long", 20, hanging="  ") == [
        "fmcluster plan: a", "  name that is long"]
    path = "/aws/service/" + "x" * 30 + "/ami-id"
    assert table.wrap(path, 20) == [path]  # whole, unless asked to break it
    assert "".join(table.wrap(path, 20, break_words=True)) == path
    assert table.paragraph("one two three", indent="    ", width=12) == ["    one two", "    three"]


def test_markdown_tables_escape_their_pipes():
    assert table.md_table([["name", "value"], ["a|b", "c"]]) == [
        "| name | value |", "|---|---|", "| a\\|b | c |"]


def test_columns_say_which_narrow_how_far_and_where_their_words_break():
    """Only the columns named narrow, each no narrower than its figure (the line runs past the
    width past that); a list breaks after its commas; a column aligned right."""
    rows = [["VERDICT", "NODE", "MEASURED"], ["PASS", "node-a,node-b,node-c,node-d", "43.8 GB/s"]]
    hosts = table.Columns(narrow={1: 14}, breaks={1: ","})
    assert table.text_table(rows, indent="", width=34, columns=hosts) == [
        "VERDICT  NODE            MEASURED", "PASS     node-a,node-b,  43.8 GB/s", "         node-c,node-d"]
    assert table.text_table(rows, indent="", width=20, columns=hosts)[1] == "PASS     node-a,node-b,  43.8 GB/s"
    kept = table.text_table(rows, indent="", width=20, columns=table.Columns(narrow={}))
    assert kept == [table.text_table(rows, indent="")[i] for i in range(2)]
    money = table.text_table([["a", "$1.00"], ["bb", "$1,008.00"]], columns=table.Columns(narrow={}, right={1}))
    assert money == ["  a       $1.00", "  bb  $1,008.00"]
    assert table.fits(rows, indent="", width=47) and not table.fits(rows, indent="", width=46)


def test_notes_can_hang_under_a_column():
    """A hint under the RESULT column: wrapped to the line's end, its lines after the first
    indented; a long path in it broken after a `/`."""
    rows = [["STATUS", "CHECK", "RESULT"], ["FAIL", "size", "holds 24 instances"]]
    path = "/aws/service/pcs/ami/" + "d" * 30 + "/x86_64/latest/ami-id"
    lines = table.noted_table(rows, ["", f"hint: size the groups {path}"], width=50, under=2, hanging="      ")
    assert lines[:2] == ["  STATUS  CHECK  RESULT", "  FAIL    size   holds 24 instances"]
    assert lines[2] == " " * 17 + "hint: size the groups" and max(map(len, lines)) <= 50
    assert all(line.startswith(" " * 23) and line[23] != " " for line in lines[3:])
    assert "".join(line.strip() for line in lines[3:]) == path
    assert table.paragraph("file: one two three", indent="    ", width=16, hanging="  ") == [
        "    file: one", "      two three"]
