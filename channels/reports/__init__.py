"""What the operator reads: `piw-channels status` (status: the facts, health: what needs
attention) and the audit of every approval (audit)."""

__all__ = ["audit", "health", "status"]
