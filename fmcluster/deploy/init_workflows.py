"""The GitHub Actions deploy of a project `fmcluster init` writes, without CodePipeline: the deploy
workflow (.github/workflows/deploy.yml) and the CloudFormation template of the OIDC role it
assumes (.github/oidc-role.yaml).

The workflow runs the sequence of the clone's example (examples/github-actions/deploy.yml), with
what a project has: fmcluster from requirements.txt, the CDK CLI fmcluster pins, and the step
programs of the installed package (`fmcluster step NAME`), never `make` or a
path of a clone. The deploy job runs in a GitHub environment named after the cluster (the pipeline
file's `protected: true`): its required reviewers approve each deploy before the job starts, and
the role trusts that environment's jobs only, so a job that skips the approval gets no
credentials. A job in an environment is given the OIDC subject
`repo:OWNER/NAME:environment:ENV` (not `ref:refs/heads/BRANCH`, which the example's role trusts):
the template trusts that subject, and the environment's deployment branches (main) and the job's
`if:` keep it to the branch.

The network and storage stacks are named from the cluster's model at init time; the rest deploy
with `cdk deploy --all` (in dependency order), so a stack fmcluster adds later deploys too.
"""

from __future__ import annotations

from fmcluster.facts import nodejs
from fmcluster.spec.pipeline import deployed_parameter

DEPLOY_WORKFLOW_FILE = ".github/workflows/deploy.yml"
ROLE_FILE = ".github/oidc-role.yaml"
ROLE_VARIABLE = "DEPLOY_ROLE_ARN"  # the repository variable that holds the role's ARN
CHANGE_SET = "fmcluster-guard"
REGIONAL_ARN, HERE = "arn:${AWS::Partition}", "${AWS::Region}:${AWS::AccountId}"  # of the role's template
BRANCH = "main"


def environment(cluster: str) -> str:
    """The GitHub environment of the deploy job: the cluster's name."""
    return cluster


def role_stack(cluster: str) -> str:
    """The CloudFormation stack of the OIDC role (one per cluster: each has its own role)."""
    return f"{cluster}-github-deploy"


def role_command(cluster: str, region: str, indent: str = "", repository: str = "OWNER/NAME") -> str:
    """The command that creates the role, once, with the account's credentials: two lines, the
    second after `indent` (and two spaces)."""
    return (f"aws cloudformation deploy --template-file {ROLE_FILE} --stack-name {role_stack(cluster)} \\\n"
            f"{indent}  --capabilities CAPABILITY_NAMED_IAM --region {region} "
            f"--parameter-overrides Repository={repository}")


