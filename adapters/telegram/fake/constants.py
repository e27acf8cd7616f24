"""The Bot API's limits, ids, update types and exact error texts, as the fake serves them."""

from __future__ import annotations

from typing import Final

from channels.telegram.limits import TELEGRAM_TEXT_LIMIT

__all__ = [
    "ALL_UPDATE_TYPES",
    "CALLBACK_ID_BASE",
    "DEFAULT_REACTIONS",
    "DESC_BAD_BODY",
    "DESC_BAD_ENTITIES",
    "DESC_BAD_MARKUP",
    "DESC_BLOCKED",
    "DESC_CAPTION_TOO_LONG",
    "DESC_CHAT_ID_EMPTY",
    "DESC_CHAT_NOT_FOUND",
    "DESC_CONFLICT_POLL",
    "DESC_CONFLICT_WEBHOOK",
    "DESC_EDIT_NOT_FOUND",
    "DESC_FILE_EMPTY",
    "DESC_METHOD_NOT_FOUND",
    "DESC_MIGRATED",
    "DESC_NOT_FOUND",
    "DESC_NOT_MODIFIED",
    "DESC_NO_FILE",
    "DESC_QUERY_TOO_OLD",
    "DESC_REACTIONS_TOO_MANY",
    "DESC_REACTION_INVALID",
    "DESC_REACTION_NOT_FOUND",
    "DESC_TEXT_EMPTY",
    "DESC_TEXT_TOO_LONG",
    "DESC_TOO_LARGE",
    "DESC_TOO_MANY_REQUESTS",
    "DESC_UNAUTHORIZED",
    "FIRST_UPDATE_ID",
    "LONG_POLL_MAX_TIMEOUT",
    "MAX_CAPTION_LENGTH",
    "MAX_TEXT_LENGTH",
    "MAX_UPLOAD_BYTES",
    "TELEGRAM_DEFAULT_UPDATES",
    "UNKNOWN_FIELD",
]


LONG_POLL_MAX_TIMEOUT: Final = 50.0
MAX_TEXT_LENGTH: Final = TELEGRAM_TEXT_LIMIT
FIRST_UPDATE_ID: Final = 873_400_001
CALLBACK_ID_BASE: Final = 4_410_371_836_592_000_000  # callback query ids are large decimals
# getUpdates' default when allowed_updates is empty or never set [facts A1].
TELEGRAM_DEFAULT_UPDATES: Final = frozenset(
    {
        "message", "edited_message", "channel_post", "edited_channel_post",
        "business_connection", "business_message", "edited_business_message",
        "deleted_business_messages", "inline_query", "chosen_inline_result",
        "callback_query", "shipping_query", "pre_checkout_query", "purchased_paid_media",
        "poll", "poll_answer", "my_chat_member", "chat_join_request", "chat_boost",
        "removed_chat_boost",
    }
)  # fmt: skip
ALL_UPDATE_TYPES: Final = TELEGRAM_DEFAULT_UPDATES | {
    "chat_member",
    "message_reaction",
    "message_reaction_count",
}
# A field no Bot API version defines: proves clients keep unknown fields.
UNKNOWN_FIELD: Final = "x_future_field"

# Exact descriptions from the Bot API server [facts A8].
DESC_UNAUTHORIZED: Final = "Unauthorized"
DESC_NOT_FOUND: Final = "Not Found"
DESC_METHOD_NOT_FOUND: Final = "Not Found: method not found"
DESC_TOO_MANY_REQUESTS: Final = "Too Many Requests: retry after {}"
DESC_CONFLICT_POLL: Final = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)
DESC_CONFLICT_WEBHOOK: Final = (
    "Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first"
)
DESC_NOT_MODIFIED: Final = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)
DESC_EDIT_NOT_FOUND: Final = "Bad Request: message to edit not found"
DESC_CHAT_NOT_FOUND: Final = "Bad Request: chat not found"
DESC_QUERY_TOO_OLD: Final = (
    "Bad Request: query is too old and response timeout expired or query ID is invalid"
)
DESC_MIGRATED: Final = "Bad Request: group chat was upgraded to a supergroup chat"
DESC_BLOCKED: Final = "Forbidden: bot was blocked by the user"
DESC_TEXT_EMPTY: Final = "Bad Request: message text is empty"
DESC_TEXT_TOO_LONG: Final = "Bad Request: message is too long"
DESC_CHAT_ID_EMPTY: Final = "Bad Request: chat_id is empty"
DESC_BAD_ENTITIES: Final = "Bad Request: can't parse entities: entity beyond the end of the text"
DESC_BAD_MARKUP: Final = "Bad Request: can't parse reply keyboard markup JSON object"
DESC_BAD_BODY: Final = "Bad Request: can't parse request body"
DESC_NO_FILE: Final = "Bad Request: there is no document in the request"
DESC_FILE_EMPTY: Final = "Bad Request: file must be non-empty"
DESC_CAPTION_TOO_LONG: Final = "Bad Request: message caption is too long"
DESC_TOO_LARGE: Final = "Request Entity Too Large"
DESC_REACTION_INVALID: Final = "Bad Request: REACTION_INVALID"
DESC_REACTIONS_TOO_MANY: Final = "Bad Request: REACTIONS_TOO_MANY"
DESC_REACTION_NOT_FOUND: Final = "Bad Request: message to react not found"
# Reactions a chat allows unless its admins narrow them (a few of the standard set).
DEFAULT_REACTIONS: Final = frozenset({"👍", "👎", "❤", "🔥", "👏", "🙏", "👌", "✍", "🤝", "👀"})
MAX_CAPTION_LENGTH: Final = 1024
MAX_UPLOAD_BYTES: Final = 50 * 1024 * 1024  # bots upload at most 50 MB
