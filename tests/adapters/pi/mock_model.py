"""A scripted OpenAI-compatible model on loopback, so real Pi runs real agent turns offline.

Each request to `/v1/chat/completions` takes the next step of the script: a text reply or a
tool call, streamed as Server-Sent Events the way the OpenAI API streams them. A step may
first wait on a gate the test opens, so the test can act while the agent is busy. Every
request body is kept, so a test can read what the model was told (for example the answer a
follow-up turn carried).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL_ID = "mock-1"
PROVIDER = "mock"


@dataclass
class Step:
    """One model reply: text, or one tool call with JSON arguments."""

    text: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    gate: threading.Event | None = None  # wait for it before replying
    more: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # sibling tool calls
    started: threading.Event = field(default_factory=threading.Event)  # set on the request


def calls(*tools: tuple[str, dict[str, Any]], gate: threading.Event | None = None) -> Step:
    """One assistant message with several tool calls (name, arguments)."""
    (first, arguments), *rest = tools
    return Step(tool=first, arguments=arguments, gate=gate, more=list(rest))


def say(text: str, *, gate: threading.Event | None = None) -> Step:
    return Step(text=text, gate=gate)


def call(tool: str, gate: threading.Event | None = None, **arguments: Any) -> Step:
    return Step(tool=tool, arguments=arguments, gate=gate)


class MockModel:
    """The server; `steps` is consumed one per request (a plain reply once it runs out)."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def add(self, *steps: Step) -> None:
        with self.lock:
            self.steps.extend(steps)

    def close(self) -> None:
        for step in self.steps:
            if step.gate is not None:
                step.gate.set()
        self.server.shutdown()
        self.server.server_close()

    def write_agent_dir(self, agent_dir: Path) -> None:
        """models.json and settings.json that make this server Pi's default model."""
        agent_dir.mkdir(parents=True, exist_ok=True)
        models = {"providers": {PROVIDER: {
            "baseUrl": self.base_url, "api": "openai-completions", "apiKey": "mock-key",
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": MODEL_ID, "reasoning": False, "input": ["text"],
                        "contextWindow": 32000, "maxTokens": 4000}],
        }}}
        (agent_dir / "models.json").write_text(json.dumps(models))
        settings = {"defaultProvider": PROVIDER, "defaultModel": MODEL_ID,
                    "quietStartup": True, "enableInstallTelemetry": False}
        (agent_dir / "settings.json").write_text(json.dumps(settings))

    def _next(self, body: dict[str, Any]) -> Step:
        with self.lock:
            self.requests.append(body)
            return self.steps.pop(0) if self.steps else Step(text="ok")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                step = model._next(body)
                step.started.set()
                if step.gate is not None:
                    step.gate.wait(60)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for chunk in _chunks(step):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0,
            "model": MODEL_ID, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _chunks(step: Step) -> list[dict[str, Any]]:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if step.tool is not None:
        tools = [(step.tool, step.arguments or {}), *step.more]
        made = [{"index": at, "id": f"call_{name}" if at == 0 else f"call_{name}_{at}",
                 "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for at, (name, args) in enumerate(tools)]
        chunks = [_chunk({"role": "assistant", "content": None, "tool_calls": made}),
                  _chunk({}, "tool_calls")]
    else:
        chunks = [_chunk({"role": "assistant", "content": step.text or ""}), _chunk({}, "stop")]
    chunks.append({**_chunk({}), "choices": [], "usage": usage})
    return chunks


def texts_sent(body: dict[str, Any]) -> list[str]:
    """Every text the request carried, message by message (for asserting what the model saw)."""
    found = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            found.append(content)
        elif isinstance(content, list):
            found.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return found
