"""The Slurm kit under a team: every sbatch script (the serving job's too) runs as the team's Slurm
account with its default QOS; without a team, the scripts are those of a cluster without teams."""

from __future__ import annotations

import dataclasses

from fmcluster.kits import jobs
from fmcluster.model.cluster import resolve
from fmcluster.spec import loader
from tests.support.paths import EXAMPLES_DIR
from tests.support.specs import base_spec, validated, with_


def model_of(name):
    return resolve(loader.load(EXAMPLES_DIR / name).spec)


def options(text: str) -> list[str]:
    return [line.split(None, 1)[1] for line in text.splitlines() if line.startswith("#SBATCH ")]


def test_every_sbatch_runs_as_the_team_with_its_priority():
    model = model_of("p6-b200-hyperpod-slurm.yaml")
    for team in model.teams:
        scripts = [f for f in jobs.slurm_kit(model, team) if f.path.endswith(".sbatch")]
        assert scripts and any(f.path.endswith("serve.sbatch") for f in scripts) == (model.serving is not None)
        for kit_file in scripts:
            found = options(kit_file.content)
            assert found.count(f"--account={team.name}") == 1, kit_file.path
            assert found.count(f"--qos={team.priority}") == 1, kit_file.path
            assert found.index(f"--account={team.name}") == next(
                i for i, o in enumerate(found) if o.startswith("--partition=")) + 1


def test_without_a_team_no_account_or_qos():
    model = model_of("p5-pcs.yaml")
    for kit_file in jobs.slurm_kit(model, None):
        assert "--account=" not in kit_file.content and "--qos=" not in kit_file.content, kit_file.path


def test_a_low_priority_team_submits_at_low():
    model = model_of("p5-pcs.yaml")
    team = dataclasses.replace(model.teams[0], priority="low")
    nccl = next(f for f in jobs.slurm_kit(model, team) if f.path.endswith("nccl.sbatch"))
    assert "#SBATCH --qos=low" in nccl.content.splitlines()


def test_the_serving_job_runs_as_the_team_too():
    spec = with_(base_spec(), "serving", {"node_group": "gpu", "model": {
        "name": "meta-llama/Llama-3.1-8B-Instruct", "path": "/fsx/models/Llama-3.1-8B-Instruct",
        "parameters_billions": 8}})
    spec = with_(spec, "teams", [{"name": "infer", "members": ["carol"], "share": 1.0, "priority": "high"}])
    model = resolve(validated(spec))
    serve = next(f for f in jobs.slurm_kit(model, model.teams[0]) if f.path.endswith("serve.sbatch"))
    assert ["--account=infer", "--qos=high"] == [o for o in options(serve.content)
                                                 if o.startswith(("--account", "--qos"))]
