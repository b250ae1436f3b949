"""The problems an application runs: workloads (`workload`: tuned points and weights), reading them from YAML or
CSV (`workload_files`), one reader of a kind's problems in a file (`problem_rows`, also `autotune validate
--points`'s), and the limits they are checked against first (`workload_limits`). Nothing is imported here."""
