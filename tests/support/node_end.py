"""Running the node programs that take a Slurm node out of service before its instance goes
(fmcluster/node/scripts/boot/programs/capacity-end.sh: the end of a Capacity Block or training plan;
interruption.sh: a spot interruption notice) on a real Slurm (tests/support/slurm_cluster.py), with
the real scontrol, squeue and scancel, and stand-ins only for the instance metadata service, the
host's name and the AWS CLI. Not a test module. Shared by tests/node/test_capacity_end*.py and
tests/node/test_interruption*.py.

- `IMDS`, the stand-in curl: IMDSv2 as EC2 answers it (PUT latest/api/token gives a token; a GET
  without it is 401), each path of latest/meta-data/ answered from a file under the node's metadata
  folder (absent: 404; PATH.status beside it: that status instead; a file `down` there: no
  connection at all; a file `expire-token`: the next GET is refused, 401, as with an expired
  token, once), with -f, -o, -w '%{http_code}' and --max-time as curl takes them; every request is
  a line of requests.log there.
- `AWS`, the stand-in AWS CLI: DescribeCapacityReservations, DescribeInstances (by an instance-id
  filter) and DescribeTrainingPlan answered from answer.json (the API's shape: times in ISO 8601, as
  the CLI parses them), the program's --query applied with JMESPath and printed as the CLI's text
  output prints it; each call a line of aws.log beside answer.json (`aws_calls`).
- `run`: a program on node1 or node2 at a given time (FMCLUSTER_NOW), as its unit runs it; without
  a cluster, with the test's own stand-ins for Slurm's commands (in `bin_dir`; `SLURM` answers as a
  one-node partition `gpu` that has no job and no reservation, and records what it is asked).
- `trapping_job`: a job whose step traps a signal, running on node1; Slurm's time at its
  submission (a job's SubmitTime: no test reads the clock itself).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping, Optional

from fmcluster.facts.node import FMCLUSTER_LIB
from tests.support.paths import ROOT
from tests.support.slurm_cluster import SlurmCluster

PROGRAMS = ROOT / "fmcluster" / "node" / "scripts" / "boot" / "programs"
SHARED = ("slurm-node.sh", "slurm-jobs.sh")  # what the programs source from FMCLUSTER_LIB

IMDS = '''#!{python}
import os, sys
folder = {folder!r}
args, method, headers, out, form, url = sys.argv[1:], "GET", [], None, "", ""
fail = any(a.startswith("-") and not a.startswith("--") and "f" in a for a in args)
i = 0
while i < len(args):
    a = args[i]
    if a == "-X": method = args[i + 1]; i += 1
    elif a == "-H": headers.append(args[i + 1]); i += 1
    elif a == "-o": out = args[i + 1]; i += 1
    elif a == "-w": form = args[i + 1]; i += 1
    elif a == "--max-time": i += 1
    elif not a.startswith("-"): url = a
    i += 1
path = url.split("/latest/", 1)[1]
with open(os.path.join(folder, "requests.log"), "a") as log:
    log.write(f"{{method}} {{path}}\\n")
if os.path.exists(os.path.join(folder, "down")):
    sys.exit(7)  # curl: failed to connect
token = any(h.startswith("X-aws-ec2-metadata-token:") for h in headers)
if path == "api/token":
    status, body = (200, "token") if method == "PUT" else (405, "")
elif not token:
    status, body = 401, ""
elif os.path.exists(os.path.join(folder, "expire-token")):
    os.remove(os.path.join(folder, "expire-token"))
    status, body = 401, ""
else:
    name = os.path.join(folder, path.removeprefix("meta-data/"))
    status, body = (200, open(name).read()) if os.path.isfile(name) else (404, "")
    if os.path.isfile(name + ".status"):
        status = int(open(name + ".status").read())
if status >= 400 and fail:
    sys.exit(22)
if out:
    open(out, "w").write(body if status < 400 else "")
else:
    sys.stdout.write(body if status < 400 else "")
sys.stdout.write(form.replace("%{{http_code}}", str(status)).replace("\\\\n", "\\n"))
'''

AWS = '''#!{python}
import json, sys
import jmespath
args = sys.argv[1:]
with open({answer!r}.replace("answer.json", "aws.log"), "a") as log:
    log.write(" ".join(args[:2]) + "\\n")
option = dict(zip(args[2::2], args[3::2]))
assert option["--output"] == "text" and option["--region"] == "us-east-1", args
answer = json.load(open({answer!r}))
if args[:2] == ["ec2", "describe-instances"]:
    wanted = option["--filters"].removeprefix("Name=instance-id,Values=")
    found = [i for r in answer.get("Reservations", []) for i in r["Instances"] if i["InstanceId"] == wanted]
    answer = {{"Reservations": [{{"Instances": found}}] if found else []}}
elif args[:2] == ["ec2", "describe-capacity-reservations"]:
    wanted = option["--capacity-reservation-ids"]
    found = [r for r in answer["CapacityReservations"] if r["CapacityReservationId"] == wanted]
    if not found:
        sys.exit("An error occurred (InvalidCapacityReservationId.NotFound)")
    answer = {{"CapacityReservations": found}}
else:
    assert args[:2] == ["sagemaker", "describe-training-plan"], args
    if option["--training-plan-name"] != answer["TrainingPlanName"]:
        sys.exit("An error occurred (ResourceNotFound)")
result = jmespath.search(option["--query"], answer)
# the CLI's text output: a list of lists a row each, its values tab-separated; a scalar as it is
rows = result if isinstance(result, list) else [result]
for row in rows:
    print("\\t".join(map(str, row)) if isinstance(row, list) else row)
'''

HOSTNAME = "#!/bin/sh\necho {name}\n"

# Slurm's commands as a one-node partition `gpu` (node1, idle) with no job and no reservation would
# answer them; each call a line of slurm.log beside them
SLURM = """#!/bin/bash
echo "${0##*/} $*" >>"${0%/*}/slurm.log"
case "${0##*/} $*" in
  "scontrol -o show node node1") echo "NodeName=node1 State=IDLE Partitions=gpu" ;;
  "scontrol -o show partition gpu") echo "PartitionName=gpu Nodes=node1" ;;
  "scontrol -o show reservation"*) echo "No reservations in the system" ;;
  "scontrol show hostnames "*) tr , '\\n' <<<"$3" ;;
  "scontrol show hostlist "*) echo "$3" ;;
