"""Deleting what a destroy's plan deletes, in its order: each stack, waited for, then what it left
behind (fmcluster.deploy.retained); the first failure stops it, with why and what to do."""

from __future__ import annotations

from typing import Any, Optional

from fmcluster.deploy import retained
from fmcluster.deploy.destroy.records import (
    DELETE,
    DELETE_COMPLETE,
    DELETE_FAILED,
    DELETED,
    HOW_TO_GO_ON,
    Clients,
    Failure,
    Plan,
    Say,
    Sleep,
    Stack,
)
from fmcluster.deploy.retained import Resource

STACK_POLL_S = 15.0
STACK_LIMIT_S = 4 * 3600.0  # how long a stack's deletion is waited for (a HyperPod or EKS cluster: tens of minutes)
SAY_EVERY_S = 300.0  # how often a long deletion says it is still going


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _why_failed(cfn: Any, stack: Stack, status: dict[str, Any]) -> str:
    """The reasons of the resources that failed to delete, newest first, back to the deletion's start."""
    reasons: list[str] = []
    for event in cfn.describe_stack_events(StackName=stack.stack_id).get("StackEvents", []):
        if event.get("LogicalResourceId") == stack.name and event.get("ResourceStatus") == "DELETE_IN_PROGRESS":
            break
        if event.get("ResourceStatus") == DELETE_FAILED and event.get("LogicalResourceId") != stack.name:
            reasons.append(f"{event['LogicalResourceId']} ({event.get('ResourceType', '?')}): "
                           f"{event.get('ResourceStatusReason', '')}")
    return "; ".join(reasons) or str(status.get("StackStatusReason") or "no reason given")


def _hint(reason: str, stack: str) -> str:
    if "in use by" in reason:
        return ("another stack imports one of its exports: delete that stack (or its import) first, then run "
                "fmcluster destroy again")
    if "DependencyViolation" in reason or "has dependencies" in reason or "dependent object" in reason:
        return ("something outside the stack still uses its resources (the network interfaces of a file system, "
                "a load balancer or an instance someone launched): delete that, then run fmcluster destroy again")
    return f"read its events (aws cloudformation describe-stack-events --stack-name {stack}); {HOW_TO_GO_ON}"


def _delete_stack(cfn: Any, stack: Stack, say: Say, sleep: Sleep) -> Optional[Failure]:
    if stack.protected:
        say(f"{stack.name}: lifting its termination protection")
        cfn.update_termination_protection(StackName=stack.stack_id, EnableTerminationProtection=False)
    say(f"{stack.name}: deleting")
    cfn.delete_stack(StackName=stack.stack_id)
    waited = 0.0
    while True:
        status = cfn.describe_stacks(StackName=stack.stack_id)["Stacks"][0]
        state = status.get("StackStatus", "")
        if state == DELETE_COMPLETE:
            say(f"{stack.name}: deleted" + (f" after {_minutes(waited)}" if waited else ""))
            return None
        if state == DELETE_FAILED:
            reason = _why_failed(cfn, stack, status)
            return Failure(stack.name, f"DELETE_FAILED: {reason}", _hint(reason, stack.name))
        if waited >= STACK_LIMIT_S:
            return Failure(stack.name, f"still {state} after {_minutes(waited)}",
                           "CloudFormation goes on: watch it in the console, then run fmcluster destroy again")
        sleep(STACK_POLL_S)
        waited += STACK_POLL_S
        if waited % SAY_EVERY_S == 0:
            say(f"{stack.name}: {state} for {_minutes(waited)}")


def _delete_resource(clients: Clients, resource: Resource, say: Say, sleep: Sleep) -> Optional[Failure]:
    from botocore.exceptions import BotoCoreError, ClientError

    where = f"{resource.name} ({resource.stack})"
    try:
        if not retained.exists(clients, resource):
            say(f"{resource.stack}: {resource.name} is gone already")
            return None
        say(f"{resource.stack}: deleting {resource.name}")
        retained.delete(clients, resource, sleep)
    except retained.DeleteFailed as exc:
        return Failure(where, exc.reason, exc.hint)
    except (BotoCoreError, ClientError) as exc:
        return Failure(where, str(exc), f"delete it by hand ({resource.how()}), or {HOW_TO_GO_ON}")
    return None


def execute(p: Plan, clients: Clients, say: Say, sleep: Sleep) -> tuple[tuple[str, ...], Optional[Failure]]:
    """Delete what the plan deletes, in its order: each stack (waited for), then what it left
    behind when the plan deletes data. Stops at the first failure."""
    from botocore.exceptions import BotoCoreError, ClientError

    cfn = clients("cloudformation")
    done: list[str] = []
    for stack in p.stacks:
        if stack.action == DELETE:
            try:
                failure = _delete_stack(cfn, stack, say, sleep)
            except (BotoCoreError, ClientError) as exc:
                failure = Failure(stack.name, str(exc), _hint(str(exc), stack.name))
            if failure:
                return tuple(done), failure
            done.append(stack.name)
        if stack.action in (DELETE, DELETED):
            for resource in p.removed_after(stack):
                failure = _delete_resource(clients, resource, say, sleep)
                if failure:
                    return tuple(done), failure
                done.append(resource.name)
    return tuple(done), None
