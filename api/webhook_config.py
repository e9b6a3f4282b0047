"""``config.webhook`` at claim: validated, and its URL checked against
where webhooks may go before the sandbox exists. Update cannot change it (the reference's rule):
only a claim reads it."""
from __future__ import annotations

import asyncio
import socket

from session_supervisor.domain.model.webhooks import WebhookConfigError, normalize_webhook
from session_supervisor.infra.webhook_targets import RefusedTarget, check_url

from .errors import ApiError


async def claim_webhook(request, config) -> dict | None:
    raw = config.get("webhook") if isinstance(config, dict) else None
    try:
        webhook = normalize_webhook(raw)
    except WebhookConfigError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    if webhook is None:
        return None
    settings = request.app.ctx.container.settings
    if settings.clustered:
        raise ApiError(400, "bad_request", "webhooks are not available with more than one node")
    try:
        await asyncio.to_thread(check_url, webhook["url"], settings.allow_local_webhooks)
    except RefusedTarget as exc:
        if "cannot resolve" not in str(exc):  # a name that does not resolve yet is tried at each delivery
            raise ApiError(400, "bad_request", f"webhook.url: {exc}") from None
    except (OSError, socket.error, UnicodeError) as exc:
        raise ApiError(400, "bad_request", f"webhook.url: {exc}") from None
    return webhook
