"""`fmcluster jobs` on the Kubernetes control planes (eks, hyperpod-eks): the kit of every
Kubernetes example, its manifests validated against Kubernetes' own schemas at the cluster's
version (kubernetes-validate) and the CRDs' (tests/data/crds), held to the model (queue, flavor,
GPUs and EFA per pod, pods per job), its scripts shellchecked and run in a sandbox with recording
fakes of mpirun and kubectl, and their output read back by `fmcluster verify`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from fmcluster.cli import main as cli
from fmcluster.facts import kubernetes as k8s
from fmcluster.kits import common, kubernetes_scripts, verify
from fmcluster.kits import kubernetes as jobs_kubernetes
from fmcluster.kubernetes import capacity_end as end_model
from fmcluster.kubernetes import kueue
from fmcluster.kubernetes import manifests as kubernetes
from fmcluster.model import expected
from fmcluster.model.cluster import resolve
from fmcluster.node import nccl as node_nccl
from fmcluster.spec import loader
from tests.support.crds import crds
from tests.support.crds import validate as validate_custom
from tests.support.kueue import dra_charge, flavor_quota
from tests.support.paths import DATA, EXAMPLES_DIR, ROOT, SUPPORT

KUBERNETES_EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in (EXAMPLES_DIR).glob("*.yaml")
                             if loader.load(p).spec.orchestrator.type in jobs_kubernetes.KUBERNETES_PLANES)
SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
FIXTURES = DATA / "verify"


def model_of(example):
    return resolve(loader.load(ROOT / example).spec)


@pytest.fixture(scope="module", params=KUBERNETES_EXAMPLES)
def kit(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("kit")
    assert cli(["jobs", request.param, "-o", str(out)]) == 0
    return model_of(request.param), out


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def all_documents(out: Path) -> list[dict]:
    return [d for path in sorted(out.rglob("*.yaml")) for d in documents(path)]


def pod_specs(manifest: dict) -> dict[str, dict]:
    """Role -> pod spec of a job manifest."""
    kind, spec = manifest["kind"], manifest["spec"]
    if kind == "MPIJob":
        return {role: r["template"]["spec"] for role, r in spec["mpiReplicaSpecs"].items()}
    if kind == "PyTorchJob":
        return {role: r["template"]["spec"] for role, r in spec["pytorchReplicaSpecs"].items()}
    return {"pod": spec["template"]["spec"]}


def test_the_examples_are_covered():
    assert {"examples/p5en-eks.yaml", "examples/p5-hyperpod-eks.yaml", "examples/p6e-gb200-eks.yaml"} <= set(
        KUBERNETES_EXAMPLES)


def test_every_gpu_group_gets_its_jobs(kit):
    model, out = kit
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    groups = expected.gpu_groups(model)
    assert groups
    wanted = [".fmcluster-kit", "README.md", "collect.sh", "expected.json", "image/Dockerfile", "kit.yaml",
              "submit-all.sh"]
    for group in groups:
        tests = ["dcgm", "nccl", "smoke"] + (["fio"] if jobs_kubernetes.fio_targets(model, group) else [])
        wanted += [f"{group.name}/{t}.yaml" for t in tests]
    assert files == sorted(wanted)
    assert all(os.access(out / f, os.X_OK) for f in ("submit-all.sh", "collect.sh"))
    assert json.loads((out / "expected.json").read_text()) == json.loads(common.expected_json(model).content)


def test_built_in_objects_match_kubernetes_schemas_at_the_clusters_version(kit):
    model, out = kit
    version = f"{model.spec.orchestrator.version}.0"
    built_in = [d for d in all_documents(out) if d["apiVersion"] in ("v1", "batch/v1")]
    assert {d["kind"] for d in built_in} >= {"ConfigMap", "Job"}
    for manifest in built_in:
        kubernetes_validate.validate(manifest, version, strict=True)


def test_custom_objects_match_their_crds(kit):
    _, out = kit
    custom = [d for d in all_documents(out) if d["apiVersion"] not in ("v1", "batch/v1")]
    assert {d["kind"] for d in custom} >= {"MPIJob", "PyTorchJob"}
    known = crds()
    missing = {(d["apiVersion"], d["kind"]) for d in custom} - set(known)
    if missing:  # the MPIJob and PyTorchJob schemas come with the operators' pin (tests/data/crds)
        pytest.skip(f"no vendored CRD schema yet for {sorted(missing)}")
    for manifest in custom:
        validate_custom(manifest)


def test_a_schema_violation_is_caught():
    """The validators are not vacuous: a Job with a misspelt field and one without its pod fail."""
    model = model_of("examples/p5en-eks.yaml")
    (job,) = jobs_kubernetes.manifests(model, expected.gpu_groups(model)[0], "dcgm")
    job["spec"]["completion"] = job["spec"].pop("completions")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.35.0", strict=True)
    del job["spec"]["template"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.35.0", strict=False)


def test_jobs_go_through_the_clusters_queue_on_their_groups_flavor(kit):
    """Through the cluster's LocalQueue in orchestrator.namespace; where the spec has teams, through
    the first team's (the kit's default) at its priority class, in its namespace."""
    model, out = kit
    if model.teams:
        team = model.teams[0]
        namespace, queue, priority = team.name, "default", team.priority
        assert kueue.team_queue(team)[:2] == (namespace, queue)
    else:
        namespace, (_, queue), priority = model.spec.orchestrator.namespace, kueue.queue_names(model.spec), None
    for group in expected.gpu_groups(model):
        for path in sorted((out / group.name).glob("*.yaml")):
            for manifest in documents(path):
                assert manifest["metadata"]["namespace"] == namespace
                if manifest["kind"] == "ComputeDomain":
                    continue
                assert manifest["metadata"]["labels"][kueue.QUEUE_NAME_LABEL] == queue
                assert manifest["metadata"]["labels"].get(kueue.PRIORITY_CLASS_LABEL) == priority
                for pod in pod_specs(manifest).values():
                    # Kueue's flavor of the group: its node label and the GPU taint's toleration
                    assert pod["nodeSelector"] == {k8s.NODE_GROUP_LABEL: group.name}
                    assert k8s.GPU_TOLERATION in pod["tolerations"]


def test_every_pod_with_gpus_asks_for_the_whole_node(kit):
    model, out = kit
    for group in expected.gpu_groups(model):
        for test in ("nccl", "smoke", "dcgm"):
            job = documents(out / group.name / f"{test}.yaml")[-1]
            pods = 0
            for role, pod in pod_specs(job).items():
                if role == "Launcher":
                    assert kueue.GPU_RESOURCE not in pod["containers"][0]["resources"].get("limits", {})
                    continue
                limits = pod["containers"][0]["resources"]["limits"]
                assert limits[kueue.GPU_RESOURCE] == group.gpus
                if test != "dcgm":
                    assert limits.get(kueue.EFA_RESOURCE) == (group.efa_interfaces or None)
            spec = job["spec"]
            if job["kind"] == "MPIJob":
                pods = spec["mpiReplicaSpecs"]["Worker"]["replicas"]
                assert spec["slotsPerWorker"] == group.gpus
            elif job["kind"] == "PyTorchJob":
                pods = sum(r["replicas"] for r in spec["pytorchReplicaSpecs"].values())
                assert spec["nprocPerNode"] == str(group.gpus)
            else:
                pods = spec["parallelism"]
                assert spec["completions"] == pods and spec["completionMode"] == "Indexed"
            assert pods == group.max_count, (group.name, test)


def test_a_job_with_a_deadline_declares_its_run_time_to_kueue(kit):
    """Kueue's label kueue.x-k8s.io/max-exec-time-seconds (a positive int32, else Kueue ignores it:
    pkg/controller/jobframework/utils.go) is the job's activeDeadlineSeconds and a margin: the
    capacity-end function holds such a job back from a group whose capacity ends before it could
    finish. Kueue counts from its admission, before the job's deadline starts, and would stop the job
    by suspending it (never Failed: collect.sh would wait its TIMEOUT), so the label exceeds the
    deadline by more than the pods' grace period and a minute. The nccl job has no deadline, and
    declares none; the README says which do."""
    model, out = kit
    label = "kueue.x-k8s.io/max-exec-time-seconds"
    declared = set()
    for group in expected.gpu_groups(model):
        for path in sorted((out / group.name).glob("*.yaml")):
            for job in documents(path):
                if job["kind"] not in ("Job", "MPIJob", "PyTorchJob"):
                    continue
                deadline = (job["spec"] if job["kind"] == "Job" else job["spec"]["runPolicy"]).get(
                    "activeDeadlineSeconds")
                value = job["metadata"]["labels"].get(label)
                assert (value is None) is (deadline is None), (path, value, deadline)
                if value is not None:
                    assert re.fullmatch(r"[1-9][0-9]*", value) and int(value) < 2 ** 31
                    templates = ([job["spec"]["template"]] if job["kind"] == "Job" else
                                 [r["template"] for r in job["spec"]["pytorchReplicaSpecs"].values()])
                    grace = max(t["spec"].get("terminationGracePeriodSeconds", 30) for t in templates)
                    assert int(value) >= deadline + grace + 60, (path, value, deadline, grace)
                    assert int(value) <= deadline + 600, (path, value, deadline)
                    declared.add(path.stem)
    assert declared >= {"dcgm", "smoke"} and "nccl" not in declared
    readme = " ".join((out / "README.md").read_text().split())
    assert f"The dcgm, fio and smoke jobs declare their run time to Kueue (label `{label}`" in readme
    assert ("fmcluster holds it back" in readme) is bool(end_model.kubernetes_ends(model))


def test_ranks_get_the_node_bootstraps_environment(kit):
    model, out = kit
    for group in expected.gpu_groups(model):
        settings = {s.name: s.value for s in node_nccl.nccl_settings(group.instance, group.efa)}
        for test in ("nccl", "smoke"):
            job = documents(out / group.name / f"{test}.yaml")[-1]
            for pod in pod_specs(job).values():
                env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
                assert {k: env.get(k) for k in settings} == settings
                if group.efa:
                    assert env["FI_EFA_USE_HUGE_PAGE"] == "0"  # the pods ask for no huge pages
        launcher = documents(out / group.name / "nccl.yaml")[-1]["spec"]["mpiReplicaSpecs"]["Launcher"]
        env = {e["name"]: e.get("value") for e in launcher["template"]["spec"]["containers"][0]["env"]}
        assert set(env["NCCL_VARS"].split()) >= set(settings)  # what mpirun -x passes to the ranks


def test_ultraserver_jobs_claim_an_imex_channel(kit):
    model, out = kit
    for group in expected.gpu_groups(model):
        for test in ("nccl", "smoke"):
            docs = documents(out / group.name / f"{test}.yaml")
            domains = [d for d in docs if d["kind"] == "ComputeDomain"]
            job = docs[-1]
            workers = {r: p for r, p in pod_specs(job).items() if r != "Launcher"}
            if not group.ultraserver:
                assert not domains and all("resourceClaims" not in p for p in workers.values())
                continue
            (domain,) = domains
            template = domain["spec"]["channel"]["resourceClaimTemplate"]["name"]
            for pod in workers.values():
                assert pod["resourceClaims"] == [{"name": "imex-channel", "resourceClaimTemplateName": template}]
                assert pod["containers"][0]["resources"]["claims"] == [{"name": "imex-channel"}]
            replicas = job["spec"].get("mpiReplicaSpecs") or job["spec"]["pytorchReplicaSpecs"]
            annotations = [r["template"].get("metadata", {}).get("annotations", {}) for r in replicas.values()]
            required = {a.get("kueue.x-k8s.io/podset-required-topology") for a in annotations} - {None}
            assert required == ({kueue.NVLINK_CLIQUE_LABEL} if group.one_nvlink_domain else set())


# --- Kueue's DRA accounting (kubernetes-sigs/kueue v0.18.3) ------------------------------------

def test_kueue_admits_the_ultraserver_jobs_claims(kit):
    """Every DeviceClass of the kit's claims is mapped, the mapped resource is covered, and its quota
    on the group's flavor holds the job (one claim a pod, one pod a node)."""
    model, out = kit
    for group in expected.gpu_groups(model):
        for test in ("nccl", "smoke"):
            docs = documents(out / group.name / f"{test}.yaml")
            charge = dra_charge(model, docs)
            if not group.ultraserver:
                assert charge == {}
                continue
            quota = flavor_quota(model, group.name)
            assert charge == {kueue.IMEX_CHANNEL_RESOURCE: group.max_count}
            assert charge[kueue.IMEX_CHANNEL_RESOURCE] <= quota[kueue.IMEX_CHANNEL_RESOURCE]


