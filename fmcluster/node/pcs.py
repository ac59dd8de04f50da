"""What an AWS PCS node runs: its program (`node_program`, from the model's setup of its group), as
node lifecycle scripts, and the few bytes of user data left.

AWS PCS runs a compute node group's node lifecycle actions itself (PCS User Guide, "Run custom
scripts with node lifecycle actions", "Configure node lifecycle actions"): it downloads each
script (S3 or HTTPS), checks it against its SHA-256 checksum, caches it on the node, runs it as
root with its arguments and keeps its output in a log of its own. The stage NodeBootstrapped runs
after PCS has configured the node and before slurmd starts, NodeReady once slurmd has registered;
within a stage the scripts run in order. Each script runs on the first boot only (FIRST_BOOT_ONLY)
or on every boot (EVERY_BOOT), and says what a failure does: TERMINATE the node, STOP_SEQUENCE
(the rest of the stage is skipped, the node is not terminated) or CONTINUE. They need the PCS
agent 1.5.0-1 or later, and changing them drains and replaces the group's nodes.

`node_actions` renders the program of `node_program` (the one the compact user data of earlier
releases carried) as these scripts: each is the whole program (header,
settings, every fragment and embedded program, comment lines stripped) with a `main` that runs
only the steps of its phase, so every script runs the same code and no step exists twice. The
phases, in order:

- ``fmcluster configure`` (NodeBootstrapped, FIRST_BOOT_ONLY, TERMINATE): the Slurm prolog and
  nvidia-imex.service enabled, the readiness check and slurmd's gate (its drop-in), the guard on
  package upgrades, the EFA / NCCL environment, and where the group publishes network features the
  drop-in that clears an earlier instance's features at each start of slurmd, once it has
  registered (network-features.sh's clear_network_features: before slurmd no Slurm command works
  on PCS, which authenticates through slurmd's SACK socket and runs configless). Files and units
  on the root volume, which a reboot keeps; local writes that fail only on a broken node, which is
  replaced rather than left to run jobs without its prolog or gate.
- ``fmcluster storage`` (NodeBootstrapped, EVERY_BOOT, CONTINUE): the instance-store scratch
  volume, LNet over EFA, the Lustre mount and the shared home at /home. The first boot writes
  their fstab lines and units and a reboot mounts from them, but a mount that did not come back (an array that did not
  assemble, a file system not yet reachable when systemd tried) is made again: each step is
  idempotent (a mounted path is left as it is, a formatted array is never formatted again).
  CONTINUE: what did not mount is the readiness check's to judge, after its wait for late mounts.
- ``fmcluster containers`` (NodeBootstrapped, FIRST_BOOT_ONLY, CONTINUE): Enroot and Pyxis
  installed and configured, on the root volume; the readiness check judges the runtime.
- ``fmcluster node ready`` (NodeBootstrapped, EVERY_BOOT, TERMINATE): the readiness check (every
  GPU, every mount, LNet, the container runtime, IMEX), last before slurmd. A node that is not
  ready is terminated, and PCS launches another: it never takes a job. Not STOP_SEQUENCE: PCS
  documents only that it skips the remaining scripts and keeps the node, not that slurmd stays
  down, so it would keep the node without keeping jobs off it. slurmd's gate (the drop-in that
  runs the same check before slurmd) stays the guard whenever slurmd starts again later.
- ``fmcluster metrics`` (NodeReady, FIRST_BOOT_ONLY, CONTINUE): metrics collection, once slurmd
  runs: a node without it still runs jobs, and its set-up (packages) does not hold the node back.
- ``fmcluster network features`` (NodeReady, FIRST_BOOT_ONLY, CONTINUE): the unit that sets the
  node's EC2 network nodes as Slurm node features (NodeProgram.network_features), started
  once slurmd has registered and at every later boot by systemd; a node without them still runs
  jobs, placed without regard to the network.

A phase without steps on a node group is left out. ScriptCachingPolicy CACHE_ONCE: a script is
published under its content hash, so a new program is a new location and checksum, a change of the
node group, and new nodes; downloading it again on every boot would gain nothing.

Settings whose values are CDK tokens (fmcluster.node.shell.plain_setting: another stack's
outputs, such as the FSx DNS and mount names and the remote-write URL) cannot be in a published
file: they are the scripts' arguments, NAME=VALUE (each at most MAX_ARGUMENT characters once
deployed), read by ``read_arguments`` (scripts/boot/arguments.sh) against ARGUMENT_SETTINGS before
any step runs.

The user data (`user_data`) is a few hundred bytes: a drop-in that keeps slurmd from starting
until the readiness check is installed, written only where the lifecycle scripts have not written
the full gate yet. Without it, a node on which the lifecycle scripts never ran (an agent older
than 1.5.0-1) would start slurmd unconfigured.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from fmcluster.facts.node import FMCLUSTER_LIB
from fmcluster.model.node import LUSTRE
from fmcluster.node.program import (
    SLURMD_RETRY_SECONDS,
    HomeMount,
    LustreMount,
    Metrics,
    NodeProgram,
    deep_nccl_floor,
    install_health,
)
from fmcluster.node.refs import NodeRefs
from fmcluster.node.shell import BOUNDARY, TOKEN_MARK, compose, embed, header, mime_multipart

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel, NodeGroup

NODE_BOOTSTRAPPED, NODE_READY = "NodeBootstrapped", "NodeReady"
STAGES = (NODE_BOOTSTRAPPED, NODE_READY)
FIRST_BOOT_ONLY, EVERY_BOOT = "FIRST_BOOT_ONLY", "EVERY_BOOT"
TERMINATE, STOP_SEQUENCE, CONTINUE = "TERMINATE", "STOP_SEQUENCE", "CONTINUE"
CACHE_ONCE = "CACHE_ONCE"
MAX_ARGUMENTS = 20  # NodeLifecycleScript.arguments: at most 20, each at most 256 characters
MAX_ARGUMENT = 256
MAX_SCRIPTS = 20  # per stage
ARGUMENTS_PART = "arguments.sh"
READ_ARGUMENTS = 'read_arguments "$@" || exit 2\n'
GATE_DROP_IN = "50-fmcluster-node-ready.conf"  # gate-slurmd.sh's, in the slurmd unit's drop-in directory
USER_DATA_NAME = "fmcluster-slurmd-guard.sh"


@dataclass(frozen=True)
class Phase:
    """A lifecycle script's place and policies, and the program's steps it runs."""

    name: str  # the PCS script name (letters, digits, spaces, '_', '-'; at most 64)
    stage: str
    execution_policy: str
    on_error: str
    steps: tuple[str, ...]


PHASES = (
    Phase("fmcluster configure", NODE_BOOTSTRAPPED, FIRST_BOOT_ONLY, TERMINATE,
          ("install_slurm_prolog", "enable_imex", "install_node_ready", "gate_slurmd", "protect_running_jobs",
           "write_nccl_env", "install_node_health", "install_request_replacement", "clear_network_features",
           "install_capacity_end", "install_interruption")),
    Phase("fmcluster storage", NODE_BOOTSTRAPPED, EVERY_BOOT, CONTINUE,
          ("setup_scratch", "setup_lnet_efa", "mount_lustre", "mount_home")),
    Phase("fmcluster containers", NODE_BOOTSTRAPPED, FIRST_BOOT_ONLY, CONTINUE, ("setup_containers",)),
    Phase("fmcluster node ready", NODE_BOOTSTRAPPED, EVERY_BOOT, TERMINATE, ("check_node_ready",)),
    Phase("fmcluster metrics", NODE_READY, FIRST_BOOT_ONLY, CONTINUE, ("setup_metrics",)),
    Phase("fmcluster network features", NODE_READY, FIRST_BOOT_ONLY, CONTINUE, ("setup_network_features",)),
)


@dataclass(frozen=True)
class LifecycleScript:
    """One node lifecycle script of a node group: where and when PCS runs it, its text (the file
    published) and the arguments it is given (values may be CDK tokens)."""

    name: str
    stage: str
    execution_policy: str
    on_error: str
    text: str
    arguments: tuple[str, ...] = ()

    @property
    def checksum(self) -> str:
        """The SHA-256 of the text as published (UTF-8), hex: the script source's Checksum."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def file_name(self) -> str:
        return self.name.replace(" ", "-") + ".sh"


