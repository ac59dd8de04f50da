"""How long a cluster's first deploy takes, from the durations of fmcluster.facts.deploy_times: each
of the model's stacks in deploy order, what it waits for and what takes its time; the deploy one
stack at a time, as `cdk deploy --all` runs it (its --concurrency is 1 unless given), and its
critical path where independent stacks deploy together (--concurrency N); when the cluster stack is
deployed, which NAME-reference (the reference GPU images) comes after; and the first GPU node's way
to ready after the cluster, so that a user knows when the first job can start.

Figures add where one thing waits for another and take the larger where things happen side by
side, the low figures and the high figures each on their own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from fmcluster.facts import deploy_times as times
from fmcluster.facts.deploy_times import Minutes
from fmcluster.model.cluster import CLUSTER, IMAGES, NETWORK, OBSERVABILITY, REFERENCE, STORAGE, ClusterModel, NodeGroup


@dataclass(frozen=True)
class Span:
    """From `low` to `high` minutes."""

    low: int
    high: int

    def __add__(self, other: Span) -> Span:
        return Span(self.low + other.low, self.high + other.high)


ZERO = Span(0, 0)


def longest(spans: Iterable[Span]) -> Span:
    """What spans that run side by side take: the largest low and the largest high figure."""
    spans = list(spans)
    return Span(max((s.low for s in spans), default=0), max((s.high for s in spans), default=0))


@dataclass(frozen=True)
class Step:
    """Something a deploy waits for, and how long it takes."""

    what: str
    minutes: Minutes

    @property
    def span(self) -> Span:
        return Span(self.minutes.low, self.minutes.high)


def in_turn(steps: Iterable[Step]) -> Span:
    """What steps that wait one for another take: their sum."""
    return sum((s.span for s in steps), ZERO)


@dataclass(frozen=True)
class StackTime:
    """One stack's creation: `chains` run side by side, the steps of each one after another."""

    key: str
    name: str
    after: tuple[str, ...]  # the keys of the stacks it waits for (its dependencies)
    chains: tuple[tuple[Step, ...], ...]

    @property
    def span(self) -> Span:
        return longest(in_turn(chain) for chain in self.chains)


@dataclass(frozen=True)
class FirstDeploy:
    stacks: tuple[StackTime, ...]  # in deploy order (the model's)
    one_at_a_time: Span  # every stack after the one before: `cdk deploy --all`, the pipeline
    together: Span  # the critical path, independent stacks side by side (cdk deploy --concurrency)
    critical_path: tuple[str, ...]  # its stacks' keys, first to last
    # one stack at a time, up to the end of the cluster stack (NAME-reference, where there is one,
    # comes after it, and nothing waits for that)
    cluster_ready: Span
    node_group: str  # the group whose first node is timed: the first GPU group (else the first)
    in_stack: str  # what the cluster stack's creation already includes of that node ("" nothing)
    node: tuple[Step, ...]  # that node's steps to ready, after the deploy
    when: str  # what starts the node, a clause ("a job asks for the group ..."); "": the deploy's end
    # the most the control plane gives a new node to be ready before it counts it failed (AWS PCS's
    # lifecycle scripts: about 30 minutes to join Slurm); None: no bound is published
    bound: Optional[int] = None

    @property
    def node_ready(self) -> Span:
        return in_turn(self.node)

    @property
    def first_job(self) -> Span:
        """From the deploy's start to the first job, one stack at a time: the cluster stack's end,
        then the node (the reference images build meanwhile)."""
        return self.cluster_ready + self.node_ready

    def stack(self, key: str) -> StackTime:
        return next(s for s in self.stacks if s.key == key)


def accounting_database(m: ClusterModel) -> bool:
    """NAME-storage holds a Slurm accounting database: SageMaker HyperPod Slurm with teams (the
    storage stack, fmcluster_cdk/stacks/storage.py)."""
    return bool(m.teams) and m.control_plane.type == "hyperpod-slurm"


