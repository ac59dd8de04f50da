"""Every check's stable id is in the generated rule reference (docs/reference/rules.md, written by
docs/gen_reference.py from the registry) with its severity, and the reference names no other; the
guide's grouped table of checks (docs/spec.md, "What `validate` checks") names the same ids."""

import ast
import re

from fmcluster.spec import accepting, loader, rules
from tests.support.paths import EXAMPLES_DIR, ROOT


def reference_ids() -> dict[str, str]:
    """Id -> severity, from the rows of the generated rule reference."""
    text = (ROOT / "docs" / "reference" / "rules.md").read_text()
    ids: dict[str, str] = {}
    for ident, severity in re.findall(r"^\| `([a-z][a-z0-9-]*)` \| (error|warning) \|", text, re.M):
        assert ident not in ids, f"{ident} is listed twice"
        ids[ident] = severity
    return ids


def table_ids() -> dict[str, str]:
    """Id -> severity column of the guide's table under "What `validate` checks"."""
    text = (ROOT / "docs" / "spec.md").read_text()
    section = text.split("## What `validate` checks", 1)[1].split("\n## ", 1)[0]
    ids: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            for ident in re.findall(r"`([a-z][a-z0-9-]*)`", cells[0]):
                ids[ident] = cells[1]
    return ids


def format_ids() -> set[str]:
    """The ids of the spec's format errors: the kinds given to _fail and _pattern in fmcluster.spec.models."""
    trees = [ast.parse(path.read_text()) for path in sorted((ROOT / "fmcluster" / "spec" / "models").glob("*.py"))]
    return {node.args[0].value.replace("_", "-") for tree in trees for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("_fail", "_pattern")
            and node.args and isinstance(node.args[0], ast.Constant)}


def every_id() -> dict[str, str]:
    ids = {rules.rule_id(fn): "warning" if rules.rule_id(fn) in rules.WARNING_RULES else "error"
           for fn in rules.RULES}
    ids.update({i: "error" for i in (*loader.ERROR_IDS, *format_ids(), "accepted-warnings")})
    ids[accepting.UNUSED_RULE] = "warning"
    return ids


def test_the_rule_reference_lists_every_check_with_its_severity():
    assert reference_ids() == every_id()


def test_the_guide_groups_every_check_with_its_severity():
    assert table_ids() == every_id()


def test_ids_are_distinct_per_rule():
    ids = [rules.rule_id(fn) for fn in rules.RULES]
    assert len(ids) == len(set(ids))
    assert not set(ids) & set(loader.ERROR_IDS) & format_ids()


def test_findings_have_the_severity_their_rule_is_registered_with():
    """accepted_warnings relies on it: warning rules report warnings only, the others errors.
    Checked over every example and specs that make each warning rule speak."""
    from tests.support import specs

    eks = specs.with_(specs.base_spec(), "orchestrator.type", "eks")  # eks-admin-role, enough-availability-zones
    cb = specs.with_(specs.with_(specs.base_spec(), "node_groups[0].capacity",
                                 {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}),
                     "node_groups[0].placement_group", "pg")  # capacity-block-not-placed
    labels = specs.with_(specs.base_spec(), "node_groups[0].labels", {"team": "ml"})  # node-labels-only-on-...
    examples = sorted((EXAMPLES_DIR).glob("*.yaml"))
    diagnostics = [d for example in examples for d in loader.load(example).diagnostics]
    for spec in (eks, cb, labels):
        diagnostics += specs.problems(spec)
    seen: dict[str, set[str]] = {}
    for d in diagnostics:
        seen.setdefault(d.rule, set()).add(d.severity)
    assert {"eks-admin-role", "capacity-block-not-placed", "node-labels-only-on-kubernetes"} <= set(seen)
    for rule, severities in seen.items():
        warns = rule in rules.WARNING_RULES or rule == accepting.UNUSED_RULE
        assert severities <= ({"warning", "accepted"} if warns else {"error"}), (rule, severities)
