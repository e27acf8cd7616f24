"""The bridge's `ask` line (from the `ask_human` tool or `/ask`): a decision bound to the session.

The extension passes what the model (or the person) gave; everything is validated here and by
the request contract, and every problem is an `InvalidRequest` the bridge answers with
`error {code, message, event_id}`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from channels.config.model import PI_CHANNEL, ChannelsConfig, audience_routes
from channels.decisions import context, workflows
from channels.decisions.choices import text_input
from channels.decisions.errors import InvalidRequest
from channels.decisions.presentation import SCHEMA
from channels.decisions.workflows import AskSpec

__all__ = ["ask_spec", "delivered_to"]


_DEFAULT_AUDIENCE = "operator"
_MAX_TIMEOUT_MINUTES = 7 * 24 * 60


def _string(message: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = message.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"ask.{name} must be a non-empty string")
    return value


def _choice(value: Any, at: int) -> tuple[str, dict[str, Any]]:
    if not isinstance(value, dict):
        raise InvalidRequest(f"ask.choices[{at}] must be an object with id and label")
    choice_id = _string(value, "id")
    label = _string(value, "label")
    assert choice_id is not None and label is not None
    entry: dict[str, Any] = {"label": label}
    prompt = value.get("text_prompt")
    if prompt is not None:
        if not isinstance(prompt, str) or not prompt.strip():
            raise InvalidRequest(f"ask.choices[{at}].text_prompt must be a non-empty string")
        minimum = value.get("min_length", 1)
        maximum = value.get("max_length", 4000)
        entry["input"] = text_input("text", prompt, minimum, maximum)
    return choice_id, entry


def ask_spec(message: dict[str, Any], session_id: str) -> AskSpec:
    """The decision an `ask` line describes, bound to this Pi session."""
    title = _string(message, "title")
    assert title is not None
    raw_choices = message.get("choices")
    if not isinstance(raw_choices, list) or not raw_choices:
        raise InvalidRequest("ask.choices must be a non-empty list")
    choices = dict(_choice(value, at) for at, value in enumerate(raw_choices))
    if len(choices) != len(raw_choices):
        raise InvalidRequest("ask.choices ids must be unique")
    summary = _string(message, "summary", required=False)
    blocks = message.get("blocks", [])
    if not isinstance(blocks, list):
        raise InvalidRequest("ask.blocks must be a list of presentation blocks")
    presentation = {"schema": SCHEMA, "summary": summary or title, "blocks": blocks}
    timeout = message.get("timeout_minutes")
    timeout_ms = None
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) \
                or not 0 < timeout <= _MAX_TIMEOUT_MINUTES:
            raise InvalidRequest(f"ask.timeout_minutes must be a number of minutes above 0"
                                 f" and at most {_MAX_TIMEOUT_MINUTES}")
        timeout_ms = int(timeout * 60_000)
    default = _string(message, "default_choice", required=False)
    if default is not None and timeout_ms is None:
        raise InvalidRequest("ask.default_choice needs ask.timeout_minutes")
    if default is not None and default not in choices:
        raise InvalidRequest(f"ask.default_choice {default!r} is not one of the choices")
    audience = _string(message, "audience", required=False) or _DEFAULT_AUDIENCE
    session_name = _string(message, "session_name", required=False) or session_id[:8]
    presentation = context.with_context(
        presentation, context.automatic(Path.cwd(), session_name))
    return AskSpec(title=title, presentation=workflows.presentation_for(title, None, presentation),
                   choices=choices, audience=audience, timeout_ms=timeout_ms,
                   default_choice=default, origin_session_id=session_id)


def delivered_to(config: ChannelsConfig | None, audience: str) -> list[str]:
    """Where the decision goes: this session (when the audience routes to pi) and the
    configured external channels, in the audience's order."""
    return ["this Pi session" if route == PI_CHANNEL else route
            for route in audience_routes(config, audience)]
