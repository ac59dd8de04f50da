"""`fmcluster jobs SPEC -o DIR`: the cluster's kit (fmcluster.kits.jobs) written into DIR, existing
kit files replaced; the report says what was written.

The kit lists the files it wrote in DIR/.fmcluster-kit (MARKER). A file of the new kit that is
already in DIR, neither listed there nor the same bytes, is the user's own (`-o .` in a project
holding its README.md): nothing is written then, and the report names those files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from fmcluster.kits import jobs, reference
from fmcluster.kits.common import kit_groups

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel

FORMATS = ("text",)
MARKER = ".fmcluster-kit"  # the files a kit wrote into its directory, one a line, after a comment
_MARKER_HEAD = "# files written by fmcluster jobs; it replaces only these in this directory\n"


@dataclass(frozen=True)
class JobsReport:
    directory: Path
    written: tuple[str, ...]  # the kit's files, relative to `directory`
    error: Optional[str] = None  # why the kit could not be written (some files may have been)
    hint: str = "name a directory you can write: fmcluster jobs SPEC -o DIR"
    left_out: tuple[str, ...] = ()  # a line per GPU node group the kit has no jobs for, and why


def run(model: ClusterModel, directory: str | Path, team: str | None = None) -> JobsReport:
    """Write the kit into `directory`; on a cluster with teams, run as `team` (default: the first)."""
    out = Path(directory)
    written: list[str] = []
    names = [t.name for t in model.teams]
    if team is not None and team not in names:
        return JobsReport(out, (), f"there is no team '{team}' in the spec", hint=(
            "a team of its teams section: " + ", ".join(names) if names else "the spec has no teams: leave --team out"))
    chosen = model.team(team) if team is not None else (model.teams[0] if model.teams else None)
    groups, left = kit_groups(model, chosen)
    left_out = tuple(item.line for item in left)
    if not groups and left and chosen is not None:  # (without teams, no group is left out)
        return JobsReport(out, (), f"team {chosen.name} cannot hold any GPU node group whole, and each acceptance "
                          "job asks for every node of its group: no job to write", hint="\n  ".join(left_out),
                          left_out=left_out)
    files = jobs.kit(model, chosen)
    ours = _listed(out)
    theirs = [f.path for f in files if f.path not in ours and _someone_elses(out / f.path, f.content)]
    if theirs:
        return JobsReport(out, (), f"{out}: would replace files the kit did not write: {', '.join(theirs)}",
                          hint="name an empty or new directory, such as the default: fmcluster jobs SPEC -o "
                               "acceptance")
    try:
        for kit_file in files:
            path = out / kit_file.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(kit_file.content, encoding="utf-8")
            path.chmod(0o755 if kit_file.executable else 0o644)
            written.append(kit_file.path)
        (out / MARKER).write_text(_MARKER_HEAD + "".join(f"{name}\n" for name in sorted(ours | set(written))),
                                  encoding="utf-8")
    except OSError as exc:
        return JobsReport(out, tuple(written), f"cannot write {out}: {exc.strerror or exc}", left_out=left_out)
    return JobsReport(out, tuple(written), left_out=left_out)


def _listed(out: Path) -> set[str]:
    """The files an earlier kit wrote into `out`, from its MARKER; none without one."""
    try:
        text = (out / MARKER).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return set()
    return {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}


def _someone_elses(path: Path, content: str) -> bool:
    """Whether `path` holds something other than `content`: a file (or link, or directory) that
    writing the kit's file would lose."""
    if not os.path.lexists(path):
        return False
    try:
        return path.is_symlink() or path.read_bytes() != content.encode("utf-8")
    except OSError:
        return True


def render(report: JobsReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr): one line, the files and node groups of the kit."""
    if report.error is not None:
        return "", f"fmcluster jobs: {report.error}\n  hint: {report.hint}\n"
    out = report.directory
    groups = sorted({p.split("/", 1)[0] for p in report.written if "/" in p and p != reference.RECIPE})
    return (f"{out}: {len(report.written)} files, acceptance jobs of node groups {', '.join(groups)} "
            f"(see {out / 'README.md'})\n" + "".join(f"  {line}\n" for line in report.left_out)), ""


def exit_code(report: JobsReport) -> int:
    """2 when the directory cannot be written, the team is not the spec's, or it can hold no GPU
    node group whole (no job to write)."""
    return 2 if report.error is not None else 0
