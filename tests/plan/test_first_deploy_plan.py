"""The plan's "First deploy" section (fmcluster.plan.first_deploy): the model's figures in every
format (JSON and its schema, text, markdown), the words of its durations, and the README's quick
start, which says the same figures for the project it starts."""

from __future__ import annotations

import json
import re

import pytest

from fmcluster.cli import main
from fmcluster.deploy import init
from fmcluster.model import cluster
from fmcluster.model import first_deploy as model
from fmcluster.plan import first_deploy, report
from fmcluster.plan import render as plan_render
from fmcluster.spec import loader
from tests.support.paths import EXAMPLES, ROOT
from tests.support.specs import base_spec, validated


def _plan(path: str) -> report.Plan:
    spec = loader.load(ROOT / path).spec
    return report.build(spec)


def _section(text: str, title: str) -> str:
    return text.split(f"\n{title}\n", 1)[1].split("\n\n", 1)[0]


def _words(span: model.Span) -> str:
    return first_deploy.span(span.low, span.high)


def test_durations_in_words():
    assert [first_deploy.clock(m) for m in (3, 45, 60, 76, 170)] == ["3 min", "45 min", "1 h", "1 h 16 min",
                                                                     "2 h 50 min"]
    assert first_deploy.span(3, 3) == "3 min" and first_deploy.span(2, 5) == "2 to 5 min"
    assert first_deploy.span(45, 90) == "45 min to 1 h 30 min" and first_deploy.span(59, 60) == "59 min to 1 h"


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_plan_carries_the_models_figures(example):
    spec = loader.load(ROOT / example).spec
    fd = model.first_deploy(cluster.resolve(spec))
    p = report.build(spec).first_deploy
    assert [(s.name, s.key, s.low_minutes, s.high_minutes) for s in p.stacks] == [
        (s.name, s.key, s.span.low, s.span.high) for s in fd.stacks]
    names = {s.key: s.name for s in fd.stacks}
    assert [s.waits_for for s in p.stacks] == [[names[k] for k in s.after] for s in fd.stacks]
    assert [[[(step.what, step.low_minutes, step.high_minutes, step.basis) for step in c] for c in s.chains]
            for s in p.stacks] == [[[(step.what, step.minutes.low, step.minutes.high, step.minutes.basis)
                                     for step in c] for c in s.chains] for s in fd.stacks]
    for got, want in ((p.one_at_a_time, fd.one_at_a_time), (p.together, fd.together), (p.node_ready, fd.node_ready),
                      (p.first_job, fd.first_job), (p.cluster_deployed, fd.cluster_ready)):
        assert (got.low_minutes, got.high_minutes) == (want.low, want.high)
    assert p.critical_path == [names[k] for k in fd.critical_path] and p.concurrency == len(fd.stacks)
    assert (p.node_group, p.node_bound_minutes) == (fd.node_group, fd.bound)


