"""The acceptance kit's own files: a job's output cut at the kit's node markers, the files that
are never a result (the kit's scripts, sources, notes), and the node groups the kit's
expected.json has jobs for. Pure: texts in, values out."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from typing import Collection, Mapping, Optional

from fmcluster.kits.verify.reading import Refusal, lines_of

_MARKER = re.compile(r"^==> fmcluster node=(\S+) group=(\S+) test=(\S+) <==\s*$")
_GLUED_MARKER = re.compile(r"([^\n])(==> fmcluster node=\S+ group=\S+ test=\S+ <==)")
# Pyxis' progress lines (NVIDIA/pyxis pyxis_slurmstepd.c: slurm_spank_log "pyxis: importing docker
# image: %s" and "pyxis: imported docker image: %s"), which slurmstepd prints outside the step's own
# output, so they land anywhere in the job's file, with or without srun --label's "N: ": not a
# result's lines. (Its failures, "pyxis: failed to import docker image" and the like, stay.)
_PYXIS_PROGRESS = re.compile(r"^(?:\s*\d+: )?pyxis: import(?:ing|ed) docker image: \S+\s*$")


@dataclass(frozen=True)
class NodePart:
    host: Optional[str]  # "all" for a step across nodes; None: text outside any marker
    group: Optional[str]
    test: Optional[str]
    text: str
    # the file's line number of each line of `text` (Pyxis' lines left out between them), so a
    # parser's line in the part is told as the file's
    lines: tuple[int, ...] = field(default=(), compare=False)
    marker_line: int = field(default=0, compare=False)  # the file's line of the part's marker (0: none)

    def file_line(self, line: int) -> int:
        """The file's line number of the part's line `line` (1-based)."""
        if 1 <= line <= len(self.lines):
            return self.lines[line - 1]
        return (self.lines[-1] if self.lines else self.marker_line) + max(line - len(self.lines), 0)


def split_by_node(text: str) -> tuple[NodePart, ...]:
    """The parts of a kit's output file, at the markers `==> fmcluster node=HOST group=GROUP test=TEST
    <==` (fmcluster.kits.jobs.MARKER). Text before the first marker is a part of its own (host, group and
    test None) where it is not blank; a file without markers is one such part. Pyxis' progress
    lines (_PYXIS_PROGRESS) are left out wherever they are."""
    parts: list[NodePart] = []
    head: Optional[tuple[str, str, str, int]] = None
    body: list[str] = []
    numbers: list[int] = []

    def close() -> None:
        chunk = "".join(body)
        if head is not None:
            parts.append(NodePart(head[0], head[1], head[2], chunk, tuple(numbers), head[3]))
        elif chunk.strip():
            parts.append(NodePart(None, None, None, chunk, tuple(numbers)))

    for number, line in enumerate(re.findall(r"[^\n]*\n|[^\n]+$", text), 1):
        if "pyxis: import" in line and _PYXIS_PROGRESS.match(line):
            continue
        if "==> fmcluster " not in line:
            body.append(line)
            numbers.append(number)
            continue
        # a marker glued to the end of an output without its last newline starts a line of its own
        glued = _GLUED_MARKER.search(line)
        if glued is not None and _MARKER.match(line[glued.start(2):].rstrip("\r\n")):
            body.append(line[:glued.start(2)] + "\n")
            numbers.append(number)
            line = line[glued.start(2):]
        match = _MARKER.match(line.rstrip("\r\n"))
        if match:
            close()
            head = (match.group(1), match.group(2), match.group(3), number)
            body, numbers = [], []
        else:
            body.append(line)
            numbers.append(number)
    close()
    if not parts:
        parts.append(NodePart(None, None, None, text, tuple(range(1, text.count("\n") + 2))))
    return tuple(parts)


def joined(parts: tuple[NodePart, ...], tests: Collection[str]) -> tuple[NodePart, ...]:
    """The parts, those of one marker (node, group and a test of `tests`) joined into its first: a
    job that requeues itself appends its next run, under its marker again, to its own output file
    (the kit's smoke job: sbatch --open-mode=append), and its runs are read as one."""
    out: list[NodePart] = []
    first: dict[tuple[Optional[str], Optional[str], Optional[str]], int] = {}
    for part in parts:
        key = (part.host, part.group, part.test)
        if part.test not in tests or key not in first:
            if part.test in tests:
                first[key] = len(out)
            out.append(part)
            continue
        earlier = out[first[key]]
        out[first[key]] = replace(earlier, text=earlier.text + part.text, lines=earlier.lines + part.lines)
    return tuple(out)


def marker_refusals(text: str) -> tuple[Refusal, ...]:
    """The lines that start as the kit's marker does (`==> fmcluster `) and are not one: a marker
    cut short, or a byte of it changed, would leave its part read as another's, or as a plain
    output."""
    return tuple(Refusal(number, f"a line that starts as the kit's marker and is not one: {line[:120]!r}")
                 for number, line in enumerate(lines_of(text), 1)
                 if line.startswith("==> fmcluster ") and not _MARKER.match(line.rstrip("\r")))


# files that are a kit's, a source or a note, whatever they mention: suffix -> what it is
_NOT_RESULTS = {".py": "a Python source", ".sh": "a shell script", ".sbatch": "an sbatch script",
                ".yaml": "a YAML file", ".yml": "a YAML file", ".md": "a Markdown note",
                ".rst": "a reStructuredText note", ".toml": "a TOML file", ".ipynb": "a notebook",
                ".html": "an HTML page"}


def not_a_result(source: str, text: str) -> Optional[str]:
    """Why a file is not a result whatever it holds (a kit's script, manifest, README or
    expected.json, a source, a note), else None."""
    name = os.path.basename(source)
    suffix = os.path.splitext(name)[1].lower()
    if suffix in _NOT_RESULTS:
        return f"{_NOT_RESULTS[suffix]} ({suffix}): a source, kit or note file, not a result"
    if text.startswith("#!"):
        return "a script (it starts with #!), not a result"
    if name == "expected.json":
        return "the kit's expected figures (expected.json: the node groups it has jobs for), not a result"
    return None


def kit_groups(files: Mapping[str, str]) -> Optional[set[str]]:
    """The node groups the kit had jobs for, from its expected.json among `files` (its
    submit-all.sh copies it into results/; listed as not judged, a kit file); None without one:
    every GPU group is expected. An expected.json that does not parse (or nests deeper than
    Python reads) names none."""
    found: Optional[set[str]] = None
    for source, text in files.items():
        if os.path.basename(source) != "expected.json":
            continue
        try:
            figures = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(figures, dict):
            found = (found or set()) | {str(name) for name in figures}
    return found
