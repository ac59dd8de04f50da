"""The image the acceptance jobs of nccl-tests and fio run: each GPU group's reference image, which
NAME-reference builds into the cluster's ECR registry (fmcluster.model.reference_image), so that a
new cluster's kit runs with nothing built, pushed or set by hand; IMAGE, when set, runs instead.
Without a reference image (`images.reference: false`) the jobs need IMAGE, as before. Pure: no
AWS call, no aws_cdk.

Slurm (fmcluster.kits.jobs): the batch script names the image (the account is the spec's, or the
node's own through `aws sts get-caller-identity`, which needs no IAM permission) and gives Enroot
credentials for the cluster's registry. Enroot reads `$ENROOT_CONFIG_PATH/.credentials` (netrc
form) and runs a password field that starts with `$` as a command at each import (NVIDIA/enroot
v4.1.2 doc/cmd/import.md, the ECR example; src/common.sh common::evalnetrc), with its errors sent to
/dev/null (src/docker.sh, docker::_authenticate); src/docker.sh takes the login of the first
`machine REGISTRY login USER` line when the image names no user, and curl's --netrc-file the first
entry of the host. Pyxis passes the step's environment to Enroot but a deny list without
ENROOT_CONFIG_PATH (NVIDIA/pyxis v0.24.0 pyxis_slurmstepd.c, enroot_deny_env), and Enroot's
environment wins over enroot.conf (enroot.in, config::export). So the job writes a config directory
of its own on the shared file system holding ONLY the registry's line (the user's own .credentials,
often literal passwords, is not copied: the steps pull only this image, and a stale line of the user
for the same registry would win), and exports ENROOT_CONFIG_PATH to it. The line holds a command,
not a token: each import on each node gets a fresh 12-hour ECR token from the node's role; the job
runs the same command once before its steps, so a failing one is a clear line, not Enroot's 401. The
user's hooks.d, mounts.d and environ.d (Enroot reads them from ENROOT_CONFIG_PATH too) are linked in.

Kubernetes (fmcluster.kits.kubernetes): kubelet pulls with the node's role, so the manifests only
name the image; without an account in the spec, submit-all.sh fills in the account of the
workstation's credentials."""

from __future__ import annotations

import textwrap
from typing import Optional

from fmcluster.kits.common import KitFile
from fmcluster.model import reference_image
from fmcluster.model.cluster import REFERENCE, ClusterModel, NodeGroup
from fmcluster.model.reference_image import ReferenceImage

RECIPE = "image/Dockerfile"  # the kit's copy of the reference image's recipe
ACCOUNT = "ACCOUNT"  # the account in the Kubernetes manifests until submit-all.sh fills it in
ENROOT_DIR = ".enroot"  # under $SLURM_SUBMIT_DIR: each job's Enroot config directory, by job id
ENROOT_USER_DIRS = ("environ.d", "hooks.d", "mounts.d")  # what Enroot also reads from ENROOT_CONFIG_PATH
ECR_LOGIN = "AWS"  # the user name of `aws ecr get-login-password`'s token


def recipe() -> KitFile:
    """The kit's copy of the reference image's recipe (no file of its build context: it copies none)."""
    return KitFile(RECIPE, reference_image.dockerfile())


def registry(model: ClusterModel, account: Optional[str] = None) -> str:
    """The cluster's ECR registry: of `account`, else of the spec's account, else of ACCOUNT."""
    return ReferenceImage.registry(account or model.spec.account or ACCOUNT, model.spec.region)


def credentials_line(registry_host: str, region: str, aws: str = "aws") -> str:
    """Enroot's .credentials line for an ECR registry: the password a command Enroot runs at each
    import (the doc's ECR example)."""
    return f"machine {registry_host} login {ECR_LOGIN} password $({aws} ecr get-login-password --region {region})"


# The shell of a batch script, after `set -uo pipefail`: `cleanup`, the directories removed when the
# job ends, however it ends (fmcluster.kits.jobs sets the traps). The directories above them stay: a
# job of another group may be making its own there at the same time (one rmdir between its
# `mkdir -p PARENT` and `mkdir PARENT/JOB` would fail it).
CLEANUP = r'''# what the job leaves is removed when it ends, however it ends: each directory of `cleanup` (the
# directories above them stay, for the jobs that make their own there at the same time)
cleanup=()
remove() {  # remove DIR...
  local dir; for dir; do rm -rf "$dir"; done
  return 0
}'''

