"""Resources of small CloudFormation templates written by hand, for the deploy commands' tests (diff,
deployed) that need no synthesis. Not a test module."""

from __future__ import annotations


def fsx(subnet: dict, **lustre) -> dict:
    """A retained FSx for Lustre file system in `subnet`, its LustreConfiguration with `lustre`."""
    return {"Type": "AWS::FSx::FileSystem", "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
            "Properties": {"FileSystemType": "LUSTRE", "SubnetIds": [subnet], "StorageCapacity": 1200,
                           "LustreConfiguration": {"DeploymentType": "PERSISTENT_2", **lustre}}}
