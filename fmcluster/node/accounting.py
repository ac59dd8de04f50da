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
    "AccountingStorageEnforce": "associations,limits,qos",
    "AccountingStorageTRES": "gres/gpu",
    "EnforcePartLimits": "ALL",
})


# Of SLURM_SETTINGS, those AWS PCS documents as cluster-level custom settings (PCS User Guide,
# "Custom Slurm settings for AWS PCS clusters"; "a subset of the options for
# AccountingStorageEnforce"). PCS runs its own slurm.conf: the priority and preemption plugins
# are not among the settings it lets a cluster change, so on PCS the QOSes' Priority counts only
# as far as PCS's own PriorityType weighs it, and QOS preemption only where PCS's PreemptType is
# preempt/qos (docs/teams.md).
PCS_SETTINGS: tuple[str, ...] = ("AccountingStorageEnforce",)


def pcs_settings() -> dict[str, str]:
    return {name: SLURM_SETTINGS[name] for name in PCS_SETTINGS}


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
    dedicated = partition_settings(teams)
    lines += [f"partition {group} {settings['AllowAccounts']}" for group, settings in dedicated.items()]
    # every other GPU group's partition is open to every team: a group that lost its `team:` must
    # not keep the AllowAccounts the program set while it was dedicated (only GPU groups can be)
    lines += [f"partition {group} -" for group in open_partitions(teams) if group not in dedicated]
    return "\n".join(lines) + "\n"


def open_partitions(teams: Sequence[Team]) -> tuple[str, ...]:
    """The partitions of the GPU node groups no team has to itself (sorted): every team's jobs may
    run there, whatever AllowAccounts the program set while one was dedicated."""
    groups = {group for team in teams for group in team.group_gpus}
    return tuple(sorted(groups - {group for team in teams for group in team.dedicated}))


def program() -> str:
    return PROGRAM.read_text()


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


SYNC_PATH = f"{FMCLUSTER_LIB}/accounting-sync"
USAGE = Path(__file__).parent / "scripts" / "slurm" / "account-usage.sh"
USAGE_PATH = f"{FMCLUSTER_LIB}/collect-accounts"
# the textfile directory of the node's Slurm exporter (scripts/boot/metrics.sh, 9341), which the
# login node (AWS PCS) and the controller (HyperPod) run with observability on
USAGE_DIR = "/var/lib/fmcluster/textfile-slurm"
USAGE_UNIT = "fmcluster-collect-accounts"
APPLIED_PATH = "/var/lib/fmcluster/accounting.applied"  # the digest of the data last applied in full (for its log)
UNIT = "fmcluster-accounting"
SYNC_MINUTES = 5


def parameter_name(cluster: str) -> str:
    """The SSM parameter that holds the teams' data (NAME-cluster writes it)."""
    return f"/fmcluster/{cluster}/slurm-teams"


SYNC = """#!/bin/bash
# fmcluster-accounting-sync: the teams' data from the SSM parameter, applied by fmcluster-accounting
# on every run: the program is idempotent (a run with nothing to change only queries), and what it
# applies is more than the data: the members of Linux groups, as getent resolves them now, and the
# AllowAccounts a slurmctld restart resets. The digest of the data applied in full is kept only
# to say when the data changed.
set -uo pipefail
root="${FMCLUSTER_ROOT:-}"
data=$(aws ssm get-parameter --region "$REGION" --name "$PARAMETER" --query Parameter.Value --output text) || {
  echo "fmcluster-accounting: cannot read $PARAMETER" >&2
  exit 1
}
digest=$(printf '%s\\n' "$data" | sha256sum | cut -d' ' -f1)
if [[ ! -f $root$APPLIED || $(<"$root$APPLIED") != "$digest" ]]; then
  echo "fmcluster-accounting: teams data $digest from $PARAMETER"
fi
mkdir -p "$(dirname "$root$TEAMS")" "$(dirname "$root$APPLIED")"
printf '%s\\n' "$data" >"$root$TEAMS.new" && mv "$root$TEAMS.new" "$root$TEAMS"
if SLURM_BIN="$SLURM_BIN" "$root$PROGRAM" "$root$TEAMS"; then
  echo "$digest" >"$root$APPLIED"
else
  exit 1
fi
"""


def sync_program(*, parameter: str, region: str, slurm_bin: str) -> str:
    q = shlex.quote
    head, body = SYNC.split("set -uo pipefail\n", 1)
    settings = "".join(f"{name}={q(value)}\n" for name, value in (
        ("PARAMETER", parameter), ("REGION", region), ("SLURM_BIN", slurm_bin), ("PROGRAM", PROGRAM_PATH),
        ("TEAMS", TEAMS_PATH), ("APPLIED", APPLIED_PATH)))
    return head + "set -uo pipefail\n" + settings + body


