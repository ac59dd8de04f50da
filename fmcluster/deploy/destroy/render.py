"""`fmcluster destroy` in words: the plan (what is deleted, kept and what that costs a month) and
what was done; the exit code."""

from __future__ import annotations

from fmcluster.deploy import retained
from fmcluster.deploy.destroy.records import DELETE, KEEP, DestroyReport, Plan
from fmcluster.deploy.retained import Cost
from fmcluster.model import cluster as model
from fmcluster.text.table import Columns, text_table

FORMATS = ("text",)


def _money(value: float) -> str:
    return f"${value:,.2f}"


# destroy's tables keep every cell whole: what they name (a stack, a log group) is typed or
# searched for as it stands
WHOLE = Columns(narrow={})
COSTS = Columns(narrow={}, right={1})


def render_plan(p: Plan, dry_run: bool = False) -> str:
    """What destroy finds and will do, in words."""
    head = f"fmcluster destroy: {p.cluster} in {p.region}, account {p.account}"
    lines = [head + (" (dry run: nothing is deleted)" if dry_run else "")]
    if not any(s.action in (DELETE, KEEP) or s.left for s in p.stacks):
        return "\n".join([*lines, f"nothing of {p.cluster} is deployed in {p.region}"]) + "\n"
    rows = []
    for s in p.stacks:
        notes = [s.why] if s.why else []
        if s.action == DELETE and s.protected:
            notes.append("its termination protection is lifted")
        if s.status and s.status not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
            notes.append(f"now {s.status}")
        rows.append((s.action, s.name, "; ".join(notes)))
    lines += ["stacks, in the order they are deleted (the reverse of the deploy order):",
              *text_table(rows, columns=WHOLE)]
    lines += _render_nodes(p)
    if p.removed:
        lines.append("deleted after their stack" + (", the data with them:" if p.with_data else
                                                     " (they hold no data):"))
        lines += text_table([(r.stack, r.label) for r in p.removed], columns=WHOLE)
    lines += _render_costs(p)
    left = [r for s in p.stacks if s.action != KEEP and not p.with_data for r in s.left
            if r.goes_with is None and not r.swept]
    if left:
        lines.append("of which CloudFormation leaves behind the stacks it deletes (DeletionPolicy Retain), to "
                     "delete by hand:")
        lines += [f"  {r.how()}" for r in left]
    if not p.with_data and p.kept:
        lines.append("--with-data deletes what is kept too (after the cluster's name is typed)")
    return "\n".join(lines) + "\n"


def _render_nodes(p: Plan) -> list[str]:
    if not any(s.key == model.CLUSTER for s in p.deleting):
        return []
    counts: dict[tuple[bool, str], int] = {}
    for node in p.nodes:
        counts[(node.compute, node.group)] = counts.get((node.compute, node.group), 0) + 1
    compute = ", ".join(f"{group}: {n}" for (is_compute, group), n in counts.items() if is_compute)
    own = ", ".join(f"{group}: {n}" for (is_compute, group), n in counts.items() if not is_compute)
    text = f"nodes up: {compute or 'none in the compute groups'}"
    if own:
        text += f"; the control plane's own ({own}) go with its stack"
    return [text]


def _render_costs(p: Plan) -> list[str]:
    """What is kept, a line each: its stack, what it costs a month (or `by use`, or `unpriced`), what
    it is; then the total of what has a figure."""
    kept = p.kept
    if not kept:
        return [f"nothing of {p.cluster} is kept"] if p.with_data else []
    t = p.table
    where = f"{t.region} list prices of {t.as_of}, {t.currency}" + (
        f"; {p.region}'s may differ" if p.region != t.region else "")
    rows, total, by_use, unpriced = [], 0.0, False, []
    for resource in kept:
        cost = retained.cost(resource, t) or Cost(None, "no charge of its own")
        if cost.monthly_usd is not None:
            total += cost.monthly_usd
        by_use |= cost.by_use
        if cost.monthly_usd is None and not cost.by_use and cost.note not in unpriced:
            unpriced.append(cost.note)
        text = _money(cost.monthly_usd) if cost.monthly_usd is not None else "by use" if cost.by_use else "unpriced"
        rows.append((resource.stack, text, resource.label))
    rows.append(("total", _money(total), "a month" + (", and what is billed by use (what it stores, takes in or "
                                                      "serves)" if by_use else "")))
    lines = [f"kept, and what it costs a month ({where}):", *text_table(rows, columns=COSTS)]
    if unpriced:
        lines.append(f"  unpriced: {'; '.join(unpriced)}")
    return lines


def render(report: DestroyReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr): the plan (unless it was printed before) and what was done; on stderr the
    refusal or the failure, with its hint."""
    out = ""
    if report.plan is not None and not report.plan_shown:
        out = render_plan(report.plan, report.dry_run)
    problem = report.refused or report.failed
    err = ""
    if problem is not None:
        err = f"error: {report.path}: {problem.where}: {problem.reason}\n  hint: {problem.hint}\n"
    if report.plan is None:
        return out, err
    if report.refused is not None:
        out += "refused: nothing was deleted\n"
    elif report.dry_run:
        out += "dry run: nothing was deleted\n"
    elif report.done or report.failed:
        names = {s.name for s in report.plan.stacks}
        stacks = [d for d in report.done if d in names]
        others = len(report.done) - len(stacks)
        out += (f"deleted: {len(stacks)} stack{'s' if len(stacks) != 1 else ''}"
                + (f" ({', '.join(stacks)})" if stacks else "")
                + (f" and {others} resource{'s' if others != 1 else ''} they left behind" if others else "") + "\n")
        if report.failed:
            out += f"stopped at {report.failed.where}: what comes after it in the plan is still there\n"
        elif report.plan.kept:
            out += f"kept: what the list above names (fmcluster destroy {report.path} --with-data deletes it)\n"
        else:
            out += f"nothing of {report.plan.cluster} is left in {report.plan.region}\n"
    elif any(s.action == KEEP for s in report.plan.stacks):
        out += "nothing to delete: what is deployed is kept\n"
    return out, err


def exit_code(report: DestroyReport) -> int:
    """1 when refused (a guard, the account unreadable) or when a deletion failed."""
    return 1 if report.refused is not None or report.failed is not None else 0
