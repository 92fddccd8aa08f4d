"""Who a Telegram sender is (R14.2): `master` or `trusted` from the configured user ids,
`guest` for anyone else only while `GUESTS` is on, else nobody (no answer, nothing stored).

The master's ids all stand for evacore's master user; a trusted or guest sender gets a user
of their own, made on their first message and found by `users.telegram_id` after that.
Must not: look at message text; roles come from the sender's id alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evacore.domain.roles import Identity
from evacore.store import telegram as store
from evacore.store.tables import User

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from evacore.config import TelegramSettings

NAME_CHARS = 200


def role_of(settings: TelegramSettings, telegram_id: int) -> str | None:
    """The sender's role, or None when the channel must ignore them."""
    if telegram_id in settings.master_ids:
        return "master"
    if telegram_id in settings.trusted_ids:
        return "trusted"
    return "guest" if settings.guests else None


async def identity_of(s: AsyncSession, role: str, telegram_id: int, name: str) -> Identity:
    """The evacore user behind a sender whose role is known (made when first seen)."""
    if role == "master":
        master = await store.first_master(s)
        if master is not None:
            return Identity(user_id=master.id, name=master.name, role="master")
    user = await store.user_by_telegram_id(s, telegram_id)
    if user is None:
        user = User(name=(name or f"telegram {telegram_id}")[:NAME_CHARS], role=role,
                    telegram_id=telegram_id)
        s.add(user)
        await s.flush()
    elif user.role != role:  # the lists changed since: the settings decide
        user.role = role
    return Identity(user_id=user.id, name=user.name, role=role)
