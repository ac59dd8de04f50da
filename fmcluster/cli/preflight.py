"""`fmcluster preflight`: read-only checks of the target account, in the planned window."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from fmcluster.cli.core import EXIT_INVALID, INVALID, SPEC_HELP, Command, done, format_help, load_valid

if TYPE_CHECKING:
    from datetime import datetime


def cmd_preflight(args: argparse.Namespace) -> int:
    from fmcluster.deploy import preflight

    spec = load_valid(args.spec, args.format)
    if spec is None:
        return EXIT_INVALID
    report = preflight.run(spec, args.window)
    return done(preflight.render(report, args.format), preflight.exit_code(report))


def _window(text: str) -> tuple[datetime, datetime]:
    """START/END, two ISO 8601 times (UTC unless they say otherwise)."""
    from datetime import datetime, timezone

    try:
        start, end = (datetime.fromisoformat(part.strip().replace("Z", "+00:00")) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected START/END in ISO 8601, such as 2026-12-01T00:00Z/2026-12-08T00:00Z, got {text!r}") from None
    start, end = (t if t.tzinfo else t.replace(tzinfo=timezone.utc) for t in (start, end))
    if end <= start:
        raise argparse.ArgumentTypeError(f"the window ends before it starts: {text!r}")
    return start, end


def _preflight_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help=format_help(text="a table of STATUS, CHECK and RESULT, with a hint under a failed check",
                                    json="the checks and the reservations and Capacity Blocks read: what "
                                         "`fmcluster plan --preflight` takes"))
    p.add_argument("--window", type=_window, metavar="START/END",
                   help="ISO 8601 times the cluster must run, such as 2026-12-01T00:00Z/2026-12-08T00:00Z "
                        "(checked against Capacity Block start and end; default: now)")
    p.set_defaults(func=cmd_preflight)


PREFLIGHT = Command(
    "read-only checks of the target account (needs AWS credentials)",
    "Read-only checks of the target account and region before a deploy (needs AWS credentials): "
    "the credentials' account, the AZ IDs, the instance types offered in the GPU AZ, quotas, "
    "reservations and Capacity Blocks (size, state, window), placement groups and AMIs.",
    ("fmcluster preflight examples/p5-pcs.yaml",
     "fmcluster preflight examples/p5-pcs.yaml --window 2026-12-01/2026-12-08 --format json"),
    ((0, "every check passed (warnings do not count)"),
     (1, "a check failed, or nothing could be checked (no credentials, no access)"),
     (2, f"the spec is invalid, or {INVALID}")),
    _preflight_args, "fmcluster.deploy.preflight")
