"""The GitOps pipeline's commands: `fmcluster stack-policy` (the storage stack's policy), `fmcluster
step` (a step program of this installation) and `fmcluster change-set` (a change set judged)."""

from __future__ import annotations

import argparse
import os
import sys

from fmcluster.cli.core import EXIT_OK, INVALID, Command, done, format_help, positive_number


def cmd_stack_policy(args: argparse.Namespace) -> int:
    from fmcluster.deploy import stack_policy

    report = stack_policy.run(args.lift)
    return done(stack_policy.render(report, "json"), stack_policy.exit_code(report))


def cmd_step(args: argparse.Namespace) -> int:
    from fmcluster.deploy import steps

    report = steps.run(args.name, args.args)
    if report.error:
        return done(steps.render(report), steps.exit_code(report))
    sys.stdout.flush()
    os.execve(report.argv[0], list(report.argv), dict(report.env))  # the program's exit status is the command's
    return EXIT_OK  # not reached


def cmd_change_set(args: argparse.Namespace) -> int:
    from fmcluster.deploy import change_set

    report = change_set.run(args.stack, args.name, region=args.region, role_arn=args.role_arn,
                            allow_data_loss=args.allow_data_loss, delete=args.delete, wait_s=args.wait)
    return done(change_set.render(report, args.format), change_set.exit_code(report))


def _stack_policy_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lift", action="store_true",
                   help="print the policy that allows every update instead (to lift the protection on purpose)")
    p.set_defaults(func=cmd_stack_policy)


def _step_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="NAME", help="the step program: allowance, diff-deployed, guard-change-set, "
                                                "protect-storage, record-deployed or review-comment")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="its arguments, as they are")
    p.set_defaults(func=cmd_step)


def _change_set_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("stack", metavar="STACK", help="the stack, such as llm-pretrain-storage")
    p.add_argument("name", metavar="CHANGE_SET", help="the change set (the pipeline's is PipelineChange)")
    p.add_argument("--region", help="the stack's region (default: that of the credentials)")
    p.add_argument("--role-arn", metavar="ARN",
                   help="a role to assume first, such as the CDK deploy role of the stack's account")
    p.add_argument("--allow-data-loss", action="store_true",
                   help="exit 0 even when what holds data (a file system, bucket, key, metrics or dashboards "
                        "workspace) is replaced or removed")
    p.add_argument("--delete", action="store_true", help="delete the change set after judging it")
    p.add_argument("--wait", type=positive_number, default=600, metavar="SECONDS",
                   help="how long to wait for a change set still being created (default 600)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help=format_help(text="how many resources change and each stateful one replaced or removed",
                                    json="the verdict as one object, with ok and each finding"))
    p.set_defaults(func=cmd_change_set)


STACK_POLICY = Command(
    "print the stack policy of a cluster's storage stack: no replacing or deleting its stateful resources",
    "Print the stack policy of a cluster's storage stack (the stack named after the cluster, "
    "CLUSTER-storage), which denies replacing or deleting its stateful resources (file systems, buckets, "
    "the key), as JSON for `aws cloudformation set-stack-policy`. The policy is the same for every "
    "cluster: it takes no name.",
    ("fmcluster stack-policy > stack-policy.json",
     "fmcluster stack-policy --lift"),
    ((0, "the policy was printed"),
     (2, INVALID)),
    _stack_policy_args, "fmcluster.deploy.stack_policy")


STEP = Command(
    "run one of the GitOps pipeline's step programs from this installation (the pipeline and the "
    "deploy workflow run them)",
    "Run one of the GitOps pipeline's step programs, shipped with fmcluster, with bash: diff-deployed "
    "(compare with the spec as last deployed), guard-change-set, record-deployed, protect-storage, "
    "allowance and review-comment. A project made by `fmcluster init` has no copy of them; the pipeline's "
    "steps and the GitHub Actions deploy workflow run them this way, with this installation's fmcluster.",
    ("fmcluster step allowance llm-pretrain",
     "fmcluster step diff-deployed /fmcluster/llm-pretrain/deployed-spec cluster.yaml"),
    ((0, "the step passed (the program's own exit status)"),
     (1, "the step failed or its guard stopped the deploy (the program's own exit status)"),
     (2, f"no such step program, or {INVALID}")),
    _step_args, "fmcluster.deploy.steps")


CHANGE_SET = Command(
    "judge a CloudFormation change set before it is executed: exit 1 if it replaces or removes "
    "a stateful resource (reads CloudFormation, read-only)",
    "Judge a CloudFormation change set before it is executed (read-only: DescribeChangeSet, nested "
    "change sets included; needs AWS credentials): does it replace, may it replace or does it remove "
    "what holds data, a file system, bucket, key, metrics or dashboards workspace?",
    ("fmcluster change-set llm-pretrain-storage PipelineChange --region us-east-1",
     "fmcluster change-set llm-pretrain-storage PipelineChange --allow-data-loss --delete --format json"),
    ((0, "no stateful resource is replaced or removed, or --allow-data-loss"),
     (1, "a stateful resource is replaced or removed without --allow-data-loss, or the change set cannot "
         "be read"),
     (2, INVALID)),
    _change_set_args, "fmcluster.deploy.change_set")
