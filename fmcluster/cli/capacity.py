"""`fmcluster capacity find | buy | extend`: the Capacity Blocks (or training plans) that fit a
spec's GPU groups, one bought after its price was shown and the question answered on a terminal
(or `--yes` within `--max-price`), its id written into the spec, and a block extended."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Callable

from fmcluster.cli.core import EXIT_INVALID, INVALID, Command, done, format_help, load_valid

if TYPE_CHECKING:
    from datetime import datetime
    from decimal import Decimal

ACTIONS = ("find", "buy", "extend")
FORMATS = ("text", "markdown", "json")


def cmd_capacity(args: argparse.Namespace) -> int:
    from fmcluster.deploy import capacity

    spec = load_valid(args.spec, args.format)
    if spec is None:
        return EXIT_INVALID
    request = capacity.Request(
        args.action, args.spec, group=args.group, start=args.start, end=args.end, hours=args.duration,
        offering=args.offering, yes=getattr(args, "yes", False), max_price=getattr(args, "max_price", None),
        move_az=getattr(args, "move_az", False), plan_name=getattr(args, "plan_name", None))
    report = capacity.run(spec, request, confirm=_terminal(args.spec))
    return done(capacity.render(report, args.format), capacity.exit_code(report))


def _terminal(spec: str) -> Callable[[str], bool] | None:
    """The question asked on the terminal, answered with `yes`; None where nobody can answer (no
    terminal, or the spec came on standard input)."""
    if spec == "-" or not sys.stdin.isatty():
        return None

    def confirm(question: str) -> bool:
        sys.stderr.write(question)
        sys.stderr.flush()
        return sys.stdin.readline().strip().lower() == "yes"

    return confirm


def _typed(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type of one of capacity's parsers (a ValueError says what was expected)."""
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def _time(text: str) -> datetime:
    from fmcluster.deploy.capacity.offerings import parse_time

    return parse_time(text)


def _hours(text: str) -> int:
    from fmcluster.deploy.capacity.offerings import parse_duration

    return parse_duration(text)


def _price(text: str) -> Decimal:
    from decimal import Decimal, InvalidOperation

    try:
        value = Decimal(text.replace(",", ""))
    except InvalidOperation:
        raise ValueError(f"expected an amount such as 258048.00, got {text!r}") from None
    if not value.is_finite() or value <= 0:
        raise ValueError(f"expected a positive amount, got {text!r}")
    return value


def _window_args(p: argparse.ArgumentParser, duration: str, required: bool = False) -> None:
    p.add_argument("--duration", type=_typed(_hours), metavar="D", required=required, help=duration)
    p.add_argument("--start", type=_typed(_time), metavar="T",
                   help="the earliest start, ISO 8601 such as 2026-12-03 or 2026-12-03T11:30Z (UTC unless it says "
                        "otherwise; default: now)")
    p.add_argument("--end", type=_typed(_time), metavar="T", help="the latest end, ISO 8601")


def _buying_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--yes", action="store_true",
                   help="buy without asking, for scripts; needs --max-price (without a terminal and without --yes "
                        "nothing is bought)")
    p.add_argument("--max-price", type=_typed(_price), metavar="P",
                   help="the most the offering may cost up front, in its currency, held to its price read again "
                        "just before buying")


def _format(p: argparse.ArgumentParser, gives: str, default: str | None = "text") -> None:
    """--format; an action's leaves the one given before the action (`capacity --format json find`)
    where it is not given itself."""
    p.add_argument("--format", choices=FORMATS, default=argparse.SUPPRESS if default is None else default,
                   help=format_help(text=gives, markdown="the same as Markdown tables, for a ticket or a pull request",
                                    json="the same as one object, whatever the exit code"))


def _common(p: argparse.ArgumentParser, action: str, gives: str) -> None:
    _format(p, gives, default=None)
    p.set_defaults(func=cmd_capacity, action=action)


