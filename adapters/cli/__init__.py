"""The `piw-channels` command line: `main` parses and dispatches; one module per command group."""

__all__ = ["main"]
