"""The Pi side: the JSON-lines bridge a Pi session spawns, the terminal operator view, and the
Pi extension (`extension/piw-channels.ts`)."""

__all__ = ["operator", "serving"]
