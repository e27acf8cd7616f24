"""The Telegram channel, network-free: identity and allowlists, buttons and callback tokens,
the split into parts, Bot API limits, updates to inbox events, inbox processing, delivery
reservation, outbound effects and the poll cycle. The network is behind `transport`, the Bot API
seam (the CLI hands the poll cycle a client)."""

__all__ = [
    "alerts",
    "buttons",
    "commands",
    "config_failures",
    "ended",
    "identity",
    "limits",
    "poll",
    "reservations",
    "transport",
]