def _capacity_args(p: argparse.ArgumentParser) -> None:
    _format(p, "find: each group's offerings, cheapest first; buy: what was bought and written; extend: the "
               "block's extensions or the one bought")
    p.set_defaults(func=cmd_capacity)
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True,
                           help="find the offerings that fit, buy one, or extend a block")
    find = sub.add_parser("find", help="the offerings that fit each GPU group, cheapest first",
                          description="The Capacity Blocks (SageMaker HyperPod: training plans) that fit each GPU "
                                      "node group, or GROUP, cheapest first (read-only).")
    find.add_argument("spec", metavar="SPEC", help="a spec file (- reads it from standard input)")
    find.add_argument("group", nargs="?", metavar="GROUP", help="one node group (default: every GPU group)")
    _window_args(find, "how long: 7d, 2w or hours (a block: whole days up to 14, whole weeks up to 182); default: "
                       "the whole days from --start to --end")
    find.set_defaults(offering=None)
    _common(find, "find", "a table of each group's offerings: start, end, hours, AZ ID, upfront fee and per "
                          "hour; what an offering in another AZ would replace; the command that buys the cheapest")
    buy = sub.add_parser("buy", help="buy one offering and write its id into the spec",
                         description="Buy OFFERING for GROUP after showing its price and asking (or --yes within "
                                     "--max-price), then write its id into SPEC and validate it.")
    buy.add_argument("spec", metavar="SPEC", help="the spec file the reservation is written into")
    buy.add_argument("group", metavar="GROUP", help="the node group")
    buy.add_argument("offering", metavar="OFFERING", help="the offering's id, as `capacity find` shows it")
    _window_args(buy, "the duration it was found for, as `capacity find` prints it", required=True)
    _buying_args(buy)
    buy.add_argument("--move-az", action="store_true",
                     help="take an offering in another AZ: availability_zone_id is written with the reservation "
                          "(`capacity find` says what that replaces)")
    buy.add_argument("--plan-name", metavar="NAME",
                     help="SageMaker HyperPod: the training plan's name (default CLUSTER-GROUP-START)")
    _common(buy, "buy", "the offering, what was bought and written, and what to run next")
    extend = sub.add_parser("extend", help="a block's extension offerings, or the purchase of one",
                            description="The extension offerings of GROUP's Capacity Block (or training plan), "
                                        "and with OFFERING the purchase of one, asked as buy asks.")
    extend.add_argument("spec", metavar="SPEC", help="a spec file (- reads it from standard input)")
    extend.add_argument("group", metavar="GROUP", help="the node group whose block is extended")
    extend.add_argument("offering", nargs="?", metavar="OFFERING", help="the extension to buy (default: list them)")
    extend.add_argument("--duration", type=_typed(_hours), metavar="D", required=True,
                        help="how much longer: whole days up to 14, whole weeks up to 182 (2d, 1w)")
    extend.set_defaults(start=None, end=None)
    _buying_args(extend)
    _common(extend, "extend", "the block now and its extension offerings, or the extension bought")


CAPACITY = Command(
    "find, buy and extend the Capacity Blocks (HyperPod: training plans) of the GPU groups (needs AWS "
    "credentials; buying asks first)",
    "Find the Capacity Blocks for ML (on SageMaker HyperPod, training plans) that fit each GPU node group, "
    "cheapest first, with what an offering in another AZ would replace; buy one after showing its price and "
    "asking (or --yes within --max-price) and write its id into the spec, every other byte of the file kept; "
    "list and buy a block's extensions.",
    ("fmcluster capacity find examples/p5-pcs.yaml --start 2026-12-03 --duration 7d",
     "fmcluster capacity buy cluster.yaml gpu cb-0123456789abcdef0 --start 2026-12-03 --duration 7d",
     "fmcluster capacity extend cluster.yaml gpu --duration 2d --format json"),
    ((0, "offerings were found (find, and extend without OFFERING), or one was bought and written into the "
         "spec as it was asked to be"),
     (1, "no offering fits, AWS refused a call, or nothing was bought: not confirmed, above --max-price, no "
         "terminal and no --yes, the offering gone, the block ended; or what was bought could not be written "
         "(the error says its id)"),
     (2, f"the spec is invalid, a GROUP that is none of its GPU groups, a duration no block has, or {INVALID}")),
    _capacity_args, "fmcluster.deploy.capacity")
