"""The inputs of the node renderers in tests: a cluster model resolved as fmcluster resolves it
(`resolve`) from the small test spec (tests/support/specs.py: AWS PCS, 2 x p5.48xlarge, a Lustre
file system) or an example spec, with edits at dotted paths, and the deploy-time values the stacks
hand the renderers (`REFS`: the stand-ins of tests/support/stacks.py); an AWS PCS node's boot as
PCS runs its node lifecycle scripts (`first_boot`, `run_stage`). Not a test module."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import yaml

from fmcluster.model.cluster import ClusterModel, NodeGroup, resolve
from fmcluster.node import pcs as pcs_node
from fmcluster.node.pcs import LifecycleScript
from fmcluster.node.refs import NodeRefs
from tests.support.paths import EXAMPLES_DIR
from tests.support.sandbox import IMAGE_PCS_SLURM, Sandbox, user_data_parts
from tests.support.specs import base_spec, on, validated, with_, without
from tests.support.stacks import FS_DNS, FS_MOUNT, HOME_DNS

URL = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123/api/v1/remote_write"
QUEUE = "test-cluster-node-replacements"  # the node replacer's queue of the test spec's cluster
# What the cluster stack hands the node renderers, deployed: the file system's and the home's
# names, the remote-write URL (metrics on) and the node replacer's queue.
REFS = NodeRefs(lustre_dns_name=FS_DNS, lustre_mount_name=FS_MOUNT, home_dns_name=HOME_DNS, remote_write_url=URL,
                replacement_queue=QUEUE)
NO_METRICS = NodeRefs(lustre_dns_name=FS_DNS, lustre_mount_name=FS_MOUNT, home_dns_name=HOME_DNS,
                      replacement_queue=QUEUE)


def example(file: str) -> dict:
    """examples/FILE as a dict, to edit."""
    return yaml.safe_load((EXAMPLES_DIR / file).read_text())


def spec(plane: str = "pcs", edits: Mapping[str, Any] | None = None, *, base: dict | None = None,
         drop: tuple[str, ...] = ()) -> dict:
    """`base` (the small test spec by default) under `plane`, with each dotted path of `edits` set
    (None removes it) and each of `drop` removed."""
    made = base if base is not None else base_spec()
    if plane != made["orchestrator"]["type"]:
        made = on(plane, made)
    for path, value in (edits or {}).items():
        made = without(made, path) if value is None else with_(made, path, value)
    for path in drop:
        made = without(made, path)
    return made


def model(plane: str = "pcs", edits: Mapping[str, Any] | None = None, **kwargs: Any) -> ClusterModel:
    """The model of `spec(plane, edits, ...)`, resolved."""
    return resolve(validated(spec(plane, edits, **kwargs)))


def group(plane: str = "pcs", instance_type: str = "p5.48xlarge", edits: Mapping[str, Any] | None = None,
          *, name: str = "gpu", **kwargs: Any) -> tuple[ClusterModel, NodeGroup]:
    """The model, and its group `name` (the test spec's one compute group, of `instance_type`; the
    login, controller or system group by its name)."""
    made = model(plane, {"node_groups[0].instance_type": instance_type, **(edits or {})}, **kwargs)
    return made, made.group(name)


def pcs_group(instance_type: str = "p5.48xlarge", edits: Mapping[str, Any] | None = None, *, name: str = "gpu",
             lustre: str | None = "tcp", efa: bool = True) -> tuple[ClusterModel, NodeGroup]:
    """An AWS PCS cluster on the Slurm of the sandbox's image (IMAGE_PCS_SLURM) whose compute group
    has one node of `instance_type` (no network features), without the deep check and replacements
    (their own tests turn them on with `edits`), and its group `name`. `lustre`: the file system
    reached over "tcp", an "efa"-enabled one, or None."""
    changes = {"orchestrator.version": IMAGE_PCS_SLURM, "node_groups[0].count": 1, "node_groups[0].efa": efa,
               "health.deep_check": False, "health.replace": False,
               **({"storage.lustre": None} if lustre is None else {"storage.lustre.efa": lustre == "efa"})}
    return group("pcs", instance_type, {**changes, **(edits or {})}, name=name)


def pcs_scripts(made: ClusterModel, node_group: NodeGroup, refs: NodeRefs = REFS) -> tuple[LifecycleScript, ...]:
    """The AWS PCS node lifecycle scripts of a group, as the cluster stack publishes them."""
    return pcs_node.node_actions(made, node_group, refs)


@dataclass
class Outcome:
    """What a PCS node's scripts did: the scripts run, those that failed, what PCS made of it
    ("terminated": a TERMINATE script failed; "stopped": a STOP_SEQUENCE one; "done"), and their
    standard error, in order. `returncode`: 1 where a script failed (as one script's `finish`)."""

    ran: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    verdict: str = "done"
    stderr: str = ""

    @property
    def returncode(self) -> int:
        return 1 if self.failed else 0

    def then(self, more: "Outcome") -> "Outcome":
        return Outcome(self.ran + more.ran, self.failed + more.failed, more.verdict, self.stderr + more.stderr)


def run_stage(node: Sandbox, scripts: Sequence[LifecycleScript], stage: str, *, reboot: bool = False,
              arguments: Sequence[str] | None = None, values: Mapping[str, str] | None = None,
              env: dict[str, str] | None = None) -> Outcome:
    """The stage's scripts as PCS runs them: in order, as root with their arguments (each token of
    `values` replaced by its value, as CloudFormation fills them in; `arguments`: these instead;
    `env`: the sandbox's stand-ins' settings); after a reboot only the EVERY_BOOT ones; a failure
    does what the script's OnError says."""
    outcome = Outcome()
    for script in pcs_node.in_stage(scripts, stage):
        if reboot and script.execution_policy != pcs_node.EVERY_BOOT:
            continue
        args = [deployed(a, values or {}) for a in script.arguments] if arguments is None else list(arguments)
        result = node.run(script.text, *args, name=f"lifecycle/{script.file_name}", env=env)
        outcome.ran.append(script.name)
        outcome.stderr += result.stderr
        if result.returncode != 0:
            outcome.failed.append(script.name)
            if script.on_error in (pcs_node.TERMINATE, pcs_node.STOP_SEQUENCE):
                outcome.verdict = "terminated" if script.on_error == pcs_node.TERMINATE else "stopped"
                return outcome
    return outcome


def first_boot(node: Sandbox, scripts: Sequence[LifecycleScript], *, values: Mapping[str, str] | None = None,
               env: dict[str, str] | None = None) -> Outcome:
    """A PCS node's first boot: cloud-init's user data (the slurmd guard), the NodeBootstrapped
    scripts, slurmd started by PCS, the NodeReady scripts (`values`, `env`: run_stage's)."""
    (_, guard), = user_data_parts(pcs_node.user_data()).values()
    assert node.run(guard, name="user-data.sh").returncode == 0
    bootstrapped = run_stage(node, scripts, pcs_node.NODE_BOOTSTRAPPED, values=values, env=env)
    if bootstrapped.verdict != "done":
        return bootstrapped
    started = node.run(f"systemctl start {node.scenario.slurmd_unit}\n", name="pcs-start-slurmd.sh", env=env)
    assert started.returncode == 0, started.stderr
    return bootstrapped.then(run_stage(node, scripts, pcs_node.NODE_READY, values=values, env=env))


def deployed(argument: str, values: Mapping[str, str]) -> str:
    """An argument as CloudFormation hands it to PCS: each token of `values` filled in."""
    for token, value in values.items():
        argument = argument.replace(token, value)
    return argument
