"""The teams of a Slurm cluster as Slurm accounting: the data the accounting program
(scripts/slurm/accounting.sh, `fmcluster-accounting`) applies with sacctmgr, and the slurm.conf
settings the teams need. Pure: no CDK, no AWS call.

What each team becomes (fmcluster.model.teams, fmcluster.facts.teams):
- the priority classes, one QOS each: Priority, the QOSes it preempts (Preempt), PreemptMode=requeue;
- one account per team: Fairshare its fair share (its guaranteed GPUs), GrpTRES=gres/gpu=N (its
  burst summed over the GPU groups) when it may borrow only so far, QOS its classes, DefaultQOS
  its own class;
- its users: the spec's members and the members of its Linux groups, looked up on the node with
  `getent` when the program runs.

Sources and details: docs/research-notes.md, "fmcluster/node/accounting.py"."""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path
from types import MappingProxyType
from typing import Mapping, Sequence

from fmcluster.facts import teams as team_facts
from fmcluster.facts.node import FMCLUSTER_LIB
from fmcluster.model.teams import Team

PROGRAM = Path(__file__).parent / "scripts" / "slurm" / "accounting.sh"
PROGRAM_PATH = f"{FMCLUSTER_LIB}/accounting"  # where a node keeps the program
TEAMS_PATH = "/etc/fmcluster/teams"  # and the data it applies

# slurm.conf of a cluster with teams: multifactor priority in which the priority class (QOS)
# outweighs fair share, which outweighs age; preemption by QOS, the preempted job requeued;
# associations, their limits and QOSes enforced (a job of a user outside every team, or above its
# team's class, is refused); GPUs tracked as a TRES, so GrpTRES=gres/gpu limits hold; a job a
# partition refuses (AllowAccounts of a dedicated group) refused at submission, not left pending.
SLURM_SETTINGS: Mapping[str, str] = MappingProxyType({
    "PriorityType": "priority/multifactor",
    "PriorityWeightQOS": "100000",
    "PriorityWeightFairshare": "10000",
    "PriorityWeightAge": "1000",
    "PreemptType": "preempt/qos",
    "PreemptMode": "REQUEUE",
    "AccountingStorageEnforce": "associations,limits,qos,safe",
    "AccountingStorageTRES": "gres/gpu",
    "EnforcePartLimits": "ALL",
})


def grp_tres(team: Team, teams: Sequence[Team]) -> str:
    """The account's GrpTRES: its burst in GPUs when it may borrow only so far (or "" for none).
    Slurm's association limits are per account, not per partition: the limit is the sum of its
    bursts over the GPU groups it may use (not those dedicated to another team, whose partitions
    refuse it)."""
    if team.borrow_limit is None:
        return ""
    others = {group for other in teams if other.name != team.name for group in other.dedicated}
    return f"gres/gpu={sum(team.burst(group) for group in team.group_gpus if group not in others)}"


def data(teams: Sequence[Team]) -> str:
    """The file fmcluster-accounting applies (its format: the program's header)."""
    lines = ["# fmcluster teams: applied by fmcluster-accounting (fmcluster.node.accounting)"]
    for p in team_facts.PRIORITY_CLASSES:
        lines.append(f"qos {p.name} {p.value} {','.join(p.preempts) or '-'}")
    for team in teams:
        lines.append(f"account {team.name} {team.fair_share} {grp_tres(team, teams) or '-'} "
                     f"{','.join(team.priorities)} {team.priority}")
        lines += [f"member {team.name} {user}" for user in team.members]
        lines += [f"group {team.name} {group}" for group in team.groups]
    return "\n".join(lines) + "\n"


def program() -> str:
    return PROGRAM.read_text()


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def apply_script(teams: Sequence[Team], slurm_bin: str) -> str:
    """A script that installs the program and the teams' data on the node and applies them: what
    a login node (AWS PCS) or the controller (HyperPod) runs at boot and on every change of the
    teams. Its text changes exactly when the data or the program does."""
    q = shlex.quote
    return "\n".join([
        "#!/bin/bash",
        "# fmcluster: the cluster's teams as Slurm accounting (fmcluster.node.accounting)",
        "set -euo pipefail",
        'root="${FMCLUSTER_ROOT:-}"',
        f'mkdir -p "$root"{q(FMCLUSTER_LIB)} "$root"{q(TEAMS_PATH.rsplit("/", 1)[0])}',
        f"cat >\"$root\"{q(PROGRAM_PATH)} <<'FMCLUSTER_PROGRAM'",
        program().rstrip("\n"),
        "FMCLUSTER_PROGRAM",
        f'chmod 0755 "$root"{q(PROGRAM_PATH)}',
        f"cat >\"$root\"{q(TEAMS_PATH)} <<'FMCLUSTER_TEAMS'",
        data(teams).rstrip("\n"),
        "FMCLUSTER_TEAMS",
        f'SLURM_BIN={q(slurm_bin)} "$root"{q(PROGRAM_PATH)} "$root"{q(TEAMS_PATH)}',
        "",
    ])


def partition_settings(teams: Sequence[Team]) -> dict[str, dict[str, str]]:
    """The partitions of node groups dedicated to a team, each with the only account it lets in
    (AllowAccounts: a job of another account is refused at submission)."""
    return {group: {"AllowAccounts": team.name} for team in teams for group in team.dedicated}