def node_program(model: ClusterModel, group: NodeGroup, refs: NodeRefs) -> NodeProgram:
    """The AWS PCS node program of `group`'s nodes (docs/research-notes.md), from the model's setup
    of the group (`model.node(group)`) and the deploy-time names in `refs`; `node_actions` runs it
    as node lifecycle scripts.

    In order: the cluster's Slurm prolog where it has one (the IMEX prolog of a cluster with
    UltraServer node groups: slurmd runs it on every compute node, so every node needs it, and a
    node without it is not ready; on an UltraServer type nvidia-imex.service must be enabled too),
    the deep check of a new GPU node (a node that fails it is not ready), the readiness check and
    slurmd's gate, the EFA / NCCL environment, metrics (with `refs.remote_write_url`), /scratch,
    LNet over EFA, the file system, the shared home (FSx for OpenZFS over NFS, or the Lustre file
    system mounted at /home, the image's home directories copied in first), Enroot and Pyxis (the
    image cache on the file system), the continuous health check, and the node's place in EC2's
    network as Slurm node features (fmcluster.node.topology says which groups). A node without a
    mount, its GPUs or its container runtime is not ready.
    """
    setup = model.node(group)
    slurm = setup.slurm
    if slurm is None:
        raise ValueError(f"node group {group.name}: not a Slurm node group")
    lnet = setup.lnet_efa_interfaces > 0
    lustre = home = None
    if setup.lustre_path:
        if not (refs.lustre_dns_name and refs.lustre_mount_name):
            raise ValueError("the file system's DNS and mount names are needed (NodeRefs)")
        lustre = LustreMount(refs.lustre_dns_name, refs.lustre_mount_name, setup.lustre_path)
    if setup.home is not None and setup.home.kind == LUSTRE:
        assert lustre is not None  # the Lustre file system at /home
        home = HomeMount.lustre(lustre, lnet=lnet)
    elif setup.home is not None:
        if setup.lustre_path == setup.home.mount_path:
            raise ValueError("two shared homes: the Lustre file system at /home and another")
        if not refs.home_dns_name:
            raise ValueError("the shared home's DNS name is needed (NodeRefs)")
        home = HomeMount.nfs(refs.home_dns_name)
    program = NodeProgram(group.instance)
    if setup.slurm_prolog:
        program.slurm_prolog(slurm.bin if setup.imex else "")
    if setup.deep_check:
        program.deep_check(deep_nccl_floor(group))
    program.readiness(mounts=setup.mounts, lnet_efa=lnet, containers=setup.containers,
                      scratch_path=setup.scratch_path, imex=setup.imex)
    program.add("gate-slurmd.sh", "gate_slurmd", SLURMD_RETRY_SECONDS=SLURMD_RETRY_SECONDS,
                SLURMD_UNITS=slurm.slurmd_units)
    program.protect().nccl(setup.efa)
    if refs.remote_write_url is not None:
        program.metrics(Metrics(model.name, refs.remote_write_url, model.region, slurm=setup.slurm_metrics),
                        efa=setup.efa, lustre_path=setup.lustre_path)
    if setup.scratch_path:
        program.scratch(setup.scratch_path)
    if lnet:
        program.lnet(setup.lnet_efa_interfaces)
    if lustre is not None and (setup.home is None or setup.home.kind != LUSTRE):
        program.lustre(lustre, lnet=lnet)
    if home is not None:
        program.home(home)
    if setup.containers is not None:
        program.containers(setup.containers, setup.scratch_path)
    if setup.health is not None:
        install_health(program, model, setup, refs)
    if setup.network_features:
        program.network_features(slurm.bin, slurm.slurmd_units)
    if setup.capacity_end is not None:
        program.capacity_end(setup.capacity_end, slurm.bin, slurm.slurmd_units, partition=group.name)  # its queue
    program.steps.append("check_node_ready")
    return program


