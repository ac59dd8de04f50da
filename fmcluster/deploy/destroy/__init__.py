"""`fmcluster destroy SPEC`: the way out of a cluster. It deletes the cluster's stacks that hold no
data, in the reverse of the deploy order, waiting for each, and says what it keeps and what that
costs a month; with `--with-data` (confirmed with the cluster's name) it deletes the rest too, and
what CloudFormation leaves behind.

- The stacks, their names and their deploy order are the model's (fmcluster.model.cluster: the CDK
  app builds them in that order, each on the ones before it). They are deleted in the reverse order.
- What each stack holds is read from the account: every stack's template as deployed and its
  resources (GetTemplate, ListStackResources, nested stacks included), also for a stack deleted
  before (by `cdk destroy`, or by hand), whose retained resources may still be there
  (CloudFormation keeps a deleted stack's records for 90 days).
- Without `--with-data`, a stack is kept when it holds data (cfn_schemas.DATA_TYPES, the list
  `diff` and `change-set` judge by: NAME-storage, and NAME-observability for its metrics
  workspace), and so is every stack deployed before a kept one (a kept stack may be built on it:
  NAME-storage's file system and security groups are in NAME-network's VPC), or before a stack whose
  retained file system, database or security group stays in that VPC. What CloudFormation leaves
  behind (DeletionPolicy Retain: the log groups) is kept and listed, with how to delete it; what
  holds no data and bills unseen (the AMIs NAME-images' builds made) is deleted after its stack.
  NAME-reference's ECR repositories (the reference GPU images, on every plane; the stack deployed
  last, so deleted first) hold no data either: CloudFormation deletes them with the stack, images
  and all (EmptyOnDelete), and retains nothing of them but their build logs.
- A stack with termination protection on (NAME-storage; every stack with the spec's `protect`) has
  it lifted just before it is deleted. A stack policy governs updates only ("A stack policy applies
  only during stack updates": CloudFormation User Guide, "Prevent updates to stack resources"):
  DeleteStack does not read it, and it is left as it is.
- With `--with-data`, every stack is deleted, and after each the resources it retained
  (fmcluster.deploy.retained: buckets emptied of every version first, file systems and the
  database waited for until they are gone).
- Nothing is deleted while compute nodes are up (fmcluster.deploy.nodes) unless `force`, nor while
  a stack is being created or updated, nor in another account than the spec names.

Run again after a failure, it goes on from where it stopped: what is gone is not deployed any more.

The package: `records` (the plan and the report), `reading` (the plan, read from the account),
`deleting` (executing it), `command` (run, with its guards) and `render` (the plan and the report
in words). It imports the deploy package's own modules and the layers below; its modules import
one another directly. This module re-exports the command's names (fmcluster.cli: run, render,
exit_code, render_plan, Plan).
"""

from fmcluster.deploy.destroy.command import client_factory, run
from fmcluster.deploy.destroy.deleting import SAY_EVERY_S, STACK_POLL_S, execute
from fmcluster.deploy.destroy.reading import plan
from fmcluster.deploy.destroy.records import ABSENT, DELETE, DELETED, KEEP, DestroyReport, Failure, Plan, Stack
from fmcluster.deploy.destroy.render import FORMATS, exit_code, render, render_plan

__all__ = ["ABSENT", "DELETE", "DELETED", "FORMATS", "KEEP", "SAY_EVERY_S", "STACK_POLL_S",
           "DestroyReport", "Failure", "Plan", "Stack", "client_factory", "execute", "exit_code", "plan", "render",
           "render_plan", "run"]
