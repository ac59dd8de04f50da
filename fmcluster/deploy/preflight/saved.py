"""A preflight report saved with `fmcluster preflight SPEC --format json > FILE`, read back by
`fmcluster plan SPEC --preflight FILE` for the reservations it read (their windows). A file that
is no such report of the spec's cluster is refused with why, and a hint that names a new file,
never FILE itself: a command that wrote over the user's own file (the spec itself, given to
--preflight by mistake, or a copy of it) would lose it."""

from __future__ import annotations

import json
import os


class Unusable(Exception):
    """FILE is no saved preflight report of the cluster: `message` says why; `hint`, how to save
    one (None where a report was saved, of another cluster)."""

    def __init__(self, message: str, hint: str | None) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


def save_hint(path: str) -> str:
    """How to save a preflight report: into a new file, never `path` (the file given to
    --preflight, which `> FILE` would overwrite)."""
    name = "preflight.json"
    try:
        same = os.path.abspath(path) == os.path.abspath(name) or os.path.samefile(path, name)
    except OSError:  # either is missing
        same = False
    if same:
        name = "preflight-report.json"
    return f"save one with `fmcluster preflight SPEC --format json > {name}`, then pass `--preflight {name}`"


def reservations(path: str, cluster: str, spec_path: str) -> list[dict[str, object]]:
    """The "reservations" of `fmcluster preflight SPEC --format json` saved in `path`; Unusable
    when the file is not such a report of `cluster` (or is the spec itself, `spec_path`)."""
    def refused(message: str, hint: bool = True) -> Unusable:
        return Unusable(message, save_hint(path) if hint else None)

    try:
        if os.path.samefile(path, spec_path):
            raise refused("--preflight names the spec itself; it takes the report that `fmcluster preflight` printed")
    except OSError:
        pass  # a missing file is said below
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise refused(f"cannot read a preflight report: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        report = json.loads(text)
    except json.JSONDecodeError as exc:
        if _is_cluster_spec(text):
            raise refused("this is a cluster spec, not a preflight report; --preflight takes the JSON that "
                          "`fmcluster preflight SPEC --format json` printed") from None
        raise refused(f"cannot read a preflight report: not JSON ({exc})") from None
    found = report.get("reservations") if isinstance(report, dict) else None
    if not isinstance(found, list) or not all(isinstance(r, dict) for r in found):
        raise refused("not a report of fmcluster preflight --format json (no \"reservations\" list)")
    if report.get("cluster") != cluster:
        raise refused(f"a preflight report of cluster {report.get('cluster')!r}, not of {cluster!r}", hint=False)
    return found


def _is_cluster_spec(text: str) -> bool:
    """Whether a text that is not JSON reads as a cluster spec (a YAML mapping with node_groups)."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and "node_groups" in data
