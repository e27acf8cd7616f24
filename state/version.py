"""The package version, defined once: pyproject reads it, schema_meta records it."""

from __future__ import annotations

__all__ = ["VERSION"]


VERSION = "0.1.0"
