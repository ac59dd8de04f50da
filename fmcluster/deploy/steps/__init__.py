"""The GitOps pipeline's step programs (bash, shipped with the package): diff-deployed.sh,
guard-change-set.sh, record-deployed.sh, protect-storage.sh, allowance.sh, review-comment.sh.

A clone of fmcluster runs them by path (`bash fmcluster/deploy/steps/NAME.sh`); a project of
one's own, which has no such directory, runs the installed copies with `python -m
fmcluster.deploy.steps NAME ARGS...` (fmcluster.deploy.steps.__main__)."""
