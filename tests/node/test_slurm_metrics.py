"""Metrics collection on Slurm nodes (fmcluster/node/scripts/boot/metrics.sh, bootstrap/collectors/):
rendering, shellcheck, runs against stubs, and the PCS stack with and without observability."""

from __future__ import annotations

import json
import subprocess
import types
from pathlib import Path

import pytest

from fmcluster.model.cluster import resolve
from fmcluster.node import pcs as pcs_node
from fmcluster.node import program as prog
from fmcluster.node import shell as node_shell
from tests.support import nodes
from tests.support.collectors import run_collector
from tests.support.nested import flatten
from tests.support.node_scripts import lifecycle_actions
from tests.support.nodes import NO_METRICS, REFS, URL
from tests.support.slurm_cluster import SlurmCluster
from tests.support.stacks import example_spec, images, network, new_app, resources, storage
from tests.support.tools import assert_shellcheck_clean

COLLECTORS = ("gpu", "efa", "slurm")


def render(name="gpu", *, metrics=True, lustre=True) -> str:
    """The PCS node lifecycle scripts of the test spec's group `name` (its GPU compute group, or the
    login nodes, of c7i.8xlarge), one after the other."""
    made, group = nodes.group("pcs", "p5.48xlarge", {"orchestrator.login.instance_type": "c7i.8xlarge",
                                                      **({} if lustre else {"storage.lustre": None})}, name=name)
    return "\n".join(s.text for s in pcs_node.node_actions(made, group, REFS if metrics else NO_METRICS))


def settings(script: str) -> str:
    return script.split("# Settings of this node group", 1)[1].split("\n\n", 1)[0]


def test_metrics_part_only_with_observability():
    assert "setup_metrics" in render()
    assert "setup_metrics" not in render(metrics=False)


def test_settings_of_a_gpu_node():
    values = settings(render())
    assert f"\nREMOTE_WRITE_URL={URL}\n" in values and "\nMETRICS_REGION='us-east-1'\n" in values
    assert "\nEXPECTED_GPUS=8\n" in values and "\nEXPECTED_LUSTRE_MOUNT=/fsx\n" in values
    assert "\nMETRICS_COLLECTORS='dcgm efa'\n" in values


def test_cpu_login_node_counts_slurm_only():
    values = settings(render("login", lustre=False))
    assert "\nMETRICS_COLLECTORS='slurm'" in values and "\nEXPECTED_GPUS=0\n" in values
    assert "\nEXPECTED_LUSTRE_MOUNT=''\n" in values


def test_collectors_are_embedded_as_shipped():
    """Each collector the node gets is the repository's script (comments left out), as a function
    the metrics set-up writes to a file; the node runs those files (tests/node/test_boot_path.py):
    the GPU and EFA collectors on the GPU nodes, the Slurm collector on the login nodes."""
    gpu, login = render(), render("login")
    for job, file in prog.COLLECTOR_FILES.items():
        assert node_shell.embed(f"collect_{job}", node_shell.COLLECTORS / file, note=False) in (
            login if job == "slurm" else gpu)
    assert "program_collect_slurm" not in gpu
    assert "program_collect_dcgm" not in login and "program_collect_efa" not in login


def test_shellcheck_clean(tmp_path):
    assert_shellcheck_clean(tmp_path, {f"collector-{n}": (node_shell.COLLECTORS / f"{n}.sh").read_text()
                                       for n in COLLECTORS})


def test_efa_collector_names_match_the_rules(tmp_path):
    counters = tmp_path / "ib/rdmap0s26/ports/1/hw_counters"
    counters.mkdir(parents=True)
    for name, value in (("retrans_timeout_events", 3), ("retrans_pkts", 10), ("unresponsive_remote_events", 0),
                        ("impaired_remote_conn_events", 1)):
        (counters / name).write_text(f"{value}\n")
    out = run_collector(tmp_path, "efa", {}, SYSFS_INFINIBAND=tmp_path / "ib")
    assert 'node_amazonefa_retrans_timeout_events{device="rdmap0s26",port="1"} 3' in out
    rules = (Path(prog.__file__).parents[1] / "observability/rules/efa.yaml").read_text()
    for metric in ("retrans_timeout_events", "retrans_pkts", "unresponsive_remote_events",
                   "impaired_remote_conn_events"):
        assert f"node_amazonefa_{metric}" in out and f"node_amazonefa_{metric}" in rules


def test_slurm_collector_counts_states(tmp_path):
    sinfo = ("printf '%s\\n' 'a1 idle' 'a1 idle' 'a2 down*' 'a3 drained' 'a4 draining@' 'a5 allocated' "
             "'a6 mixed' 'a7 fail'")
    out = run_collector(tmp_path, "slurm", {"sinfo": sinfo}, STATE_DIR=tmp_path / "state")
    assert "\nslurm_scrape_success 1\n" in out
    for line in ("slurm_nodes_idle 1", "slurm_nodes_down 1", "slurm_nodes_drain 2", "slurm_nodes_alloc 1",
                 "slurm_nodes_mix 1", "slurm_nodes_fail 1", "slurm_nodes_other 0"):
        assert f"\n{line}\n" in f"\n{out}"


