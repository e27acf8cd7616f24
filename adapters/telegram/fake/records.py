"""What the fake saw: each request as it arrived, each pushed update, each overlapping poll."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Entry", "Overlap", "PushedUpdate", "RecordedRequest"]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as it arrived on the wire (the token is never kept)."""

    seq: int
    method: str
    http_method: str
    content_type: str
    body: bytes
    fields: dict[str, str]  # exact wire values (form/query strings)
    params: dict[str, Any]  # fields with the nested JSON ones decoded
    token_ok: bool
    fault: str | None
    started_at: float
    ended_at: float | None  # None while in flight, or if it never finished
    status: int | None  # HTTP status sent; None when no response was sent
    # What an ``ok`` answer carried (a sent Message, ``true``...); getUpdates' is not kept.
    result: Any = None

    def to_json(self) -> dict[str, object]:
        """Plain JSON form, for the control endpoint."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["body"] = base64.b64encode(self.body).decode("ascii")
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedRequest:
        """Inverse of ``to_json``."""
        values = dict(data)
        values["body"] = base64.b64decode(values["body"])
        return cls(**values)


@dataclass(frozen=True, slots=True)
class PushedUpdate:
    """An update a test (or ``demo --press``) queued: what the person did, and when.

    ``after_seq`` is the seq of the last request recorded before it, which orders it among
    the requests.
    """

    after_seq: int
    at: float
    update: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Overlap:
    """A getUpdates that arrived while an earlier one was still being answered."""

    earlier_seq: int
    later_seq: int
    at: float


@dataclass(slots=True)
class Entry:
    """Mutable bookkeeping behind a RecordedRequest."""

    seq: int
    method: str
    http_method: str
    content_type: str
    body: bytes
    fields: dict[str, str]
    params: dict[str, Any]
    token_ok: bool
    fault: str | None
    started_at: float
    ended_at: float | None = None
    status: int | None = None
    result: Any = None

    def snapshot(self) -> RecordedRequest:
        """A frozen copy, safe to hand out while the request is still in flight."""
        return RecordedRequest(
            self.seq, self.method, self.http_method, self.content_type, self.body,
            dict(self.fields), dict(self.params), self.token_ok, self.fault,
            self.started_at, self.ended_at, self.status, self.result,
        )  # fmt: skip
