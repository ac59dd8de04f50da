"""The CDK feature flags every fmcluster app is made with: the templates depend on them, so they are code.

A feature flag is CDK context (`@aws-cdk/...`) that switches a construct library's behaviour, such as
`@aws-cdk/core:defaultCrossStackReferences` ("weak": a reference between two stacks of one app is
an `Fn::GetStackOutput` of the producer's output; without it every reference is an export and an
`Fn::ImportValue`, which CloudFormation locks; fmcluster_cdk/stacks/network.py asks for the strong
kind where it wants that lock).
`cdk init` writes them into cdk.json, where only the CDK CLI reads them: `pip install` of the package,
`fmcluster synth` outside the repository or `cdk synth` with another cdk.json would give other
templates. Here they are the App's post-CLI context (`fmcluster_cdk.synthesis.new_app`), which wins
over cdk.json and `-c`, so every way of running the app gives the same templates; cdk.json keeps only
what the CLI itself reads (the app, the default spec, telemetry and notices off).

FEATURE_FLAGS is the set `cdk init` writes for aws-cdk-lib 2.275 (its recommended values), as the
templates were made and reviewed with it, and `@aws-cdk/core:defaultCrossStackReferences: weak`.
Raising aws-cdk-lib may bring new recommended flags: add them here, and see what the templates do
(/work/golden/compare.sh, tests/cdk/test_app_context.py).
"""

from __future__ import annotations

from typing import Any, Mapping