SLURMCTLD_DOWN = ('echo "slurm_load_node error: Unable to contact slurm controller (connect failure)" >&2\n'
                  "exit 1")


def test_slurm_collector_keeps_the_last_good_counts_when_slurmctld_does_not_answer(tmp_path):
    """sinfo fails (slurmctld down): never zeros that clear SlurmNodesDown / SlurmNodesDrained,
    but the last good counts and slurm_scrape_success 0 (SlurmScrapeFailing); the first run
    without a good one writes only the 0. The textfile is written either way (exit 0)."""
    state = tmp_path / "state"
    out = run_collector(tmp_path, "slurm", {"sinfo": SLURMCTLD_DOWN}, STATE_DIR=state)
    assert "slurm_nodes_" not in out and "\nslurm_scrape_success 0\n" in out
    good = run_collector(tmp_path, "slurm", {"sinfo": "printf '%s\\n' 'a1 down*' 'a2 drained' 'a3 idle'"},
                         STATE_DIR=state)
    assert "\nslurm_nodes_down 1\n" in good and "\nslurm_nodes_drain 1\n" in good
    out = run_collector(tmp_path, "slurm", {"sinfo": SLURMCTLD_DOWN}, STATE_DIR=state)
    assert out == good.replace("\nslurm_scrape_success 1\n", "\nslurm_scrape_success 0\n")
    assert parse_textfile(out)["slurm_scrape_success"] == 0.0  # well-formed exposition


def parse_textfile(text: str) -> dict[str, float]:
    """The samples of a textfile, as Prometheus' text parser reads them (promtool check metrics)."""
    result = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert "error" not in result.stdout + result.stderr, result.stdout + result.stderr
    return {line.split()[0]: float(line.split()[-1]) for line in text.splitlines() if line and line[0] != "#"}


def test_gpu_collector_maps_nvidia_smi(tmp_path):
    smi = """if [[ "$1" == --query-remapped-rows* ]]; then echo '00000000:53:00.0, 1'; exit 0; fi
echo '0, 00000000:53:00.0, GPU-a, 41, 2, 7, 310.5, Active, Not Active, Not Active'
echo '1, 00000000:64:00.0, GPU-b, 40, 0, 0, [N/A], Not Active, Not Active, Active'"""
    state = tmp_path / "state"
    out = run_collector(tmp_path, "gpu", {"nvidia-smi": smi, "journalctl": "exit 1"}, STATE_DIR=state,
                        COLLECT_INTERVAL_SECONDS=30)
    assert 'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",pci_bus_id="00000000:53:00.0"} 41' in out
    assert 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="0",UUID="GPU-a",pci_bus_id="00000000:53:00.0"} 2' in out
    assert 'DCGM_FI_DEV_ROW_REMAP_FAILURE{gpu="0",UUID="GPU-a",pci_bus_id="00000000:53:00.0"} 1' in out
    assert 'DCGM_FI_DEV_ROW_REMAP_FAILURE{gpu="1",UUID="GPU-b",pci_bus_id="00000000:64:00.0"} NaN' in out
    assert 'DCGM_FI_DEV_THERMAL_VIOLATION{gpu="0",UUID="GPU-a",pci_bus_id="00000000:53:00.0"} 30000000' in out
    assert 'DCGM_FI_DEV_POWER_VIOLATION{gpu="1",UUID="GPU-b",pci_bus_id="00000000:64:00.0"} 30000000' in out
    out = run_collector(tmp_path, "gpu", {"nvidia-smi": smi, "journalctl": "exit 1"}, STATE_DIR=state,
                        COLLECT_INTERVAL_SECONDS=30)
    assert 'DCGM_FI_DEV_THERMAL_VIOLATION{gpu="0",UUID="GPU-a",pci_bus_id="00000000:53:00.0"} 60000000' in out



def test_gpu_collector_reports_the_last_xid_of_each_gpu(tmp_path):
    """DCGM_FI_DEV_XID_ERRORS: the last XID since boot per GPU, 0 without one; the kernel log's
    PCI address (four-digit domain, lower case) matched with nvidia-smi's (eight digits, upper case)."""
    smi = """if [[ "$1" == --query-remapped-rows* ]]; then exit 0; fi
echo '0, 00000000:53:00.0, GPU-a, 41, 0, 0, 300, Not Active, Not Active, Not Active'
echo '1, 00000000:A4:00.0, GPU-b, 40, 0, 0, 300, Not Active, Not Active, Not Active'
echo '2, 00000000:B5:00.0, GPU-c, 40, 0, 0, 300, Not Active, Not Active, Not Active'"""
    kernel_log = "\n".join([
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.86.15",
        "NVRM: Xid (PCI:0000:53:00): 13, pid=4242, name=python, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0)",
        "NVRM: Xid (PCI:0000:a4:00): 31, pid=4243, name=python, Ch 00000008, intr 00000000. MMU Fault",
        "NVRM: Xid (PCI:0000:53:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:99:00): 48, pid=1, name=x, An uncorrectable double bit error",
    ])
    journalctl = f'[[ "$*" == "-k -b -o cat --no-pager" ]] || exit 3\nprintf "{kernel_log}\\n"'
    stubs = {"nvidia-smi": smi, "journalctl": journalctl}
    out = run_collector(tmp_path, "gpu", stubs, STATE_DIR=tmp_path / "state")
    assert 'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-a",pci_bus_id="00000000:53:00.0"} 79' in out
    assert 'DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-b",pci_bus_id="00000000:A4:00.0"} 31' in out
    assert 'DCGM_FI_DEV_XID_ERRORS{gpu="2",UUID="GPU-c",pci_bus_id="00000000:B5:00.0"} 0' in out
    assert out.count("DCGM_FI_DEV_XID_ERRORS{") == 3


