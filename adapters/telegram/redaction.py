"""Keeping the bot token out of logs, reprs and results.

The token travels only inside request URLs. ``redact`` removes it, in every spelling a
provider text can carry (raw, URL-quoted, the secret part alone), from a text;
``install_log_redaction`` removes it from the records of httpx, httpcore and
python-telegram-bot, which log request URLs; ``Secret`` holds it so that no
``repr`` shows it.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Final
from urllib.parse import quote

__all__ = ["REDACTED", "Secret", "install_log_redaction", "redact", "redact_bytes"]


REDACTED: Final = "<redacted>"
# Loggers that format request URLs (httpx's INFO "HTTP Request: POST <url>",
# PTB's "Set Bot API URL") or may in a future version.
_URL_LOGGERS: Final = (
    "httpx",
    "httpcore.connection",
    "httpcore.connection_pool",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "telegram.Bot",
    "telegram.request.BaseRequest",
    "telegram.request.HTTPXRequest",
)


# A secret part shorter than this is not searched for on its own: it would scrub ordinary words
# (a real one is 35 characters).
_MIN_SECRET: Final = 8


@functools.lru_cache(maxsize=8)  # a response's every string is scrubbed: a dozen calls a call
def _secret_forms(token: str) -> tuple[str, ...]:
    """Every spelling of the token to scrub, longest first: raw, URL-quoted (either case of
    the hex), and the secret part after the colon on its own. JSON escapes are undone before
    scrubbing (the text is scrubbed after decoding), and the secret part's characters are
    URL-safe, so these cover every encoding a provider text can carry."""
    if not token:
        return ()
    forms = {token, quote(token, safe=""), token.replace(":", "%3a")}
    secret = token.partition(":")[2]
    if len(secret) >= _MIN_SECRET:
        forms.add(secret)
    return tuple(sorted(forms, key=len, reverse=True))


def redact(text: str, token: str) -> str:
    """Replace every spelling of the token (see ``secret_forms``) in text with ``<redacted>``."""
    for form in _secret_forms(token):
        text = text.replace(form, REDACTED)
    return text


def redact_bytes(data: bytes, token: str) -> bytes:
    """``redact`` on raw bytes (before a body is parsed)."""
    for form in _secret_forms(token):
        data = data.replace(form.encode("ascii", "replace"), REDACTED.encode("ascii"))
    return data


class _TokenRedactingFilter(logging.Filter):
    """Rewrites log records so no registered token survives formatting."""

    def __init__(self) -> None:
        super().__init__()
        self._tokens: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def add(self, token: str) -> None:
        with self._lock:
            self._tokens |= {token}

    def _clean(self, text: str) -> str:
        for token in self._tokens:
            text = redact(text, token)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record; keep only its template
            message = str(record.msg)
        record.msg, record.args = self._clean(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._clean(record.exc_text)
        if record.stack_info:
            record.stack_info = self._clean(record.stack_info)
        return True


_REDACTOR: Final = _TokenRedactingFilter()


def install_log_redaction(token: str) -> None:
    """Redact ``token`` from every record of the loggers that print request URLs.

    Filters on a logger see only records created by that very logger, so each
    URL-logging logger gets the (shared, idempotent) filter.
    """
    _REDACTOR.add(token)
    for name in _URL_LOGGERS:
        logger = logging.getLogger(name)
        if _REDACTOR not in logger.filters:
            logger.addFilter(_REDACTOR)


class Secret:
    """Holds the token so that ``repr``/``vars`` of the client never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return REDACTED
