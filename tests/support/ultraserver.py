"""A P6e-GB200 UltraServer cluster spec (a dict, valid as given): one u-p6e-gb200x72 Capacity Block in
the Dallas Local Zone, the control plane in the region. Not a test module. The UltraServer rules'
tests (tests/spec/test_rules_ultraserver.py) and the plan, preflight, Kubernetes, serving and EKS
stack tests build on it."""

from __future__ import annotations

from tests.support.specs import base_spec, with_

CR = "cr-0123456789abcdef0"
RG = "arn:aws:resource-groups:us-east-1:111122223333:group/gb200-blocks"
G0 = "node_groups[0]"
DALLAS = "use1-dfw2-az1"  # the Dallas Local Zone us-east-1-dfw-2a


def gb200(count=18, orchestrator_type="pcs", version="25.05", az=DALLAS, extra=("use1-az4",), **capacity):
    """A PCS cluster in the Dallas Local Zone on one u-p6e-gb200x72 block (valid as given)."""
    spec = base_spec(availability_zone_id=az, network={"extra_availability_zone_ids": list(extra)},
                     orchestrator={"type": orchestrator_type, "version": version})
    if orchestrator_type in ("eks", "hyperpod-eks"):
        spec = with_(spec, "orchestrator.admin_role_arn", "arn:aws:iam::111122223333:role/admin")
    block = {"type": "capacity-block", "reservation_id": CR, "ultraserver_type": "u-p6e-gb200x72", **capacity}
    return with_(spec, G0, {"name": "gb200", "instance_type": "p6e-gb200.36xlarge", "count": count,
                            "capacity": {k: v for k, v in block.items() if v is not None}})