def deploy_workflow(cluster: str, region: str, spec_file: str, requirements_file: str, network_stack: str,
                    storage_stack: str, cluster_stack: str) -> str:
    """.github/workflows/deploy.yml: on a push to main (or run by hand), deploy the spec."""
    text = """\
# Deploys the cluster spec on every push to main (and when run by hand), with an OIDC role, no stored
# keys. The job runs in the GitHub environment __ENV__: create it (Settings, Environments) with
# required reviewers, who approve each deploy before it starts, and deployment branches limited to
# main, before the first push (a job creates an environment it names, unprotected, where none is).
# Then, once, with the account's credentials:
#   __ROLE_COMMAND__
# and set the repository variable __VARIABLE__ to the RoleArn output of that stack.
# The sequence: compare with the spec as last deployed (stops on data loss); deploy the network;
# create the storage stack's change set and judge it (`fmcluster change-set`: stops when
# CloudFormation would replace or remove a file system, bucket or key), then execute that very
# change set; `cdk deploy --all` for the rest; record what was deployed and protect the storage
# stack. A merge allowed to lose data says so in its commit: the trailer "Allow-Data-Loss: __CLUSTER__".
name: deploy

on:
  push:
    branches: [__BRANCH__]
  workflow_dispatch:

permissions:
  contents: read

concurrency:  # one deploy at a time; a newer push waits, it does not cancel a running deploy
  group: deploy-__CLUSTER__
  cancel-in-progress: false

defaults:
  run:
    shell: bash  # -e and -o pipefail

env:
  SPEC: __SPEC__
  CLUSTER: __CLUSTER__
  AWS_REGION: __REGION__
  NETWORK_STACK: __NETWORK__
  STORAGE_STACK: __STORAGE__
  CLUSTER_STACK: __CLUSTER_STACK__
  DEPLOYED: __DEPLOYED__  # what was last deployed, for the diff
  CDK_DISABLE_VERSION_CHECK: "true"
  CDK_DISABLE_CLI_TELEMETRY: "true"

jobs:
  deploy:
    if: github.ref == 'refs/heads/__BRANCH__'
    runs-on: ubuntu-24.04
    environment: __ENV__  # protected: its required reviewers approve the deploy; the role trusts it alone
    permissions:
      contents: read
      id-token: write  # the OIDC token that assumes __VARIABLE__
    steps:
      - uses: actions/checkout@v7.0.1
        with:
          fetch-depth: 0  # the commit last deployed, for the diff
      - uses: actions/setup-python@v7.0.0
        with:
          python-version: "3.12"
      - uses: actions/setup-node@v7.0.0
        with:
          node-version: "__NODE__"  # the CDK CLI, and the CDK's jsii when it synthesizes
          package-manager-cache: false
      - name: Install fmcluster and the CDK CLI it pins
        run: |
          python -m pip install -r __REQUIREMENTS__
          npm install -g aws-cdk@__CDK__
      - name: Validate
        run: fmcluster validate "$SPEC"
      - uses: aws-actions/configure-aws-credentials@v6.2.3
        with:
          role-to-assume: ${{ vars.__VARIABLE__ }}
          aws-region: ${{ env.AWS_REGION }}
      - name: Is this merge allowed to lose data? (the trailer Allow-Data-Loss of its commit)
        id: allowance
        run: echo "flag=$(fmcluster step allowance "$CLUSTER")" >> "$GITHUB_OUTPUT"
      - name: Compare with the spec as last deployed (stops on data loss)
        env:
          ALLOW: ${{ steps.allowance.outputs.flag }}
        run: fmcluster step diff-deployed "$DEPLOYED" "$SPEC" ${ALLOW:+"$ALLOW"}
      - name: Lift the storage stack's policy for this deploy (Protect sets it again)
        if: steps.allowance.outputs.flag != ''
        run: fmcluster step protect-storage "$STORAGE_STACK" --lift
      - name: Deploy the network first (the storage stack imports its subnets and security groups)
        run: cdk deploy -c spec="$SPEC" "$NETWORK_STACK" --exclusively --require-approval never
      - name: Prepare the storage stack's change set (created, not executed)
        run: >-
          cdk deploy -c spec="$SPEC" "$STORAGE_STACK" --exclusively --require-approval never
          --method=prepare-change-set --change-set-name __CHANGE_SET__
      - name: Judge the change set (stops when it replaces or removes a file system, bucket or key)
        env:
          ALLOW: ${{ steps.allowance.outputs.flag }}
        run: |
          fmcluster step guard-change-set "$CLUSTER" "$STORAGE_STACK" __CHANGE_SET__ \\
            ${ALLOW:+"$ALLOW"} --region "$AWS_REGION" --format json > "$RUNNER_TEMP/verdict.json"
          jq -r '.status' "$RUNNER_TEMP/verdict.json"
      - name: Execute the judged change set (or drop an empty one)
        run: |
          if [ "$(jq -r '.status' "$RUNNER_TEMP/verdict.json")" = changes ]; then
            cdk deploy -c spec="$SPEC" "$STORAGE_STACK" --exclusively --require-approval never \\
              --method=execute-change-set --change-set-name __CHANGE_SET__
          else
            aws cloudformation delete-change-set --stack-name "$STORAGE_STACK" --change-set-name __CHANGE_SET__
          fi
      - name: Deploy the cluster (and every stack it needs, in dependency order)
        run: cdk deploy -c spec="$SPEC" "$CLUSTER_STACK" --require-approval never
      - name: Record what was deployed
        run: fmcluster step record-deployed "$DEPLOYED" "$SPEC"
      - name: Protect the storage stack (no update may replace or delete its data)
        run: fmcluster step protect-storage "$STORAGE_STACK"
      - name: Deploy the rest (the reference GPU image, which nothing waits for)
        run: cdk deploy -c spec="$SPEC" --all --require-approval never
"""
    values = {"__ENV__": environment(cluster), "__ROLE_COMMAND__": role_command(cluster, region, "#   "),
              "__VARIABLE__": ROLE_VARIABLE, "__CLUSTER__": cluster, "__BRANCH__": BRANCH, "__SPEC__": spec_file,
              "__REGION__": region, "__NETWORK__": network_stack, "__STORAGE__": storage_stack,
              "__CLUSTER_STACK__": cluster_stack,
              "__DEPLOYED__": deployed_parameter(cluster), "__NODE__": str(max(nodejs.SUPPORTED_MAJORS)),
              "__REQUIREMENTS__": requirements_file, "__CDK__": nodejs.CDK_CLI_VERSION,
              "__CHANGE_SET__": CHANGE_SET}
    for marker, value in values.items():
        text = text.replace(marker, value)
    return text


