"""The Pi channel: Pi sessions and the local operator view as channels, their deliveries,
answers and settlement. The bridge process that talks to Pi lives in `adapters.pi`."""

__all__ = ["answers", "deliveries", "gating", "notes", "sessions", "settlement", "turns"]
