"""Settings for every test process (pytest-xdist workers included).

CDK's built-in CloudFormation validation is off in fmcluster's apps (stacks.synthesis.new_app);
some tests build `cdk.App`s of their own, and this keeps them on the same footing. cfn-lint
checks every template of every example instead (tests/test_examples_synth.py). The variable is
read by the jsii Node process, which starts at the first `import aws_cdk`: after this file.
"""

import os

os.environ.setdefault("CDK_VALIDATION", "false")
