"""How the VPC is cut into subnets: pure functions of a CIDR and AZ IDs, shared by validation
(does it fit?), the model (what the network stack builds) and the plan report. What takes an
address is read from the spec in fmcluster.spec.addresses.

Sources and details: docs/research-notes.md, "fmcluster/facts/network.py"."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from itertools import islice

from fmcluster.facts import regions

AWS_RESERVED_PER_SUBNET = 5  # network, router, DNS, future use, broadcast
MAX_SUBNET_PREFIX = 28  # the smallest subnet AWS allows
PUBLIC_MIN_PREFIX = 24  # public subnets hold only NAT gateways and load balancers
CONTROL_PLANE_HEADROOM = 16  # control-plane ENIs (PCS, EKS), VPC endpoints, rolling replacements
# A VPC's IPv4 CIDR block, and a subnet's, is /16 to /28 (Amazon VPC User Guide, "VPC CIDR
# blocks"; EC2 API Reference, CreateSubnet): a secondary CIDR block adds subnets, never a larger
# one. The GPU AZ's subnet is half of the VPC, so a /17 of a /16 is the most it can be.
LARGEST_VPC_PREFIX = 16


def gpu_subnet_usable(vpc_prefix: int) -> int:
    """Usable addresses of the GPU AZ's private subnet (the first half) of a VPC of this prefix."""
    return (1 << (32 - vpc_prefix - 1)) - AWS_RESERVED_PER_SUBNET


def vpc_prefix_for(addresses: int) -> int | None:
    """The longest VPC prefix (the smallest VPC) whose GPU subnet holds `addresses`; None when
    not even the largest VPC does."""
    fits = [p for p in range(LARGEST_VPC_PREFIX, MAX_SUBNET_PREFIX) if gpu_subnet_usable(p) >= addresses]
    return max(fits) if fits else None


@dataclass(frozen=True)
class Subnet:
    az_id: str
    cidr: str
    public: bool

    @property
    def prefix(self) -> int:
        return int(self.cidr.split("/")[1])

    @property
    def usable(self) -> int:
        return (1 << (32 - self.prefix)) - AWS_RESERVED_PER_SUBNET  # 2 ** (32 - prefix) addresses


class LayoutError(ValueError):
    pass


def _slots(block: ipaddress.IPv4Network, count: int, min_prefix: int = 0) -> list[ipaddress.IPv4Network]:
    """`count` subnets of fixed-size slots of `block`: 4 slots for up to 4 subnets, else 8, so
    adding an AZ ID never resizes (and so never replaces) an existing subnet."""
    bits = 2 if count <= 4 else 3
    if count > 2 ** bits:
        raise LayoutError(f"at most {2 ** bits} AZ IDs fit")
    prefix = max(block.prefixlen + bits, min_prefix)
    if prefix > MAX_SUBNET_PREFIX:
        raise LayoutError(f"/{block.prefixlen} cannot hold {count} subnets of at least /{MAX_SUBNET_PREFIX}")
    return list(islice(block.subnets(new_prefix=prefix), count))  # not all 64 /24s of a /18


def layout(vpc_cidr: str, az_ids: list[str]) -> list[Subnet]:
    """Private subnets (GPU AZ first), then public subnets, in the order of `az_ids`."""
    vpc = ipaddress.IPv4Network(vpc_cidr)
    first_half, second_half = vpc.subnets(prefixlen_diff=1)
    third_quarter, last_quarter = second_half.subnets(prefixlen_diff=1)
    subnets = [Subnet(az_ids[0], str(first_half), False)]
    extra = az_ids[1:]
    if extra:
        subnets += [Subnet(az, str(net), False)
                    for az, net in zip(extra, _slots(third_quarter, len(extra)), strict=True)]
    subnets += [Subnet(az, str(net), True)
                for az, net in zip(az_ids, _slots(last_quarter, len(az_ids), PUBLIC_MIN_PREFIX), strict=True)
                if not regions.is_local_zone(az)]
    return subnets


@dataclass(frozen=True)
class AddressNeed:
    what: str
    addresses: int


def total(needs: list[AddressNeed]) -> int:
    return sum(n.addresses for n in needs)
