# shellcheck shell=bash
# The node image's build phase (EC2 Image Builder, an AWSTOE ExecuteBash step rendered by
# fmcluster.node.image): everything a Slurm node needs that does not depend on the node, installed
# once into the image instead of on every boot. The boot only checks it (boot/containers.sh,
# boot/metrics.sh) and never downloads or compiles. Any failure fails the build: no image.
#
# Enroot and Pyxis are each cloned at their pinned tag (v$ENROOT_VERSION, PYXIS_TAG; retried)
# and built only when the checkout is the pinned commit (ENROOT_COMMIT, PYXIS_COMMIT) with
# exactly the pinned submodule commits (ENROOT_SUBMODULES; Pyxis has none): an image never holds
# a build of a source it cannot verify. Enroot (doc/installation.md, "From source"): `make install
# prefix=/usr sysconfdir=/etc`, the layout of NVIDIA's .debs (/usr/bin/enroot,
# /etc/enroot/enroot.conf, /usr/share/enroot/hooks.d), and `make setcap` (the enroot+caps
# flavor: users import and convert images); its AppArmor profile goes to /etc/apparmor.d/enroot
# (loaded at every boot by apparmor.service) and is loaded now where AppArmor is on, as the .deb's
# postinst does (Ubuntu 24.04 confines unprivileged user namespaces; a parser that refuses the
# profile is only a warning, as there). The build and runtime dependencies, CONTAINER_PACKAGES
# (with the NFS client, nfs-common, that mounts the shared home),
# and the exporters' packages (exporters.sh) come from apt_get (the dpkg lock waited for).
# Pyxis: no packages exist, and the plugin must be built against the spank.h of the Slurm that
# loads it, so it is built against SLURM_PREFIX/include (the image's Slurm) into
# SLURM_PREFIX/lib/slurm. The sources are built in BUILD_DIR and removed afterwards.
#
# The manifest (IMAGE_MANIFEST) records what was baked, for the boot checks and for whoever looks
# at a node: the image's key and digest (fmcluster.node.image), Enroot's version and commit,
# Pyxis' tag and commit, the Slurm it was built against, and the exporters' package versions.

# retry COMMAND...: DOWNLOAD_ATTEMPTS tries, DOWNLOAD_RETRY_SECONDS apart (the clones).
retry() {
  local attempt
  for ((attempt = 1; attempt < DOWNLOAD_ATTEMPTS; attempt++)); do
    "$@" && return 0
    log "$1 failed (attempt $attempt of $DOWNLOAD_ATTEMPTS); retrying in ${DOWNLOAD_RETRY_SECONDS}s"
    sleep "$DOWNLOAD_RETRY_SECONDS"
  done
  "$@"
}

