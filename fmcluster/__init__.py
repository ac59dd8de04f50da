"""fmcluster: one validated spec to a GPU cluster for foundation-model training on AWS."""

__version__ = "0.1.0"

# The environment variable through which `fmcluster synth` and `fmcluster diff` ask the CDK app
# (fmcluster_cdk/synthesis.py) for its steps: the number of a file descriptor it writes one line
# per step to. Unset (as under `cdk synth`), the app writes none.
PROGRESS_FD = "FMCLUSTER_PROGRESS_FD"

# The environment variable through which `fmcluster diff` tells the CDK app that it has printed the
# specs' warnings itself (it validates them first): the app then prints their errors only.
WARNED = "FMCLUSTER_WARNED"

# The environment variable through which `fmcluster diff` asks the CDK app for each spec's assembly
# apart (set to 1): spec N (from 1) an App of its own, written to CDK_OUTDIR/N, and each step of its
# own said as "N: STEP". One app run synthesizes OLD and NEW, as two runs would each write them.
# fmcluster.deploy.synth.run_app sets it only when asked, whatever the caller's environment holds.
APART = "FMCLUSTER_APART"

# The variable the CDK CLI sets, for the app, to the account of the credentials it found: a deploy
# cannot run without it, so where it is set the app refuses a spec's placeholders
# (fmcluster_cdk.synthesis.deploying). `fmcluster synth` and `fmcluster diff` write templates to
# read and compare, never to deploy: they run the app without it.
DEPLOY_ACCOUNT = "CDK_DEFAULT_ACCOUNT"
