"""The plan's "First deploy" section: how long each stack takes to create, in deploy order, the
deploy one stack at a time and with independent stacks together, and when the first node is ready
for a job (fmcluster.model.first_deploy, from the figures of fmcluster.facts.deploy_times). Its
records (fmcluster.plan.shape.estimates) made from the model, and the rows and lines that
fmcluster.plan.render lays out as text and markdown."""

from __future__ import annotations

from fmcluster.facts import deploy_times
from fmcluster.model import first_deploy as model
from fmcluster.model.cluster import CLUSTER, ClusterModel
from fmcluster.plan.shape.estimates import FirstDeployPlan, SpanPlan, StackTimePlan, StepPlan

TITLE = "First deploy (each stack's creation, in deploy order)"
SOURCES = "fmcluster/facts/deploy_times.py"
PUBLISHED_MARK = " (published)"


def _step(step: model.Step) -> StepPlan:
    m = step.minutes
    return StepPlan(what=step.what, low_minutes=m.low, high_minutes=m.high, basis=m.basis, source=m.source)


def _span(span: model.Span) -> SpanPlan:
    return SpanPlan(low_minutes=span.low, high_minutes=span.high)


def build(m: ClusterModel) -> FirstDeployPlan:
    fd = model.first_deploy(m)
    names = {s.key: s.name for s in fd.stacks}
    return FirstDeployPlan(
        stacks=[StackTimePlan(name=s.name, key=s.key, waits_for=[names[k] for k in s.after], low_minutes=s.span.low,
                              high_minutes=s.span.high, chains=[[_step(step) for step in c] for c in s.chains])
                for s in fd.stacks],
        one_at_a_time=_span(fd.one_at_a_time), together=_span(fd.together), concurrency=len(fd.stacks),
        critical_path=[names[k] for k in fd.critical_path], cluster_deployed=_span(fd.cluster_ready),
        node_group=fd.node_group, node_in_stack=fd.in_stack,
        node_starts=fd.when, node_steps=[_step(s) for s in fd.node], node_ready=_span(fd.node_ready),
        node_bound_minutes=fd.bound, first_job=_span(fd.first_job))


# ---- words ---------------------------------------------------------------------------------

def clock(minutes: int) -> str:
    """45 -> '45 min', 60 -> '1 h', 76 -> '1 h 16 min'."""
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} min"
    return f"{hours} h" + (f" {rest} min" if rest else "")


def span(low: int, high: int) -> str:
    """'2 to 5 min', '3 min', '1 h 16 min to 2 h 50 min'."""
    if low == high:
        return clock(low)
    if high < 60:
        return f"{low} to {high} min"
    return f"{clock(low)} to {clock(high)}"


def of(s: SpanPlan | StackTimePlan | StepPlan) -> str:
    return span(s.low_minutes, s.high_minutes)


def _step_words(step: StepPlan) -> str:
    return f"{step.what}: {of(step)}" + (PUBLISHED_MARK if step.basis == deploy_times.PUBLISHED else "")


def stack_note(stack: StackTimePlan) -> str:
    """What takes a stack's time: its chains side by side ('; '), each chain's steps in turn."""
    return "; ".join(", ".join(_step_words(step) for step in chain) for chain in stack.chains)


def _keys(fd: FirstDeployPlan, names: list[str]) -> str:
    """Stacks by their keys ('network, storage'): the cluster's name is every stack's prefix."""
    key = {s.name: s.key for s in fd.stacks}
    return ", ".join(key[n] for n in names)


def stack_rows(fd: FirstDeployPlan) -> list[list[str]]:
    """A row per stack: its name, the stacks it waits for, how long it takes."""
    return [["stack", "waits for", "takes"], *[[s.name, _keys(fd, s.waits_for) or "-", of(s)] for s in fd.stacks]]


def lines(fd: FirstDeployPlan) -> list[str]:
    """The totals, the first node and the sources, a sentence each."""
    together = (f"with cdk deploy --all --concurrency {fd.concurrency}: {of(fd.together)}, each stack as soon as "
                f"those it waits for are deployed (critical path: {_keys(fd, fd.critical_path)})"
                if fd.together != fd.one_at_a_time else
                f"cdk deploy --all --concurrency {fd.concurrency} gains nothing: each stack waits for the one "
                "before it")
    out = [f"one stack at a time (cdk deploy --all, the pipeline): {of(fd.one_at_a_time)}", together]
    cluster = next(s for s in fd.stacks if s.key == CLUSTER)
    after = fd.stacks[fd.stacks.index(cluster) + 1:]
    if after:
        out.append(f"cluster deployed: {of(fd.cluster_deployed)} after a deploy one stack at a time starts; "
                   f"{', '.join(s.name for s in after)} comes after it, and nothing waits for it")
    starts = fd.node_starts or f"{cluster.name} is deployed"
    steps = ", then ".join(f"{s.what} ({of(s)})" for s in fd.node_steps)
    node = f"first node of {fd.node_group}: ready {of(fd.node_ready)} after {starts}" + (f": {steps}" if steps else "")
    if fd.node_in_stack:
        node += f"; its stack's creation includes {fd.node_in_stack}"
    if fd.node_bound_minutes is not None:
        node += f"; AWS PCS gives a node about {fd.node_bound_minutes} minutes to join Slurm"
    out.append(node)
    out.append(f"first job: {of(fd.first_job)} after a deploy one stack at a time starts"
               + (f", if by then {fd.node_starts}" if fd.node_starts else ""))
    out.append(f"figures marked{PUBLISHED_MARK} are the vendor's; the others are estimates, as AWS publishes "
               f"none for them: {SOURCES} gives each one's page or reason")
    return out
