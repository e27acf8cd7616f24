"""Private configuration (`channels.json`, `credentials.json`): the model, strict parsing,
private files and their modes, loading, and the installer behind `setup telegram`."""

__all__ = ["errors", "files", "gate", "install", "loading", "model", "quiet_hours"]
