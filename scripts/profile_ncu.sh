#!/usr/bin/env bash
# Profile the kernel of a one-instance sweep config with Nsight Compute, through the runner (same compile, same
# launch geometry, same data as a sweep): the first launch of the space's kernel (the verification launch) is
# profiled with the sections that say where the time goes; the rest of the sweep runs unprofiled.
#
#   scripts/profile_ncu.sh configs/profile/flat64.yaml [more configs...]
#
# Writes OUT_DIR/<config>.log (default OUT_DIR: results/profiles) and prints the key metrics of each. Needs a GPU,
# ncu on the PATH, and a machine where ncu can read the hardware counters; clocks are left alone
# (--clock-control none). The configs under configs/profile/ each select one instance and one point.
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -euo pipefail
OUT_DIR=${OUT_DIR:-results/profiles}
SECTIONS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy)
[ $# -ge 1 ] || { echo "usage: $0 CONFIG.yaml [CONFIG.yaml ...]" >&2; exit 2; }
for cfg in "$@"; do
  [ -f "$cfg" ] || { echo "error: no config file $cfg" >&2; exit 2; }
done
command -v ncu >/dev/null 2>&1 || {
  echo "error: ncu (Nsight Compute) is not on the PATH; this script profiles on a GPU with it (a sweep without it: autotune sweep CONFIG)" >&2
  exit 2
}
source "$(dirname "$0")/python.sh"  # $py: the checkout's .venv, or $PYTHON
mkdir -p "$OUT_DIR"
for cfg in "$@"; do
  name=$(basename "$cfg" .yaml)
  # the kernel's function name: the template of the config's first space, without its namespace
  kernel=$("$py" -c "import sys; from autotune.sweep.config import load_config; from autotune.space.spec import load_space
c = load_config(sys.argv[1]); print(load_space(c.spaces[0].path).kernel.template.split('::')[-1])" "$cfg")
  log="$OUT_DIR/$name.log"
  ncu --target-processes all --clock-control none --kernel-name "regex:(^|:)${kernel}$" --launch-count 1 "${SECTIONS[@]}" \
    "$py" -m autotune sweep "$cfg" --db "sqlite:///$OUT_DIR/$name.sqlite" -q > "$log" 2>&1 || {
      echo "$name: ncu or the sweep failed, see $log" >&2; continue; }
  echo "== $name ($kernel): $log"
  grep -E "^\s+(DRAM Throughput|Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc Active|Achieved Occupancy|Registers Per Thread|Executed Instructions|Warp Cycles Per Issued Instruction|L1/TEX Cache Throughput|Mem Pipes Busy|Waves Per SM|Grid Size|Block Size) " "$log" \
    | sed 's/  */ /g' || true
  grep -E "is the highest-utilized pipeline" "$log" | sed 's/^ *INF *//' || true
done
