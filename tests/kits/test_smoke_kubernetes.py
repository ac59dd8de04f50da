"""The Kubernetes kit's smoke job on its end (issue 41): a PyTorchJob whose pods run smoke.sh
(fmcluster.kits.kubernetes_scripts.SMOKE_SH), which passes the pod's SIGTERM (an eviction) on to
torchrun and so to smoke.py, which saves a checkpoint on the Lustre claim; the pod then exits 143,
which the job's ExitCode restart policy restarts, and the next run resumes. The manifests are held
to that; smoke.sh runs for real under the torchrun and torch stand-ins (tests/support/gpu_standins),
signalled as kubelet signals a container's first process, then run again as the restarted pod, and
`fmcluster verify` reads the restarted pod's log (the first pod's goes with it)."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fmcluster.kits import common, verify
from fmcluster.kits import kubernetes as jobs_kubernetes
from fmcluster.kits.kubernetes_scripts import SMOKE_SH, TORCHRUN_STOP_S
from fmcluster.kubernetes import manifests as kubernetes
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.paths import EXAMPLES_DIR, SUPPORT

KUBERNETES_EXAMPLES = sorted(p.name for p in EXAMPLES_DIR.glob("*.yaml")
                             if loader.load(p).spec.orchestrator.type in jobs_kubernetes.KUBERNETES_PLANES)
CHECKPOINT = re.compile(r"^fmcluster-smoke checkpoint step=(\d+) seconds=(\S+) bytes=(\d+) path=(\S+)$", re.MULTILINE)


def model_of(example: str):
    return resolve(loader.load(EXAMPLES_DIR / example).spec)


@pytest.mark.parametrize("example", KUBERNETES_EXAMPLES)
def test_the_smoke_pods_save_on_the_lustre_claim_and_restart_on_their_end(example):
    model = model_of(example)
    lustre = model.spec.storage.lustre
    for group in [g for g in model.node_groups if g.instance.gpu_count]:
        job = jobs_kubernetes.smoke_manifests(model, group)[-1]
        assert job["spec"]["runPolicy"]["backoffLimit"] == jobs_kubernetes.SMOKE_RESTARTS > 0
        for replica in job["spec"]["pytorchReplicaSpecs"].values():
            assert replica["restartPolicy"] == "ExitCode"  # 143 (a run stopped on a signal) restarts it
            pod = replica["template"]["spec"]
            assert pod["terminationGracePeriodSeconds"] == jobs_kubernetes.SMOKE_GRACE_S > TORCHRUN_STOP_S
            (container,) = pod["containers"]
            assert container["command"] == ["bash", "/kit/smoke.sh"]
            env = {e["name"]: e.get("value") for e in container["env"]}
            assert env["GROUP"] == group.name and env["STEPS"] == str(common.SMOKE_STEPS)
            mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
            volumes = {v["name"]: v for v in pod["volumes"]}
            if lustre is None:
                assert env["CHECKPOINTS"] == "" and "fsx" not in mounts
                continue
            assert env["CHECKPOINTS"] == jobs_kubernetes.smoke_checkpoints(model, group)
            assert env["CHECKPOINTS"].startswith(f"{lustre.mount_path}/fmcluster-checkpoints/")
            assert env["CHECKPOINTS"].endswith(f"/{group.name}-smoke/{jobs_kubernetes.SUBMISSION}")  # submit-all's
            assert mounts["fsx"] == lustre.mount_path
            assert volumes["fsx"]["persistentVolumeClaim"]["claimName"] == kubernetes.LUSTRE_CLAIM


@pytest.mark.parametrize("example", KUBERNETES_EXAMPLES)
def test_the_checkpoint_fits_the_time_torchrun_gives_it(example):
    """smoke.py's checkpoint (its model's weights and AdamW's two moments, fp32) written at the file
    system's baseline throughput takes less than the TORCHRUN_STOP_S torchrun gives its workers."""
    model = model_of(example)
    assert common.SMOKE_CHECKPOINT_BYTES == 100_769_792 * 12
    lustre = model.spec.storage.lustre
    if lustre is not None:
        assert common.SMOKE_CHECKPOINT_BYTES / (lustre.throughput_mbps * 1e6) < TORCHRUN_STOP_S
        readme = jobs_kubernetes.readme(model)
        seconds = math.ceil(common.SMOKE_CHECKPOINT_BYTES / (lustre.throughput_mbps * 1e6))
        assert f"about {seconds} s at the file system's" in readme


def test_the_smoke_models_size_is_smoke_pys():
    """SMOKE_CHECKPOINT_BYTES counts the model smoke.py builds."""
    assert ("TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True)"
            in common.SMOKE_PY and "TransformerEncoder(layer, num_layers=8)" in common.SMOKE_PY)


