"""The window of a training plan a node group runs in (fmcluster_cdk/constructs/handler_lib/
training_plans.py), which every Lambda handler that acts on a plan's end reads, each from a link in
its own code: the capacity-end function (HyperPod EKS), the node replacer and the countdown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import lambda_handlers
from tests.support.paths import ROOT
from tests.support.training_plans import CASES, NOW, P5

LIB = ROOT / "fmcluster_cdk/constructs/handler_lib/training_plans.py"
training_plans = lambda_handlers.load(LIB, "training_plans_lib")


@pytest.mark.parametrize("answer, expected, _nodes", CASES)
def test_a_training_plans_window_is_its_reserved_capacity_of_the_groups_type(answer, expected, _nodes):
    assert training_plans.plan_window(answer, P5, NOW) == expected


HANDLERS = ["compute/handlers/capacity_end", "compute/handlers/node_replacer",
            "observability/handlers/capacity_countdown"]


@pytest.mark.parametrize("handler", HANDLERS)
def test_each_handler_that_reads_a_plan_holds_the_one_module(handler):
    """A link in the handler's directory (CDK's asset staging copies what a link outside the
    directory points at, so the function's code holds the file), to the one module."""
    link = ROOT / "fmcluster_cdk/constructs" / handler / "training_plans.py"
    assert link.is_symlink() and link.resolve() == LIB.resolve()
    assert not Path(os.readlink(link)).is_absolute()  # a clone anywhere


@pytest.mark.parametrize("example", ["p6-b200-hyperpod-slurm.yaml", "p5-hyperpod-eks.yaml"])
def test_the_functions_code_holds_the_module_and_imports_as_lambda_runs_it(corpus, example):
    """Each staged asset of a handler that imports the module (the countdown, and the node replacer of
    HyperPod Slurm or the capacity-end function of HyperPod EKS) holds it as a file of its own, and its
    index imports in a fresh interpreter from the asset's root, as Lambda's Python runtime runs it
    (writing no bytecode there: the corpus's assemblies are read-only)."""
    assembly = corpus.assembly(f"examples/{example}")
    importing = [d for d in sorted(assembly.glob("asset.*")) if (d / "index.py").is_file()
                 and "from training_plans import" in (d / "index.py").read_text()]
    first = {(d / "index.py").read_text().splitlines()[0].strip('"') for d in importing}
    other = ("Replaces the cluster's nodes that its node health check drained for a hardware fault" if "slurm" in
             example else "The end of a node group's reserved capacity, handled on Kubernetes")
    assert first == {"Counts down to the end of each Capacity Block and training plan of a cluster", other}
    for asset in importing:
        copied = asset / "training_plans.py"
        assert not copied.is_symlink() and copied.read_bytes() == LIB.read_bytes()
        done = subprocess.run([sys.executable, "-E", "-s", "-B", "-c", "import index"], cwd=asset, capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr
