"""piw-channels: the Pi-independent state layer.

The marker lets start-up tell this package from another one of the same name.
"""

PIW_CHANNELS_PACKAGE = "state"
