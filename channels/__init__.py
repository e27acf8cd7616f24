"""The domain, network-free: human decisions and the channels that carry them.

Subpackages hold one capability each (`decisions`, `telegram`, `pi`, `config`, `gate`,
`notifications`, and `reports`: the status report, its health check and the approval audit);
the modules at this level are what every channel shares: the channel and cursor records
(`store`), the inbox, messages and their parts, text measurement and errors.
Imports point down only: `channels` uses `state`, never `adapters`."""

__all__ = [
    "PIW_CHANNELS_PACKAGE", "config", "decisions", "errors", "gate", "notifications",
    "pi", "reports", "telegram",
]


# The marker lets start-up tell this package from another one of the same name.
PIW_CHANNELS_PACKAGE = "channels"
