"""`POST /v1/telegram/webhook` (R14.2): Telegram's updates in webhook mode. The
`X-Telegram-Bot-Api-Secret-Token` header must equal `WEBHOOK_SECRET` before the body is
even read (403 otherwise, nothing stored); a body that is no update is a 400. An update this
aiogram cannot read (a field of a newer Bot API) is logged and answered 200: Telegram would
send it again and again otherwise, holding back the updates after it.

Must not: answer anything but Telegram's own calls, or run while the channel is off (404).
"""

from __future__ import annotations

import hmac

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from evacore.logs import get_logger

log = get_logger(__name__)
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_UPDATE_BYTES = 1024 * 1024
router = APIRouter(tags=["telegram"])


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


@router.post("/telegram/webhook", include_in_schema=False)
async def webhook(request: Request) -> Response:
    channel = getattr(request.app.state, "telegram", None)
    if channel is None or not channel.webhook:
        return _error(404, "not_found", "the Telegram channel runs without a webhook here")
    expected = channel.settings.webhook_secret.get_secret_value()
    given = request.headers.get(SECRET_HEADER) or ""
    if not hmac.compare_digest(given.encode(), expected.encode()):
        log.warning("telegram.webhook_refused", reason="wrong or missing secret token")
        return _error(403, "forbidden", f"the {SECRET_HEADER} header does not match")
    raw = await request.body()
    if len(raw) > MAX_UPDATE_BYTES:
        return _error(413, "too_large", "an update is at most 1 MiB")
    # the channel runs, so its extra is installed
    from evacore.channels.telegram.polling import read_update

    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return _error(400, "bad_request", f"the body is not JSON: {exc}"[:500])
    update_id, update = read_update(body, channel.api.bot)
    if update_id is None:
        return _error(400, "bad_request", "the body is not a Telegram update (no update_id)")
    if update is not None:
        await channel.handle(update)
    return JSONResponse({})