_ENROOT = r'''# Enroot's credentials for the cluster's registry, for the job's steps on every node: a directory
# of the job's own next to the kit (mode 0700) with one line, the registry's, whose password is a
# command Enroot runs at each import (a fresh ECR token from the node's role); your own .credentials
# is not copied (the steps pull only this image); your hooks.d, mounts.d and environ.d linked in.
# An ENROOT_CONFIG_PATH an earlier job of a kit exported is not yours: its directory is gone.
if [[ ${ENROOT_CONFIG_PATH:-} == */ENROOT_DIR/[0-9]* ]]; then unset ENROOT_CONFIG_PATH; fi
if [[ -n $REGISTRY && $IMAGE == "docker://$REGISTRY"[#/]* ]]; then
  own=${ENROOT_CONFIG_PATH:-${XDG_CONFIG_HOME:-$HOME/.config}/enroot}
  aws_cli=$(command -v aws) || aws_cli=aws
  # the command once here: Enroot runs it with its errors to /dev/null, and would only say 401
  if ! error=$("$aws_cli" ecr get-login-password --region REGION 2>&1 >/dev/null); then
    error=$(awk 'NF { print; exit }' <<<"$error")  # its first line (the CLI's start with an empty one)
    echo "fmcluster: no ECR token for the image: '$aws_cli ecr get-login-password --region REGION' on" \
      "$(hostname) failed (${error:-no message}); check the node role's ECR permissions" \
      "(ecr:GetAuthorizationToken), a route from the nodes to ECR in REGION, and AWS_* variables in the" \
      "job's environment (AWS_PROFILE, AWS_ACCESS_KEY_ID, ... take the CLI off the node's role)" >&2
    exit 1
  fi
  config="$SLURM_SUBMIT_DIR/ENROOT_DIR/$SLURM_JOB_ID"
  cleanup+=("$config")
  rm -rf "$config"  # what a run of this job that was killed left (a requeued job keeps its id)
  if ! mkdir -p "${config%/*}" || ! mkdir -m 0700 "$config"; then
    echo "fmcluster: cannot make Enroot's configuration directory $config on $(hostname)" >&2
    exit 1
  fi
  (  # the file created mode 0600
    umask 077
    printf '%s\n' "CREDENTIALS" >"$config/.credentials"
  ) || exit 1
  for dir in USER_DIRS; do
    if [[ -e $own/$dir ]]; then ln -s "$own/$dir" "$config/$dir"; fi
  done
  export ENROOT_CONFIG_PATH=$config
fi'''


def slurm_lines(model: ClusterModel, group: NodeGroup) -> list[str]:
    """The lines of a batch script (after CLEANUP) that set IMAGE: the group's reference image
    unless IMAGE is set, with Enroot's credentials for it; without one, IMAGE is required."""
    image = model.reference_image(group)
    if image is None:
        return [': "${IMAGE:?set IMAGE to an image with nccl-tests and fio (the recipe: ' + RECIPE + ' of the '
                'kit), such as docker://ACCOUNT.dkr.ecr.REGION.amazonaws.com#REPOSITORY:TAG}"']
    region = model.spec.region
    lines = [f"# the image of the jobs: the reference image {built_by(model)} built for {group.name} "
             f"({image.architecture}), in the", "# cluster's ECR registry; IMAGE, when set, runs instead"]
    if model.spec.account:
        lines.append(f"REGISTRY={registry(model)}")
    else:
        lines += ['REGISTRY=""',
                  'if [[ -z ${IMAGE:-} ]]; then',
                  "  # the account of the node's instance role (STS answers it without any IAM permission)",
                  f"  account=$(aws sts get-caller-identity --region {region} --query Account --output text 2>&1)",
                  "  if [[ ! $account =~ ^[0-9]{12}$ ]]; then",
                  "    echo \"fmcluster: no AWS account for the reference image: 'aws sts get-caller-identity' on "
                  "$(hostname) failed (${account//$'\\n'/ }); set IMAGE, or the spec's account and write the kit "
                  "again\" >&2",
                  "    exit 1",
                  "  fi",
                  f"  REGISTRY={ReferenceImage.registry('$account', region)}",
                  "fi"]
    lines.append(f"IMAGE=${{IMAGE:-docker://$REGISTRY#{image.repository}:{image.tag}}}")
    credentials = credentials_line("$REGISTRY", region, "$aws_cli")
    lines.append(_ENROOT.replace("ENROOT_DIR", ENROOT_DIR).replace("USER_DIRS", " ".join(ENROOT_USER_DIRS))
                 .replace("REGION", region)
                 .replace('"CREDENTIALS"', '"' + credentials.replace("$(", "\\$(") + '"'))
    return lines


def _sed(pattern: str) -> str:
    """A sed pattern that matches `pattern` literally (image names: letters, digits, . / : _ -)."""
    return pattern.replace(".", "\\.")


