# shellcheck shell=bash
# Containers on Slurm: Enroot and Pyxis, so that `srun --container-image=...` runs a job step in
# a container (docs/research-notes.md section 10). Run after /scratch and the file system are
# mounted; a node without them is not ready (node-ready checks Enroot and Pyxis).
#
# Enroot and Pyxis are each cloned at their pinned tag (v$ENROOT_VERSION, PYXIS_TAG; retried)
# and built only when the checkout is the pinned commit (ENROOT_COMMIT, PYXIS_COMMIT) with
# exactly the pinned submodule commits (ENROOT_SUBMODULES; Pyxis has none): a node never builds
# a source it cannot verify. Enroot (doc/installation.md, "From source"): `make install
# prefix=/usr sysconfdir=/etc`, the layout of NVIDIA's .debs (/usr/bin/enroot,
# /etc/enroot/enroot.conf, /usr/share/enroot/hooks.d), and `make setcap` (the enroot+caps
# flavor: users import and convert images); its AppArmor profile goes to /etc/apparmor.d/enroot
# and is loaded where AppArmor is on, as the .deb's postinst does (Ubuntu 24.04 confines
# unprivileged user namespaces; a parser that refuses the profile is only a warning, as there).
# The build and runtime dependencies, CONTAINER_PACKAGES, come from apt_get (the dpkg lock
# waited for). Pyxis: no packages exist, and the plugin must be built against the spank.h of the
# Slurm that loads it, so it is built against SLURM_PREFIX/include into SLURM_PREFIX/lib/slurm
# (PYXIS_PLUGIN); PLUGSTACK_DIR/pyxis.conf loads it (`required`; AWS PCS includes PLUGSTACK_DIR
# itself, SageMaker HyperPod's controller includes it by name: lifecycle_scripts/plugstack.sh).
# Each build leaves a stamp with its commit in CONTAINERS_STATE: a node that has the pinned builds
# already (a second run) clones and builds nothing.
#
# /etc/enroot/enroot.conf: runtime, data and temporary files under ENROOT_LOCAL (the instance
# store, or /tmp without one), the image cache under ENROOT_CACHE_ROOT (the shared file system
# when there is one: one import serves every node), each per user. Enroot's Slurm hooks (PMI,
# PyTorch's rendezvous variables) are enabled; the PMI hook runs scontrol, so with SLURM_BIN
# slurmd's PATH gets Slurm's commands (/etc/default/slurmd). RESTART_SLURMD: a running slurmd is
# restarted to load the plugin (SageMaker HyperPod starts it before the lifecycle script).

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
# in CONTAINERS_STATE/NAME, afresh on every try; an error unless its HEAD is COMMIT and `git
# submodule status` lists exactly the SUBMODULE-COMMITs (in path order, each checked out: a
# submodule not checked out, or at another commit, has a "-" or "+" before its commit).
clone() {
  local src="$ROOT$CONTAINERS_STATE/$1" commits
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

enroot_installed() {
  [[ "$(enroot version 2>/dev/null || true)" == "$ENROOT_VERSION" ]] &&
    grep -qxF "$ENROOT_COMMIT" "$ROOT$CONTAINERS_STATE/enroot.stamp" 2>/dev/null
}

# build_enroot: the pinned commit and submodules, installed as NVIDIA's packages install it
# (DESTDIR is ROOT, empty on a node: Enroot's Makefile writes it into the paths of its script).
build_enroot() {
  local src="$ROOT$CONTAINERS_STATE/enroot"
  clone enroot "v$ENROOT_VERSION" "$ENROOT_REPOSITORY" "$ENROOT_COMMIT $ENROOT_SUBMODULES"
  make -C "$src" install prefix=/usr sysconfdir=/etc DESTDIR="$ROOT"
  make -C "$src" setcap prefix=/usr sysconfdir=/etc DESTDIR="$ROOT"
  install -D -m 0644 "$ROOT/usr/share/enroot/apparmor.profile" "$ROOT/etc/apparmor.d/enroot"
  if aa-enabled -q 2>/dev/null; then
    apparmor_parser -r -T -W /etc/apparmor.d/enroot || log "warning: apparmor_parser failed"
  fi
  echo "$ENROOT_COMMIT" >"$ROOT$CONTAINERS_STATE/enroot.stamp"
}

# build_pyxis: the pinned commit, built against this node's Slurm, installed next to its plugins.
# The include path goes in the environment: Pyxis' Makefile extends CPPFLAGS (`CPPFLAGS :=
# -D_GNU_SOURCE ... -DPYXIS_VERSION=... $(CPPFLAGS)`), which a CPPFLAGS on make's command line
# would replace. prefix, libdir and DESTDIR are its `?=` variables (the plugin in
# DESTDIR/libdir/slurm, its own pyxis.conf in DESTDIR/prefix/share/pyxis, not used).
build_pyxis() {
  local src="$ROOT$CONTAINERS_STATE/pyxis"
  if [[ ! -e "$ROOT$SLURM_PREFIX/include/slurm/spank.h" ]]; then
    log "error: no Slurm headers at $SLURM_PREFIX/include (spank.h): Pyxis cannot be built"
    return 1
  fi
  clone pyxis "$PYXIS_TAG" "$PYXIS_REPOSITORY" "$PYXIS_COMMIT"
  CPPFLAGS="-I$ROOT$SLURM_PREFIX/include" make -C "$src"
  CPPFLAGS="-I$ROOT$SLURM_PREFIX/include" make -C "$src" install DESTDIR="$ROOT" prefix=/usr/local libdir="$SLURM_PREFIX/lib"
  echo "$PYXIS_COMMIT $SLURM_PREFIX" >"$ROOT$CONTAINERS_STATE/pyxis.stamp"
}

pyxis_installed() {
  [[ -e "$ROOT$SLURM_PREFIX/lib/slurm/spank_pyxis.so" ]] &&
    grep -qxF "$PYXIS_COMMIT $SLURM_PREFIX" "$ROOT$CONTAINERS_STATE/pyxis.stamp" 2>/dev/null
}

# write_enroot_conf: after the install (`make install` writes Enroot's default enroot.conf).
write_enroot_conf() {
  local hook
  install -d -m 0755 "$ROOT/etc/enroot/hooks.d"
  # shellcheck disable=SC2016  # $(id -u): Enroot expands it, for each user
  printf 'ENROOT_%s\n' "RUNTIME_PATH $ENROOT_LOCAL/runtime/user-\$(id -u)" "DATA_PATH $ENROOT_LOCAL/data/user-\$(id -u)" \
    "TEMP_PATH $ENROOT_LOCAL/tmp" "CACHE_PATH $ENROOT_CACHE_ROOT/user-\$(id -u)" \
    "SQUASH_OPTIONS -comp lzo -noI -noD -noF -noX -no-duplicates" "ROOTFS_WRITABLE yes" >"$ROOT/etc/enroot/enroot.conf"
  for hook in 50-slurm-pmi.sh 50-slurm-pytorch.sh; do
    ln -sfn "/usr/share/enroot/hooks.d/$hook" "$ROOT/etc/enroot/hooks.d/$hook"
  done
}

write_plugstack() {
  local defaults="$ROOT/etc/default/slurmd"
  install -d -m 0755 "$ROOT$PLUGSTACK_DIR" "$ROOT/etc/default"
  echo "required $SLURM_PREFIX/lib/slurm/spank_pyxis.so" >"$ROOT$PLUGSTACK_DIR/pyxis.conf"
  if [[ -n "$SLURM_BIN" ]]; then
    touch "$defaults"
    sed -i '/# fmcluster$/d' "$defaults"
    echo "PATH=$SLURM_BIN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin # fmcluster" >>"$defaults"
  fi
}

setup_containers() {
  local dir
  for dir in $CONTAINER_MOUNTS; do
    if ! mountpoint -q "$dir"; then
      log "error: $dir is not mounted: Enroot's directories are not set up"
      return 1
    fi
  done
  for dir in "$ENROOT_LOCAL"/{runtime,data,tmp} "$ENROOT_CACHE_ROOT"; do
    install -d -m 1777 "$ROOT$dir"
  done
  install -d -m 0755 "$ROOT$CONTAINERS_STATE"
  if ! enroot_installed || ! pyxis_installed; then
    apt_get update -q
    # shellcheck disable=SC2086  # a list of package names
    apt_get install -y -q --no-install-recommends $CONTAINER_PACKAGES
  fi
  if ! enroot_installed; then
    build_enroot
  fi
  write_enroot_conf
  if ! pyxis_installed; then
    build_pyxis
  fi
  write_plugstack
  if ((RESTART_SLURMD)) && systemctl is-active --quiet slurmd.service; then
    systemctl restart slurmd.service
  fi
  log "containers: Enroot $ENROOT_VERSION and Pyxis $PYXIS_TAG ready; image cache $ENROOT_CACHE_ROOT"
}