def depends_on(m: ClusterModel) -> dict[str, tuple[str, ...]]:
    """Each stack's dependencies, by key, as the CDK app makes them: its references to another
    stack's resources (a file system in the VPC, the storage key, the workspace), and the explicit
    ones of the images, the cluster and the reference images (fmcluster_cdk/stacks/app.py: the last
    read the network only, and wait for the cluster so that nothing waits for them).
    tests/cdk/test_stack_order.py holds them to the synthesized assemblies."""
    spec = m.spec.storage
    in_vpc = bool(spec.lustre or spec.home or accounting_database(m))
    needs = {
        NETWORK: (),
        STORAGE: (NETWORK,) if in_vpc else (),
        OBSERVABILITY: (NETWORK,) + ((STORAGE,) if spec.lustre else ()),
        IMAGES: (NETWORK, STORAGE) + ((OBSERVABILITY,) if m.observed else ()),
        # storage always: the buckets, whose names the cluster stack derives (fmcluster_cdk/stacks/app.py)
        CLUSTER: (NETWORK, STORAGE) + ((OBSERVABILITY,) if m.observed else ()) + ((IMAGES,) if m.images else ()),
        REFERENCE: (NETWORK, CLUSTER),
    }
    return {s.key: needs[s.key] for s in m.stacks}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _its(count: int, word: str) -> str:
    """'its WORD' for one, 'its N WORDs' for more."""
    return f"its {word}" if count == 1 else f"its {_plural(count, word)}"


def _chains(m: ClusterModel, key: str) -> tuple[tuple[Step, ...], ...]:
    spec = m.spec
    if key == NETWORK:
        return ((Step("VPC, subnets, NAT gateway, S3 endpoint, flow logs, security groups", times.NETWORK),),)
    if key == STORAGE:
        chains: list[tuple[Step, ...]] = [
            (Step("S3 buckets" + (" and the storage key" if spec.storage.kms else ""), times.BUCKETS),)]
        lustre = spec.storage.lustre
        if lustre is not None:
            chain = [Step(f"FSx for Lustre ({lustre.storage_capacity_gib:,} GiB {lustre.deployment_type})",
                          times.LUSTRE)]
            if lustre.links:
                chain.append(Step(f"then {_its(len(lustre.links), 'data repository association')}",
                                  times.LUSTRE_LINKS))
            chains.append(tuple(chain))
        if spec.storage.home is not None:
            chains.append((Step("FSx for OpenZFS, the shared home", times.OPENZFS),))
        if accounting_database(m):
            chains.append((Step("the Slurm accounting database (RDS for MariaDB)", times.ACCOUNTING_DATABASE),))
        return tuple(chains)
    if key == OBSERVABILITY:
        chains = [(Step("Managed Prometheus workspace, alert rules, alarms", times.PROMETHEUS),)]
        if spec.observability.grafana:
            chains.append((Step("Managed Grafana workspace and its dashboards", times.GRAFANA),))
        return tuple(chains)
    if key == IMAGES:  # CloudFormation creates a stack's images side by side: the longest build counts
        return ((_builds(len(m.images), "node image", "built and tested", times.IMAGE_BUILD),),)
    if key == REFERENCE:
        return ((_builds(len(m.reference_images), "reference GPU image", "built and pushed to ECR",
                         times.REFERENCE_BUILD),),)
    return (_cluster_chain(m),)


def _builds(count: int, what: str, done: str, minutes: Minutes) -> Step:
    return Step(f"{_plural(count, what)} {done}" + (" side by side" if count > 1 else ""), minutes)


def _cluster_chain(m: ClusterModel) -> tuple[Step, ...]:
    plane = m.control_plane.type
    groups = len(m.all_groups)
    if plane == "pcs":
        return (Step("AWS PCS cluster", times.PCS_CLUSTER),
                Step(f"then {_its(groups, 'compute node group')} and queues", times.PCS_NODE_GROUPS))
    hyperpod = (f"SageMaker HyperPod cluster: {_plural(groups, 'instance group')}, their instances launched and "
                "their lifecycle scripts run")
    if plane == "hyperpod-slurm":
        return (Step(hyperpod, times.HYPERPOD_CLUSTER),)
    eks = Step(f"Amazon EKS cluster and {_its(len(_eks_node_groups(m)), 'managed node group')}",
               times.EKS_CLUSTER)
    charts = Step("then the Helm charts and manifests", times.EKS_CHARTS)
    if plane == "eks":
        return (eks, charts)
    return (eks, charts, Step(f"then the {hyperpod}", times.HYPERPOD_CLUSTER))


