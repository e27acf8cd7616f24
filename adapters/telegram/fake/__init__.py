"""A loopback fake of the Telegram Bot API, for tests and for the ``demo`` command.

It speaks the real wire format over real HTTP on 127.0.0.1:

* ``POST|GET /bot<token>/<method>`` with form-encoded (what python-telegram-bot
  sends; nested objects are JSON strings), JSON or query-string parameters.
* ``getUpdates`` serves a queue the test pushes into (``push_update``,
  ``push_fixture``), honouring ``offset`` (confirmation), ``limit``, long-poll
  ``timeout`` and ``allowed_updates``. A second ``getUpdates`` while one is in
  flight is recorded as an overlap and terminates the earlier one with 409, as
  Telegram does.
* Every request is recorded (``requests("sendMessage")``, with the result an
  ``ok`` answer carried), so is every pushed update (``pushed_updates``), and a
  request can be awaited
  (``wait_received``). Faults are queued per method (``inject``): canned error
  responses (429, 409, 400, 403, migrate...), ``ok`` with a wrong result, a
  non-JSON body, dropping the connection after the request, a TCP reset, a hang
  until ``release()``, a delay. ``refuse_connections()`` closes the listening
  socket so new connections are refused (the only honest "not sent" a live
  server can produce); ``unused_port_url()`` is a URL nobody listens on.

Out of process, ``python -m adapters.telegram.fake --port 0 --token-file F
--fixtures DIR`` prints its base URL as the first stdout line and accepts the
same controls as JSON under ``/_control/`` (see ``RemoteFakeBotApi`` and
``FakeBotApiProcess``).

The modules: ``server`` (HTTP server and request routing), ``methods`` (the
Bot API methods), ``bot_state`` (what the bot remembers), ``faults``,
``records`` (recorded requests), ``fixtures``, ``wire`` (encoding and
parameters), ``constants`` (limits and exact error texts), ``control`` (the
``/_control/`` endpoint and its client), ``runner`` (the child process) and
``transcript`` (the chat as the person sees it, rendered from what the fake recorded).
"""

from adapters.telegram.fake.control import RemoteFakeBotApi
from adapters.telegram.fake.faults import ANY_METHOD, BotError, Fault, FaultKind
from adapters.telegram.fake.fixtures import (
    demo_fixture_names,
    fixture_updates,
    load_demo_fixture,
    load_fixture,
)
from adapters.telegram.fake.records import Overlap, PushedUpdate, RecordedRequest
from adapters.telegram.fake.runner import FakeBotApiProcess
from adapters.telegram.fake.server import FakeBotApi, unused_port_url

__all__ = [
    "ANY_METHOD", "BotError", "FakeBotApi", "FakeBotApiProcess", "Fault", "FaultKind",
    "Overlap", "PushedUpdate", "RecordedRequest", "RemoteFakeBotApi", "demo_fixture_names",
    "fixture_updates", "load_demo_fixture", "load_fixture", "transcript", "unused_port_url",
]
