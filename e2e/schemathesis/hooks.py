"""Schemathesis hooks of the API contract test (see schemathesis.toml).

Loaded with SCHEMATHESIS_HOOKS=hooks and PYTHONPATH=e2e/schemathesis.
"""

import base64
import hashlib
import hmac
import os
import time
import uuid
from datetime import datetime, timedelta, timezone

import schemathesis
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation import GenerationMode

WEBHOOK_SECRET = bytes.fromhex(os.environ["SECKILL_ST_WEBHOOK_SECRET"])


class WebhookSignature:
    """Signs a payment callback as the provider does (Standard Webhooks:
    HMAC-SHA256 over "<id>.<timestamp>.<body>"), over the exact bytes sent.

    Only a request that carries all three webhook headers is signed: one
    generated without some of them must still be refused (401).
    """

    def __call__(self, request):
        webhook_id = request.headers.get("webhook-id")
        if not webhook_id or "webhook-timestamp" not in request.headers or "webhook-signature" not in request.headers:
            return request
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode()
        ts = str(int(time.time()))
        mac = hmac.new(WEBHOOK_SECRET, webhook_id.encode() + b"." + ts.encode() + b"." + body, hashlib.sha256)
        request.headers["webhook-timestamp"] = ts
        request.headers["webhook-signature"] = "v1," + base64.b64encode(mac.digest()).decode()
        return request


@schemathesis.hook
def before_call(context, case, kwargs):
    """Runs before every request of every phase (the coverage phase skips
    map_* and filter_* hooks, so the adjustments live here)."""
    op = case.operation.definition.raw.get("operationId")
    if op == "paymentCallback":
        kwargs["auth"] = WebhookSignature()
    elif op == "reserve":
        one_request_id(case)
    elif op == "setupSale":
        cross_field_rules(case)


def one_request_id(case):
    """The request is named by the Idempotency-Key header or the body's
    request_id: one of them is required and, if both are sent, they must be
    equal. OpenAPI cannot say "one of a header and a body field", so a case
    gets a fresh key when it has neither and the body's request_id follows
    the header when it has both."""
    if case.headers is None:
        case.headers = {}
    body = case.body if isinstance(case.body, dict) else None
    # Schemathesis 4.32.5 now and then draws "" for a positive
    # `format: uuid` string of minLength 36 (seed
    # 52643448458093283749241397888453178759): a positive case gets a UUID
    # there, a negative one keeps what it drew.
    if _positive(case, ParameterLocation.HEADER) and "Idempotency-Key" in case.headers \
            and not _is_uuid(case.headers["Idempotency-Key"]):
        case.headers["Idempotency-Key"] = str(uuid.uuid4())
    if _positive(case, ParameterLocation.BODY) and body is not None and "request_id" in body \
            and not _is_uuid(body["request_id"]):
        body["request_id"] = str(uuid.uuid4())
    key = case.headers.get("Idempotency-Key")
    if key is None and (body is None or "request_id" not in body):
        case.headers["Idempotency-Key"] = str(uuid.uuid4())
    elif key is not None and body is not None and "request_id" in body:
        body["request_id"] = key


def _positive(case, location):
    component = case.meta.components.get(location) if case.meta is not None else None
    return component is not None and component.mode == GenerationMode.POSITIVE


def _is_uuid(value):
    if not isinstance(value, str) or len(value) != 36:
        return False
    try:
        return uuid.UUID(value).int != 0
    except ValueError:
        return False


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _time(value):
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo is not None else None


def cross_field_rules(case):
    """Keeps a definition within the rules OpenAPI cannot express (times
    from 1970 on, ends_at after starts_at; sku_ids unique): earlier times
    moved to 1970, a later ends_at, and repeated sku_ids renumbered. The api
    package's tests cover breaking them."""
    body = case.body
    if not isinstance(body, dict):
        return
    for field in ("starts_at", "ends_at"):
        t = _time(body.get(field))
        if t is not None and t < EPOCH:
            body[field] = EPOCH.isoformat()
    starts, ends = _time(body.get("starts_at")), _time(body.get("ends_at"))
    if starts is not None and ends is not None and ends <= starts:
        try:
            body["ends_at"] = (starts + timedelta(hours=1)).isoformat()
        except OverflowError:  # starts_at at the end of time
            body["starts_at"] = (ends - timedelta(hours=1)).isoformat()
    skus = body.get("skus")
    if isinstance(skus, list):
        ids = [s for s in skus if isinstance(s, dict) and _whole(s.get("sku_id"))]
        seen, top = set(), max((int(s["sku_id"]) for s in ids), default=0)
        for s in ids:
            if int(s["sku_id"]) in seen:
                top += 1
                s["sku_id"] = top
            seen.add(int(s["sku_id"]))


def _whole(x):
    """A JSON integer, however written (7 or 7.0)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and float(x).is_integer()