def kubernetes_images(model: ClusterModel, images: list[str], placeholder: str) -> list[str]:
    """The lines of the Kubernetes kit's submit-all.sh that set `edit`, the sed commands that put
    the images into the manifests: IMAGE, when set, in place of every one of `images` (each
    group's reference image, or `placeholder`); else the reference images' account filled in
    where the spec names none (the workstation's credentials'), or IMAGE required for `placeholder`."""
    lines = ([f"# the nccl and fio jobs' image: each group's reference image, built by {built_by(model)} in "
              "the cluster's", "# ECR registry (README.md); IMAGE, when set, runs instead of every one"]
             if placeholder not in images else
             ["# the nccl and fio jobs' image: IMAGE (the cluster builds no reference image: README.md)"])
    lines += ['edit=""  # sed commands that put the images in', 'if [[ -n ${IMAGE:-} ]]; then',
             *(f'  edit+="s|{_sed(i)}|$IMAGE|g;"' for i in images)]
    if placeholder in images:
        lines += ["else", '  : "${IMAGE:?set IMAGE to an image with nccl-tests and fio (the recipe: '
                  f'{RECIPE}), such as ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPOSITORY:TAG}}"']
    elif images and not model.spec.account:
        lines += ["else",
                  "  # the cluster's account: the spec names none, so the account of your AWS credentials",
                  f"  account=$(aws sts get-caller-identity --region {model.spec.region} --query Account "
                  "--output text 2>&1) || true",
                  "  if [[ ! $account =~ ^[0-9]{12}$ ]]; then",
                  "    echo \"no AWS account for the reference image: 'aws sts get-caller-identity' failed "
                  "(${account//$'\\n'/ }); set IMAGE, or the spec's account and write the kit again\" >&2",
                  "    exit 1", "  fi",
                  f'  edit="s|{_sed(registry(model))}/|{registry(model, "$account")}/|g"']
    return [*lines, "fi"]


def _paragraph(text: str) -> list[str]:
    return [*textwrap.wrap(text, 100, break_long_words=False, break_on_hyphens=False), ""]


def readme_lines(model: ClusterModel, groups: tuple[NodeGroup, ...], *, slurm: bool) -> list[str]:
    """The kit README's paragraphs on the image each group's nccl and fio jobs run, its recipe in
    the kit, and running one's own (IMAGE)."""
    example = ("docker://ACCOUNT.dkr.ecr.REGION.amazonaws.com#REPOSITORY:TAG" if slurm
               else "ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPOSITORY:TAG")
    built = [(g, model.reference_image(g)) for g in groups]
    own = [*_paragraph(f"`{RECIPE}` is the image's recipe, the one `{built_by(model)}` builds: to extend it, or "
                       "to build it by hand, `docker buildx build --platform linux/amd64,linux/arm64 -f "
                       f"{RECIPE} -t REPOSITORY:TAG --push {RECIPE.split('/')[0]}`. To run an image of your own "
                       "(with nccl-tests and fio), set IMAGE when you submit:"),
           "```", f"IMAGE={example} ./submit-all.sh", "```", ""]
    if not any(image for _, image in built):
        return [*_paragraph("The nccl and fio jobs run the image in IMAGE: this cluster builds no reference image "
                            "(`images.reference: false`)."), *own]
    if model.spec.account:
        where = f"in account {model.spec.account}"
    elif slurm:
        where = "in the account of the node's role (each job asks `aws sts get-caller-identity`)"
    else:
        where = ("in the account of your AWS credentials, the cluster's (`submit-all.sh` asks `aws sts "
                 "get-caller-identity`)")
    lines = _paragraph(f"The nccl and fio jobs run the reference image that `{built_by(model)}` built for "
                       f"the group's architecture, in ECR ({model.spec.region}) {where}: nothing needs "
                       "building or pushing.")
    lines += ["| Group | Architecture | Repository | Tag |", "|---|---|---|---|"]
    lines += [f"| {g.name} | {image.architecture} | `{image.repository}` | `{image.tag}` |" if image else
              f"| {g.name} | {g.instance.architecture} | none: set IMAGE | |" for g, image in built]
    lines.append("")
    if slurm:
        lines += _paragraph(
            "Enroot pulls it with the node's role: each job writes Enroot's credentials for the registry to "
            f"`{ENROOT_DIR}/JOBID/.credentials` here, removed when the job ends (the directory `{ENROOT_DIR}` "
            "stays). The file holds one line, the registry's, and no token: its password is a command, "
            f"`$(aws ecr get-login-password --region {model.spec.region})`, which Enroot runs at each import "
            "on each node. Your own `.credentials` is not copied (your `hooks.d`, `mounts.d` and `environ.d` "
            "are linked in); the job runs the command once before its steps and stops with one line if it "
            "fails. Each node imports the image once a job: the steps run it as a Pyxis named container, "
            "`fmcluster-kit-JOBID`, which the job removes from its nodes before its first step and when it "
            "ends (a job that was cancelled or ran out of time leaves it, about 10 GB of the node's "
            "instance store, until the next nccl or fio job of yours on the node).")
        lines += _paragraph(
            "An `IMAGE` of your own runs with your own Enroot configuration: the job writes credentials only "
            "for the cluster's reference image (and, where the spec names the account, for an `IMAGE` in the "
            "same registry; the nodes' role may pull only the reference repositories there, and ECR answers "
            "403 for any other). Push your image to a "
            "registry your `.credentials` (or a public one) covers, or let the node role pull that repository "
            "too (`ecr:BatchGetImage`, `ecr:GetDownloadUrlForLayer`).")
    else:
        lines += _paragraph("The nodes pull it with their instance role.")
    return [*lines, *own]


def built_by(model: ClusterModel) -> str:
    """The stack that builds the reference images (NAME-reference), as the model names it."""
    stack = model.stack(REFERENCE)
    return stack.name if stack is not None else f"{model.name}-{REFERENCE}"
