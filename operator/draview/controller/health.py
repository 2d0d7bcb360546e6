"""One port for /healthz, /readyz and /metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest


async def serve(host: str, port: int, not_ready: Callable[[], str | None]) -> web.AppRunner:
    """`not_ready()` says why the operator is not ready, or None when it is."""

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        why = not_ready()
        if why is None:
            return web.Response(text="ok")
        return web.Response(status=503, text=why)

    async def metrics(_: web.Request) -> web.Response:
        # Rendering thousands of per-pool series takes long enough to stall the event
        # loop (watches, writes) on every scrape; a thread keeps the loop free.
        body = await asyncio.to_thread(generate_latest)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
