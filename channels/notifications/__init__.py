"""Notifications: what a run says about its progress and result, and their deliveries."""

__all__ = ["producing", "records", "views"]
