"""piw-channels: the edges: command line, Bot API client, Pi.

The marker lets start-up tell this package from another one of the same name.
"""

PIW_CHANNELS_PACKAGE = "adapters"