def test_an_unmapped_device_class_is_inadmissible():
    """The check above fails as Kueue does without the mapping (the Kueue 0.18 default)."""
    model = model_of("examples/p6e-gb200-eks.yaml")
    group = model.ultraserver_groups[0]
    docs = jobs_kubernetes.manifests(model, group, "nccl")
    assert dra_charge(model, docs) == {kueue.IMEX_CHANNEL_RESOURCE: group.max_count}
    import unittest.mock

    with unittest.mock.patch.object(kueue, "kueue_configuration", lambda m: None):
        with pytest.raises(AssertionError, match="compute-domain-default-channel.nvidia.com is not mapped"):
            dra_charge(model, docs)


def test_scripts_pass_shellcheck(kit, tmp_path):
    _, out = kit
    (config_map,) = documents(out / "kit.yaml")
    paths = [str(out / "submit-all.sh"), str(out / "collect.sh")]
    for name, text in config_map["data"].items():
        if name.endswith(".sh"):
            (tmp_path / name).write_text(text)
            paths.append(str(tmp_path / name))
    result = subprocess.run([SHELLCHECK, "--shell=bash", *paths], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    compile(config_map["data"]["smoke.py"], "smoke.py", "exec")


def written_kit(tmp_path: Path, example: str = "examples/p5en-eks.yaml"):
    """The model of `example` and its kit, written under tmp_path/kit as `fmcluster jobs` writes it."""
    out = tmp_path / "kit"
    assert cli(["jobs", example, "-o", str(out)]) == 0
    return model_of(example), out


def _fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def test_the_nccl_launcher_marks_each_nodes_output_for_verify(tmp_path):
    """nccl.sh run with a fake mpirun that answers like nccl-tests (a real p5 output over EFA):
    one part per node and operation, named by its Kubernetes node, and one across the nodes, which
    `fmcluster verify` judges against the model."""
    model = model_of("examples/p5en-eks.yaml")
    group = expected.gpu_groups(model)[0]
    real = (FIXTURES / "nccl-all_reduce-2x-p4d-eks-efa.txt").read_text()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    _fake(bin_dir, "mpirun", f'echo "$*" >>{calls}\n'
          'for a; do case $a in *:1) host=${a%:1};; esac; done\n'
          'if [[ " $* " == *" cat "* ]]; then echo "ip-$host.ec2.internal"; exit 0; fi\n'
          f'cat {tmp_path / "nccl.txt"}\n')
    (tmp_path / "nccl.txt").write_text(real)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("gpu-nccl-worker-0.gpu-nccl.training.svc slots=8\n"
                        "gpu-nccl-worker-1.gpu-nccl.training.svc slots=8\n")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GROUP": group.name, "GPUS": str(group.gpus), "SIZE": "16G",
           "NCCL_VARS": "FI_PROVIDER NCCL_BUFFSIZE", "OMPI_MCA_orte_default_hostfile": str(hostfile)}
    script = tmp_path / "nccl.sh"
    script.write_text(kubernetes_scripts.NCCL_SH)
    result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    parts = verify.split_by_node(result.stdout)
    marked = [(p.host, p.test) for p in parts if p.test]
    hosts = ["ip-gpu-nccl-worker-0.gpu-nccl.training.svc.ec2.internal",
             "ip-gpu-nccl-worker-1.gpu-nccl.training.svc.ec2.internal"]
    assert marked == [x for op in expected.NCCL_OPERATIONS
                      for x in [(h, f"nccl-{op}-node") for h in hosts] + [("all", f"nccl-{op}-nodes")]]
    recorded = calls.read_text().splitlines()
    across = [c for c in recorded if "-npernode" in c]
    assert len(across) == 3 and all(f"-np {2 * group.gpus} -npernode {group.gpus}" in c for c in across)
    assert all("-x FI_PROVIDER -x NCCL_BUFFSIZE" in c and "--prefix /opt/amazon/openmpi" in c for c in recorded)
    report = verify.judge_results(model, {"results/gpu-nccl.out": result.stdout})
    judged = {(r.node, r.test) for r in report.rows}
    assert set(marked) <= judged