# clone NAME TAG REPOSITORY "COMMIT [SUBMODULE-COMMIT...]": TAG of REPOSITORY with its submodules
# in BUILD_DIR/NAME, afresh on every try; an error unless its HEAD is COMMIT and `git submodule
# status` lists exactly the SUBMODULE-COMMITs (in path order, each checked out: a submodule not
# checked out, or at another commit, has a "-" or "+" before its commit).
clone() {
  local src="$ROOT$BUILD_DIR/$1" commits
  retry git_clone -q --depth 1 --recurse-submodules --branch "$2" "$3" "$src"
  commits=$(git -C "$src" rev-parse HEAD && git -C "$src" submodule status | awk '{print $1}')
  commits=${commits//$'\n'/ }
  if [[ "$commits" != "$4" ]]; then
    log "error: $1 $2 is $commits, not the pinned $4: not built"
    return 1
  fi
}

git_clone() {
  rm -rf "${@: -1}"
  git clone "$@"
}

# install_packages: the build and runtime dependencies, and the exporters at their pinned series.
install_packages() {
  local release
  release=$(ubuntu_release)
  exporters_pinned "$release"
  apt_get update -q
  # shellcheck disable=SC2086  # a list of package names
  apt_get install -y -q --no-install-recommends $CONTAINER_PACKAGES \
    "prometheus-node-exporter=${NODE_EXPORTER_VERSIONS[$release]}" "prometheus=${PROMETHEUS_VERSIONS[$release]}"
  # Neither packaged service runs from the image: Prometheus's server is not used (the boot sets up
  # an agent with its own unit), and the packaged node exporter would listen on every interface
  # (:9100) on every node, observed or not; metrics.sh enables it, on the loopback address only,
  # where the cluster is observed.
  systemctl disable prometheus.service prometheus-node-exporter.service
}

# build_enroot: the pinned commit and submodules, installed as NVIDIA's packages install it
# (DESTDIR is ROOT, empty on the build instance: Enroot's Makefile writes it into the paths of its
# script).
build_enroot() {
  local src="$ROOT$BUILD_DIR/enroot"
  clone enroot "v$ENROOT_VERSION" "$ENROOT_REPOSITORY" "$ENROOT_COMMIT $ENROOT_SUBMODULES"
  make -C "$src" install prefix=/usr sysconfdir=/etc DESTDIR="$ROOT"
  make -C "$src" setcap prefix=/usr sysconfdir=/etc DESTDIR="$ROOT"
  install -D -m 0644 "$ROOT/usr/share/enroot/apparmor.profile" "$ROOT/etc/apparmor.d/enroot"
  if aa-enabled -q 2>/dev/null; then
    apparmor_parser -r -T -W /etc/apparmor.d/enroot || log "warning: apparmor_parser failed"
  fi
}

# build_pyxis: the pinned commit, built against the image's Slurm, installed next to its plugins.
# The include path goes in the environment: Pyxis' Makefile extends CPPFLAGS (`CPPFLAGS :=
# -D_GNU_SOURCE ... -DPYXIS_VERSION=... $(CPPFLAGS)`), which a CPPFLAGS on make's command line
# would replace. prefix, libdir and DESTDIR are its `?=` variables (the plugin in
# DESTDIR/libdir/slurm, its own pyxis.conf in DESTDIR/prefix/share/pyxis, not used).
build_pyxis() {
  local src="$ROOT$BUILD_DIR/pyxis"
  if [[ ! -e "$ROOT$SLURM_PREFIX/include/slurm/spank.h" ]]; then
    log "error: no Slurm headers at $SLURM_PREFIX/include (spank.h): Pyxis cannot be built"
    return 1
  fi
  clone pyxis "$PYXIS_TAG" "$PYXIS_REPOSITORY" "$PYXIS_COMMIT"
  CPPFLAGS="-I$ROOT$SLURM_PREFIX/include" make -C "$src"
  CPPFLAGS="-I$ROOT$SLURM_PREFIX/include" make -C "$src" install DESTDIR="$ROOT" prefix=/usr/local libdir="$SLURM_PREFIX/lib"
}

# package_version NAME: the installed version of a package ("" when it is not installed).
package_version() {
  dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true
}

write_manifest() {
  install -d -m 0755 "$(dirname "$ROOT$IMAGE_MANIFEST")"
  printf '%s=%s\n' IMAGE_KEY "$IMAGE_KEY" IMAGE_DIGEST "$IMAGE_DIGEST" \
    ENROOT_VERSION "$ENROOT_VERSION" ENROOT_COMMIT "$ENROOT_COMMIT" \
    PYXIS_TAG "$PYXIS_TAG" PYXIS_COMMIT "$PYXIS_COMMIT" \
    SLURM_PREFIX "$SLURM_PREFIX" PYXIS_PLUGIN "$SLURM_PREFIX/lib/slurm/spank_pyxis.so" \
    NODE_EXPORTER_VERSION "$(package_version prometheus-node-exporter)" \
    PROMETHEUS_VERSION "$(package_version prometheus)" >"$ROOT$IMAGE_MANIFEST"
}

bake_image() {
  install -d -m 0755 "$ROOT$BUILD_DIR"
  install_packages
  build_enroot
  build_pyxis
  rm -rf "$ROOT${BUILD_DIR:?}"
  write_manifest
  log "image $IMAGE_KEY: Enroot $ENROOT_VERSION, Pyxis $PYXIS_TAG against $SLURM_PREFIX, exporters baked"
}
