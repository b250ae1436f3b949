# Sourced first by the scripts under scripts/: `-h` or `--help` as the first argument prints the script's leading
# comment (what it does, its arguments and knobs) and exits.
case "${1:-}" in
    -h | --help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
esac
