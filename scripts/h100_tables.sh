#!/usr/bin/env bash
# The H100 runs of workload-driven tables (tables, sharing, validation), each phase resumable: run a phase again to go
# on where it stopped (on any H100: --resume model). Databases go to $RUNS (default runs/); every sweep is stopped
# cleanly (SIGTERM) after SECONDS.
#   bash scripts/h100_tables.sh small|fp16|square-share SECONDS
#   bash scripts/h100_tables.sh validate-small|validate-fp16 SECONDS
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -uo pipefail
phase=${1:?phase}; secs=${2:-300}
RUNS=${RUNS:-runs}; mkdir -p "$RUNS"
source "$(dirname "$0")/python.sh"  # $py: the checkout's .venv, or $PYTHON
run() { echo "== $phase: $* (stops after ${secs}s)"; timeout -s TERM "$secs" "$py" -m autotune "$@"; echo "== exit $?"; }
case $phase in
  small|fp16) run sweep "configs/${phase}_tables_h100.yaml" --db "sqlite:///$RUNS/${phase}_tables_h100.sqlite" \
                --resume model -q ;;
  square-share) run sweep configs/square_share_h100.yaml --db "sqlite:///$RUNS/square_share_h100.sqlite" \
                  --resume model -q ;;
  validate-small|validate-fp16)
    name=${phase#validate-}
    case $name in small) wl=small_h100;; fp16) wl=fp16_h100;; esac
    run validate "results/${name}_tables_h100/dispatch.json" --db "$RUNS/${name}_tables_h100.sqlite" \
      --random 200 --seed 1 --workload "configs/workloads/$wl.yaml" --pool-bk 3 \
      --out "$RUNS/${name}_validation" --validation-db "sqlite:///$RUNS/${name}_validation.sqlite" --quiet ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
