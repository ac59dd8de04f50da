"""`fmcluster destroy`: a cluster's stacks deleted, its data kept unless --with-data (and its
name typed)."""

from __future__ import annotations

import argparse
import sys

from fmcluster.cli.core import EXIT_INVALID, INVALID, SPEC_HELP, Command, done, invalid, load_valid


def cmd_destroy(args: argparse.Namespace) -> int:
    from fmcluster.deploy import destroy

    if args.yes is not None and not args.with_data:
        return invalid("--yes confirms --with-data: give both, or neither")
    spec = load_valid(args.spec)
    if spec is None:
        return EXIT_INVALID

    def shown(plan: destroy.Plan) -> None:
        sys.stdout.write(destroy.render_plan(plan, args.dry_run))
        sys.stdout.flush()

    def confirm(plan: destroy.Plan) -> str | None:
        """The name typed at the prompt; None where nobody can type (no terminal, or the spec
        came on standard input) or nothing was typed."""
        if args.spec == "-" or not sys.stdin.isatty():
            return None
        sys.stderr.write(f"This deletes the data of {plan.cluster} for good. Type the cluster's name to go on: ")
        sys.stderr.flush()
        typed = sys.stdin.readline()
        return typed.strip() if typed.strip() else None

    def say(text: str) -> None:
        print(f"fmcluster destroy: {text}", file=sys.stderr, flush=True)

    report = destroy.run(spec, args.spec, with_data=args.with_data, yes=args.yes, force=args.force,
                         dry_run=args.dry_run, shown=shown, confirm=confirm, say=say)
    return done(destroy.render(report, "text"), destroy.exit_code(report))


def _destroy_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--with-data", action="store_true",
                   help="delete what holds data too: the storage stack (its termination protection lifted), the "
                        "observability stack, the network, and what CloudFormation retains (buckets emptied of "
                        "every version, file systems, keys, the accounting database, log groups); asks for the "
                        "cluster's name")
    p.add_argument("--yes", metavar="NAME",
                   help="with --with-data, the cluster's name, for scripts: no prompt (another name is refused)")
    p.add_argument("--force", action="store_true",
                   help="delete the cluster even while nodes of its compute groups are up (their jobs end); "
                        "never lifts the guard on data")
    p.add_argument("--dry-run", action="store_true",
                   help="only say what would be deleted and kept, and what the rest costs (read-only)")
    p.set_defaults(func=cmd_destroy)


DESTROY = Command(
    "delete a cluster's stacks that hold no data, newest first; --with-data deletes the data too "
    "(needs AWS credentials)",
    "Delete the stacks of a cluster that hold no data, in the reverse of the deploy order, each waited for, "
    "and say what is kept (the storage and observability stacks, the network they are built on, what "
    "CloudFormation retains) and what that costs a month. With --with-data, after the cluster's name is "
    "typed (or --yes=NAME), delete those too and what CloudFormation retains. Refuses while nodes of the "
    "compute groups are up, unless --force.",
    ("fmcluster destroy examples/p5-pcs.yaml --dry-run",
     "fmcluster destroy examples/p5-pcs.yaml",
     "fmcluster destroy examples/p5-pcs.yaml --with-data --yes=llm-pretrain"),
    ((0, "what the plan deletes was deleted (with --dry-run: would be), or none of the cluster's stacks is "
         "deployed in the spec's region"),
     (1, "refused, with nothing deleted (nodes up, --with-data not confirmed or another name typed, another "
         "account, a stack busy, the account unreadable), or a deletion failed: what came before it is gone, "
         "the rest is still there"),
     (2, f"the spec is invalid, or {INVALID}")),
    _destroy_args, "fmcluster.deploy.destroy")