def _eks_node_groups(m: ClusterModel) -> tuple[NodeGroup, ...]:
    """The managed node groups of an EKS cluster (the system nodes; on HyperPod EKS nothing else)."""
    return m.all_groups if m.control_plane.type == "eks" else tuple(g for g in (m.login,) if g is not None)


def _first_node(m: ClusterModel) -> tuple[str, str, tuple[Step, ...], str]:
    """The first GPU node (of the first GPU group, else of the first group; a spec has one at
    least): its group, what its stack's creation includes of it, its steps to ready after the
    deploy, and what starts it."""
    group = next((g for g in m.node_groups if g.instance.is_gpu), m.node_groups[0])
    plane = m.control_plane.type
    boot = Step(f"a {group.instance_type} launches and boots", times.INSTANCE_BOOT)
    plugins = Step("the device plugins advertise its GPUs and EFA", times.DEVICE_PLUGINS)
    if plane == "pcs":
        steps = [boot, Step("fmcluster's node program mounts and checks it", times.NODE_PROGRAM)]
        if m.deep_checks(group):
            steps.append(Step("the deep check of a new node, before slurmd starts", times.DEEP_CHECK))
        when = "" if group.min_count else "a job asks for the group (min_count 0: it runs no node before)"
        return group.name, "", tuple(steps), when
    if m.control_plane.hyperpod:
        after: list[Step] = []
        if group.instance.is_gpu and m.health.deep_check:
            after.append(Step("SageMaker HyperPod's deep health checks", times.HYPERPOD_DEEP_CHECKS))
        if plane == "hyperpod-eks" and group.instance.is_gpu:
            after.append(plugins)
        return group.name, "its launch and lifecycle scripts (the HyperPod cluster is created with its nodes)", \
            tuple(after), ""
    if group.created_size:
        return group.name, "its launch and join (its managed node group is created with its nodes)", (plugins,), ""
    when = ("its Capacity Block starts (the group is created with no node, and scaled up then)"
            if group.follows_block else "the group is scaled up (it is created with no node)")
    return group.name, "", (boot, plugins), when


def critical_path(stacks: tuple[StackTime, ...]) -> tuple[Span, tuple[str, ...]]:
    """The deploy with every stack started as soon as those it waits for are done: when the last
    ends, and the chain of stacks that ends it (by the high figures)."""
    done: dict[str, Span] = {}
    for stack in stacks:  # deploy order: a stack's dependencies come before it
        done[stack.key] = longest(done[d] for d in stack.after) + stack.span
    last = max(stacks, key=lambda s: (done[s.key].high, done[s.key].low))
    path = [last.key]
    while True:
        waits = next(s for s in stacks if s.key == path[-1]).after
        if not waits:
            break
        path.append(max(waits, key=lambda k: (done[k].high, done[k].low)))
    return longest(done.values()), tuple(reversed(path))


def first_deploy(m: ClusterModel) -> FirstDeploy:
    """The first deploy of `m`'s stacks and the way of its first GPU node to ready."""
    needs = depends_on(m)
    stacks = tuple(StackTime(key=s.key, name=s.name, after=needs[s.key], chains=_chains(m, s.key)) for s in m.stacks)
    together, path = critical_path(stacks)
    group, in_stack, node, when = _first_node(m)
    upto = next(i for i, s in enumerate(stacks) if s.key == CLUSTER) + 1
    return FirstDeploy(stacks=stacks, one_at_a_time=sum((s.span for s in stacks), ZERO), together=together,
                       critical_path=path, cluster_ready=sum((s.span for s in stacks[:upto]), ZERO),
                       node_group=group, in_stack=in_stack, node=node, when=when,
                       bound=times.PCS_JOIN_MINUTES if m.control_plane.type == "pcs" else None)
