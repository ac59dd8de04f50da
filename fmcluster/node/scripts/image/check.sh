# shellcheck shell=bash
# The node image's test phase (EC2 Image Builder runs it on an instance launched from the new
# image; rendered by fmcluster.node.image): what the bake installed really works. Every check runs
# and says what failed; any failure fails the test phase, and Image Builder does not publish the
# image.
#
# - the manifest (IMAGE_MANIFEST) names this image's pins;
# - `enroot version` is the pinned ENROOT_VERSION;
# - the Pyxis SPANK plugin really loads into this Slurm: srun loads the plugins of plugstack.conf
#   in its local context, also for --help, whose text then lists each plugin's options. A
#   temporary slurm.conf (no controller is contacted) whose PlugStackConfig says `required
#   PLUGIN` is enough; a plugin built against another Slurm fails to load ("Incompatible plugin
#   version"), and `required` makes srun fail then. srun loads its authentication plugin before it
#   reads any option, so the configuration names the plane's (CHECK_SLURM_AUTH, CHECK_SLURM_CRED:
#   auth/slurm on AWS PCS, whose Slurm has no munge; auth/munge on HyperPod). auth/slurm reads
#   its key only in the daemons: srun --help needs none;
# - the node exporter starts on a loopback port and serves /metrics;
# - `prometheus --version` runs;
# - where the image's GPU nodes run the deep check before their first job (AWS PCS,
#   CHECK_DEEP_NCCL_TESTS not empty): DCGM's dcgmi and nccl-tests' all_reduce_perf (the first file
#   matching one of those globs) are there. The build instance has no GPU, so only their presence
#   is checked; without them every new node would fail its deep check, so the image fails instead.

# manifest_value NAME: NAME's value in the manifest.
manifest_value() {
  sed -n "s/^$1=//p" "$ROOT$IMAGE_MANIFEST"
}

check_manifest() {
  local name want got
  [[ -e "$ROOT$IMAGE_MANIFEST" ]] || { log "error: no manifest $IMAGE_MANIFEST: the bake did not finish"; return 1; }
  while read -r name want; do
    got=$(manifest_value "$name")
    if [[ "$got" != "$want" ]]; then
      log "error: the manifest's $name is '$got', not $want"
      return 1
    fi
  done < <(printf '%s %s\n' ENROOT_VERSION "$ENROOT_VERSION" ENROOT_COMMIT "$ENROOT_COMMIT" PYXIS_TAG "$PYXIS_TAG" \
    PYXIS_COMMIT "$PYXIS_COMMIT" SLURM_PREFIX "$SLURM_PREFIX")
}

check_enroot() {
  local version
  version=$(enroot version 2>&1) || { log "error: enroot does not run: $version"; return 1; }
  if [[ "$version" != "$ENROOT_VERSION" ]]; then
    log "error: enroot version is '$version', not $ENROOT_VERSION"
    return 1
  fi
}

check_pyxis() {
  local plugin="$ROOT$SLURM_PREFIX/lib/slurm/spank_pyxis.so" dir help
  if [[ ! -e "$plugin" ]]; then
    log "error: no Pyxis plugin $SLURM_PREFIX/lib/slurm/spank_pyxis.so"
    return 1
  fi
  dir=$(mktemp -d)
  printf '%s\n' "ClusterName=imagecheck" "SlurmctldHost=localhost" "PlugStackConfig=$dir/plugstack.conf" \
    "AuthType=$CHECK_SLURM_AUTH" "CredType=$CHECK_SLURM_CRED" \
    "NodeName=localhost CPUs=1 State=UNKNOWN" "PartitionName=check Nodes=localhost Default=YES" >"$dir/slurm.conf"
  echo "required $plugin" >"$dir/plugstack.conf"
  if ! help=$(SLURM_CONF="$dir/slurm.conf" "$ROOT$SLURM_PREFIX/bin/srun" --help 2>&1); then
    rm -rf "$dir"
    log "error: srun of $SLURM_PREFIX does not load Pyxis: $(tail -n 3 <<<"$help" | tr '\n' ' ')"
    return 1
  fi
  rm -rf "$dir"
  if ! grep -q -- '--container-image' <<<"$help"; then
    log "error: srun of $SLURM_PREFIX loaded the plugin, but lists no --container-image"
    return 1
  fi
}

# http_get PORT PATH: the body of http://127.0.0.1:PORT/PATH (bash's /dev/tcp: nothing else needed).
http_get() {
  local response
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
  response=$(cat <&3)
  exec 3<&-
  printf '%s\n' "$response"
}

check_node_exporter() {
  local pid try metrics=""
  prometheus-node-exporter --web.listen-address="127.0.0.1:$CHECK_EXPORTER_PORT" >/dev/null 2>&1 &
  pid=$!
  for ((try = 0; try < CHECK_EXPORTER_TRIES; try++)); do
    metrics=$(http_get "$CHECK_EXPORTER_PORT" /metrics 2>/dev/null) && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if ! grep -q '^node_exporter_build_info' <<<"$metrics"; then
    log "error: prometheus-node-exporter did not serve /metrics on 127.0.0.1:$CHECK_EXPORTER_PORT"
    return 1
  fi
}

check_prometheus() {
  local out
  out=$(prometheus --version 2>&1) || { log "error: prometheus --version fails: $out"; return 1; }
}

check_deep_tools() {
  local pattern found=""
  [[ -n "$CHECK_DEEP_NCCL_TESTS" ]] || return 0
  command -v dcgmi >/dev/null || { log "error: no dcgmi (DCGM): the deep check of new GPU nodes needs it"; return 1; }
  for pattern in $CHECK_DEEP_NCCL_TESTS; do
    for found in $ROOT$pattern; do
      [[ -x "$found" ]] && return 0
    done
  done
  log "error: no nccl-tests all_reduce_perf at $CHECK_DEEP_NCCL_TESTS: the deep check of new GPU nodes needs it"
  return 1
}

check_image() {
  local check failed=()
  for check in check_manifest check_enroot check_pyxis check_node_exporter check_prometheus check_deep_tools; do
    "$check" || failed+=("$check")
  done
  if ((${#failed[@]} > 0)); then
    log "error: image $IMAGE_KEY failed ${failed[*]}"
    return 1
  fi
  log "image $IMAGE_KEY: Enroot $ENROOT_VERSION, Pyxis against $SLURM_PREFIX, the exporters work"
}
