"""The typed references one stack hands to the next: what NAME-network, NAME-storage and
NAME-observability give the stacks after them (values are CDK tokens: exports, attributes).

The stacks themselves satisfy these protocols (NetworkStack, StorageStack, ObservabilityStack);
tests may hand in any object with the same attributes (tests/cdk/test_pcs_stack.py's stand-ins).
The members are read-only properties: the stacks after only read them (so a stack's list is a
`Sequence`, its dict a `Mapping`).
"""

from __future__ import annotations

from typing import Mapping, Optional, Protocol, Sequence


class NetworkRefs(Protocol):
    """NAME-network's outputs."""

    @property
    def vpc_id(self) -> str: ...

    @property
    def vpc_cidr(self) -> str: ...

    @property
    def private_subnet_ids(self) -> Sequence[str]:
        """In the order of the spec's AZ IDs: the GPU AZ first."""

    @property
    def gpu_subnet_id(self) -> str:
        """The first private subnet, in the GPU capacity's AZ ID."""

    @property
    def region_subnet_ids(self) -> Sequence[str]:
        """The private subnets in Availability Zones of the region, in the spec's order: all of them,
        unless the GPU zone is a Local Zone (the control planes' own subnets: PCS and EKS refuse a
        Local Zone's)."""

    @property
    def efa_security_group_id(self) -> str:
        """All traffic to and from itself (EFA)."""

    @property
    def node_security_group_id(self) -> str:
        """The nodes' own (Lustre clients, control-plane traffic)."""

    @property
    def nat_gateway_id(self) -> str:
        """The NAT gateway (its port-allocation alarm)."""


class StorageRefs(Protocol):
    """NAME-storage's outputs (None where the spec has no file system or no key)."""

    @property
    def bucket_arns(self) -> Mapping[str, str]:
        """Spec bucket name -> ARN."""

    @property
    def kms_key_arn(self) -> Optional[str]:
        """The storage key (storage.kms)."""

    @property
    def file_system_id(self) -> Optional[str]: ...

    @property
    def file_system_dns_name(self) -> Optional[str]: ...

    @property
    def file_system_mount_name(self) -> Optional[str]: ...

    @property
    def home_dns_name(self) -> Optional[str]:
        """The shared home's FSx for OpenZFS DNS name (storage.home)."""


class ObservabilityRefs(Protocol):
    """NAME-observability's outputs."""

    @property
    def workspace_arn(self) -> str:
        """The Amazon Managed Service for Prometheus workspace."""

    @property
    def remote_write_url(self) -> str:
        """Its remote-write endpoint (SigV4)."""


class ImagesRefs(Protocol):
    """NAME-images' outputs."""

    @property
    def image_ids(self) -> Mapping[str, str]:
        """Node image key (fmcluster.model.cluster.NodeImage.key) -> the AMI id of its newest build."""

    @property
    def identities(self) -> Mapping[str, str]:
        """Node image key -> the identity of what makes the image (a hex digest): the groups that
        launch from it carry it, so that their stack changes, and reads the new AMI, when it does."""