def test_gpu_collector_without_a_kernel_log_reports_no_xid(tmp_path):
    smi = """if [[ "$1" == --query-remapped-rows* ]]; then exit 0; fi
echo '0, 00000000:53:00.0, GPU-a, 41, 0, 0, 300, Not Active, Not Active, Not Active'"""
    out = run_collector(tmp_path, "gpu", {"nvidia-smi": smi, "journalctl": "exit 1"}, STATE_DIR=tmp_path / "state")
    assert 'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-a",pci_bus_id="00000000:53:00.0"} 0' in out
    assert 'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",pci_bus_id="00000000:53:00.0"} 41' in out


def test_xid_rules_read_what_the_gpu_collector_writes():
    rules = (Path(prog.__file__).parents[1] / "observability/rules/gpu.yaml").read_text()
    collector = (node_shell.COLLECTORS / "gpu.sh").read_text()
    assert "DCGM_FI_DEV_XID_ERRORS" in rules and '"DCGM_FI_DEV_XID_ERRORS{$labels}' in collector

@pytest.mark.synth
@pytest.mark.parametrize("with_observability", [True, False])
def test_pcs_node_role_and_user_data(with_observability):
    import aws_cdk as cdk

    from fmcluster_cdk.stacks.pcs import PcsClusterStack

    spec = example_spec("p5-pcs.yaml")
    app = new_app()
    observability = types.SimpleNamespace(
        workspace_arn="arn:aws:aps:us-east-1:111122223333:workspace/ws-0123", remote_write_url=URL)
    model = resolve(spec)
    stack = PcsClusterStack(app, "obs-cluster", model=model, network=network(), storage=storage(spec),
                            env=cdk.Environment(region=spec.region), images=images(model),
                            observability=observability if with_observability else None)
    # The node groups' launch templates are in their nested stacks: read the stack with them inlined.
    template = flatten(Path(app.synth().directory), stack.stack_name)
    assert len(resources(template, "AWS::EC2::LaunchTemplate")) == len(spec.node_groups) + bool(
        spec.orchestrator.login.count)
    roles = resources(template, "AWS::IAM::Role")
    statements = [s for r in roles.values() for p in r.get("Policies", []) for s in p["PolicyDocument"]["Statement"]]
    remote = [s for s in statements if "aps:RemoteWrite" in json.dumps(s["Action"])]
    if with_observability:
        assert remote == [{"Sid": "PrometheusRemoteWrite", "Action": "aps:RemoteWrite", "Effect": "Allow",
                           "Resource": observability.workspace_arn}]
    else:
        assert remote == []
    outdir = Path(app.outdir)
    for group in resources(template, "AWS::PCS::ComputeNodeGroup").values():
        # the node lifecycle scripts (fmcluster.node.pcs): a URL without token is in the published text
        texts = "".join(text for _, _, text in lifecycle_actions(outdir, group))
        assert ("setup_metrics" in texts) == with_observability
        assert (URL in texts) == with_observability


def test_slurm_collector_against_a_real_slurm(tmp_path):
    """The collector with Debian's real sinfo against a localhost Slurm (tests/support/slurm_cluster.py):
    the states Slurm itself reports for a drained, a down and an idle node are counted; once
    slurmctld stops answering, the last good counts stay with slurm_scrape_success 0."""
    with SlurmCluster(tmp_path / "slurm", 3) as cluster:
        cluster.run("scontrol", "update", "nodename=node1", "state=drain", "reason=test")
        cluster.run("scontrol", "update", "nodename=node2", "state=down", "reason=test")
        env = {**cluster.env, "STATE_DIR": str(tmp_path / "state")}

        def collect() -> dict[str, float]:
            result = subprocess.run(["bash", str(node_shell.COLLECTORS / "slurm.sh")], env=env, capture_output=True,
                                    text=True, timeout=60)
            assert result.returncode == 0, result.stderr
            return parse_textfile(result.stdout)

        good = collect()
        assert (good["slurm_nodes_drain"], good["slurm_nodes_down"], good["slurm_nodes_idle"]) == (1, 1, 1)
        assert good["slurm_scrape_success"] == 1
        with cluster.controller_down():
            failed = collect()
        assert failed == {**good, "slurm_scrape_success": 0.0}