def test_the_nccl_launcher_fails_when_a_worker_never_answers(tmp_path):
    """A worker whose sshd never answers fails the launcher (the operator restarts it) rather than
    a job that succeeds with nothing measured."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake(bin_dir, "mpirun", 'for a; do [[ $a == *worker-1*:1 ]] && exit 255; done\necho ip-node\n')
    _fake(bin_dir, "sleep", "exit 0\n")
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("w-worker-0.w.ns.svc slots=8\nw-worker-1.w.ns.svc slots=8\n")
    script = tmp_path / "nccl.sh"
    script.write_text(kubernetes_scripts.NCCL_SH)
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60, env={
        "PATH": f"{bin_dir}:/usr/bin:/bin", "GROUP": "gpu", "GPUS": "8", "SIZE": "16G",
        "OMPI_MCA_orte_default_hostfile": str(hostfile), "WORKER_WAIT_TRIES": "3"})
    assert result.returncode == 1
    assert "worker w-worker-1.w.ns.svc does not answer over ssh" in result.stderr
    assert "==> fmcluster" not in result.stdout


def test_collect_waits_and_writes_each_jobs_logs(tmp_path):
    """collect.sh with a fake kubectl: it polls each job until a final condition, then writes the
    logs of the job's output pods (by their labels) to results/JOB.out."""
    model, out = written_kit(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    state = tmp_path / "polls"
    _fake(bin_dir, "kubectl", f'echo "$*" >>{tmp_path / "calls"}\n'
          'case $1 in\n'
          f'  get) n=$(cat {state} 2>/dev/null || echo 0); echo $((n + 1)) >{state}\n'
          '       (( n % 2 )) && printf "Created\\nSucceeded\\n" || printf "Created\\n";;\n'
          '  logs) echo "logs of $*";;\n'
          'esac\n')
    _fake(bin_dir, "sleep", "exit 0\n")
    result = subprocess.run(["bash", str(out / "collect.sh")], env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    group = expected.gpu_groups(model)[0].name
    written = sorted(p.name for p in (out / "results").iterdir())
    assert written == sorted(f"{group}-{t}.out" for t in ("dcgm", "nccl", "fio", "smoke"))
    nccl = (out / "results" / f"{group}-nccl.out").read_text()
    assert "training.kubeflow.org/job-role=launcher" in nccl
    assert "mpijob/" in result.stdout.replace("mpijob ", "mpijob/") and "Succeeded" in result.stdout


def test_submit_puts_image_in(tmp_path):
    """IMAGE set: it replaces the reference image in every manifest; the rest of the image
    handling (the account, no reference image): tests/kits/test_reference_image_kits.py."""
    model, out = written_kit(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    created = tmp_path / "created"
    # like kubectl, it reads the manifests it is given (-f -)
    _fake(bin_dir, "kubectl", f'if [[ $1 == create ]]; then cat >>{created}; elif [[ " $* " == *" - "* ]]; '
          'then cat >/dev/null; fi\n')
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/fmcluster/acceptance:1"
    ran = subprocess.run(["bash", str(out / "submit-all.sh")], env={**env, "IMAGE": image},
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    text = created.read_text()
    assert jobs_kubernetes.IMAGE_PLACEHOLDER not in text and text.count(f"image: {image}") >= 3
    assert "dkr.ecr.us-east-2.amazonaws.com/fmcluster/" not in text
    assert jobs_kubernetes.DCGM_IMAGE in text and common.PYTORCH_IMAGE_REF in text


def test_each_submission_keeps_its_smoke_checkpoints_apart(tmp_path):
    """The smoke job's checkpoints are a directory of its submission's own: submitted again (by
    submit-all.sh, which deletes the earlier job of the name), it never resumes from a checkpoint
    an earlier submission left behind (stopped, then deleted or failed before it resumed)."""
    model, out = written_kit(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake(bin_dir, "kubectl", 'if [[ $1 == create ]]; then cat >>"$CREATED"; elif [[ " $* " == *" - "* ]]; '
          'then cat >/dev/null; fi\n')
    directories = []
    for submission in ("first", "second"):
        created = tmp_path / submission
        ran = subprocess.run(["bash", str(out / "submit-all.sh")], capture_output=True, text=True,
                             env={"PATH": f"{bin_dir}:/usr/bin:/bin", "IMAGE": "image:1", "CREATED": str(created)})
        assert ran.returncode == 0, ran.stderr
        jobs = [d for d in yaml.safe_load_all(created.read_text()) if d and d["kind"] == "PyTorchJob"]
        found = {e["value"] for job in jobs for replica in job["spec"]["pytorchReplicaSpecs"].values()
                 for e in replica["template"]["spec"]["containers"][0]["env"] if e["name"] == "CHECKPOINTS"}
        (directory,) = found  # every pod of the job the same
        base = jobs_kubernetes.smoke_checkpoints(model, expected.gpu_groups(model)[0]).rsplit("/", 1)[0]
        assert directory.startswith(base + "/") and re.fullmatch(r"\d{8}T\d{6}Z-\d+", directory[len(base) + 1:])
        directories.append(directory)
    assert directories[0] != directories[1]


def test_fio_measures_the_file_system_and_the_nodes_nvme(kit):
    model, out = kit
    for group in expected.gpu_groups(model):
        targets = jobs_kubernetes.fio_targets(model, group)
        tests = [t.test for t, _ in targets]
        assert tests == [t for t in ("fio-fsx", "fio-scratch") if t in expected.expectations(model)[group.name]]
        if not targets:
            continue
        (job,) = documents(out / group.name / "fio.yaml")
        pod = job["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        if "fio-fsx" in tests:
            assert volumes["fsx"]["persistentVolumeClaim"]["claimName"] == kubernetes.LUSTRE_CLAIM
        if "fio-scratch" in tests:
            local = volumes["scratch"]
            assert ("hostPath" in local) == (model.control_plane.type == "hyperpod-eks")
        anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        assert anti["topologyKey"] == kueue.HOSTNAME_LABEL  # one pod a node


def test_the_smoke_log_is_marked_for_its_group(kit):
    model, out = kit
    for group in expected.gpu_groups(model):
        job = documents(out / group.name / "smoke.yaml")[-1]
        container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
        assert container["command"] == ["bash", "/kit/smoke.sh"]
        assert {"name": "GROUP", "value": group.name} in container["env"]
        assert 'echo "==> fmcluster node=all group=${GROUP:?} test=smoke <=="' in kubernetes_scripts.SMOKE_SH
        assert "\ntorchrun " in kubernetes_scripts.SMOKE_SH


def test_fio_writes_a_tenth_of_each_capacity(kit):
    """fio's --size is per job: all pods of a group and their FIO_JOBS jobs together write at most a
    tenth of the Lustre file system, and of each node's /scratch (on eks an emptyDir of
    SCRATCH_EMPTY_DIR_GIB, whose limit would evict the pod; on hyperpod-eks the instance store)."""
    model, out = kit
    lustre = model.spec.storage.lustre
    for group in expected.gpu_groups(model):
        for target, _ in jobs_kubernetes.fio_targets(model, group):
            if target.test == "fio-fsx":
                capacity, writers = lustre.storage_capacity_gib, group.max_count
            elif model.control_plane.type == "eks":
                capacity, writers = jobs_kubernetes.SCRATCH_EMPTY_DIR_GIB, 1
            else:
                capacity, writers = common.instance_store_gib(group), 1
            written_gib = writers * common.FIO_JOBS * target.job_mib / 1024
            assert written_gib <= capacity * common.FIO_FRACTION, (group.name, target)


def test_fio_script_reads_back_what_it_wrote_and_leaves_nothing(tmp_path):
    """The ConfigMap's fio.sh run with the real fio (tests/support/gpu_standins/fio: a thousandth of the
    sizes, what was asked recorded) on two targets: each written, then the same files read back
    (fio's job name, size and count alike), every part under its marker, verify reads fio's JSON,
    and nothing is left in either directory."""
    if shutil.which("fio") is None:
        if os.environ.get("CI"):
            pytest.fail("fio is not installed (make tools installs it)")
        pytest.skip("fio is not installed (make tools)")
    standins = SUPPORT / "gpu_standins"
    targets = {"fio-fsx": tmp_path / "fsx", "fio-scratch": tmp_path / "scratch"}
    for directory in targets.values():
        directory.mkdir()
    script = tmp_path / "fio.sh"
    script.write_text(jobs_kubernetes.scripts()["fio.sh"])
    record = tmp_path / "fio.record"
    env = {**os.environ, "PATH": f"{standins}:{os.environ['PATH']}", "GROUP": "gpu", "NODE_NAME": "node-1",
           "FIO_JOBS": "2", "TARGETS": " ".join(f"{test}:{path}:8" for test, path in targets.items()),
           "STANDIN_FIO_RECORD": str(record), "STANDIN_FIO_SCALE": "8", "SLURMD_NODENAME": "node-1"}
    result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    asked = [dict(field.split("=", 1) for field in line.split("\t")[1:]) for line in record.read_text().splitlines()]
    for path in targets.values():
        runs = [a for a in asked if a["--directory"] == f"{path}/fmcluster-fio/node-1"]
        assert [a["--rw"] for a in runs] == ["write", "read"]
        same = ("--name", "--size", "--numjobs")  # the read pass reads the files the write pass laid out
        assert [runs[0][k] for k in same] == [runs[1][k] for k in same] == ["fmcluster", "8M", "2"]
        assert not any(path.rglob("*")), sorted(path.rglob("*"))
    parts = verify.split_by_node(result.stdout)
    assert [(p.host, p.test) for p in parts] == [("node-1", "fio-fsx"), ("node-1", "fio-scratch")]
    for part in parts:
        parsed = verify.parse_fio(part.text)
        assert not parsed.errors and parsed.write_bw and parsed.read_bw, parsed


def test_a_teams_kit_runs_in_its_namespace_and_queue(tmp_path):
    """`fmcluster jobs --team research`: every object in the team's namespace, each job in its
    LocalQueue at its priority class (a WorkloadPriorityClass the cluster has), the scripts
    reading and writing that namespace, the README saying so. Research borrows enough to hold the
    whole group (as the example stands it may not: tests/kits/test_kit_groups.py)."""
    spec = tmp_path / "spec.yaml"
    data = yaml.safe_load(Path("examples/p5en-eks.yaml").read_text())
    data["teams"][1]["borrow"] = 48
    spec.write_text(yaml.safe_dump(data))
    spec = str(spec)
    model = resolve(loader.load(spec).spec)
    team = model.team("research")
    out = tmp_path / "kit"
    assert cli(["jobs", spec, "-o", str(out), "--team", "research"]) == 0
    classes = {d["metadata"]["name"] for d in kueue.kueue_manifests(model) if d["kind"] == "WorkloadPriorityClass"}
    local_queues = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in kueue.kueue_manifests(model)
                    if d["kind"] == "LocalQueue"}
    jobs = 0
    for manifest in all_documents(out):
        assert manifest["metadata"]["namespace"] == "research", manifest["metadata"]
        labels = manifest["metadata"].get("labels", {})
        if kueue.QUEUE_NAME_LABEL in labels:
            jobs += 1
            assert ("research", labels[kueue.QUEUE_NAME_LABEL]) in local_queues
            assert labels[kueue.PRIORITY_CLASS_LABEL] == team.priority and team.priority in classes
    assert jobs >= 3
    assert "ns=research" in (out / "collect.sh").read_text()
    assert "(namespace research)" in (out / "submit-all.sh").read_text()
    readme = (out / "README.md").read_text()
    assert "namespace `research`" in readme and "team `research`" in readme and "`normal`" in readme
