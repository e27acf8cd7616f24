"""The shared records of state.sqlite: database, schema identity, canonical JSON, blobs,
resources and events, leases, effects, maintenance. Pi-independent. Its DDL creates every table
of the plan, but it writes no domain table (their owners in `channels` do), and it imports
nothing from `channels` or `adapters`."""

__all__ = [
    "PIW_CHANNELS_PACKAGE", "blobs", "canonical", "clock", "crashes", "database", "effects",
    "errors", "exit_codes", "files", "ids", "leases", "maintenance", "resources", "version",
]


# The marker lets start-up tell this package from another one of the same name.
PIW_CHANNELS_PACKAGE = "state"
