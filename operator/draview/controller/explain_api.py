"""The explain API's HTTPS port: discovery for explain.draview.io and `get` of a
ClaimExplanation (api/explanations.py), reached through the API server's aggregation
layer (an APIService the chart installs).

Discovery is served to anyone who reaches the port (the API server reads it to list the
group, as it does for every aggregated API); an explanation, or the answer to a
FitReview (fit_answers.py), only to a caller the front proxy names and the API server
authorizes (front_proxy.py). The port starts once the
front-proxy CA is read: until then there is no way to tell the API server from anyone
else, and the APIService shows as unavailable, which says why. The serving certificate and
the CA are taken up again when they change (serving_tls.py)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web
from kubernetes_asyncio import client

from draview.api import explanations as api
from draview.controller import front_proxy
from draview.controller.explain_answers import ClaimAnswers, Reply
from draview.controller.fit_answers import FitAnswers
from draview.controller.logs import Once
from draview.controller.serving_tls import ServingTLS

log = logging.getLogger("draview.explain_api")

# Seconds between attempts to read the front-proxy CA while it cannot be read.
RETRY = 10.0
# Seconds between reads of the front-proxy CA once serving: the API server's CA is
# rotated rarely, and a stale one only refuses the API server until the next read.
PROXY_RELOAD = 60.0


def _json(code: int, body: dict[str, Any]) -> web.Response:
    return web.json_response(body, status=code)


def _fail(code: int, reason: str, message: str) -> web.Response:
    return _json(code, api.status(code, reason, message))


class _Handlers:
    """The routes of the port: discovery for anyone, answers for a caller the front proxy
    names and the API server allows."""

    def __init__(
        self, tls: ServingTLS, answers: ClaimAnswers, fits: FitAnswers, kube: client.ApiClient
    ) -> None:
        self.tls, self.answers, self.fits, self.kube = tls, answers, fits, kube

    async def group_list(self, _: web.Request) -> web.Response:
        return _json(200, api.group_list())

    async def group(self, _: web.Request) -> web.Response:
        return _json(200, api.group())

    async def resources(self, _: web.Request) -> web.Response:
        return _json(200, api.resource_list())

    async def _caller(
        self, request: web.Request, needed: front_proxy.Needed, name: str = ""
    ) -> front_proxy.Caller | web.Response:
        """Who asks, when they may have the answer; else the answer that refuses them."""
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        who = self.tls.proxy.caller(peer, request.headers)
        if who is None:
            return _fail(401, "Unauthorized", "ask through the Kubernetes API server")
        namespace = request.match_info["namespace"]
        try:
            why = await front_proxy.refusal(self.kube, who, needed, namespace, name)
        except Exception as exc:  # the API server could not say: refuse, and say why
            log.warning("authorization failed", extra={"user": who.user, "error": str(exc)})
            return _fail(503, "ServiceUnavailable", f"could not authorize: {exc}")
        if why is not None:
            return _fail(403, "Forbidden", why)
        return who

    async def explanation(self, request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        name = request.match_info["name"]
        who = await self._caller(request, front_proxy.WHY_NEEDED, name)
        if isinstance(who, web.Response):
            return who
        node = request.query.get("node") or None
        reply = await self.answers.answer(namespace, name, node)
        return _answered(reply, f"{namespace}/{name}", who)

    async def fit_review(self, request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        who = await self._caller(request, front_proxy.FIT_NEEDED)
        if isinstance(who, web.Response):
            return who
        try:
            body = await request.json()
        except ValueError as exc:
            return _fail(400, "BadRequest", f"the body is not JSON: {exc}")
        reply = await self.fits.answer(namespace, body)
        return _answered(reply, f"{namespace}/{api.FIT_RESOURCE}", who)


def _answered(reply: Reply, what: str, who: front_proxy.Caller) -> web.Response:
    log.debug("answered", extra={"object": what, "user": who.user, "code": reply.code})
    return _json(reply.code, reply.body)


def app(
    tls: ServingTLS, answers: ClaimAnswers, fits: FitAnswers, kube: client.ApiClient
) -> web.Application:
    h = _Handlers(tls, answers, fits, kube)
    base = f"/apis/{api.API_VERSION}"
    namespaced = base + "/namespaces/{namespace}/"
    application = web.Application()
    application.router.add_get("/apis", h.group_list)
    application.router.add_get(f"/apis/{api.GROUP}", h.group)
    application.router.add_get(base, h.resources)
    application.router.add_get(namespaced + api.RESOURCE + "/{name}", h.explanation)
    application.router.add_post(namespaced + api.FIT_RESOURCE, h.fit_review)
    return application


async def run(
    kube: client.ApiClient,
    answers: ClaimAnswers,
    fits: FitAnswers,
    host: str,
    port: int,
    cert_dir: str,
) -> None:
    """Serve until cancelled; the port opens once the front-proxy CA is read."""
    once = Once(log)
    while True:
        try:
            proxy = await front_proxy.read(kube)
            break
        except Exception as exc:  # RBAC not yet bound, or an API server without the CA
            once.say("ca", f"cannot read the front-proxy CA, the explain API waits: {exc}")
            await asyncio.sleep(RETRY)
    tls = ServingTLS(proxy, cert_dir)
    runner = web.AppRunner(app(tls, answers, fits, kube), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, ssl_context=tls.context).start()
        log.info("explain API serving", extra={"port": port})
        while True:
            await asyncio.sleep(PROXY_RELOAD)
            try:
                tls.use_proxy(await front_proxy.read(kube))
                once.clear("reload")
            except Exception as exc:  # keeps the CA it has
                once.say("reload", f"cannot read the front-proxy CA again: {exc}")
    finally:
        await runner.cleanup()
