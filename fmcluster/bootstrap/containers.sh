# shellcheck shell=bash
# Containers on Slurm: Enroot and Pyxis, so that `srun --container-image=...` runs a job step in
# a container (docs/research-notes.md section 10). Run after /scratch and the file system are
# mounted; a node without them is not ready (node-ready checks Enroot and Pyxis).
#
# Enroot: NVIDIA's release .debs ENROOT_DEBS ("FILE=SHA256 ..." for this node's dpkg
# architecture DEB_ARCH) from ENROOT_RELEASE_URL, downloaded with retries, each checked against
# its SHA-256 before apt-get installs it (apt_get: the dpkg lock waited for). Pyxis: no packages
# exist, and the plugin must be built against the spank.h of the Slurm that loads it, so the node
# clones PYXIS_TAG, checks that it is PYXIS_COMMIT, and builds it against SLURM_PREFIX/include
# into SLURM_PREFIX/lib/slurm (PYXIS_PLUGIN); PLUGSTACK_DIR/pyxis.conf loads it (`required`), and
# PLUGSTACK_CONF, when set, includes PLUGSTACK_DIR. A node that has the pinned versions already
# (a second run) downloads and builds nothing.
#
# /etc/enroot/enroot.conf: runtime, data and temporary files under ENROOT_LOCAL (the instance
# store, or /tmp without one), the image cache under ENROOT_CACHE_ROOT (the shared file system
# when there is one: one import serves every node), each per user. Enroot's Slurm hooks (PMI,
# PyTorch's rendezvous variables) are enabled; the PMI hook runs scontrol, so with SLURM_BIN
# slurmd's PATH gets Slurm's commands (/etc/default/slurmd). RESTART_SLURMD: a running slurmd is
# restarted to load the plugin (SageMaker HyperPod starts it before the lifecycle script).

# retry COMMAND...: DOWNLOAD_ATTEMPTS tries, DOWNLOAD_RETRY_SECONDS apart (downloads, clones).
retry() {
  local attempt
  for ((attempt = 1; attempt < DOWNLOAD_ATTEMPTS; attempt++)); do
    "$@" && return 0
    log "$1 failed (attempt $attempt of $DOWNLOAD_ATTEMPTS); retrying in ${DOWNLOAD_RETRY_SECONDS}s"
    sleep "$DOWNLOAD_RETRY_SECONDS"
  done
  "$@"
}

enroot_installed() {
  [[ "$(enroot version 2>/dev/null || true)" == "$ENROOT_VERSION" ]]
}

# fetch_enroot: the pinned .debs in CONTAINERS_STATE, each verified; their paths in DEBS.
DEBS=()
fetch_enroot() {
  local pin name file
  for pin in $ENROOT_DEBS; do
    name=${pin%%=*}
    file="$ROOT$CONTAINERS_STATE/$name"
    retry curl -fsSL --connect-timeout 30 -o "$file" "$ENROOT_RELEASE_URL/$name"
    if ! echo "${pin#*=}  $file" | sha256sum -c --status; then
      rm -f "$file"
      log "error: $name does not have the pinned SHA-256 ${pin#*=}: not installed"
      return 1
    fi
    DEBS+=("$CONTAINERS_STATE/$name")
  done
}

# build_pyxis: the pinned commit, built against this node's Slurm, installed next to its plugins.
build_pyxis() {
  local src="$ROOT$CONTAINERS_STATE/pyxis" commit
  if [[ ! -e "$ROOT$SLURM_PREFIX/include/slurm/spank.h" ]]; then
    log "error: no Slurm headers at $SLURM_PREFIX/include (spank.h): Pyxis cannot be built"
    return 1
  fi
  rm -rf "$src"
  retry git clone -q --depth 1 --branch "$PYXIS_TAG" "$PYXIS_REPOSITORY" "$src"
  commit=$(git -C "$src" rev-parse HEAD)
  if [[ "$commit" != "$PYXIS_COMMIT" ]]; then
    log "error: Pyxis $PYXIS_TAG is commit $commit, not the pinned $PYXIS_COMMIT: not built"
    return 1
  fi
  make -C "$src" CPPFLAGS="-I$SLURM_PREFIX/include"
  make -C "$src" install DESTDIR="$ROOT" prefix=/usr/local libdir="$SLURM_PREFIX/lib"
  echo "$PYXIS_COMMIT $SLURM_PREFIX" >"$ROOT$CONTAINERS_STATE/pyxis.stamp"
}

pyxis_installed() {
  [[ -e "$ROOT$SLURM_PREFIX/lib/slurm/spank_pyxis.so" ]] &&
    grep -qxF "$PYXIS_COMMIT $SLURM_PREFIX" "$ROOT$CONTAINERS_STATE/pyxis.stamp" 2>/dev/null
}

write_enroot_conf() {
  local dir hook
  for dir in "$ENROOT_LOCAL"/{runtime,data,tmp} "$ENROOT_CACHE_ROOT"; do
    install -d -m 1777 "$ROOT$dir"
  done
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
  local include="include $PLUGSTACK_DIR/*.conf" defaults="$ROOT/etc/default/slurmd"
  install -d -m 0755 "$ROOT$PLUGSTACK_DIR" "$ROOT/etc/default"
  echo "required $SLURM_PREFIX/lib/slurm/spank_pyxis.so" >"$ROOT$PLUGSTACK_DIR/pyxis.conf"
  if [[ -n "$PLUGSTACK_CONF" ]] && ! grep -qxF "$include" "$ROOT$PLUGSTACK_CONF" 2>/dev/null; then
    echo "$include" >>"$ROOT$PLUGSTACK_CONF"
  fi
  if [[ -n "$SLURM_BIN" ]]; then
    touch "$defaults"
    sed -i '/# fmcluster$/d' "$defaults"
    echo "PATH=$SLURM_BIN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin # fmcluster" >>"$defaults"
  fi
}

setup_containers() {
  local arch mount need_enroot=0 need_pyxis=0
  arch=$(dpkg --print-architecture)
  if [[ "$arch" != "$DEB_ARCH" ]]; then
    log "error: this node is $arch, the pinned Enroot packages are $DEB_ARCH"
    return 1
  fi
  for mount in $CONTAINER_MOUNTS; do
    if ! mountpoint -q "$mount"; then
      log "error: $mount is not mounted: Enroot's directories are not set up"
      return 1
    fi
  done
  install -d -m 0755 "$ROOT$CONTAINERS_STATE"
  write_enroot_conf
  enroot_installed || need_enroot=1
  pyxis_installed || need_pyxis=1
  if ((need_enroot)); then
    fetch_enroot
  fi
  if ((need_enroot || need_pyxis)); then
    apt_get update -q
    # shellcheck disable=SC2086  # a list of package names
    apt_get install -y -q --no-install-recommends "${DEBS[@]}" $CONTAINER_PACKAGES
    enroot_installed || { log "error: Enroot $ENROOT_VERSION is not installed after apt-get"; return 1; }
    if ((need_pyxis)); then
      build_pyxis
    fi
  fi
  write_plugstack
  if ((RESTART_SLURMD)) && systemctl is-active --quiet slurmd.service; then
    systemctl restart slurmd.service
  fi
  log "containers: Enroot $ENROOT_VERSION and Pyxis $PYXIS_TAG ready; image cache $ENROOT_CACHE_ROOT"
}
