"""The Pi channel: Pi sessions and the local operator view as channels, their deliveries,
answers and settled views (settle_view). The bridge process that talks to Pi lives in
`adapters.pi`."""

__all__ = ["answers", "deliveries", "gate_decisions", "gating", "notes", "sessions",
           "settle_view", "turns"]
