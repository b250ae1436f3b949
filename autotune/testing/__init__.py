"""Conformance suites a kind, a strategy or an executor runs in its own tests (as `optuna.testing` does for
storages): subclass the suite, say how to build the thing under test, and pytest collects the checks.

- `autotune.testing.kinds.KindTests` / `KindGpuTests`: any `autotune.problems.base.ProblemKind`;
- `autotune.testing.strategies.StrategyConformance`: any `autotune.sweep.strategies.base.Strategy`;
- `autotune.testing.backends.BackendConformance`: any `autotune.sweep.backends.base.Backend`.
Nothing here is imported by the rest of the package; pytest is needed only to run a suite.
"""