def token_settings(program: NodeProgram) -> dict[str, str]:
    """The program's settings whose values hold a CDK token: they become arguments."""
    return {name: str(value) for name, value in program.settings.items() if TOKEN_MARK.search(str(value))}


def scripts(program: NodeProgram) -> tuple[LifecycleScript, ...]:
    """`program` as node lifecycle scripts, one per phase with steps (PHASES)."""
    phase_of = {step: phase for phase in PHASES for step in phase.steps}
    unknown = [step for step in program.steps if step not in phase_of]
    if unknown:
        raise ValueError(f"steps without a lifecycle phase: {', '.join(unknown)} (fmcluster.node.pcs.PHASES)")
    deployed = token_settings(program)
    settings = {name: value for name, value in program.settings.items() if name not in deployed}
    settings["ARGUMENT_SETTINGS"] = " ".join(deployed)
    arguments = tuple(f"{name}={value}" for name, value in deployed.items())
    if len(arguments) > MAX_ARGUMENTS:
        raise ValueError(f"{len(arguments)} deploy-time settings: a lifecycle script takes {MAX_ARGUMENTS} arguments")
    embedded = [embed(name, path, program.rendered.get(name), note=False) for name, path in program.programs.items()]
    parts = [*program.parts, ARGUMENTS_PART]
    made = []
    for phase in PHASES:
        steps = [step for step in program.steps if phase_of[step] is phase]
        if steps:
            text = compose(header(), settings, parts, steps, [*embedded, READ_ARGUMENTS], comments=False)
            made.append(LifecycleScript(phase.name, phase.stage, phase.execution_policy, phase.on_error, text,
                                        arguments))
    return tuple(made)


