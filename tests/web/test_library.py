"""Characters and Lorebooks on the page (R14.4): import by the file input labelled `Import`
and by dropping files on the page, list, export, delete; real SillyTavern files.

Must not: copy the shared fixtures; they are read from where they live.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.helpers import FIXTURES
from tests.web.conftest import Evacore, shot, sign_in

SERAPHINA = FIXTURES / "cards" / "st_default_Seraphina.v2.png"
AMY = FIXTURES / "cards" / "st_content_Amy.chara-and-ccv3.png"
ELDORIA = FIXTURES / "worldinfo" / "st_Eldoria.json"


def open_view(page: Page, name: str) -> None:
    page.get_by_role("navigation").get_by_role("link", name=name).click()
    expect(page.get_by_role("heading", name=name, level=1)).to_be_visible()


def drop(page: Page, path: Path, mime: str) -> None:
    """Drop a file on the page as a person dragging it from their desktop would."""
    data = page.evaluate_handle(
        """([name, type, b64]) => {
          const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
          const dt = new DataTransfer();
          dt.items.add(new File([bytes], name, { type }));
          return dt;
        }""",
        [path.name, mime, base64.b64encode(path.read_bytes()).decode()],
    )
    for event in ("dragenter", "dragover", "drop"):
        page.dispatch_event("main", event, {"dataTransfer": data})


def characters(evacore: Evacore) -> dict[str, str]:
    body = evacore.api.get("/v1/characters").json()
    return {c["name"]: c["id"] for c in body["characters"]}


def test_r14_4_import_a_real_png_card(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    open_view(page, "Characters")
    page.get_by_label("Import").set_input_files(str(SERAPHINA))
    card = page.locator(".card", has=page.get_by_role("heading", name="Seraphina"))
    expect(card).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text("Imported Seraphina")
    expect(card.locator("img.card-avatar")).to_have_attribute("src", lambda_blob())
    assert "Seraphina" in characters(evacore)
    stored = evacore.api.get(f"/v1/characters/{characters(evacore)['Seraphina']}").json()
    assert "guardian of this forest" in stored["data"]["first_mes"]
    shot(page, evacore, "characters")

    with page.expect_download() as info:
        card.get_by_role("button", name="PNG").click()
    exported = Path(info.value.path()).read_bytes()
    assert exported[:8] == b"\x89PNG\r\n\x1a\n"

    card.get_by_role("button", name="Chat with Seraphina").click()
    page.wait_for_url("**/#/chats/*")
    greeting = page.locator('article[data-role="assistant"]')
    expect(greeting).to_have_count(1)
    expect(greeting).to_contain_text("guardian of this forest")  # the card's greeting
    expect(greeting.locator("em").first).to_contain_text("You wake with a start")


def lambda_blob():  # the avatar is fetched with the token and shown from a blob: URL
    import re

    return re.compile(r"^blob:http://127\.0\.0\.1")


def test_r14_4_delete_a_character(page: Page, evacore: Evacore) -> None:
    r = evacore.api.post("/v1/characters", files={"file": (AMY.name, AMY.read_bytes(),
                                                            "image/png")})
    assert r.status_code == 201, r.text
    name = r.json()["name"]
    sign_in(page, evacore)
    open_view(page, "Characters")
    card = page.locator(".card", has=page.get_by_role("heading", name=name, exact=True))
    card.get_by_role("button", name="Delete").click()
    card.get_by_role("button", name="Really delete?").click()
    expect(card).to_have_count(0)
    assert name not in characters(evacore)


def test_r14_4_a_bad_file_shows_the_api_error(page: Page, evacore: Evacore, watch) -> None:
    watch.expected_statuses.update({415, 422})
    sign_in(page, evacore)
    open_view(page, "Characters")
    before = characters(evacore)
    page.get_by_label("Import").set_input_files(files=[{
        "name": "broken.json", "mimeType": "application/json", "buffer": b'{"spec": 1'}])
    expect(page.get_by_role("status")).to_contain_text("broken.json:")
    assert characters(evacore) == before


def test_r14_4_drop_world_info_on_the_page(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    name = json.loads(ELDORIA.read_text()).get("name") or ELDORIA.stem
    drop(page, ELDORIA, "application/json")  # dropped on the Chats view: it finds its way
    page.wait_for_url("**/#/lorebooks")
    book = page.locator(".book", has_text=name)
    expect(book).to_be_visible()
    books = evacore.api.get("/v1/lorebooks").json()["lorebooks"]
    stored = next(b for b in books if b["name"] == name)
    entries = len(json.loads(ELDORIA.read_text())["entries"])
    assert stored["entries"] == entries
    expect(book).to_contain_text(f"{entries} entries")
    book.locator("summary").click()
    expect(book.locator("tbody tr")).to_have_count(entries)
    shot(page, evacore, "lorebooks")

    with page.expect_download() as info:
        book.get_by_role("button", name="Export").click()
    exported = json.loads(Path(info.value.path()).read_text())
    assert len(exported["entries"]) == entries

    book.get_by_role("button", name="Delete").click()
    book.get_by_role("button", name="Really delete?").click()
    expect(page.locator(".book", has_text=name)).to_have_count(0)
    assert all(b["name"] != name for b in evacore.api.get("/v1/lorebooks").json()["lorebooks"])


def test_r14_4_drop_a_card_and_import_a_lorebook_by_input(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    open_view(page, "Characters")
    drop(page, AMY, "image/png")
    expect(page.get_by_role("status")).to_contain_text("Imported")
    assert any(n.startswith("Amy") for n in characters(evacore)), characters(evacore)

    open_view(page, "Lorebooks")
    page.get_by_label("Import").set_input_files(str(ELDORIA))
    expect(page.get_by_role("status")).to_contain_text("Imported")
    expect(page.locator(".book")).not_to_have_count(0)


def test_r14_4_a_lorebook_dropped_on_characters_is_imported_as_a_lorebook(
        page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    open_view(page, "Characters")
    name = json.loads(ELDORIA.read_text()).get("name") or ELDORIA.stem
    before = [b["id"] for b in evacore.api.get("/v1/lorebooks").json()["lorebooks"]]
    drop(page, ELDORIA, "application/json")
    page.wait_for_url("**/#/lorebooks")
    expect(page.get_by_role("status")).to_contain_text("Imported")
    books = evacore.api.get("/v1/lorebooks").json()["lorebooks"]
    added = [b for b in books if b["id"] not in before]
    assert [b["name"] for b in added] == [name]
    evacore.api.delete(f"/v1/lorebooks/{added[0]['id']}")
