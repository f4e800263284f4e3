"""WebSocket mode on `/v1/responses`: `response.create` events in, the SSE stream's events out, per connection.

One `Connection` per socket: a reader turns client events into commands on their lane (`stream_id`; the
default lane has none), one worker per lane runs them FIFO (lanes interleave, at most `max_active` responses
at once), and a connection-local cache (`MemoryStore`) keeps every response finished here, so that
`previous_response_id` continues from it even with `store: false`. Close codes: see `docs/api.md`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket

from vllm_responses.api.auth import principal_of
from vllm_responses.api.middleware import deny_websocket
from vllm_responses.api.params import parse_json
from vllm_responses.api.ratelimit import meter_of
from vllm_responses.api.state import app_state
from vllm_responses.api.steering import (
    Steer,
    Steering,
    SteerRefused,
    parse_steer,
    refused_steer,
    required_input,
    steer_failed,
)
from vllm_responses.api.ws_caps import WebSocketCaps
from vllm_responses.errors import DOMAIN_ERRORS, api_error
from vllm_responses.protocol.errors import APIError, Busy, InvalidRequest
from vllm_responses.protocol.items import ResponseObject
from vllm_responses.protocol.requests import parse_create_request
from vllm_responses.protocol.status import ResponseStatus
from vllm_responses.service.lifecycle import Lifecycle
from vllm_responses.service.responses import ResponsesService
from vllm_responses.store.base import DEFAULT_PROJECT
from vllm_responses.store.memory import MemoryStore

__all__ = ["LIMITS", "WebSocketLimits", "error_event", "responses_websocket"]

logger = logging.getLogger(__name__)

# Close codes (RFC 6455) this server sends on an open connection (before it: `middleware.CLOSE_POLICY`);
# see docs/api.md.
CLOSE_GOING_AWAY = 1001  # the connection reached `max_connection_s` (clients may reconnect)
CLOSE_INTERNAL = 1011  # the server failed (a bug): clients may reconnect

STREAM_ID = re.compile(r"[A-Za-z0-9_.-]{1,256}")


@dataclass(frozen=True)
class WebSocketLimits:
    """Per-connection limits (the ones the `openai` SDK's WebSocket README describes, and our bounds)."""

    max_active: int = 16  # responses generating at once; further creates wait in their lane
    max_named_lanes: int = 32  # distinct `stream_id`s per connection (the default lane not counted)
    max_connection_s: float = 3600.0  # then `websocket_connection_limit_reached` and close 1001
    max_queued: int = 256  # creates received and not yet finished, all lanes together
    cache_size: int = 256  # responses kept in the connection-local cache (oldest dropped)


LIMITS = WebSocketLimits()


def error_event(err: APIError, stream_id: str | None = None) -> dict[str, Any]:
    """The WebSocket error envelope (the SDK's `ResponseWsError`): `status` plus the HTTP error body."""
    event: dict[str, Any] = {"type": "error", "status": err.status, **err.body()}
    if stream_id is not None:
        event["stream_id"] = stream_id
    return event


async def responses_websocket(websocket: WebSocket) -> None:
    """The `/v1/responses` WebSocket route."""
    state = app_state(websocket)
    caps: WebSocketCaps = websocket.app.state.ws_caps
    try:
        caller = caps.take(websocket.scope)
    except Busy as err:  # past --max-websockets(-per-key): refused before it is accepted
        await deny_websocket(websocket.scope, websocket.receive, websocket.send, err)
        return
    try:
        await websocket.accept()
        project = principal_of(websocket).project  # its responses are its API key's project's
        await Connection(websocket, state.service, state.lifecycle, LIMITS, project).serve()
    finally:
        caps.give_back(caller)


@dataclass
class _Lane:
    stream_id: str | None
    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None


class Connection:
    """One socket: its lanes, its active-response slots, its cache, and one writer at a time."""

    def __init__(
        self,
        websocket: WebSocket,
        service: ResponsesService,
        lifecycle: Lifecycle,
        limits: WebSocketLimits,
        project: str = DEFAULT_PROJECT,
    ) -> None:
        self.ws = websocket
        self.service = service
        self.lifecycle = lifecycle
        self.limits = limits
        self.cache = MemoryStore(max_rows=limits.cache_size)
        self.project = project  # the project of the connection's API key
        self.origin: dict[str, str | None] = {}  # cached response id -> the lane that made it
        self.lanes: dict[str | None, _Lane] = {}
        self.named: set[str] = set()  # every named lane ever used here (never released)
        self.slots = asyncio.Semaphore(limits.max_active)
        self.queued = 0
        self._send_lock = asyncio.Lock()
        self.steering = Steering()
        self.unsteerable: dict[str, str] = {}  # running response id -> why it cannot be steered
        self._gone = asyncio.Event()  # the client left or a send failed

    async def serve(self) -> None:
        reader = asyncio.create_task(self._read(), name="websocket reader")
        gone = asyncio.create_task(self._gone.wait())
        code: int | None = None
        try:
            done, _ = await asyncio.wait(
                {reader, gone}, timeout=self.limits.max_connection_s, return_when=asyncio.FIRST_COMPLETED
            )
            if reader in done:
                reader.result()  # a bug in the reader: raise it
            elif not done:
                await self.send(
                    error_event(
                        InvalidRequest(
                            f"This connection reached its limit of {self.limits.max_connection_s:g} s; "
                            "open a new one (responses still running here were cancelled).",
                            code="websocket_connection_limit_reached",
                        )
                    )
                )
                code = CLOSE_GOING_AWAY
        except Exception:
            logger.exception("websocket connection failed")
            code = CLOSE_INTERNAL
        finally:
            tasks = [reader, gone, *(lane.worker for lane in self.lanes.values() if lane.worker)]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if code is not None and not self._gone.is_set():
            try:
                await self.ws.close(code)
            except Exception:  # the client left meanwhile
                pass

    async def send(self, event: Mapping[str, Any]) -> None:
        """Write one event as one text message; a failed write marks the connection gone."""
        if self._gone.is_set():
            raise ConnectionError("the client is gone")
        try:
            async with self._send_lock:
                await self.ws.send_text(json.dumps(event, separators=(",", ":")))
        except Exception as exc:
            self._gone.set()
            raise ConnectionError("the client is gone") from exc

    # --- reading --------------------------------------------------------------------------------------

    async def _read(self) -> None:
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                self._gone.set()
                return
            raw = message.get("text")
            if raw is None:
                try:
                    raw = (message.get("bytes") or b"").decode()
                except UnicodeDecodeError:
                    raw = ""
            try:
                steer = self._dispatch(raw)
                if steer is not None:
                    await self._steer(steer)
            except ConnectionError:
                return
            except _Refused as refused:
                try:
                    await self.send(error_event(refused.error, refused.stream_id))
                except ConnectionError:
                    return

    def _dispatch(self, raw: str) -> dict[str, Any] | None:
        """Route one client message to its lane (a `response.steer` is returned, for `_steer`), or raise
        `_Refused` with the error to answer it with."""
        try:
            event = parse_json(raw, param=None)  # nesting and Unicode checked as for an HTTP body
        except InvalidRequest as exc:
            raise _Refused(exc) from None
        if not isinstance(event, dict):
            raise _Refused(InvalidRequest("A client event must be a JSON object.", code="invalid_value"))
        kind = event.get("type")
        if kind == "response.steer":
            return event
        if kind != "response.create":
            raise _Refused(
                InvalidRequest(
                    f"Unsupported client event type {kind!r}; supported: 'response.create', 'response.steer'.",
                    param="type",
                )
            )
        refusal = self.lifecycle.refusal()  # shutting down, or the engine died
        if refusal is not None:
            raise _Refused(refusal)
        stream_id = event.get("stream_id")
        if stream_id is not None and not (isinstance(stream_id, str) and STREAM_ID.fullmatch(stream_id)):
            raise _Refused(
                InvalidRequest(
                    "stream_id must be 1-256 ASCII letters, digits, underscores, hyphens or periods.",
                    param="stream_id",
                    code="invalid_stream_id",
                )
            )
        if stream_id is not None and stream_id not in self.named:
            if len(self.named) >= self.limits.max_named_lanes:
                raise _Refused(
                    InvalidRequest(
                        f"This connection already used {self.limits.max_named_lanes} stream_ids; "
                        "reuse one or open a new connection.",
                        param="stream_id",
                        code="websocket_stream_limit_reached",
                    ),
                    stream_id,
                )
            self.named.add(stream_id)
        if self.queued >= self.limits.max_queued:
            raise _Refused(
                Busy(f"At most {self.limits.max_queued} response.create events may wait on one connection."),
                stream_id,
            )
        lane = self.lanes.get(stream_id)
        if lane is None:
            lane = self.lanes[stream_id] = _Lane(stream_id)
            lane.worker = asyncio.create_task(self._work(lane), name=f"websocket lane {stream_id}")
        self.queued += 1
        lane.queue.put_nowait(event)
        return None

    async def _steer(self, event: dict[str, Any]) -> None:
        """A `response.steer`: queued on its running response (`response.steer.accepted`), or refused
        (`response.steer.failed`)."""
        try:
            target, items = parse_steer(event)
            steer = self.steering.accept(target, items, self.unsteerable.get(target))
        except SteerRefused as refused:
            await self.send(steer_failed(self.steering.seq(), refused, refused_steer(event)))
            return
        lane = self.steering.active.get(target)
        ref = {"id": steer.id, "previous_response_id": target}
        accepted = {"type": "response.steer.accepted", "sequence_number": self.steering.seq(), "steer": ref}
        await self.send({**accepted, "stream_id": lane} if lane is not None else accepted)

    # --- responding -----------------------------------------------------------------------------------

    async def _work(self, lane: _Lane) -> None:
        """A lane's worker: its creates one after another."""
        while True:
            event = await lane.queue.get()
            try:
                await self._respond(lane.stream_id, event)
            except ConnectionError:
                return
            finally:
                self.queued -= 1

    async def _respond(self, stream_id: str | None, event: dict[str, Any]) -> None:
        """One create: its events, or an error event; a failed same-lane continuation evicts its cached
        parent (a fork from another lane keeps it)."""
        try:
            async with self.slots:
                failed, steered = await self._run(stream_id, event)
        except ConnectionError:
            raise
        except Exception as exc:
            if not isinstance(exc, DOMAIN_ERRORS):
                logger.exception("websocket response.create failed")
            await self._evict(event.get("previous_response_id"), stream_id)
            await self.send(error_event(api_error(exc), stream_id))
            return
        if failed:
            await self._evict(event.get("previous_response_id"), stream_id)
        if steered is not None:  # after its slot is free: a successor takes one of its own
            await self._after_steered(stream_id, *steered)

    def _admit_rate(self) -> None:
        """A create counts as a request of the connection's key, as over HTTP: past its per-minute limits the
        429 `rate_limit_exceeded` it would get there (as an error event)."""
        meter = meter_of(self.ws)
        if meter is not None and (refused := meter.admit()) is not None:
            raise refused

    async def _evict(self, parent: object, stream_id: str | None) -> None:
        if isinstance(parent, str) and parent in self.origin and self.origin[parent] == stream_id:
            del self.origin[parent]
            await self.cache.delete(parent)

    async def _run(self, stream_id: str | None, event: dict[str, Any]) -> tuple[bool, _Steered | None]:
        """One response: created, followed to its end (its events echo the lane), kept in the cache.
        Raises the error to answer with when it never started (refused up front, or 429 from the server's
        admission, which every create goes through as over HTTP); returns whether it failed, and what to do
        with the steers it got."""
        body = {k: v for k, v in event.items() if k not in ("type", "stream_id", "generate", "stream")}
        generate = True if event.get("generate") is None else event["generate"]
        if not isinstance(generate, bool):
            raise InvalidRequest("generate must be a boolean.", param="generate")
        if body.get("background"):
            raise InvalidRequest(
                "background is not supported over WebSocket.",
                param="background",
                code="unsupported_parameter",
            )
        committed = self.steering.take_pending(body.get("previous_response_id"))
        if committed:  # queued steering input goes first, in the order it was sent
            given = body.get("input", [])
            given = (
                [{"type": "message", "role": "user", "content": given}] if isinstance(given, str) else given
            )
            body["input"] = [*(item for steer in committed for item in steer.items), *given]
        req = parse_create_request(body)
        self._admit_rate()
        budget = meter_of(self.ws)  # its tokens reserved against the key's per-minute limit
        run = await self.service.create(
            req, local=self.cache, generate=generate, project=self.project, budget=budget
        )
        self.steering.active[run.id] = stream_id
        if req.conversation or req.context_management:
            self.unsteerable[run.id] = (
                "Responses bound to a conversation or with automatic compaction cannot be steered."
            )
        self.origin[run.id] = stream_id
        while len(self.origin) > self.limits.cache_size:  # as bounded as the cache
            self.origin.pop(next(iter(self.origin)))
        try:
            async for batch in run.follow_batches():
                for ev in batch:
                    await self.send({**ev, "stream_id": stream_id} if stream_id is not None else ev)
        finally:
            if not run.done.is_set():
                run.cancel()
            self.unsteerable.pop(run.id, None)
        failed = run.builder.status == ResponseStatus.FAILED
        steers = self.steering.take(run.id)
        return failed, ((body, run.builder.snapshot(), steers) if steers else None)

    async def _after_steered(
        self, stream_id: str | None, body: dict[str, Any], snapshot: ResponseObject, steers: list[Steer]
    ) -> None:
        """A steered response has ended: its successor continues it with the steers' input (completed), or
        they wait for the client's next create (`response.steer.pending`: client output is due), or fail."""
        response_id, status = snapshot["id"], snapshot["status"]
        stubs = required_input(snapshot["output"])
        lane = {"stream_id": stream_id} if stream_id is not None else {}
        if status == ResponseStatus.COMPLETED and stubs:
            self.steering.pending[response_id] = steers
            for steer in steers:
                ref = {"id": steer.id, "previous_response_id": response_id}
                pending = {
                    "type": "response.steer.pending",
                    "sequence_number": self.steering.seq(),
                    "steer": ref,
                }
                await self.send(
                    {**pending, "reason": "waiting_for_required_input", "required_input": stubs, **lane}
                )
            return
        if status == ResponseStatus.COMPLETED:
            inherited = {k: v for k, v in body.items() if k not in ("input", "previous_response_id")}
            items = [item for steer in steers for item in steer.items]
            successor = {
                "type": "response.create",
                **inherited,
                "previous_response_id": response_id,
                "input": items,
            }
            await self._respond(stream_id, successor)
            return
        ended = SteerRefused(
            f"Response {response_id!r} ended {status} before the steer could be applied.",
            "response_not_active",
        )
        for steer in steers:
            echo = {"id": steer.id, "previous_response_id": response_id, "input": list(steer.items)}
            await self.send({**steer_failed(self.steering.seq(), ended, echo), **lane})


# A steered response's create body, its final snapshot and its steers (`Connection._after_steered`).
_Steered = tuple[dict[str, Any], ResponseObject, list[Steer]]


class _Refused(Exception):
    """A client event answered with an error event, never queued on a lane."""

    def __init__(self, error: APIError, stream_id: str | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.stream_id = stream_id
