"""The live event stream of a run (Server-Sent Events, resuming from ``Last-Event-ID``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from agentgrad.service.access import Reader, ServiceDep
from agentgrad.service.models import JobId, Offset
from agentgrad.service.routes.common import ERRORS
from agentgrad.service.streaming import stream
from agentgrad.store.kinds import EventKind

router = APIRouter(prefix="/api/runs/{job_id}", tags=["events"], responses=ERRORS)
_EVENT = {"type": "object", "required": ["data"],
          "properties": {"id": {"type": "string", "description": "The event's sequence number."},
                         "event": {"type": "string", "description": "The event's kind, or `end`."},
                         "data": {"type": "string", "description": "JSON: seq, kind, at, payload."}}}
_SSE: dict[int | str, dict[str, Any]] = {200: {"content": {"text/event-stream": {"schema": _EVENT}},
              "description": "Events as `id: SEQ / event: KIND / data: JSON`; an `end` event closes the stream."}}


@router.get("/events", response_class=StreamingResponse, responses=_SSE, summary="The run's events, live")
def events(service: ServiceDep, who: Reader, job_id: JobId, after: Offset = 0,
           kind: Annotated[list[EventKind] | None, Query(max_length=32, description="Only these kinds.")] = None,
           max_seconds: Annotated[float, Query(gt=0, le=86_400, description="Close the stream after this long.")]
           = 3600.0,
           last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", pattern=r"^[0-9]{1,18}$",
                                                       description="Resume after this event.")] = None
           ) -> StreamingResponse:
    target = service.run_dir(job_id)
    start = int(last_event_id) if last_event_id is not None else after
    settings = service.settings

    def done() -> bool:
        job = service.jobs.get(job_id)
        return job is None or not job.state.active

    body = stream(target, after=start, kinds=[k.value for k in kind] if kind else None, done=done,
                  poll=settings.stream_poll, heartbeat=settings.heartbeat, max_seconds=max_seconds)
    return StreamingResponse(body, media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