def test_json_carries_the_section_and_its_schema_documents_it(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    assert main(["plan", str(ROOT / "examples/p5-pcs.yaml"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, report.json_schema())
    fd = data["first_deploy"]
    assert [s["name"] for s in fd["stacks"]] == [f"llm-pretrain-{k}" for k in
                                                  ("network", "storage", "observability", "images", "cluster",
                                                   "reference")]
    assert fd["stacks"][3]["chains"][0][0]["basis"] == "estimate" and fd["node_group"] == "gpu"
    schema = report.json_schema()
    assert "first_deploy" in schema["required"]
    assert {"stacks", "one_at_a_time", "together", "critical_path", "node_steps", "first_job"} <= set(
        schema["$defs"]["FirstDeployPlan"]["properties"])
    broken = json.loads(json.dumps(data))
    del broken["first_deploy"]["stacks"][0]["low_minutes"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, report.json_schema())


def test_text_shows_each_stack_in_deploy_order_then_the_totals_and_the_first_node():
    p = _plan("examples/p5-pcs.yaml")
    fd = p.first_deploy
    section = _section(plan_render.render_text(p), first_deploy.TITLE)
    flat = " ".join(section.split())
    rows = [line for line in section.splitlines() if re.match(r"  llm-pretrain-\S+  ", line)]
    assert [row.split()[0] for row in rows] == [s.name for s in fd.stacks]
    for row, stack in zip(rows, fd.stacks, strict=True):
        assert row.rstrip().endswith(first_deploy.of(stack)), row
    assert f"llm-pretrain-images network, storage, observability {first_deploy.of(fd.stacks[3])}" in flat
    assert "1 node image built and tested: 45 min to 1 h 30 min llm-pretrain-cluster" in flat
    assert f"llm-pretrain-reference network, cluster {first_deploy.of(fd.stacks[5])}" in flat
    assert "1 reference GPU image built and pushed to ECR: 45 min to 2 h" in flat
    assert "FSx for Lustre (4,800 GiB PERSISTENT_2): 10 to 30 min, then its 2 data repository associations: " \
           "2 to 10 min" in flat
    assert f"one stack at a time (cdk deploy --all, the pipeline): {first_deploy.of(fd.one_at_a_time)}" in flat
    assert (f"cluster deployed: {first_deploy.of(fd.cluster_deployed)} after a deploy one stack at a time starts; "
            "llm-pretrain-reference comes after it, and nothing waits for it") in flat
    assert "cdk deploy --all --concurrency 6 gains nothing: each stack waits for the one before it" in flat
    assert (f"first node of gpu: ready {first_deploy.of(fd.node_ready)} after llm-pretrain-cluster is deployed: "
            "a p5.48xlarge") in flat
    assert "AWS PCS gives a node about 30 minutes to join Slurm" in flat
    assert f"first job: {first_deploy.of(fd.first_job)} after a deploy one stack at a time starts" in flat
    assert "fmcluster/facts/deploy_times.py" in flat and "(published)" not in flat.split("figures marked")[0]


def test_independent_stacks_shorten_the_deploy_with_concurrency():
    data = base_spec()
    del data["storage"]["lustre"]
    p = report.build(validated(data), data)
    fd = p.first_deploy
    assert (fd.together.low_minutes, fd.together.high_minutes) < (fd.one_at_a_time.low_minutes,
                                                                   fd.one_at_a_time.high_minutes)
    flat = " ".join(_section(plan_render.render_text(p), first_deploy.TITLE).split())
    assert (f"with cdk deploy --all --concurrency 6: {first_deploy.of(fd.together)}, each stack as soon as those "
            "it waits for are deployed (critical path: network, observability, images, cluster, reference)") in flat
    assert "test-cluster-storage - 1 to 2 min" in flat


def test_a_published_figure_is_marked_and_a_later_node_says_what_starts_it():
    p = _plan("examples/p5en-eks.yaml")
    flat = " ".join(_section(plan_render.render_text(p), first_deploy.TITLE).split())
    assert "Amazon EKS cluster and its 3 managed node groups: 15 to 20 min (published), then" in flat
    assert "ready 4 to 13 min after its Capacity Block starts" in flat
    assert f"first job: {first_deploy.of(p.first_deploy.first_job)} after a deploy one stack at a time starts, if " \
           "by then its Capacity Block starts" in flat
    # the cluster does not wait for the reference image: it comes after it, and ends the deploy
    assert "cdk deploy --all --concurrency 5 gains nothing" in flat
    assert "cluster deployed: " in flat and "p5en-eks-reference comes after it, and nothing waits for it" in flat


def test_markdown_has_the_table_and_the_totals():
    p = _plan("examples/p6-b200-hyperpod-slurm.yaml")
    md = plan_render.render_markdown(p)
    section = md.split(f"#### {first_deploy.TITLE}\n\n", 1)[1].split("#### Diagram", 1)[0]
    assert section.startswith("| stack | waits for | takes | what takes its time |\n|---|---|---|---|\n")
    fd = p.first_deploy
    for stack in fd.stacks:
        assert f"| {stack.name} | " in section and f" | {first_deploy.of(stack)} | " in section
    assert "the Slurm accounting database (RDS for MariaDB): 10 to 20 min" in section
    assert f"- one stack at a time (cdk deploy --all, the pipeline): {first_deploy.of(fd.one_at_a_time)}" in section
    assert "its stack's creation includes its launch and lifecycle scripts" in section
    assert md.index("#### Estimated cost") < md.index(f"#### {first_deploy.TITLE}") < md.index("#### Diagram")


def test_the_readme_quick_start_says_how_long_its_projects_first_deploy_takes():
    """The README's quick start starts a project with `fmcluster init ... --orchestrator pcs
    --instance-type p5.48xlarge` (tests/project/test_readme.py runs it) and says how long its first
    deploy takes, its images and its first node: the model's figures for that project."""
    text = (ROOT / "README.md").read_text()
    quick = " ".join(text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0].split())
    assert "fmcluster init my-cluster --orchestrator pcs --instance-type p5.48xlarge" in quick
    spec = loader.load_text(init.spec_text("pcs", "p5.48xlarge", "my-cluster", "us-east-1", "use1-az4")).spec
    fd = model.first_deploy(cluster.resolve(spec))
    assert f"Its first deploy has the cluster up after about {_words(fd.cluster_ready)}, one stack after " \
        "another" in quick
    assert f"(`my-cluster-images` builds the node images for {_words(fd.stack('images').span)} of it)" in quick
    assert f"its first GPU node is ready {_words(fd.node_ready)} after that" in quick
    assert f"`my-cluster-reference` then builds the reference GPU image for {_words(fd.stack('reference').span)}" \
        in quick
    assert f"its first GPU node is ready {_words(fd.node_ready)} after that" in quick
