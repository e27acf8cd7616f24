"""The narrow seam between the poll cycle and a Bot API client (ARCHITECTURE section 1).

`channels/` never touches the network: the CLI hands the worker an object with these methods
(the real client in `adapters/telegram/`, or anything that behaves the same).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol

__all__ = ["BotApi", "CallOutcome", "ProviderResult", "describe"]


class CallOutcome(StrEnum):
    """What a Bot API call provably did."""

    OK = "ok"
    NOT_SENT = "not_sent"
    AMBIGUOUS = "ambiguous"
    REJECTED = "rejected"


class ProviderResult(Protocol):
    """One classified Bot API call: ok, not_sent, ambiguous or rejected."""

    @property
    def outcome(self) -> str: ...
    @property
    def result(self) -> Any: ...
    @property
    def error_code(self) -> int | None: ...
    @property
    def description(self) -> str | None: ...
    @property
    def retry_after(self) -> int | float | None: ...
    @property
    def migrate_to_chat_id(self) -> int | None: ...
    @property
    def message_id(self) -> int | None: ...
    @property
    def is_conflict(self) -> bool: ...
    @property
    def is_rate_limited(self) -> bool: ...
    @property
    def is_message_not_modified(self) -> bool: ...
    @property
    def is_message_to_edit_not_found(self) -> bool: ...
    @property
    def updates(self) -> list[Any]: ...
    @property
    def malformed(self) -> bool: ...


class BotApi(Protocol):
    """The Bot API methods the poll cycle uses (Bot API names)."""

    async def get_updates(
        self,
        offset: int | None,
        timeout: int = 0,
        limit: int = 100,
        allowed_updates: Sequence[str] | None = ...,
        *,
        deadline: float | None = None,
    ) -> ProviderResult: ...

    async def send_message(
        self,
        chat_id: int | str,
        text: str,
        reply_markup: Mapping[str, Any] | None = None,
        message_thread_id: int | None = None,
        *,
        entities: Sequence[Mapping[str, Any]] | None = None,
        disable_notification: bool = False,
        reply_to: int | None = None,
        deadline: float | None = None,
    ) -> ProviderResult: ...

    async def send_document(
        self, chat_id: int | str, file_name: str, data: bytes, *, caption: str | None = None,
        disable_notification: bool = False, deadline: float | None = None,
    ) -> ProviderResult:
        """`sendDocument` with `data` uploaded (multipart) as `file_name`."""
        ...

    async def edit_message_reply_markup(
        self, chat_id: int | str, message_id: int, *,
        reply_markup: Mapping[str, Any] | None = None, deadline: float | None = None,
    ) -> ProviderResult: ...

    async def set_message_reaction(
        self, chat_id: int | str, message_id: int, emoji: str, *,
        deadline: float | None = None,
    ) -> ProviderResult: ...

    async def edit_message_text(
        self, chat_id: int | str, message_id: int, text: str, *,
        entities: Sequence[Mapping[str, Any]] | None = None, deadline: float | None = None,
    ) -> ProviderResult: ...

    async def answer_callback_query(
        self, callback_query_id: str, text: str | None = None, *, deadline: float | None = None
    ) -> ProviderResult: ...


def describe(result: ProviderResult) -> dict[str, Any]:
    """A result as a small JSON document for effect records (no token). A migrated group's new
    chat id is kept, so the report can name it (it is never used to send)."""
    described = {
        "outcome": result.outcome,
        "errorCode": result.error_code,
        "description": result.description,
        "retryAfter": result.retry_after,
    }
    if result.migrate_to_chat_id is not None:
        described["migrateToChatId"] = result.migrate_to_chat_id
    return described
