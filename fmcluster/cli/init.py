"""`fmcluster init`: a new cluster project written into a new directory."""

from __future__ import annotations

import argparse

from fmcluster.cli.core import INVALID, Command, done


def cmd_init(args: argparse.Namespace) -> int:
    from fmcluster.deploy import init

    report = init.run(args.directory, args.orchestrator, args.instance_type, name=args.name, region=args.region,
                      az_id=args.az_id)
    return done(init.render(report, "text"), init.exit_code(report))


def _init_args(p: argparse.ArgumentParser) -> None:
    from fmcluster.deploy import init_choices as init

    p.add_argument("directory", metavar="DIR", help="the project's directory, new or empty")
    p.add_argument("--orchestrator", choices=init.ORCHESTRATORS, default=init.DEFAULT_ORCHESTRATOR,
                   help=f"the control plane (default {init.DEFAULT_ORCHESTRATOR})")
    p.add_argument("--instance-type", choices=init.instance_types(), default=init.DEFAULT_INSTANCE_TYPE,
                   metavar="TYPE", help="the GPU node group's instance type: " + ", ".join(init.instance_types())
                   + f" (default {init.DEFAULT_INSTANCE_TYPE})")
    p.add_argument("--name", help="the cluster's name, which prefixes every stack (default: DIR's name)")
    p.add_argument("--region", default=init.DEFAULT_REGION, help=f"the AWS region (default {init.DEFAULT_REGION})")
    p.add_argument("--az-id", metavar="ID",
                   help="the AZ ID of the GPU capacity, such as use1-az4 (default: the examples' for the region)")
    p.set_defaults(func=cmd_init)


INIT = Command(
    "write a new cluster project (spec, cdk.json, .gitignore, pins, CI and deploy workflows, pipeline "
    "file) into a new directory",
    "Write a new cluster project into DIR: cluster.yaml (a spec for the control plane and instance type, "
    "a comment on every field), cdk.json (runs the installed CDK app on it), .gitignore, requirements.txt "
    "(the fmcluster the project runs, pinned), a GitHub Actions workflow that validates, plans and diffs "
    "every pull request, a deploy workflow and the template of the OIDC role it assumes, and pipeline.yaml "
    "(a GitOps pipeline for the spec). DIR must be new or empty: nothing is written over.",
    ("fmcluster init my-cluster",
     "fmcluster init my-cluster --orchestrator eks --instance-type p5en.48xlarge --region us-east-1"),
    ((0, "the project was written"),
     (2, "refused, with nothing written: DIR is not empty, the spec rules refuse the combination, "
         f"or {INVALID}")),
    _init_args, "fmcluster.deploy.init")
