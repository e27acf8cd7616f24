"""The Pi channel: Pi sessions and the local operator view as channels, their deliveries,
answers and settled views (settle_view), and the owner of a session's channel (owner), the
writes its bridge makes through the channel's lease. The bridge process that talks to Pi lives
in `adapters.pi`."""

__all__ = ["answers", "gate_decisions", "gating", "notes", "owner", "sessions"]