class Pod:
    """smoke.sh as a pod of the job runs it (its /kit the test's directory), torchrun the stand-in
    with the operator's PET_* settings."""

    def __init__(self, tmp_path: Path, name: str, **more: str) -> None:
        kit = tmp_path / "kit"
        script = kit / "smoke.sh"
        if not kit.exists():  # once per test: rewriting smoke.sh would truncate it under a pod's bash, which reads
            kit.mkdir()       # its script as it runs (the next pod's start made the first one's script empty)
            (kit / "smoke.py").write_text(common.SMOKE_PY)
            script.write_text(SMOKE_SH.replace("/kit/", f"{kit}/"))
        self.checkpoints = tmp_path / "fsx" / "fmcluster-checkpoints" / "default" / "gpu-smoke"
        self.log = tmp_path / f"{name}.log"
        env = {**os.environ, "PATH": f"{SUPPORT / 'gpu_standins'}:{os.environ['PATH']}", "GROUP": "gpu",
               "STEPS": "40", "CHECKPOINTS": str(self.checkpoints), "PET_NNODES": "1", "PET_NPROC_PER_NODE": "2",
               "PET_RDZV_ID": name, "STANDIN_TORCH_DIR": str(tmp_path / "rendezvous"),
               "STANDIN_STEP_SECONDS": "0.1", "STANDIN_RESUMED_STEP_SECONDS": "0", "PYTHONDONTWRITEBYTECODE": "1",
               **more}
        with self.log.open("w") as out:
            self.process = subprocess.Popen(["bash", str(script)], stdout=out, stderr=subprocess.STDOUT, env=env)

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + 60
        while text not in self.log.read_text():
            assert self.process.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.05)


def test_an_evicted_pod_saves_exits_to_be_restarted_and_its_next_run_resumes(tmp_path):
    first = Pod(tmp_path, "first")
    first.wait_for("fmcluster-smoke step=2 ")
    first.process.send_signal(signal.SIGTERM)  # kubelet: the container's first process only
    assert first.process.wait(timeout=60) == 143  # retryable: the job restarts the pod
    log = first.log.read_text()
    assert log.startswith("==> fmcluster node=all group=gpu test=smoke <==\n")
    (step, seconds, size, path), = CHECKPOINT.findall(log)
    assert Path(path) == first.checkpoints / f"step-{int(step):06d}" and (Path(path) / ".metadata").exists()

    second = Pod(tmp_path, "second")
    assert second.process.wait(timeout=60) == 0
    log = second.log.read_text()
    assert f"\nfmcluster-smoke resumed step={step} seconds={seconds} bytes={size} path={path}\n" in log
    assert "fmcluster-smoke ok world_size=2 steps=40" in log and not first.checkpoints.exists()
    (result,) = verify.parse_smoke_runs(log)  # the restarted pod's log alone: collect.sh's
    assert result.verdict is verify.Verdict.PASS and result.resumed_from == int(step)
    (read,) = result.checkpoints
    assert (read.step, read.seconds, read.bytes, read.saved_here) == (int(step), float(seconds), int(size), False)


def test_a_failing_smoke_test_is_not_restarted_and_ends_the_job(tmp_path):
    """A loss that is not finite fails the test (torchrun exits 1): smoke.sh exits 0, which ends the
    job, and verify FAILs the output. Not 1: the pinned training operator would leave an ExitCode
    job whose pod exited 1 Restarting, not Failed, until activeDeadlineSeconds (its issue 2044)."""
    pod = Pod(tmp_path, "nan", STANDIN_LOSS="nan")
    assert pod.process.wait(timeout=60) == 0
    log = pod.log.read_text()
    assert "fmcluster-smoke failed reason=loss-not-finite" in log
    assert "fmcluster: torchrun exited 1 (the pod exits 0: only a stopped run restarts)" in log
    (result,) = verify.parse_smoke_runs(log)
    assert result.verdict is verify.Verdict.FAIL and "smoke test failed: loss-not-finite" in result.errors


def test_every_pod_of_a_run_stopped_by_one_pods_eviction_exits_to_be_restarted(tmp_path):
    """Two nodes, a Master and a Worker: only the Worker is evicted (kubelet signals its pod alone).
    Every rank stops at the same step and the checkpoint is saved; the Master's pod, which got no
    signal, must still exit 143: had it exited 0 the operator would count the Master succeeded,
    the whole job with it, and nothing would resume. Both pods, made anew, resume and complete."""
    nodes = {"master": "0", "worker": "1"}
    pods = {name: Pod(tmp_path, name, PET_NNODES="2", PET_NODE_RANK=rank, PET_RDZV_ID="run-1")
            for name, rank in nodes.items()}
    pods["master"].wait_for("fmcluster-smoke step=2 ")
    pods["worker"].process.send_signal(signal.SIGTERM)
    assert {name: pod.process.wait(timeout=60) for name, pod in pods.items()} == {"master": 143, "worker": 143}
    (step, seconds, size, path), = CHECKPOINT.findall(pods["master"].log.read_text())

    again = {name: Pod(tmp_path, f"{name}-again", PET_NNODES="2", PET_NODE_RANK=rank, PET_RDZV_ID="run-2")
             for name, rank in nodes.items()}
    assert {name: pod.process.wait(timeout=60) for name, pod in again.items()} == {"master": 0, "worker": 0}
    log = again["master"].log.read_text()
    assert f"\nfmcluster-smoke resumed step={step} seconds={seconds} bytes={size} path={path}\n" in log
    assert "fmcluster-smoke ok world_size=4 steps=40" in log
    (result,) = verify.parse_smoke_runs(log)
    assert result.verdict is verify.Verdict.PASS and result.resumed_from == int(step)
