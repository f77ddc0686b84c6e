from __future__ import annotations

import uuid
from typing import Annotated, Literal

from litestar import Controller, delete, get, patch, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_202_ACCEPTED
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, admin_only
from app.errors import Conflict, QuotaExceeded
from app.http import Limit, Offset
from app.schemas import Page
from app.webhooks.schemas import DeliveryRead, WebhookCreate, WebhookRead, WebhookUpdate, WebhookWithSecret
from app.webhooks.service import WebhookService

DeliveryStatus = Annotated[
    Literal["pending", "delivering", "delivered", "failed"] | None,
    QueryParameter(description="Only deliveries in this status."),
]


def provide_webhook_service(
    state: State, session: NamedDependency[AsyncSession], principal: NamedDependency[Principal]
) -> WebhookService:
    return WebhookService(session, principal.org_id, validate_url=state.validate_url)


class WebhookController(Controller):
    path = "/api/webhooks"
    tags = ["webhooks"]
    guards = [admin_only]
    dependencies = {"webhook_service": Provide(provide_webhook_service, sync_to_thread=False)}

    @get("/", summary="List the organisation's webhooks (never their secrets)")
    async def list_webhooks(
        self, webhook_service: NamedDependency[WebhookService], limit: Limit = 50, offset: Offset = 0
    ) -> Page[WebhookRead]:
        return await webhook_service.page(limit=limit, offset=offset)

    @post(
        "/",
        summary="Register a webhook; its signing secret is in this response only",
        opt={"errors": (QuotaExceeded,)},
        description="The URL passes the same checks as a URL document's (public host, ports 80/443, "
        "or what the operator opened), now and again before every delivery.",
    )
    async def create_webhook(
        self, data: JSONBody[WebhookCreate], webhook_service: NamedDependency[WebhookService]
    ) -> WebhookWithSecret:
        return await webhook_service.create(data)

    @get("/{webhook_id:str}", summary="One webhook (never its secret)")
    async def get_webhook(
        self, webhook_id: FromPath[uuid.UUID], webhook_service: NamedDependency[WebhookService]
    ) -> WebhookRead:
        return await webhook_service.get(webhook_id)

    @patch("/{webhook_id:str}", summary="Change the URL, description, events or active flag")
    async def update_webhook(
        self,
        webhook_id: FromPath[uuid.UUID],
        data: JSONBody[WebhookUpdate],
        webhook_service: NamedDependency[WebhookService],
    ) -> WebhookRead:
        return await webhook_service.update(webhook_id, data)

    @delete("/{webhook_id:str}", summary="Remove a webhook and its delivery log")
    async def delete_webhook(
        self, webhook_id: FromPath[uuid.UUID], webhook_service: NamedDependency[WebhookService]
    ) -> None:
        await webhook_service.delete(webhook_id)

    @post(
        "/{webhook_id:str}/rotate-secret",
        status_code=HTTP_200_OK,
        summary="Replace the signing secret; the new one is in this response only",
    )
    async def rotate_secret(
        self, webhook_id: FromPath[uuid.UUID], webhook_service: NamedDependency[WebhookService]
    ) -> WebhookWithSecret:
        return await webhook_service.rotate_secret(webhook_id)

    @get("/{webhook_id:str}/deliveries", summary="The webhook's deliveries, newest first (paginated)")
    async def list_deliveries(
        self,
        webhook_id: FromPath[uuid.UUID],
        webhook_service: NamedDependency[WebhookService],
        status: DeliveryStatus = None,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[DeliveryRead]:
        return await webhook_service.deliveries(webhook_id, status=status, limit=limit, offset=offset)

    @post(
        "/{webhook_id:str}/deliveries/{delivery_id:str}/redeliver",
        status_code=HTTP_202_ACCEPTED,
        summary="Send a delivery's event again (same event id), as a new delivery",
        opt={"errors": (Conflict,)},
    )
    async def redeliver(
        self,
        webhook_id: FromPath[uuid.UUID],
        delivery_id: FromPath[uuid.UUID],
        webhook_service: NamedDependency[WebhookService],
    ) -> DeliveryRead:
        return await webhook_service.redeliver(webhook_id, delivery_id)

    @post(
        "/{webhook_id:str}/ping",
        status_code=HTTP_202_ACCEPTED,
        summary="Queue a `ping` event to this webhook, to test the receiver",
        opt={"errors": (Conflict,)},
    )
    async def ping(
        self, webhook_id: FromPath[uuid.UUID], webhook_service: NamedDependency[WebhookService]
    ) -> DeliveryRead:
        return await webhook_service.ping(webhook_id)
