"""The edges: the command line (the one composition root), the Telegram Bot API client and
its loopback fake, the Pi bridge, operator view and extension, and other agents at the gate."""

__all__ = ["PIW_CHANNELS_PACKAGE", "cli", "pi"]


# The marker lets start-up tell this package from another one of the same name.
PIW_CHANNELS_PACKAGE = "adapters"
