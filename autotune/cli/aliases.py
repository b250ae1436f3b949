"""Old option names kept for one release as hidden aliases of the new ones (docs/cli.md, CHANGELOG.md).

The vocabulary: a database that is a command's main input is its first argument (`autotune analyze DB`); any other
database is `--db` (`sweep --db`, `query --db`, `validate --db`, `import kerneltuner --db`), and one a command
writes beside another is `--NAME-db` (`validate --validation-db`). A file written is `--out`/`-o`, a GPU `--device`/`-d`,
a precision `--precision`/`-p`. tests/test_cli_vocabulary.py walks every command to keep it so.
"""

from __future__ import annotations

import warnings
from typing import TypeVar

from autotune.errors import UserError

T = TypeVar("T")


def renamed(value: T | None, old_value: T | None, new: str, old: str) -> T | None:
    """The value given for option `new`, or for its old name `old` (hidden; warns that it goes in the next
    release). Both given with different values is an error."""
    if old_value is None:
        return value
    if value is not None and value != old_value:
        raise UserError(f"{old} is the old name of {new}: give only {new}")
    warnings.warn(f"{old} is now {new}; the old name goes in the next release", FutureWarning, stacklevel=2)
    return old_value
