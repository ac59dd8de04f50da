"""`fmcluster diff OLD NEW` and `fmcluster diff --deployed SPEC`: run, render, exit code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from fmcluster.deploy import cfn_schemas
from fmcluster.deploy.deployed import NotReadable
from fmcluster.deploy.diff.changes import (
    KEY,
    Change,
    Comparison,
    NewCluster,
    Templates,
    resources_of,
    stateful_and_retained,
)
from fmcluster.deploy.diff.compare import compare, data_keys
from fmcluster.deploy.diff.notes import health_notes, home_notes, identity_changes, team_changes
from fmcluster.deploy.diff.render import refused, render_json, render_text
from fmcluster.deploy.diff.rolls import image_rolls
from fmcluster.deploy.synth import SynthesisFailed
from fmcluster.model import cluster as model
from fmcluster.spec.models import ClusterSpec

FORMATS = ("text", "json")
Synthesizer = Callable[[ClusterSpec], Templates]  # spec -> stack name -> template
Reader = Callable[[Iterable[str], str], Templates]  # stack names, region -> deployed templates


@dataclass(frozen=True)
class DiffReport:
    old: str  # what is compared: the OLD spec file, or "deployed NAME (REGION)"
    new: str
    allow_data_loss: bool
    comparison: Comparison | None = None  # None when nothing could be compared
    error: str | None = None
    hint: str | None = None
    synthesis_failed: int = 0  # the CDK app's exit code when it failed (it said why on stderr)


NO_SCHEMAS = DiffReport("", "", False, error="fmcluster diff needs the CloudFormation resource schemas that "
                        "cfn-lint ships", hint="pip install cfn-lint (make install does)")


def _where(spec: ClusterSpec) -> str:
    return f"{spec.region}, account {spec.account or 'of the credentials'}"



def new_cluster(changes: list[str], old: ClusterSpec, old_templates: Templates) -> NewCluster:
    """The old cluster that a change of identity leaves behind: its stacks and what holds data in them."""
    keys = data_keys(old_templates)
    left = [Change(stack, lid, r["Type"], "keep", stateful=True, retained=stateful_and_retained(r)[1])
            for stack in sorted(old_templates) for lid, r in sorted(resources_of(old_templates[stack]).items())
            if cfn_schemas.holds_data(r["Type"]) and (r["Type"] != KEY or (stack, lid) in keys)]
    return NewCluster(changes, _where(old), sorted(n for n in old_templates if "/" not in n), left)


def run_deployed(spec: ClusterSpec, allow_data_loss: bool = False, name: str = "SPEC", *,
                 synthesize: Synthesizer, read: Reader) -> DiffReport:
    """`fmcluster diff --deployed SPEC`: the deployed stacks of the spec's cluster (read by `read`,
    fmcluster.deploy.deployed.read on the command line) against the spec as this code synthesizes it."""
    if not cfn_schemas.available():
        return NO_SCHEMAS
    old_name = f"deployed {spec.name} ({spec.region})"
    try:
        new_templates = synthesize(spec)
    except SynthesisFailed as exc:
        return DiffReport(old_name, name, allow_data_loss, synthesis_failed=exc.code)
    try:
        deployed = read(list(new_templates), spec.region)
    except NotReadable as exc:
        return DiffReport(old_name, name, allow_data_loss,
                          error=f"cannot read the deployed stacks of {spec.name} in {spec.region}: {exc}",
                          hint="it reads the account with the default credentials (cloudformation:GetTemplate and "
                               "DescribeStackResource); set AWS_PROFILE, or compare two specs instead: "
                               "fmcluster diff OLD NEW")
    report = compare(deployed, new_templates, region=spec.region)
    report.rolls = image_rolls(model.resolve(spec), report, deployed, new_templates)
    if not deployed:
        report.notes.append(f"no stack of {spec.name} is deployed in {spec.region}: everything is new")
    return DiffReport(old_name, name, allow_data_loss, report)


def run(old: ClusterSpec, new: ClusterSpec, allow_data_loss: bool = False, names: Iterable[str] = ("OLD", "NEW"),
        *, synthesize: Synthesizer) -> DiffReport:
    """`fmcluster diff OLD NEW`. `synthesize` gives a spec's templates (the command line's runs the
    CDK app: fmcluster.deploy.synth.apart); it is handed in, so that nothing here imports the CDK side."""
    old_name, new_name = names
    if not cfn_schemas.available():
        return NO_SCHEMAS
    try:
        old_templates, new_templates = synthesize(old), synthesize(new)
    except SynthesisFailed as exc:  # the app said why on stderr
        return DiffReport(old_name, new_name, allow_data_loss, synthesis_failed=exc.code)
    changes = identity_changes(old, new)
    # another name, region or account is a new set of stacks, not an update of these: nothing of
    # the old deployment is compared with (or replaced by) the new one, which starts empty
    report = compare({} if changes else old_templates, new_templates, region=new.region)
    if changes:
        report.new_cluster = new_cluster(changes, old, old_templates)
    else:
        resolved = model.resolve(new)
        report.rolls = image_rolls(resolved, report, old_templates, new_templates)
        report.teams = team_changes(model.resolve(old).teams, resolved.teams)
        report.notes.extend(home_notes(old, new))
        report.notes.extend(health_notes(old, new))
    if bool(old.account) != bool(new.account) and not changes:
        given, spec = (old, "OLD") if old.account else (new, "NEW")
        report.notes.append(f"only {spec} names an account ({given.account}); the other deploys to the account of "
                            "the credentials: compared as the same account (if they differ, NEW is a new cluster "
                            "there, with empty storage)")
    return DiffReport(old_name, new_name, allow_data_loss, report)


def render(report: DiffReport, fmt: str = "text") -> tuple[str, str]:
    """(stdout, stderr): the changes (text or JSON), or on stderr why nothing was compared."""
    if report.comparison is None:
        return "", (f"error: {report.error}\n  hint: {report.hint}\n" if report.error else "")
    render_as = render_json if fmt == "json" else render_text
    return render_as(report.comparison, report.old, report.new, report.allow_data_loss), ""


def exit_code(report: DiffReport) -> int:
    """1 for an update the service refuses (whatever is allowed), for data loss not allowed, or
    when nothing could be compared; the CDK app's own code when it failed."""
    if report.comparison is None:
        return report.synthesis_failed or 1
    return 1 if refused(report.comparison, report.allow_data_loss) else 0
