"""CloudFormation's limits with many node groups, stable node-group templates, termination protection.

CloudFormation rejects a template over 1 MB (the body given through S3), over 500 resources,
200 outputs or 200 parameters. One p5.48xlarge launch template with its user data is tens of KB,
so NAME-cluster keeps each spec node group in a nested stack of its own (fmcluster_cdk/stacks/node_groups.py).
Here each control plane gets as many node groups of p5.48xlarge as it takes (on-demand, so each
also gets a cluster placement group, with observability on, so each also carries the metrics
set-up): AWS PCS 9 (10 compute node groups, the login group one of them), EKS 64 (Kueue's flavors
per resource group, one per node group), HyperPod Slurm 98 (100 instance groups with the
controller and login groups; properties of one AWS::SageMaker::Cluster), HyperPod EKS 64 (Kueue
again). Every template of the cloud assembly, nested ones included, must stay within the limits.
Each assembly is synthesized once for the module.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fmcluster.deploy import assembly
from fmcluster.facts import naming
from fmcluster.facts.controlplanes import HYPERPOD_MAX_INSTANCE_GROUPS, KUEUE_MAX_FLAVORS, PCS_MAX_COMPUTE_NODE_GROUPS
from fmcluster.spec import loader
from tests.support import security
from tests.support.paths import ROOT

pytestmark = pytest.mark.synth

MAX_BYTES, MAX_RESOURCES, MAX_OUTPUTS, MAX_PARAMETERS = 1_000_000, 500, 200, 200
# The most node groups each control plane takes (module docstring); the login group of PCS and the
# controller and login groups of hyperpod-slurm count against its limit.
MAX_GROUPS = {"pcs": PCS_MAX_COMPUTE_NODE_GROUPS - 1, "eks": KUEUE_MAX_FLAVORS,
              "hyperpod-slurm": HYPERPOD_MAX_INSTANCE_GROUPS - 2,
              "hyperpod-eks": min(HYPERPOD_MAX_INSTANCE_GROUPS, KUEUE_MAX_FLAVORS)}


# The most buckets a cluster takes: each is named in the node role's (and HyperPod's execution
# role's) inline policies, which must stay within IAM's size quota.
BUCKETS = ["datasets", "checkpoints"] + [f"b{i:02d}" for i in range(naming.MAX_BUCKETS - 2)]


def spec_text(kind: str, groups: int, *, protect: bool = False, names: list[str] | None = None) -> str:
    names = names or [f"gpu{i:03d}" for i in range(groups)]
    body = "".join(f"\n  - name: {name}\n    instance_type: p5.48xlarge\n    count: 1\n" for name in names)
    extra = "network: {extra_availability_zone_ids: [use1-az6]}\n" if "eks" in kind else ""
    buckets = ", ".join("{name: " + name + "}" for name in BUCKETS)
    return f"""name: lim-{kind}
region: us-east-1
availability_zone_id: use1-az4
protect: {str(protect).lower()}
{extra}storage:
  buckets: [{buckets}]
  lustre:
    storage_capacity_gib: 4800
    links: [{{bucket: datasets, path: /datasets, import: [NEW]}}]
