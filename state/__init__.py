"""The shared records of state.sqlite: database, schema identity, canonical JSON, blobs,
resources and events, leases, effects, maintenance. Pi-independent; knows no domain table and
imports nothing from `channels` or `adapters`."""

# The marker lets start-up tell this package from another one of the same name.
PIW_CHANNELS_PACKAGE = "state"
