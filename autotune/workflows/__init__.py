"""What runs across stages, as plain functions with typed arguments: load results (results.py), build tables
(tables.py), launch a sweep (sweeps.py), validate a table (validation.py), active tuning (active.py) and bake spent
validations into a tuning database (bake.py). The command line (autotune/cli) parses options, calls one of these and
prints; a script, a test or `tune_kernel` calls them the same way (the public ones are re-exported by
`autotune/__init__.py`)."""