def units(slurm_bin: str = "/usr/bin") -> dict[str, str]:
    """The systemd services and timers: the sync at boot and every SYNC_MINUTES minutes; the
    per-account GPU usage (account-usage.sh) every minute, into the Slurm exporter's directory."""
    usage = f"{USAGE_DIR}/accounts.prom"
    return {
        f"{USAGE_UNIT}.service": (
            "[Unit]\nDescription=fmcluster: GPUs in use per Slurm account and user (textfile collector)\n\n"
            f"[Service]\nType=oneshot\nEnvironment=SLURM_BIN={slurm_bin}\n"
            f"ExecStart=/bin/sh -c '{USAGE_PATH} >{usage}.tmp && mv {usage}.tmp {usage}'\n"),
        f"{USAGE_UNIT}.timer": (
            "[Unit]\nDescription=fmcluster: GPUs in use per Slurm account every minute\n\n"
            "[Timer]\nOnActiveSec=0\nOnUnitActiveSec=60s\n\n[Install]\nWantedBy=timers.target\n"),
        f"{UNIT}.service": (
            "[Unit]\nDescription=fmcluster: the teams as Slurm accounting (fmcluster-accounting)\n"
            "After=network-online.target\nWants=network-online.target\n\n"
            f"[Service]\nType=oneshot\nExecStart={SYNC_PATH}\n"),
        f"{UNIT}.timer": (
            "[Unit]\nDescription=fmcluster: apply the teams' Slurm accounting (every few minutes)\n\n"
            f"[Timer]\nOnBootSec=2min\nOnUnitActiveSec={SYNC_MINUTES}min\n\n[Install]\nWantedBy=timers.target\n"),
    }


# Sets SLURM_SETTINGS in the controller's slurm.conf (HyperPod: fmcluster's hook on the controller,
# where slurm.conf is the cluster's own file): each KEY=VALUE line replaced or added, and slurmctld
# restarted when one changed (PriorityType and PreemptType take effect only on a restart). The
# partitions of dedicated groups are HyperPod's lines: fmcluster-accounting sets their AllowAccounts.
SET_SLURM_CONF = r"""
changed=0
if [[ ! -f "$root$SLURM_CONF" ]]; then
  echo "fmcluster-accounting: no $SLURM_CONF: Slurm's settings for teams not set" >&2
  SLURM_SETTINGS=()
fi
for setting in "${SLURM_SETTINGS[@]}"; do
  key=${setting%%=*}
  if grep -qix "$setting" "$root$SLURM_CONF"; then
    continue
  elif grep -qi "^$key=" "$root$SLURM_CONF"; then
    sed -i "s|^$key=.*|$setting|I" "$root$SLURM_CONF"
  else
    echo "$setting" >>"$root$SLURM_CONF"
  fi
  changed=1
done
if ((changed)); then
  systemctl restart slurmctld
fi
"""



def install_script(*, parameter: str, region: str, slurm_bin: str, slurm_conf: str = "") -> str:
    """What a login node (AWS PCS) or the controller (HyperPod) runs at boot: installs
    fmcluster-accounting, its sync and the timer that runs the sync, then syncs once. The teams
    are not in it (they are in the SSM parameter), so a change of the teams changes no node: the
    timer applies it within SYNC_MINUTES minutes (and every run resolves the groups' members and
    sets AllowAccounts again), and retries a failed first apply (the script
    says so and succeeds: the node works without it). `slurm_conf`: the controller's slurm.conf,
    given SLURM_SETTINGS (HyperPod; PCS keeps its own)."""
    q = shlex.quote
    lines = ["#!/bin/bash", "# fmcluster: the cluster's teams as Slurm accounting (fmcluster.node.accounting)",
             "set -euo pipefail", 'root="${FMCLUSTER_ROOT:-}"',
             f'mkdir -p "$root"{q(FMCLUSTER_LIB)} "$root"/etc/systemd/system "$root"{q(USAGE_DIR)}']
    if slurm_conf:
        settings = " ".join(f"'{k}={v}'" for k, v in SLURM_SETTINGS.items())  # quoted: values hold commas
        lines += [f"SLURM_CONF={q(slurm_conf)}", f"SLURM_SETTINGS=({settings})", SET_SLURM_CONF.strip("\n")]
    files = {PROGRAM_PATH: program(), SYNC_PATH: sync_program(parameter=parameter, region=region,
                                                              slurm_bin=slurm_bin), USAGE_PATH: USAGE.read_text()}
    files.update({f"/etc/systemd/system/{name}": text for name, text in units(slurm_bin).items()})
    for path, text in files.items():
        lines += [f"cat >\"$root\"{q(path)} <<'FMCLUSTER_FILE'", text.rstrip("\n"), "FMCLUSTER_FILE"]
    lines += [f'chmod 0755 "$root"{q(PROGRAM_PATH)} "$root"{q(SYNC_PATH)} "$root"{q(USAGE_PATH)}',
              "systemctl daemon-reload",
              f"systemctl enable --now {UNIT}.timer {USAGE_UNIT}.timer",
              f'"$root"{q(SYNC_PATH)} || echo "fmcluster-accounting: not applied yet; {UNIT}.timer retries" >&2',
              ""]
    return "\n".join(lines)


def partition_settings(teams: Sequence[Team]) -> dict[str, dict[str, str]]:
    """The partitions of node groups dedicated to a team, each with the only account it lets in
    (AllowAccounts: a job of another account is refused at submission)."""
    return {group: {"AllowAccounts": team.name} for team in teams for group in team.dedicated}
