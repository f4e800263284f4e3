"""The web playground: `/` serves a static chat page that streams from our own `/v1/responses`."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

__all__ = ["STATIC_DIR", "playground_routes"]

STATIC_DIR = Path(__file__).parent / "static"


async def index(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})


def playground_routes() -> list[BaseRoute]:
    """`/` (the page) and `/static/*` (its CSS and script); public: only the `/v1` calls carry the API key."""
    return [
        Route("/", index, methods=["GET", "HEAD"]),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]
