"""How long a first deploy takes (fmcluster.model.first_deploy, from fmcluster.facts.deploy_times):
what each control plane's cluster stack waits for, how the figures add (one thing after another)
or take the larger (side by side), the critical path, and the first node's way to ready."""

from __future__ import annotations

import pytest

from fmcluster.facts import deploy_times as times
from fmcluster.facts import health
from fmcluster.facts import images as image_facts
from fmcluster.facts.deploy_times import ESTIMATE, PUBLISHED, Minutes
from fmcluster.model import cluster
from fmcluster.model import first_deploy as fd
from fmcluster.model.first_deploy import Span, StackTime, Step
from tests.support.paths import EXAMPLES
from tests.support.specs import base_spec, validated, with_
from tests.support.stacks import example_spec

FIGURES = {name: value for name, value in vars(times).items() if isinstance(value, Minutes)}


def deploy(data: dict) -> fd.FirstDeploy:
    return fd.first_deploy(cluster.resolve(validated(data)))


def of_example(file: str) -> fd.FirstDeploy:
    return fd.first_deploy(cluster.resolve(example_spec(file)))


def span(*figures: Minutes) -> Span:
    return Span(sum(f.low for f in figures), sum(f.high for f in figures))


def on(plane: str, data: dict | None = None) -> dict:
    data = data or base_spec()
    if plane in ("eks", "hyperpod-eks"):
        data = with_(data, "network.extra_availability_zone_ids", ["use1-az6"])
    return with_(data, "orchestrator", {"type": plane})


# ---- the figures ---------------------------------------------------------------------------

def test_every_figure_runs_from_low_to_high_and_says_what_it_rests_on():
    assert len(FIGURES) >= 15
    for name, figure in FIGURES.items():
        assert 0 < figure.low <= figure.high, name
        assert figure.basis in (PUBLISHED, ESTIMATE) and len(figure.source) > 40, name
        if figure.basis == PUBLISHED:  # the vendor's words, with the page they are on
            assert '"' in figure.source and "(" in figure.source, name
    with pytest.raises(ValueError):
        Minutes(10, 5, ESTIMATE, "backwards")
    with pytest.raises(ValueError):
        Minutes(1, 2, "measured somewhere", "no such basis")


def test_the_figures_agree_with_the_repositorys_own():
    """The image build's range holds the typical build the cost line prices; the deep check is
    health's minutes; a PCS node's way to ready stays inside the half hour AWS PCS gives it."""
    assert times.IMAGE_BUILD.low <= image_facts.BUILD_MINUTES_ESTIMATE <= times.IMAGE_BUILD.high
    assert times.DEEP_CHECK.low == times.DEEP_CHECK.high == health.DEEP_CHECK_MINUTES
    node = of_example("p5-pcs.yaml")
    assert node.bound == times.PCS_JOIN_MINUTES and node.node_ready.high <= times.PCS_JOIN_MINUTES


# ---- adding up -------------------------------------------------------------------------------

def test_steps_in_turn_add_and_chains_side_by_side_take_the_larger():
    a, b, c = (Minutes(2, 5, ESTIMATE, "x" * 50), Minutes(10, 20, ESTIMATE, "y" * 50),
               Minutes(1, 40, ESTIMATE, "z" * 50))
    stack = StackTime("storage", "x-storage", (), ((Step("a", a), Step("b", b)), (Step("c", c),)))
    assert fd.in_turn((Step("a", a), Step("b", b))) == Span(12, 25)
    assert stack.span == Span(12, 40)  # the larger low of the chains, and the larger high, each on its own
    assert fd.longest([]) == Span(0, 0)