esac
"""
SLURM_COMMANDS = ("scontrol", "squeue", "sinfo", "scancel")


def epoch(slurm_time: str) -> int:
    """A time as Slurm shows it (local time, no zone) in seconds since the epoch."""
    return int(time.mktime(time.strptime(slurm_time, "%Y-%m-%dT%H:%M:%S")))


def field(line: str, key: str) -> str:
    return next(word.split("=", 1)[1] for word in line.split() if word.startswith(f"{key}="))


def reservation(cluster: SlurmCluster, name: str) -> str:
    return cluster.run("scontrol", "-o", "show", "reservation", name).stdout.strip()


def answer(tmp_path: Path, data: Mapping) -> None:
    """What EC2 or SageMaker answers the node programs of `tmp_path` (answer.json)."""
    (tmp_path / "answer.json").write_text(json.dumps(data))


def metadata(tmp_path: Path, node: str) -> Path:
    """The folder the stand-in metadata service of `node` answers from (made, with its region and instance id)."""
    folder = tmp_path / node / "imds"
    (folder / "placement").mkdir(parents=True, exist_ok=True)
    (folder / "placement" / "region").write_text("us-east-1")
    (folder / "instance-id").write_text(f"i-0a1b2c3d4e5f6000{node[-1]}")
    return folder


def bin_dir(tmp_path: Path, node: str) -> Path:
    """Where the stand-ins of `node`'s commands are (first on its PATH)."""
    return tmp_path / node / "bin"


def aws_calls(tmp_path: Path) -> list[str]:
    """What the stand-in AWS CLI of `tmp_path` was asked so far ("ec2 describe-capacity-reservations", ...)."""
    log = tmp_path / "aws.log"
    return log.read_text().splitlines() if log.exists() else []


