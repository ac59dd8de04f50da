"""The typed references one stack hands to the next: what NAME-network, NAME-storage and
NAME-observability give the stacks after them (values are CDK tokens: exports, attributes).

The stacks themselves satisfy these protocols (NetworkStack, StorageStack, ObservabilityStack);
tests may hand in any object with the same attributes (tests/cdk/test_pcs_stack.py's stand-ins).
"""

from __future__ import annotations

from typing import Mapping, Optional, Protocol, Sequence


class NetworkRefs(Protocol):
    """NAME-network's outputs."""

    vpc_id: str
    vpc_cidr: str
    private_subnet_ids: Sequence[str]  # in the order of the spec's AZ IDs: the GPU AZ first
    gpu_subnet_id: str  # the first private subnet, in the GPU capacity's AZ ID
    # the private subnets in Availability Zones of the region, in the spec's order: all of them,
    # unless the GPU zone is a Local Zone (the control planes' own subnets: PCS and EKS refuse a
    # Local Zone's)
    region_subnet_ids: Sequence[str]
    efa_security_group_id: str  # all traffic to and from itself (EFA)
    node_security_group_id: str  # the nodes' own (Lustre clients, control-plane traffic)
    nat_gateway_id: str  # the NAT gateway (its port-allocation alarm)


class StorageRefs(Protocol):
    """NAME-storage's outputs (None where the spec has no file system or no key)."""

    bucket_arns: Mapping[str, str]  # spec bucket name -> ARN
    kms_key_arn: Optional[str]  # the storage key (storage.kms)
    file_system_id: Optional[str]
    file_system_dns_name: Optional[str]
    file_system_mount_name: Optional[str]


class ObservabilityRefs(Protocol):
    """NAME-observability's outputs."""

    workspace_arn: str  # the Amazon Managed Service for Prometheus workspace
    remote_write_url: str  # its remote-write endpoint (SigV4)
