"""`fmcluster capacity`: find, buy and extend the reserved GPU capacity a spec's node groups run
on (issue 41) — Capacity Blocks for ML on AWS PCS and Amazon EKS, SageMaker training plans on
HyperPod.

The pure modules decide: offerings (the search window, each group's request, the offerings read
from the answers, price per hour, cheapest first), placement (what moving the GPU AZ ID to an
offering's AZ replaces, from the model), purchase (when fmcluster may buy, the question, what it
writes into the spec, what to run next), spec_edit (one value written into the user's YAML file,
every other byte kept) and report (the request and report). aws makes the calls, through the
clients it is given; actions runs each command's steps; render gives text, Markdown and JSON;
command holds run, render and exit_code. The modules import one another directly, never through
this package, which re-exports the command's names."""

from fmcluster.deploy.capacity.command import FORMATS, Request, exit_code, render, run

__all__ = ["FORMATS", "Request", "exit_code", "render", "run"]
