"""Request-scoped dependencies shared by routers: the core and a database session.

Must not: hold business rules.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.core import Core


async def get_core(request: Request) -> Core:
    """The app's core (async, so FastAPI never sends it to its thread pool)."""
    return request.app.state.core


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    async with request.app.state.core.session() as s:
        yield s


CoreDep = Annotated[Core, Depends(get_core)]
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
"""A session committed before the response is sent: an acknowledged write is durable."""