def oidc_role(cluster: str, region: str) -> str:
    """.github/oidc-role.yaml: examples/github-actions/oidc-role.yaml's role (the same permissions),
    trusted by the deploy job's environment of one repository, its defaults the project's."""
    text = """\
# The role .github/workflows/deploy.yml assumes through GitHub's OIDC provider: only jobs of one
# repository that run in its environment __ENV__ (whose required reviewers approve each deploy, and
# whose deployment branches are main alone) can assume it, and it can do no more than hand the
# deploy to the CDK bootstrap roles, read and write the cluster's deployed-spec parameter, and set
# the storage stack's policy and read its change sets. Deploy it once, in the account and region of
# the spec (bootstrapped for the CDK: npx aws-cdk bootstrap aws://ACCOUNT/__REGION__):
#   __ROLE_COMMAND__
# (with OidcProviderArn=ARN too where the account has the provider token.actions.githubusercontent.com)
# then set the repository variable __VARIABLE__ to the RoleArn output.
AWSTemplateFormatVersion: "2010-09-09"
Description: fmcluster - GitHub Actions OIDC deploy role of __CLUSTER__ (one repository, one environment)

Parameters:
  Repository:
    Type: String
    Description: owner/name of the GitHub repository
    AllowedPattern: "[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+"
  Environment:
    Type: String
    Default: __ENV__
    Description: the GitHub environment of the deploy job (its `environment:`)
    AllowedPattern: "[A-Za-z0-9_.-]+"
  ClusterName:
    Type: String
    Default: __CLUSTER__
    Description: the spec's name (its deployed-spec parameter)
    AllowedPattern: "[a-z][a-z0-9-]{0,31}"
  OidcProviderArn:
    Type: String
    Default: ""
    Description: ARN of an existing token.actions.githubusercontent.com provider; empty creates one

Conditions:
  CreateProvider: !Equals [!Ref OidcProviderArn, ""]

Resources:
  GitHubOidcProvider:
    Type: AWS::IAM::OIDCProvider
    Condition: CreateProvider
    Properties:
      Url: https://token.actions.githubusercontent.com
      ClientIdList:
        - sts.amazonaws.com

  DeployRole:
    Type: AWS::IAM::Role
    Properties:
      Description: !Sub "fmcluster deploys from ${Repository}, environment ${Environment}"
      MaxSessionDuration: 7200
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Action: sts:AssumeRoleWithWebIdentity
            Principal:
              Federated: !If [CreateProvider, !Ref GitHubOidcProvider, !Ref OidcProviderArn]
            Condition:
              StringEquals:
                token.actions.githubusercontent.com:aud: sts.amazonaws.com
                token.actions.githubusercontent.com:sub: !Sub "repo:${Repository}:environment:${Environment}"
      Policies:
        - PolicyName: deploy
          PolicyDocument:
            Version: "2012-10-17"
            Statement:
              - Sid: CdkBootstrapRoles  # cdk deploy works through these (deploy, publish, lookup)
                Effect: Allow
                Action: sts:AssumeRole
                Resource: !Sub "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/cdk-hnb659fds-*"
              - Sid: DeployedSpec       # the steps diff-deployed and record-deployed
                Effect: Allow
                Action:
                  - ssm:GetParameter
                  - ssm:PutParameter
                Resource: !Sub "__PARAMETER_ARN__"
              - Sid: StoragePolicy      # the steps protect-storage (its stack policy), guard-change-set
                Effect: Allow
                Action:
                  - cloudformation:DescribeStacks
                  - cloudformation:SetStackPolicy
                  - cloudformation:DescribeChangeSet
                  - cloudformation:DeleteChangeSet
                Resource: !Sub "__STACK_ARN__"

Outputs:
  RoleArn:
    Value: !GetAtt DeployRole.Arn
"""
    values = {"__ENV__": environment(cluster), "__ROLE_COMMAND__": role_command(cluster, region, "#   "),
              "__VARIABLE__": ROLE_VARIABLE, "__CLUSTER__": cluster, "__REGION__": region,
              # the example's ARNs, one line each (a Python line of their own would pass 120 columns)
              "__PARAMETER_ARN__": f"{REGIONAL_ARN}:ssm:{HERE}:parameter/fmcluster/${{ClusterName}}/deployed-spec",
              "__STACK_ARN__": f"{REGIONAL_ARN}:cloudformation:{HERE}:stack/${{ClusterName}}-storage/*"}
    for marker, value in values.items():
        text = text.replace(marker, value)
    return text
