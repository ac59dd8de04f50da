"""The container runtime of Slurm nodes, Enroot and Pyxis: their pinned releases and commits, what
the node image bakes them from (fmcluster.node.image), and where a node keeps Enroot's files
(`enroot_paths`). fmcluster.node.program checks and configures what the image holds; nothing is
installed at boot. Slurm's paths on each plane are the model's (fmcluster.model.node.Containers).

Sources and details: docs/research-notes.md, "The node kit (fmcluster/node/)", and section 10."""

from __future__ import annotations

from fmcluster.model.node import Containers
from fmcluster.node.shell import FMCLUSTER_ETC

# Enroot (github.com/NVIDIA/enroot), built into the node image (fmcluster.node.image) from its
# pinned tag, checked against its commit, as Pyxis is (doc/installation.md, "From source": `git
# clone --recurse-submodules`, `make install`, `make setcap`). 4.1.2 is the latest release
# (2026-03-23); AWS's PCS reference installs 3.5.0 (awslabs/awsome-distributed-ai
# architectures/aws-pcs/assets/scripts/install-enroot-pyxis.sh).
# NVIDIA's release .debs would do as well, but their SHA-256 are in no source this project can
# read, and an image never holds a download it cannot verify; a git commit is a digest of the
# whole tree, its submodules' commits included.
ENROOT_VERSION = "4.1.2"  # what `enroot version` prints (its Makefile's VERSION at the tag)
ENROOT_REPOSITORY = "https://github.com/NVIDIA/enroot.git"
ENROOT_TAG = f"v{ENROOT_VERSION}"  # the image bake clones v$ENROOT_VERSION
ENROOT_COMMIT = "bd51f53b6fa954805ae3e1985c5dc7594ff66d05"
# The submodules at ENROOT_COMMIT, path -> commit, in path order (`git submodule status`'s): the
# gitlinks of its tree, which git checks out by object id (the build compiles Enroot's helpers
# statically against musl). Their URLs (.gitmodules): makeself https://github.com/megastep/makeself.git,
# musl git://git.musl-libc.org/musl (the git protocol, TCP 9418: the node security group's egress
# allows it), linux-headers https://github.com/sabotage-linux/kernel-headers.git; deps/Makefile
# names their releases (makeself 2.4.5, musl 1.2.5, linux-headers 4.19.88-1).
ENROOT_SUBMODULES = {
    "deps/linux-headers": "c79004ad7f82165c86396b11bc6958ee53febb63",
    "deps/makeself": "5742be6410bfad2c619fb1e98bf795e8fa0913c7",
    "deps/musl": "0784374d561435f7c787a555aeab8ede699ed298",
}
# The bake (scripts/image/bake.sh) installs it where NVIDIA's .debs do (pkg/deb/rules): `make
# install prefix=/usr sysconfdir=/etc` (/usr/bin/enroot, /etc/enroot/enroot.conf, /usr/share/enroot/hooks.d), `make
# setcap` (the enroot+caps flavor: users import and convert images), and its AppArmor profile
# at /etc/apparmor.d/enroot, loaded (the .deb's dh_apparmor: Ubuntu 24.04 lets Enroot create user
# namespaces only with it).
# Pyxis (github.com/NVIDIA/pyxis): no prebuilt packages; a SPANK plugin compiled against the
# spank.h of the Slurm release it is loaded by ("Incompatible plugin version" otherwise), so the
# image bake builds it against the image's Slurm from the pinned tag, checked against its commit.
# v0.24.0 is the latest release (2026-05-11); AWS's references build v0.20.0 (PCS) and v0.19.0 (HyperPod).
PYXIS_REPOSITORY = "https://github.com/NVIDIA/pyxis.git"
PYXIS_TAG = "v0.24.0"
PYXIS_COMMIT = "107519944221822ea1dace4db8e7234b2eaa4cd5"
# What the image bake needs from the Ubuntu archive: to build Enroot and Pyxis
# (doc/installation.md's Debian build dependencies; build-essential for gcc and make), and Enroot's runtime dependencies
# (doc/installation.md, and zstd from the .deb's Depends), with the optional ones (pigz,
# squashfuse, fuse-overlayfs; libnvidia-container-tools is the AMI's, node-ready requires it).
CONTAINER_BUILD_PACKAGES = "git build-essential libcap2-bin libtool automake libmd-dev"
ENROOT_RUNTIME_PACKAGES = "curl gawk jq squashfs-tools parallel zstd pigz squashfuse fuse-overlayfs"
# The NFS client (mount.nfs), for the shared home on FSx for OpenZFS (home.sh): baked with them,
# since the boot path installs nothing.
NFS_CLIENT_PACKAGES = "nfs-common"
CONTAINER_PACKAGES = f"{CONTAINER_BUILD_PACKAGES} {ENROOT_RUNTIME_PACKAGES} {NFS_CLIENT_PACKAGES}"
# What the image bake installed (fmcluster/node/scripts/image/bake.sh), read by the boot's checks.
IMAGE_MANIFEST = f"{FMCLUSTER_ETC}/image.env"
DOWNLOAD_ATTEMPTS = 5  # the image bake's clones
DOWNLOAD_RETRY_SECONDS = 15
FALLBACK_SCRATCH = "/tmp"  # Enroot's node-local paths on a type without instance store
ENROOT_LOCAL_DIRS = ("runtime", "data", "tmp")  # under ENROOT_LOCAL, each mode 1777


def enroot_paths(containers: Containers, scratch_path: str) -> dict[str, str]:
    """Enroot's directories: runtime, data and temporary files node-local (the instance store at
    `scratch_path`, or FALLBACK_SCRATCH without one: ""), the image cache on the shared file system
    when there is one. Per user where Enroot writes per user (a shared cache's layers are the first
    importer's, mode 0640: awsome-distributed-ai's install-enroot-pyxis.sh); the roots 1777."""
    local = f"{scratch_path or FALLBACK_SCRATCH}/enroot"
    cache = f"{containers.shared_path}/enroot/cache" if containers.shared_path else f"{local}/cache"
    return {"ENROOT_LOCAL": local, "ENROOT_CACHE_ROOT": cache}
