# Sourced by the scripts that measure committed results on a GPU (scripts/*_h100.sh), after they set R (the run's
# folder): what every such run records the same way.
#   at MESSAGE...       a timestamped line in $R/log.txt (and on stdout)
#   run_start           the start time, the GPU ($R/gpu.csv) and the commit ($R/commit.txt: AUTOTUNE_GIT_COMMIT
#                       first, since a copy sent to a lent machine may carry stale git metadata)
#   relative_paths      the run's text files name its folder and the checkout relatively (no machine paths)
#   provenance_head T   PROVENANCE.md's first lines: title T, the command, commit, date, wall time, GPU
#   need_gpu CPU_CHECK  stop with one line (exit 2) unless CuPy sees a GPU; CPU_CHECK says how to check the script
#                       on a CPU instead (e.g. REPLAY=1)
#   write_provenance T STEPS FILES...   $R/PROVENANCE.md: the head (title T), the paragraph STEPS, the FILES that
#                       exist in a code block, the log; the run's folder and the checkout named relatively
need_gpu() {
  "$py" -c "import cupy, sys; sys.exit(cupy.cuda.runtime.getDeviceCount() == 0)" >/dev/null 2>&1 && return 0
  echo "error: $(basename "$0") measures on a GPU and CuPy sees none here; on a CPU, $1 bash scripts/$(basename "$0") checks the script" >&2
  exit 2
}
at() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$R/log.txt"; }
run_start() {
  start=$(date -u +%s)
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem --format=csv > "$R/gpu.csv" 2>&1
  echo "${AUTOTUNE_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo 'no git metadata')}" > "$R/commit.txt"
}
relative_paths() {
  find "$R" \( -name '*.yaml' -o -name '*.json' -o -name '*.txt' -o -name '*.csv' \) -print0 |
    xargs -0 -r sed -i -e "s#sqlite:///$R/##g" -e "s#$R/##g" -e "s#$PWD/##g"
}
provenance_head() {
  echo "# $1"
  echo
  echo "Measured by \`bash scripts/$(basename "$0")\` (commit $(cat "$R/commit.txt")), $(date -u +%F), $(( $(date -u +%s) - start )) s wall."
  echo "GPU: $(tail -n +2 "$R/gpu.csv" | head -1)${REPLAY:+ (REPLAY: nothing measured, a check of the script)}"
}
write_provenance() {
  local title=$1 steps=$2; shift 2
  {
    provenance_head "$title"
    echo
    echo "$steps" | fold -s -w 116 | sed 's/ *$//'
    echo
    echo '```'; cat "$@" 2>/dev/null; echo '```'
    echo
    echo "Log:"; echo '```'; cat "$R/log.txt"; echo '```'
  } > "$R/PROVENANCE.md"
  sed -i -e "s#$R/##g" -e "s#$PWD/##g" "$R/PROVENANCE.md"
}