def node_actions(model: ClusterModel, group: NodeGroup, refs: NodeRefs) -> tuple[LifecycleScript, ...]:
    """The node lifecycle scripts of an AWS PCS node group (`node_program`)."""
    return scripts(node_program(model, group, refs))


def in_stage(actions: Sequence[LifecycleScript], stage: str) -> list[LifecycleScript]:
    return [action for action in actions if action.stage == stage]


# The guard cannot know the cluster's Slurm release (the user data is the same for every group):
# it guards slurmd.service and every slurmd-VERSION.service the image has (AWS PCS's installer's,
# one per release; which one the PCS agent starts is not documented, and a drop-in of a unit the
# node does not have is never read). /lib is /usr/lib on the images PCS runs (Ubuntu, Amazon Linux).
# Its first comment names the module it had: new text there would change every PCS node group's
# user data, and so replace its nodes.
GUARD = f"""#!/bin/bash
# fmcluster: slurmd waits for the node lifecycle scripts (fmcluster.node.actions).
set -eu
shopt -s nullglob
r="${{FMCLUSTER_ROOT:-}}" u=(slurmd.service)
for f in "$r"/{{etc,usr/lib}}/systemd/system/slurmd-*.service; do u+=("${{f##*/}}"); done
for n in "${{u[@]}}"; do
  f="$r/etc/systemd/system/$n.d/{GATE_DROP_IN}"
  mkdir -p "${{f%/*}}"
  [ -e "$f" ] || printf '[Service]\\nExecStartPre={FMCLUSTER_LIB}/node-ready\\n' >"$f"
done
systemctl daemon-reload
"""


def user_data() -> str:
    """The node group's user data: MIME multipart with the slurmd guard (GUARD), not yet base64.
    The same for every node group (nothing in it depends on the group)."""
    assert BOUNDARY not in GUARD
    return mime_multipart([("text/x-shellscript", USER_DATA_NAME, GUARD)])