def test_a_stack_that_waits_adds_and_independent_stacks_overlap():
    """network (2-5) and storage (1-30) are independent; images waits for both, cluster for images."""
    def stack(key: str, after: tuple[str, ...], low: int, high: int) -> StackTime:
        return StackTime(key, f"x-{key}", after, ((Step(key, Minutes(low, high, ESTIMATE, key * 20)),),))

    stacks = (stack("network", (), 2, 5), stack("storage", (), 1, 30), stack("images", ("network", "storage"), 45, 90),
              stack("cluster", ("network", "images"), 15, 30))
    together, path = fd.critical_path(stacks)
    assert together == Span(2 + 45 + 15, 30 + 90 + 30)  # low through network, high through storage
    assert path == ("storage", "images", "cluster")
    alone, path = fd.critical_path(stacks[:2])
    assert alone == Span(2, 30) and path == ("storage",)


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_deploys_in_the_models_order_and_adds_up(example):
    m = cluster.resolve(example_spec(example.rsplit("/", 1)[-1]))
    deploy_ = fd.first_deploy(m)
    order = [s.key for s in m.stacks]
    assert [s.key for s in deploy_.stacks] == order and [s.name for s in deploy_.stacks] == [s.name for s in m.stacks]
    for s in deploy_.stacks:  # a stack waits only for stacks deployed before it
        assert all(order.index(k) < order.index(s.key) for k in s.after), s.key
    assert deploy_.one_at_a_time == sum((s.span for s in deploy_.stacks), Span(0, 0))
    assert deploy_.together.low <= deploy_.one_at_a_time.low and deploy_.together.high <= deploy_.one_at_a_time.high
    # the path ends at a stack nothing waits for: NAME-reference, after the cluster
    assert not any(deploy_.critical_path[-1] in s.after for s in deploy_.stacks)
    assert deploy_.critical_path[-2:] == ("cluster", "reference")
    # the first job waits for the cluster, not for the reference images after it
    upto = order.index("cluster") + 1
    assert deploy_.cluster_ready == sum((s.span for s in deploy_.stacks[:upto]), Span(0, 0))
    assert deploy_.first_job == deploy_.cluster_ready + deploy_.node_ready
    assert deploy_.one_at_a_time == deploy_.cluster_ready + deploy_.stack("reference").span


def test_storage_without_a_file_system_deploys_beside_the_network():
    """Buckets alone reference no VPC: NAME-storage waits for nothing, so with --concurrency it
    overlaps NAME-network and the critical path runs around it."""
    data = base_spec()
    del data["storage"]["lustre"]
    deploy_ = deploy(data)
    assert deploy_.stack("storage").after == () and deploy_.stack("storage").span == span(times.BUCKETS)
    # the cluster waits for the buckets all the same (fmcluster_cdk/stacks/app.py), but they are
    # ready long before the network it waits for too
    assert deploy_.stack("cluster").after == ("network", "storage", "observability", "images")
    assert deploy_.critical_path == ("network", "observability", "images", "cluster", "reference")
    # storage (1-2) overlaps the longer network (2-5): the critical path leaves it out
    assert deploy_.together + deploy_.stack("storage").span == deploy_.one_at_a_time


def test_storage_takes_its_longest_file_system_and_the_links_after_lustre():
    deploy_ = of_example("p5en-eks.yaml")  # Lustre with two links, and the OpenZFS home
    storage = deploy_.stack("storage")
    assert [[s.minutes for s in chain] for chain in storage.chains] == [
        [times.BUCKETS], [times.LUSTRE, times.LUSTRE_LINKS], [times.OPENZFS]]
    assert storage.span == span(times.LUSTRE, times.LUSTRE_LINKS)
    unlinked = deploy(with_(base_spec(), "storage.lustre.links", []))
    assert unlinked.stack("storage").span == span(times.LUSTRE)
    teams = of_example("p6-b200-hyperpod-slurm.yaml")  # HyperPod Slurm with teams: the accounting database
    assert [times.ACCOUNTING_DATABASE] in [[s.minutes for s in c] for c in teams.stack("storage").chains]


def test_observability_adds_grafana_beside_prometheus():
    plain = deploy(base_spec())
    assert plain.stack("observability").span == span(times.PROMETHEUS)
    grafana = deploy(with_(base_spec(), "observability.grafana", True))
    assert grafana.stack("observability").span == span(times.GRAFANA)
    quiet = deploy(with_(base_spec(), "observability", {"prometheus": False, "grafana": False}))
    assert [s.key for s in quiet.stacks] == ["network", "storage", "images", "cluster", "reference"]
    assert quiet.stack("cluster").after == ("network", "storage", "images")