FEATURE_FLAGS: Mapping[str, Any] = {
    "@aws-cdk-containers/ecs-service-extensions:enableDefaultLogDriver": True,
    "@aws-cdk/aws-apigateway:authorizerChangeDeploymentLogicalId": True,
    "@aws-cdk/aws-apigateway:disableCloudWatchRole": True,
    "@aws-cdk/aws-apigateway:logGroupDestinationArnWithoutWildcard": True,
    "@aws-cdk/aws-apigateway:requestValidatorUniqueId": True,
    "@aws-cdk/aws-appsync:appSyncGraphQLAPIScopeLambdaPermission": True,
    "@aws-cdk/aws-appsync:useArnForSourceApiAssociationIdentifier": True,
    "@aws-cdk/aws-autoscaling:generateLaunchTemplateInsteadOfLaunchConfig": True,
    "@aws-cdk/aws-batch:defaultToAL2023": True,
    "@aws-cdk/aws-cloudfront:defaultFunctionRuntimeV2_0": True,
    "@aws-cdk/aws-cloudfront:defaultViewerProtocolPolicyRedirectToHttps": True,
    "@aws-cdk/aws-cloudwatch-actions:changeLambdaPermissionLogicalIdForLambdaAction": True,
    "@aws-cdk/aws-codedeploy:removeAlarmsFromDeploymentGroup": True,
    "@aws-cdk/aws-codepipeline-actions:useNewDefaultBranchForCodeCommitSource": True,
    "@aws-cdk/aws-codepipeline:crossAccountKeyAliasStackSafeResourceName": True,
    "@aws-cdk/aws-codepipeline:crossAccountKeysDefaultValueToFalse": True,
    "@aws-cdk/aws-codepipeline:defaultPipelineTypeToV2": True,
    "@aws-cdk/aws-dynamodb:resourcePolicyPerReplica": True,
    "@aws-cdk/aws-dynamodb:retainTableReplica": True,
    "@aws-cdk/aws-ec2:bastionHostUseAmazonLinux2023ByDefault": True,
    "@aws-cdk/aws-ec2:ebsDefaultGp3Volume": True,
    "@aws-cdk/aws-ec2:ec2SumTImeoutEnabled": True,
    "@aws-cdk/aws-ec2:launchTemplateDefaultUserData": True,
    "@aws-cdk/aws-ec2:requirePrivateSubnetsForEgressOnlyInternetGateway": True,
    "@aws-cdk/aws-ec2:restrictDefaultSecurityGroup": True,
    "@aws-cdk/aws-ec2:uniqueImdsv2TemplateName": True,
    "@aws-cdk/aws-ecs-patterns:secGroupsDisablesImplicitOpenListener": True,
    "@aws-cdk/aws-ecs-patterns:uniqueTargetGroupId": True,
    "@aws-cdk/aws-ecs:arnFormatIncludesClusterName": True,
    "@aws-cdk/aws-ecs:disableExplicitDeploymentControllerForCircuitBreaker": True,
    "@aws-cdk/aws-ecs:reduceEc2FargateCloudWatchPermissions": True,
    "@aws-cdk/aws-ecs:removeDefaultDeploymentAlarm": True,
    "@aws-cdk/aws-ecs:removeEmptyLoadBalancers": True,
    "@aws-cdk/aws-efs:denyAnonymousAccess": True,
    "@aws-cdk/aws-efs:mountTargetOrderInsensitiveLogicalId": True,
    "@aws-cdk/aws-eks:defaultToAL2023": True,
    "@aws-cdk/aws-eks:nodegroupNameAttribute": True,
    "@aws-cdk/aws-eks:useNativeOidcProvider": True,
    "@aws-cdk/aws-elasticloadbalancingV2:albDualstackWithoutPublicIpv4SecurityGroupRulesDefault": True,
    "@aws-cdk/aws-elasticloadbalancingv2:networkLoadBalancerWithSecurityGroupByDefault": True,
    "@aws-cdk/aws-elasticloadbalancingv2:usePostQuantumTlsPolicy": True,
    "@aws-cdk/aws-events:eventsTargetQueueSameAccount": True,
    "@aws-cdk/aws-events:requireEventBusPolicySid": True,
    "@aws-cdk/aws-iam:importedRoleStackSafeDefaultPolicyName": True,
    "@aws-cdk/aws-iam:minimizePolicies": True,
    "@aws-cdk/aws-iam:oidcRejectUnauthorizedConnections": True,
    "@aws-cdk/aws-kms:aliasNameRef": True,
    "@aws-cdk/aws-kms:applyImportedAliasPermissionsToPrincipal": True,
    "@aws-cdk/aws-kms:reduceCrossAccountRegionPolicyScope": True,
    "@aws-cdk/aws-lambda-nodejs:sdkV3ExcludeSmithyPackages": True,
    "@aws-cdk/aws-lambda-nodejs:useLatestRuntimeVersion": True,
    "@aws-cdk/aws-lambda:createNewPoliciesWithAddToRolePolicy": False,
    "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
    "@aws-cdk/aws-lambda:useCdkManagedLogGroup": True,
    "@aws-cdk/aws-opensearchservice:enableOpensearchMultiAzWithStandby": True,
    "@aws-cdk/aws-rds:auroraClusterChangeScopeOfInstanceParameterGroupWithEachParameters": True,
    "@aws-cdk/aws-rds:databaseProxyUniqueResourceName": True,
    "@aws-cdk/aws-rds:preventRenderingDeprecatedCredentials": True,
    "@aws-cdk/aws-rds:setCorrectValueForDatabaseInstanceReadReplicaInstanceResourceId": True,
    "@aws-cdk/aws-redshift:columnId": True,
    "@aws-cdk/aws-route53-patterns:useDistribution": True,
    "@aws-cdk/aws-route53-patters:useCertificate": True,
    "@aws-cdk/aws-route53-targets:userPoolDomainNameMethodWithoutCustomResource": True,
    "@aws-cdk/aws-s3:createDefaultLoggingPolicy": True,
    "@aws-cdk/aws-s3:keepNotificationInImportedBucket": False,
    "@aws-cdk/aws-s3:publicAccessBlockedByDefault": True,
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
    "@aws-cdk/aws-s3:setUniqueReplicationRoleName": True,
    "@aws-cdk/aws-secretsmanager:useAttachedSecretResourcePolicyForSecretTargetAttachments": True,
    "@aws-cdk/aws-signer:signingProfileNamePassedToCfn": True,
    "@aws-cdk/aws-sns-subscriptions:restrictSqsDescryption": True,
    "@aws-cdk/aws-stepfunctions-tasks:enableEmrServicePolicyV2": True,
    "@aws-cdk/aws-stepfunctions-tasks:fixRunEcsTaskPolicy": True,
    "@aws-cdk/aws-stepfunctions:useDistributedMapResultWriterV2": True,
    "@aws-cdk/core:annotationsInValidationReport": True,
    "@aws-cdk/core:aspectPrioritiesMutating": True,
    "@aws-cdk/core:cfnIncludeRejectComplexResourceUpdateCreatePolicyIntrinsics": True,
    "@aws-cdk/core:checkSecretUsage": True,
    "@aws-cdk/core:defaultCrossStackReferences": "weak",
    "@aws-cdk/core:enableAdditionalMetadataCollection": True,
    "@aws-cdk/core:enablePartitionLiterals": True,
    "@aws-cdk/core:explicitStackTags": True,
    "@aws-cdk/core:includePrefixInUniqueNameGeneration": True,
    "@aws-cdk/core:target-partitions": ["aws", "aws-cn"],
    "@aws-cdk/core:validateAgainstDefaultRules": True,
    "@aws-cdk/core:validateSnapshotRemovalPolicy": True,
    "@aws-cdk/custom-resources:logApiResponseDataPropertyTrueDefault": False,
    "@aws-cdk/customresources:installLatestAwsSdkDefault": False,
    "@aws-cdk/s3-notifications:addS3TrustKeyPolicyForSnsSubscriptions": True,
}
