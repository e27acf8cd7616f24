"""The one canonical DDL of state.sqlite, every table of the plan, in three fragments.

The fragments are joined without separators: the schema digest is the SHA-256 of exactly this
text, so a change to any byte here is a schema change.
"""

from __future__ import annotations

from state.ddl.channels import CHANNELS
from state.ddl.records import RECORDS
from state.ddl.workflows import WORKFLOWS

__all__ = ["DDL"]


DDL = RECORDS + WORKFLOWS[1:] + CHANNELS[1:]
