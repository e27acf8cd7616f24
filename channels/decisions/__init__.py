"""Human decisions: the request contract, presentation, the single resolution function, read
projections, runs, and the ask/expire/cancel workflows.

Functions that take an apsw `conn` run inside the caller's transaction (`records`, `resolution`,
`views`, `runs`); `workflows` takes a `Database` and opens its own short transactions."""

__all__ = [
    "askers", "choices", "context", "dates", "deadline", "digests", "errors", "fields", "history",
    "presentation", "records", "request", "resolution", "runs", "turn_intents", "views",
    "workflows",
]