orchestrator: {{type: {kind}}}
observability: {{prometheus: true}}
node_groups:{body}"""


def synthesize(text: str, outdir: Path) -> dict[str, assembly.Template]:
    from fmcluster.deploy.synth import app_context, cdk_json
    from fmcluster_cdk.synthesis import build_app

    result = loader.load_text(text, "limits.yaml")
    assert result.ok, [d.format() for d in result.diagnostics]
    build_app([result.spec], str(outdir), app_context(cdk_json(ROOT))).synth()
    return assembly.load(outdir)


def measure(template: assembly.Template) -> dict[str, int]:
    body = json.loads(template.path.read_text())
    return {"bytes": len(json.dumps(body, separators=(",", ":"))), "resources": len(body.get("Resources", {})),
            "outputs": len(body.get("Outputs", {})), "parameters": len(body.get("Parameters", {}))}


@pytest.fixture(scope="module", params=["pcs", "eks", "hyperpod-slurm", "hyperpod-eks"])
def many(request, tmp_path_factory):
    """(kind, node groups, {template name: Template}) of one spec at the most node groups tested."""
    kind = request.param
    groups = MAX_GROUPS[kind]
    return kind, groups, synthesize(spec_text(kind, groups), tmp_path_factory.mktemp(kind) / "cdk.out")


def test_every_template_within_cloudformation_limits(many):
    kind, groups, templates = many
    sizes = {name: measure(t) for name, t in templates.items()}
    print(f"\n{kind}, {groups} node groups: " + "; ".join(f"{n} {s}" for n, s in sizes.items() if "/" not in n))
    for name, size in sizes.items():
        assert size["bytes"] < MAX_BYTES, (name, size)
        assert size["resources"] <= MAX_RESOURCES, (name, size)
        assert size["outputs"] <= MAX_OUTPUTS, (name, size)
        assert size["parameters"] <= MAX_PARAMETERS, (name, size)


def test_with_margin_to_grow(many):
    """Not only within the limits: the parent and network templates would take several times the
    node groups, and no template grows by an output or parameter per group (the storage stack has
    an output per bucket, at most naming.MAX_BUCKETS)."""
    kind, groups, templates = many
    sizes = {name: measure(t) for name, t in templates.items()}
    for name, size in sizes.items():
        per_bucket = len(BUCKETS) if name.endswith("-storage") else 0
        assert size["bytes"] < MAX_BYTES / 2, (name, size)
        assert size["outputs"] < 25 + per_bucket and size["parameters"] < 25, (name, size)
    if kind in ("pcs", "eks"):
        cluster = sizes[f"lim-{kind}-cluster"]
        assert cluster["resources"] < MAX_RESOURCES / 4 and cluster["bytes"] < MAX_BYTES / 4, cluster


def test_one_nested_stack_per_node_group(many):
    kind, groups, templates = many
    nested = [name for name, t in templates.items() if t.nested]
    if kind in ("pcs", "eks"):
        assert sorted(nested) == sorted(f"lim-{kind}-cluster/NodeGroup-gpu{i:03d}" for i in range(groups))
    else:  # HyperPod's instance groups are properties of its one cluster resource
        assert nested == []
        (cluster,) = [r for r in templates[f"lim-{kind}-cluster"].body["Resources"].values()
                      if r["Type"] == "AWS::SageMaker::Cluster"]
        own = 2 if kind == "hyperpod-slurm" else 0  # controller and login
        assert len(cluster["Properties"]["InstanceGroups"]) == groups + own
        if kind == "hyperpod-slurm":
            assert groups + own == HYPERPOD_MAX_INSTANCE_GROUPS


def test_storage_alone_is_termination_protected_by_default(many):
    kind, _, templates = many
    manifest = json.loads((next(iter(templates.values())).path.parent / "manifest.json").read_text())
    protected = {a["displayName"] for a in manifest["artifacts"].values()
                 if a.get("type") == "aws:cloudformation:stack" and a["properties"].get("terminationProtection")}
    assert protected == {f"lim-{kind}-storage"}


# ---- adding a node group ---------------------------------------------------------------------

@pytest.fixture(scope="module", params=["pcs", "eks"])
def grown(request, tmp_path_factory):
    """The same spec before and after a node group is added in front of the others (and the
    others reordered), with `protect: true` after."""
    kind = request.param
    folder = tmp_path_factory.mktemp(f"grown-{kind}")
    before = synthesize(spec_text(kind, 0, names=["alpha", "beta"]), folder / "before")
    after = synthesize(spec_text(kind, 0, names=["new", "beta", "alpha"], protect=True), folder / "after")
    return kind, before, after


def test_adding_a_node_group_leaves_the_other_groups_alone(grown):
    kind, before, after = grown
    parent = f"lim-{kind}-cluster"
    assert set(after) - set(before) == {f"{parent}/NodeGroup-new"}
    for name in (f"{parent}/NodeGroup-alpha", f"{parent}/NodeGroup-beta"):
        assert after[name].path.read_bytes() == before[name].path.read_bytes(), name  # the same nested template
        assert after[name].logical_id == before[name].logical_id
        old, new = (t[parent].body["Resources"][t[name].logical_id] for t in (before, after))
        assert new == old, name  # the same AWS::CloudFormation::Stack: same template URL and parameters
    # Every other resource of the cluster stack keeps its logical id.
    assert set(before[parent].body["Resources"]) <= set(after[parent].body["Resources"])


def test_protect_true_protects_every_stack(grown):
    """Every stack but NAME-reference, which holds no data and whose failed first build must be
    deletable (fmcluster.model.cluster, REFERENCE)."""
    kind, before, after = grown
    for templates, expected in ((before, {f"lim-{kind}-storage"}),
                                (after, {n for n, t in after.items()
                                         if not t.nested and n != f"lim-{kind}-reference"})):
        manifest = json.loads((next(iter(templates.values())).path.parent / "manifest.json").read_text())
        protected = {a["displayName"] for a in manifest["artifacts"].values()
                     if a.get("type") == "aws:cloudformation:stack" and a["properties"].get("terminationProtection")}
        assert protected == expected


def test_every_role_policy_fits_iams_quotas(many):
    """At the most node groups and buckets a control plane takes, every role's inline policies
    together, and its trust policy, fit IAM's quotas once deployed (tokens at their longest)."""
    kind, _, templates = many
    sizes = {(name, role, what): size for name, t in templates.items()
             for (role, what), size in security.policy_sizes(t.body).items()}
    print(f"\n{kind}: largest inline {max(v for k, v in sizes.items() if k[2] == 'inline')}, "
          f"trust {max(v for k, v in sizes.items() if k[2] == 'trust')}")
    for (name, role, what), size in sizes.items():
        limit = security.INLINE_POLICIES_MAX if what == "inline" else security.TRUST_POLICY_MAX
        assert size <= limit, (name, role, what, size)