def stand_in_slurm(tmp_path: Path, node: str = "node1") -> Path:
    """`SLURM` as Slurm's commands of `node` (in its `bin_dir`); the file they record their calls in."""
    folder = bin_dir(tmp_path, node)
    folder.mkdir(parents=True, exist_ok=True)
    for command in SLURM_COMMANDS:
        (folder / command).write_text(SLURM)
        (folder / command).chmod(0o755)
    return folder / "slurm.log"


def run(cluster: Optional[SlurmCluster], tmp_path: Path, program: str, node: str, settings: str, *,
        now: Optional[int] = None, env: Optional[Mapping[str, str]] = None,
        timeout: float = 120, aws: bool = True, call: str = "main") -> subprocess.CompletedProcess:
    """`program` (a file of PROGRAMS) on node `node` (node1 or node2), with the settings file's text
    `settings`, as its unit runs it, at `now` (FMCLUSTER_NOW) where given; on `cluster`'s Slurm, or
    with none Slurm's commands are the test's stand-ins in `bin_dir`; `aws`: with the stand-in AWS
    CLI (else none: the PATH then has no other). `call`: what the program's last line runs, its
    `main` unless another of its functions is asked for alone."""
    root, bin_dir = tmp_path / node / "root", tmp_path / node / "bin"
    lib = root / FMCLUSTER_LIB.lstrip("/")
    lib.mkdir(parents=True, exist_ok=True)
    for shared in SHARED:
        shutil.copy(PROGRAMS / shared, lib / shared)
    bin_dir.mkdir(parents=True, exist_ok=True)
    folder = metadata(tmp_path, node)
    for command, text in (("curl", IMDS.format(python=sys.executable, folder=str(folder))),
                          ("hostname", HOSTNAME.format(name=node)),
                          ("aws", AWS.format(python=sys.executable, answer=str(tmp_path / "answer.json")))):
        (bin_dir / command).write_text(text)
        (bin_dir / command).chmod(0o755)
    if not aws:
        (bin_dir / "aws").unlink()
    path = tmp_path / node / f"{program}.env"
    path.write_text(settings)
    slurm = {**cluster.env, "PATH": f"{bin_dir}:{cluster.bin}:{os.environ['PATH']}"} if cluster else {
        "PATH": f"{bin_dir}:/usr/bin:/bin"}
    environment = {**slurm, "FMCLUSTER_ROOT": str(root), **({"FMCLUSTER_NOW": str(now)} if now else {}), **(env or {})}
    script = PROGRAMS / program
    if call != "main":
        text = script.read_text()
        assert text.endswith("\nmain\n"), program
        script = tmp_path / node / program
        script.write_text(text.removesuffix("main\n") + call + "\n")
    return subprocess.run(["bash", str(script), str(path)], env=environment,
                          capture_output=True, text=True, timeout=timeout)


def trapping_job(cluster: SlurmCluster, signal: str = "USR1") -> tuple[str, int, Path]:
    """A job on node1 whose step traps SIG`signal` (writing it to the file `marker` and ending),
    running: its id, Slurm's time at its submission and the marker."""
    # in the cluster's directory, which a job sees at its own path; srun where the node keeps it
    # (AWS PCS: /opt/aws/pcs/scheduler/slurm-RELEASE/bin, on no default PATH)
    marker = cluster.dir / "checkpointed"
    script = (f"#!/bin/bash\n{cluster.node_bin}/srun bash -c 'trap \"echo {signal} >{marker}; exit 0\" {signal}; "
              "while :; do sleep 0.2; done'\n")
    job = cluster.sbatch(script, "-w", "node1", "-n1")
    info = cluster.wait_job(job, until=lambda j: j.get("JobState") == "RUNNING")
    return job, epoch(info["SubmitTime"]), marker


def assert_signalled_and_drained(cluster: SlurmCluster, job: str, marker: Path, reason: str,
                                 nodes: tuple[str, ...] = ("node1", "node2"), signal: str = "USR1") -> None:
    """The job's step trapped SIG`signal` and ended (COMPLETED, `marker` written), and `nodes` are
    drained with a reason that starts with `reason`."""
    info = cluster.wait_job(job)
    assert info["JobState"] == "COMPLETED", info
    assert marker.read_text() == f"{signal}\n"
    for node in nodes:
        found = cluster.node(node)
        assert "DRAIN" in found["State"] and found["Reason"].startswith(reason), found