def test_images_build_side_by_side_and_the_reference_images_after_the_cluster():
    """A stack's images build side by side (CloudFormation creates its independent resources
    concurrently): NAME-images takes its longest node image, NAME-reference its longest reference
    image, and NAME-reference waits for the cluster (the network it reads, and the cluster, so that
    nothing waits for it), never the other way round."""
    two = of_example("p6e-gb200-pcs.yaml")  # arm64 GPU nodes, x86_64 login nodes
    ((nodes,),) = two.stack("images").chains
    assert nodes.minutes == times.IMAGE_BUILD and nodes.what.startswith("2 node images")
    ((references,),) = two.stack("reference").chains
    assert references.minutes == times.REFERENCE_BUILD and references.what.startswith("1 reference GPU image")
    assert two.stack("reference").after == ("network", "cluster")
    assert "reference" not in two.stack("cluster").after
    assert times.REFERENCE_BUILD.low <= image_facts.REFERENCE_BUILD_MINUTES_ESTIMATE <= times.REFERENCE_BUILD.high
    # a Kubernetes plane: the reference image only, after the cluster
    eks = of_example("p5en-eks.yaml")
    assert [s.key for s in eks.stacks][-2:] == ["cluster", "reference"] and "images" not in eks.stack("cluster").after
    unreferenced = deploy(with_(base_spec(), "images", {"reference": False}))
    ((step,),) = unreferenced.stack("images").chains
    assert step.minutes == times.IMAGE_BUILD and [s.key for s in unreferenced.stacks][-1] == "cluster"


# ---- per control plane -----------------------------------------------------------------------

@pytest.mark.parametrize("plane, figures", [
    ("pcs", (times.PCS_CLUSTER, times.PCS_NODE_GROUPS)),
    ("hyperpod-slurm", (times.HYPERPOD_CLUSTER,)),
    ("eks", (times.EKS_CLUSTER, times.EKS_CHARTS)),
    ("hyperpod-eks", (times.EKS_CLUSTER, times.EKS_CHARTS, times.HYPERPOD_CLUSTER)),
])
def test_the_cluster_stack_of_each_control_plane(plane, figures):
    deploy_ = deploy(on(plane))
    (chain,) = deploy_.stack("cluster").chains
    assert tuple(s.minutes for s in chain) == figures
    assert deploy_.stack("cluster").span == span(*figures)
    # NAME-images on the Slurm planes, whose nodes launch from its node images (the cluster waits
    # for it); NAME-reference on every plane, after the cluster
    slurm = plane in ("pcs", "hyperpod-slurm")
    assert ("images" in [s.key for s in deploy_.stacks]) == ("images" in deploy_.stack("cluster").after) == slurm
    assert deploy_.stacks[-1].key == "reference"


def test_a_pcs_node_boots_after_the_deploy_runs_the_node_program_and_the_deep_check():
    deploy_ = deploy(base_spec())
    assert deploy_.node_group == "gpu" and deploy_.in_stack == "" and deploy_.when == ""
    assert [s.minutes for s in deploy_.node] == [times.INSTANCE_BOOT, times.NODE_PROGRAM, times.DEEP_CHECK]
    assert deploy_.node_ready == span(times.INSTANCE_BOOT, times.NODE_PROGRAM, times.DEEP_CHECK)
    unchecked = deploy(with_(base_spec(), "health", {"deep_check": False}))
    assert [s.minutes for s in unchecked.node] == [times.INSTANCE_BOOT, times.NODE_PROGRAM]
    dynamic = deploy(with_(base_spec(), "node_groups[0]", {"name": "gpu", "instance_type": "p5.48xlarge",
                                                          "min_count": 0, "max_count": 4}))
    assert dynamic.when.startswith("a job asks for the group")


def test_the_first_node_is_of_the_first_gpu_group():
    data = with_(base_spec(), "node_groups", [{"name": "cpu", "instance_type": "c7i.8xlarge", "count": 2},
                                              {"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}])
    assert deploy(data).node_group == "gpu"


def test_hyperpod_creates_its_nodes_with_the_cluster_then_checks_them():
    deploy_ = deploy(on("hyperpod-slurm"))
    assert "lifecycle scripts" in deploy_.in_stack and deploy_.bound is None
    assert [s.minutes for s in deploy_.node] == [times.HYPERPOD_DEEP_CHECKS]
    unchecked = deploy(with_(on("hyperpod-slurm"), "health", {"deep_check": False}))
    assert unchecked.node == () and unchecked.node_ready == Span(0, 0)
    on_eks = deploy(on("hyperpod-eks"))
    assert [s.minutes for s in on_eks.node] == [times.HYPERPOD_DEEP_CHECKS, times.DEVICE_PLUGINS]


def test_an_eks_gpu_group_joins_while_its_stack_is_created_unless_it_waits_for_its_block():
    joined = deploy(on("eks"))
    assert "join" in joined.in_stack and [s.minutes for s in joined.node] == [times.DEVICE_PLUGINS]
    block = of_example("p5en-eks.yaml")  # a Capacity Block: the group is created with no node
    assert block.in_stack == "" and block.when.startswith("its Capacity Block starts")
    assert [s.minutes for s in block.node] == [times.INSTANCE_BOOT, times.DEVICE_PLUGINS]
