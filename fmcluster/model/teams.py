"""The teams that share a cluster, resolved: each team's guaranteed GPUs per node group, how far
it may borrow and lend, its priority classes and its fair share. What the Slurm accounting
program, the Kueue queues, `plan` and `diff` read.

Sources and details: docs/research-notes.md, "fmcluster/model/teams.py"."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Optional

from fmcluster.facts import teams as team_facts
from fmcluster.spec import shares
from fmcluster.spec.models import ClusterSpec, TeamSpec


@dataclass(frozen=True)
class Team:
    name: str  # its Slurm account; its Kubernetes namespace and ClusterQueue
    members: tuple[str, ...]  # Linux user names (Slurm) or IAM principal ARNs (Kubernetes)
    groups: tuple[str, ...]  # Linux groups (Slurm) or Kubernetes groups (Kubernetes)
    guaranteed: Mapping[str, int]  # GPU node group -> GPUs guaranteed to it (every GPU group; 0 where none)
    group_gpus: Mapping[str, int]  # GPU node group -> its GPUs at its largest size
    borrow_limit: Optional[int]  # more GPUs per group it may use when idle; None: as many as are idle
    lend_limit: Optional[int]  # of its guaranteed GPUs per group, how many others may use; None: all
    priority: str  # its jobs' default priority class, the highest it may use
    dedicated: tuple[str, ...]  # the node groups that are its alone
    others: tuple[str, ...] = ()  # the node groups dedicated to other teams: never its to use

    @property
    def priorities(self) -> tuple[str, ...]:
        """The classes it may use, highest first: its own and every lower one."""
        return team_facts.allowed_priorities(self.priority)

    @property
    def guaranteed_gpus(self) -> int:
        return sum(self.guaranteed.values())

    def burst(self, group: str) -> int:
        """The most GPUs of `group` its jobs may hold at once: its guarantee and what it may borrow,
        at most the group. A dedicated group's GPUs are its alone: others never borrow them."""
        if group in self.dedicated:
            return self.group_gpus[group]
        if group in self.others:
            return 0
        if self.borrow_limit is None:
            return self.group_gpus[group]
        return min(self.group_gpus[group], self.guaranteed[group] + self.borrow_limit)

    @property
    def burst_gpus(self) -> int:
        return sum(self.burst(group) for group in self.group_gpus)

    def lendable(self, group: str) -> int:
        """Of its guarantee in `group`, the GPUs others may borrow while it leaves them idle."""
        if group in self.dedicated:
            return 0
        guaranteed = self.guaranteed[group]
        return guaranteed if self.lend_limit is None else min(guaranteed, self.lend_limit)

    @property
    def fair_share(self) -> int:
        """Its Slurm fair-share shares: its guaranteed GPUs (at least 1, so that a team with no
        guarantee still has a share)."""
        return max(1, self.guaranteed_gpus)


def _limit(value: bool | int) -> Optional[int]:
    """A borrow or lend setting as a limit: true, no limit (None); false, 0; a number, itself."""
    if value is True:
        return None
    if value is False:
        return 0
    return value


def _team(spec: ClusterSpec, team: TeamSpec) -> Team:
    owners = shares.dedicated(spec)
    return Team(
        name=team.name, members=tuple(team.members), groups=tuple(team.groups),
        guaranteed=MappingProxyType(shares.team_guarantee(spec, team)),
        group_gpus=MappingProxyType(shares.group_gpus(spec)),
        borrow_limit=_limit(team.borrow), lend_limit=_limit(team.lend), priority=team.priority,
        dedicated=tuple(group for group, owner in owners.items() if owner == team.name),
        others=tuple(group for group, owner in owners.items() if owner != team.name))


def resolve_teams(spec: ClusterSpec) -> tuple[Team, ...]:
    """The spec's teams, in its order (none without a teams section)."""
    return tuple(_team(spec, team) for team in spec.teams)
