# shellcheck shell=bash
# Containers on Slurm: Enroot and Pyxis, so that `srun --container-image=...` runs a job step in
# a container (docs/research-notes.md section 10). Run after /scratch and the file system are
# mounted; a node without them is not ready (node-ready checks Enroot and Pyxis).
#
# Enroot and Pyxis are baked into the node's image (fmcluster/node/scripts/image/bake.sh: the
# pinned commits, Pyxis built against the image's Slurm), never downloaded or built at boot. The
# boot checks them: `enroot version` is ENROOT_VERSION and the plugin is PYXIS_PLUGIN (SLURM_PREFIX/
# lib/slurm/spank_pyxis.so, the Slurm this node runs); where the image has fmcluster's manifest
# (IMAGE_MANIFEST), its Enroot and Pyxis commits must be the pinned ones and its Slurm this one.
# A missing or other piece is an error naming it and what to do, and the node is not ready.
#
# What depends on the node stays here. /etc/enroot/enroot.conf: runtime, data and temporary files
# under ENROOT_LOCAL (the instance store, or /tmp without one), the image cache under
# ENROOT_CACHE_ROOT (the shared file system when there is one: one import serves every node), each
# per user. Enroot's Slurm hooks (PMI, PyTorch's rendezvous variables) are enabled; the PMI hook
# runs scontrol, so with SLURM_BIN slurmd's PATH gets Slurm's commands (/etc/default/slurmd).
# PLUGSTACK_DIR/pyxis.conf loads the plugin (`required`; AWS PCS includes PLUGSTACK_DIR itself,
# SageMaker HyperPod's controller includes it by name: lifecycle_scripts/plugstack.sh).
# RESTART_SLURMD: a running slurmd is restarted to load the plugin (SageMaker HyperPod starts it
# before the lifecycle script).

# manifest_value NAME: NAME's value in the image's manifest ("" without one).
manifest_value() {
  sed -n "s/^$1=//p" "$ROOT$IMAGE_MANIFEST" 2>/dev/null || true
}

# baked_pieces: an error line for each piece the image lacks, or has other than pinned.
baked_pieces() {
  local version name want got
  version=$(enroot version 2>/dev/null || true)
  if [[ "$version" != "$ENROOT_VERSION" ]]; then
    echo "Enroot $ENROOT_VERSION is not installed (enroot version: '${version:-none}')"
  fi
  if [[ ! -e "$ROOT$PYXIS_PLUGIN" ]]; then
    echo "no Pyxis plugin $PYXIS_PLUGIN (Pyxis $PYXIS_TAG built against $SLURM_PREFIX)"
  fi
  if [[ -e "$ROOT$IMAGE_MANIFEST" ]]; then
    for name in ENROOT_COMMIT PYXIS_COMMIT SLURM_PREFIX; do
      want=${!name}
      got=$(manifest_value "$name")
      [[ "$got" == "$want" ]] || echo "the image's $name is '$got', not $want ($IMAGE_MANIFEST)"
    done
  fi
}

# check_baked: the baked pieces are there, or an error that says what to do.
check_baked() {
  local missing line
  missing=$(baked_pieces)
  if [[ -n "$missing" ]]; then
    while IFS= read -r line; do
      log "error: containers: $line"
    done <<<"$missing"
    log "error: containers: launch the node from its cluster's node image (NAME-images), or bake Enroot" \
      "$ENROOT_VERSION ($ENROOT_COMMIT) and Pyxis $PYXIS_TAG ($PYXIS_COMMIT) built against $SLURM_PREFIX" \
      "into the group's ami_id: nothing is installed at boot"
    return 1
  fi
}

# write_enroot_conf: over the default enroot.conf the image's `make install` wrote.
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
  echo "required $PYXIS_PLUGIN" >"$ROOT$PLUGSTACK_DIR/pyxis.conf"
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
  check_baked
  write_enroot_conf
  write_plugstack
  local unit
  # the first active name only: a unit with an Alias is active under both, one slurmd
  # shellcheck disable=SC2086  # a list of unit names
  for unit in ${SLURMD_UNITS:-slurmd.service}; do
    if ((RESTART_SLURMD)) && systemctl is-active --quiet "$unit"; then
      systemctl restart "$unit"
      break
    fi
  done
  log "containers: Enroot $ENROOT_VERSION and Pyxis $PYXIS_TAG ready; image cache $ENROOT_CACHE_ROOT"
}
