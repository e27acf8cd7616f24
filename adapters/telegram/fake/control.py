"""Both ends of ``/_control/``: the JSON test controls of a fake running in another process.

``serve_control`` answers ``POST /_control/<action>`` inside the fake;
``RemoteFakeBotApi`` calls it from the test.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Protocol
from urllib.parse import parse_qsl, urlsplit

from adapters.telegram.fake.faults import Fault
from adapters.telegram.fake.records import Overlap, PushedUpdate, RecordedRequest
from adapters.telegram.fake.wire import Reply, dumps

__all__ = ["CONTROL_PREFIX", "RemoteFakeBotApi", "serve_control"]


CONTROL_PREFIX: Final = "/_control/"


class _ControlExchange(Protocol):
    """What the control endpoint needs from a connection handler."""

    path: str

    def read_body(self) -> bytes: ...
    def send(self, reply: Reply) -> int | None: ...


class _ControlledFake(Protocol):
    """What the control interface drives: the fake's test controls (`FakeBotApi` has them;
    naming them here keeps the server and this module out of an import circle)."""

    def close(self) -> None: ...
    def refuse_for(self, seconds: float) -> None: ...
    def push_update(self, update: Mapping[str, Any]) -> int: ...
    def push_raw_update(self, text: str, update_id: int | None = None) -> int: ...
    def push_fixture(self, name: str | Path, values: Mapping[str, object] | None = None,
                     *, renumber: bool = True) -> list[int]: ...
    def inject(self, method: str, fault: Fault) -> None: ...
    def release(self) -> None: ...
    def requests(self, method: str | None = None) -> list[RecordedRequest]: ...
    def overlaps(self) -> list[Overlap]: ...
    def pushed_updates(self) -> list[PushedUpdate]: ...
    def pending_updates(self) -> list[dict[str, Any]]: ...
    def keyboards(self) -> list[dict[str, Any]]: ...
    def wait_received(self, method: str, count: int = 1, timeout: float = 5.0) -> bool: ...


def serve_control(fake: _ControlledFake, handler: _ControlExchange) -> None:
    """Serve ``/_control/<action>``: a JSON interface to the test controls."""
    split = urlsplit(handler.path)
    action = split.path[len(CONTROL_PREFIX) :]
    query = dict(parse_qsl(split.query))
    try:
        raw = handler.read_body()
        body = json.loads(raw) if raw else {}
        result = _control_action(fake, action, body, query)
    except (ValueError, KeyError, TypeError) as exc:
        handler.send(Reply(400, dumps({"ok": False, "description": str(exc)})))
        return
    if result is None:
        handler.send(Reply(404, dumps({"ok": False, "description": "unknown control"})))
        return
    handler.send(Reply(200, dumps({"ok": True, **result})))
    if action == "shutdown":
        threading.Thread(target=fake.close, daemon=True).start()


def _control_action(
    fake: _ControlledFake, action: str, body: Any, query: Mapping[str, str]
) -> dict[str, object] | None:
    if action == "push_update":
        return {"update_id": fake.push_update(body)}
    if action == "push_raw_update":
        return {"update_id": fake.push_raw_update(str(body["text"]), body.get("update_id"))}
    if action == "push_fixture":
        return {"update_ids": fake.push_fixture(body["name"], body.get("values"))}
    if action == "inject":
        fake.inject(body["method"], Fault.from_json(body["fault"]))
        return {}
    if action == "release":
        fake.release()
        return {}
    if action == "refuse":
        fake.refuse_for(float(body["seconds"]))
        return {}
    if action == "requests":
        found = fake.requests(query.get("method") or body.get("method"))
        return {"requests": [r.to_json() for r in found]}
    if action == "overlaps":
        return {"overlaps": [dataclasses.asdict(o) for o in fake.overlaps()]}
    if action == "pushed":
        return {"pushed": [dataclasses.asdict(p) for p in fake.pushed_updates()]}
    if action == "wait_received":
        args = (str(body["method"]), int(body.get("count", 1)), float(body.get("timeout", 5)))
        return {"received": fake.wait_received(*args)}
    if action == "keyboards":
        return {"keyboards": fake.keyboards()}
    if action == "status":
        return {"pending_updates": len(fake.pending_updates())}
    if action == "shutdown":
        return {}
    return None


class RemoteFakeBotApi:
    """Drives a fake running in another process through its ``/_control/`` endpoint."""

    def __init__(self, base_url: str, *, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"RemoteFakeBotApi(base_url={self.base_url!r})"

    def _call(self, action: str, body: object = None, timeout: float | None = None) -> Any:
        data = dumps(body if body is not None else {})
        request = urllib.request.Request(
            f"{self.base_url}{CONTROL_PREFIX}{action}", data=data, method="POST",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=timeout or self._timeout) as response:
            return json.loads(response.read())

    def push_update(self, update: Mapping[str, Any]) -> int:
        """See ``FakeBotApi.push_update``."""
        return int(self._call("push_update", dict(update))["update_id"])

    def push_raw_update(self, text: str, update_id: int | None = None) -> int:
        """See ``FakeBotApi.push_raw_update``."""
        return int(self._call("push_raw_update", {"text": text, "update_id": update_id})
                   ["update_id"])

    def push_fixture(self, name: str, values: Mapping[str, object] | None = None) -> list[int]:
        """See ``FakeBotApi.push_fixture`` (name in ``--fixtures`` or a demo template)."""
        reply = self._call("push_fixture", {"name": name, "values": dict(values or {})})
        return [int(i) for i in reply["update_ids"]]

    def inject(self, method: str, fault: Fault) -> None:
        """See ``FakeBotApi.inject``."""
        self._call("inject", {"method": method, "fault": fault.to_json()})

    def release(self) -> None:
        """See ``FakeBotApi.release``."""
        self._call("release")

    def refuse_for(self, seconds: float) -> None:
        """See ``FakeBotApi.refuse_for`` (the only refusal a remote caller can undo)."""
        self._call("refuse", {"seconds": seconds})

    def requests(self, method: str | None = None) -> list[RecordedRequest]:
        """See ``FakeBotApi.requests``."""
        reply = self._call("requests", {"method": method} if method else {})
        return [RecordedRequest.from_json(r) for r in reply["requests"]]

    def overlaps(self) -> list[Overlap]:
        """See ``FakeBotApi.overlaps``."""
        return [Overlap(**o) for o in self._call("overlaps")["overlaps"]]

    def pushed_updates(self) -> list[PushedUpdate]:
        """See ``FakeBotApi.pushed_updates``."""
        return [PushedUpdate(**p) for p in self._call("pushed")["pushed"]]

    def wait_received(self, method: str, count: int = 1, timeout: float = 5.0) -> bool:
        """See ``FakeBotApi.wait_received``."""
        body = {"method": method, "count": count, "timeout": timeout}
        return bool(self._call("wait_received", body, timeout=timeout + 5)["received"])

    def keyboards(self) -> list[dict[str, Any]]:
        """See ``FakeBotApi.keyboards``."""
        return list(self._call("keyboards")["keyboards"])

    def shutdown(self) -> None:
        """Stop the remote server."""
        self._call("shutdown")
