"""Schema identity: the canonical DDL's digest, its statements and the objects it creates.

The DDL (`state.ddl`) holds every table of the SQLite state plan, not only the channel tables:
one database is shared by every part of Pi Workflows. The text is hashed byte for byte
(schema_meta holds the digest), so any edit to it is a schema change that existing databases
refuse.
"""

from __future__ import annotations

import hashlib

from state.ddl import DDL

__all__ = ["APPLICATION_ID", "DDL_DIGEST", "SCHEMA_NAME", "SCHEMA_VERSION", "expected_objects"]


SCHEMA_NAME = "pi-workflows-state"
SCHEMA_VERSION = 1
APPLICATION_ID = 0x50495746  # "PIWF"

DDL_DIGEST: bytes = hashlib.sha256(DDL.encode("utf-8")).digest()


def _ddl_statements(ddl: str = DDL) -> list[str]:
    """Split DDL into statements as SQLite stores them in `sqlite_schema.sql`."""
    import apsw  # local: keeps this module importable without touching the extension at load

    statements: list[str] = []
    buffer = ""
    for line in ddl.splitlines(keepends=True):
        buffer += line
        if buffer.strip() and apsw.complete(buffer):
            statements.append(buffer.strip().removesuffix(";"))
            buffer = ""
    return statements


def expected_objects() -> dict[str, tuple[str, str, str]]:
    """name -> (type, table name, sql) of every schema object the DDL creates."""
    objects: dict[str, tuple[str, str, str]] = {}
    for sql in _ddl_statements():
        words = sql.split()
        kind = words[2].lower() if words[1] == "UNIQUE" else words[1].lower()
        name = words[3] if words[1] == "UNIQUE" else words[2]
        on_index = words.index("ON") if "ON" in words else -1
        table = name if kind == "table" else words[on_index + 1]
        objects[name] = (kind, table, sql)
    return objects
