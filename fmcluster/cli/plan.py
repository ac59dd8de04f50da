"""`fmcluster plan`: what a spec builds, can do and costs (with --preflight, the windows of the
reservations a saved preflight report read)."""

from __future__ import annotations

import argparse
import sys

from fmcluster.cli.core import (
    EXIT_INVALID,
    INVALID,
    SPEC_HELP,
    Command,
    done,
    format_help,
    invalid,
    positive_number,
    valid,
)


def cmd_plan(args: argparse.Namespace) -> int:
    from fmcluster.plan import render as plan

    if args.json_schema:
        from fmcluster.plan.report import json_schema
        from fmcluster.spec import schema

        report = schema.SchemaReport(json_schema())
        return done(schema.render(report, "json"), schema.exit_code(report))
    if not args.spec:
        return invalid("plan needs a SPEC (or --json-schema)")
    from fmcluster.spec import loader

    result = loader.load(args.spec)
    spec = valid(args.spec, result, args.format)
    if spec is None:
        return EXIT_INVALID
    reservations = _preflight_reservations(args.preflight, spec.name, args.spec) if args.preflight else []
    if reservations is None:
        return EXIT_INVALID
    plan_report = plan.run(spec, result.data, args.checkpoint_params, reservations)
    return done(plan.render(plan_report, args.format), plan.exit_code(plan_report))


def _preflight_reservations(path: str, cluster: str, spec_path: str) -> list[dict[str, object]] | None:
    """The reservations of the preflight report saved in `path` (fmcluster.deploy.preflight.saved);
    None, after saying why, when it is no such report of the cluster."""
    from fmcluster.deploy.preflight import saved

    try:
        return saved.reservations(path, cluster, spec_path)
    except saved.Unusable as refused:
        print(f"error: {path}: {refused.message}", file=sys.stderr)
        if refused.hint is not None:
            print(f"  hint: {refused.hint}", file=sys.stderr)
        return None


def _plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", nargs="?", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                   help=format_help(text="tables for a terminal, ending with the resolved spec as YAML",
                                    markdown="the same tables, a Mermaid diagram and the resolved spec in a "
                                             "collapsed block, for a pull-request comment",
                                    json="the typed plan, for programs (its JSON Schema: --json-schema)"))
    p.add_argument("--checkpoint-params", type=positive_number, metavar="N",
                   help="model size for the checkpoint write time, such as 70e9 (default 70e9)")
    p.add_argument("--json-schema", action="store_true", help="print the JSON Schema of --format json")
    p.add_argument("--preflight", metavar="REPORT",
                   help="a saved `fmcluster preflight SPEC --format json`: show the windows of the reservations "
                        "and Capacity Blocks it read")
    p.set_defaults(func=cmd_plan)


PLAN = Command(
    "what a spec builds, what it can do and what it costs",
    "What a spec builds, what it can do and what it costs, before anyone deploys: every resolved "
    "default, per node group and in total the instances, GPUs, PFLOPS, memory, EFA and NVLink, the "
    "storage, the subnets and their addresses, the stacks and the estimated cost. No AWS call.",
    ("fmcluster plan examples/p5-pcs.yaml",
     "fmcluster plan examples/p5en-eks.yaml --format markdown --checkpoint-params 405e9"),
    ((0, "the plan was printed"),
     (2, f"the spec is invalid, the --preflight REPORT cannot be used, or {INVALID}")),
    _plan_args, "fmcluster.plan.render")
