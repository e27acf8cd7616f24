"""The Telegram channel, network-free: identity and allowlists, buttons and callback tokens,
the split into parts, Bot API limits, updates to inbox events, inbox processing, delivery
reservation, outbound effects, the poll cycle and what fails alone in it. The network is
behind `transport`, the Bot API seam (the CLI hands the poll cycle a client)."""

__all__ = [
    "alerts",
    "buttons",
    "commands",
    "config_failures",
    "ended",
    "failures",
    "identity",
    "limits",
    "poll",
    "reservations",
    "transport",
]
