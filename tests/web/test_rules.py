"""Rules and Stats on the page (R14.4): rules opened by name, edited with the API's errors
inline, enabled/disabled, tested live without saving ("fires" / "does not fire"); firings
per rule as a chart and a table; what a non-master sees.

Must not: change the seeded rules for good (a test that edits one puts it back).
"""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.fakes.script import Reply
from tests.web.conftest import Evacore, Watch, shot, sign_in


def open_rules(page: Page) -> None:
    page.get_by_role("navigation").get_by_role("link", name="Rules").click()
    expect(page.get_by_role("link", name="telegram_markdown_image")).to_be_visible()


def rule(evacore: Evacore, name: str) -> dict:
    r = evacore.api.get(f"/v1/rules/{name}")
    assert r.status_code == 200, r.text
    return r.json()


def test_r14_4_test_says_fires_or_does_not_fire(page: Page, evacore: Evacore) -> None:
    before = rule(evacore, "telegram_markdown_image")
    sign_in(page, evacore)
    open_rules(page)
    page.get_by_role("link", name="telegram_markdown_image").click()
    editor = page.get_by_role("region", name="Rule telegram_markdown_image")
    expect(editor.get_by_role("heading", name="telegram_markdown_image")).to_be_visible()
    text = page.get_by_role("textbox", name="Test text")
    text.fill("Here you go: ![a cat](https://example.com/cat.png)")
    page.get_by_role("button", name="Test").click()
    expect(page.get_by_text("fires", exact=True)).to_be_visible()
    shot(page, evacore, "rules")

    text.fill("Just plain words, nothing else.")
    page.get_by_role("button", name="Test").click()
    expect(page.get_by_text("does not fire", exact=True)).to_be_visible()
    expect(page.get_by_text("fires", exact=True)).to_have_count(0)
    assert rule(evacore, "telegram_markdown_image") == before  # testing saved nothing


def test_r14_4_test_uses_the_unsaved_edit(page: Page, evacore: Evacore) -> None:
    before = rule(evacore, "telegram_markdown_image")
    sign_in(page, evacore)
    open_rules(page)
    page.get_by_role("link", name="telegram_markdown_image").click()
    page.get_by_role("textbox", name="Test text").fill("I like a Banana now and then.")
    page.get_by_role("button", name="Test").click()
    expect(page.get_by_text("does not fire", exact=True)).to_be_visible()
    page.get_by_role("textbox", name="Condition", exact=True).fill("(?i)banana")
    # the verdict was about the rule before this edit: it goes until tested again
    expect(page.get_by_text("does not fire", exact=True)).to_have_count(0)
    page.get_by_role("button", name="Test").click()
    expect(page.get_by_text("fires", exact=True)).to_be_visible()
    assert rule(evacore, "telegram_markdown_image") == before


def test_r14_4_create_edit_with_inline_errors_toggle_delete(
    page: Page, evacore: Evacore, watch: Watch
) -> None:
    watch.expected_statuses.add(422)
    sign_in(page, evacore)
    open_rules(page)
    page.get_by_role("link", name="New rule").click()
    page.get_by_role("textbox", name="Name", exact=True).fill("no_shouting")
    page.get_by_role("textbox", name="Condition", exact=True).fill("[A-Z]{8,}")
    page.get_by_role("button", name="Create rule").click()
    # the API's own message, next to the field it names; nothing stored
    text_field = page.locator(".field", has=page.get_by_role("textbox", name="Text", exact=True))
    expect(text_field.get_by_role("alert")).to_contain_text("empty")
    assert evacore.api.get("/v1/rules/no_shouting").status_code == 404

    page.get_by_role("textbox", name="Text", exact=True).fill("Write in normal case, please.")
    page.get_by_role("button", name="Create rule").click()
    page.wait_for_url("**/#/rules/no_shouting")
    expect(page.get_by_role("link", name="no_shouting")).to_be_visible()
    assert rule(evacore, "no_shouting")["condition"] == "[A-Z]{8,}"
    # the editor's own switch is the one control its name finds (the list's say "Use …")
    expect(page.get_by_label("Enabled")).to_have_count(1)
    expect(page.get_by_label("Enabled")).to_be_checked()

    page.get_by_role("textbox", name="Condition", exact=True).fill("((")
    page.get_by_role("button", name="Save").click()
    error = page.locator(".field", has=page.get_by_role("textbox", name="Condition", exact=True))
    expect(error.get_by_role("alert")).to_contain_text("RE2")
    assert rule(evacore, "no_shouting")["condition"] == "[A-Z]{8,}"  # nothing changed
    shot(page, evacore, "rule-error")

    page.get_by_role("textbox", name="Condition", exact=True).fill("[A-Z]{10,}")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status").filter(has_text="Saved")).to_be_visible()
    assert rule(evacore, "no_shouting")["condition"] == "[A-Z]{10,}"

    page.get_by_role("checkbox", name="Use no_shouting").click()
    for _ in range(50):
        if rule(evacore, "no_shouting")["enabled"] is False:
            break
        page.wait_for_timeout(100)
    assert rule(evacore, "no_shouting")["enabled"] is False

    page.get_by_role("button", name="Delete rule").click()
    page.get_by_role("button", name="Really delete?").click()
    expect(page.get_by_role("link", name="no_shouting")).to_have_count(0)
    assert evacore.api.get("/v1/rules/no_shouting").status_code == 404


def test_r14_4_stats_show_firings_as_chart_and_table(page: Page, evacore: Evacore) -> None:
    chat = evacore.chat(connection_id=evacore.fake_connection_id)
    evacore.fake.script.reply("Look: ![cat](https://example.com/cat.png)")
    evacore.fake.script.add(Reply(text="A cat, sitting in the sun."))
    r = evacore.api.post(f"/v1/chats/{chat['id']}/generate", json={
        "message": {"content": "show me a cat"}, "env": {"telegram": True}, "stream": False})
    assert r.status_code == 200, r.text
    fired = {x["rule"]: x["fired"] for x in evacore.api.get("/v1/stats").json()["rules"]}
    assert fired["telegram_markdown_image"] >= 1

    sign_in(page, evacore)
    page.get_by_role("navigation").get_by_role("link", name="Stats").click()
    chart = page.get_by_role("img", name="Firings per rule")
    expect(chart).to_be_visible()
    expect(chart.locator("rect.bar")).to_have_count(len(fired))
    row = page.get_by_role("row").filter(has_text="telegram_markdown_image")
    expect(row.get_by_role("cell").nth(1)).to_have_text(str(fired["telegram_markdown_image"]))
    expect(page.get_by_text("tours completed")).to_be_visible()
    expect(page.get_by_text("prompt tokens")).to_be_visible()
    shot(page, evacore, "stats")


def test_r14_4_a_non_master_is_told_what_is_theirs(
    page: Page, evacore: Evacore, watch: Watch
) -> None:
    watch.expected_statuses.add(403)
    r = evacore.api.post("/v1/users", json={"name": "guest-web", "role": "guest"})
    assert r.status_code == 201, r.text
    sign_in(page, evacore, token=r.json()["token"])
    expect(page.get_by_text("guest-web")).to_be_visible()
    page.get_by_role("navigation").get_by_role("link", name="Rules").click()
    expect(page.get_by_text("for the master only")).to_be_visible()
    page.get_by_role("navigation").get_by_role("link", name="Stats").click()
    expect(page.get_by_text("for the master only")).to_be_visible()


def test_r14_4_a_rule_named_new_opens_by_its_name(page: Page, evacore: Evacore) -> None:
    r = evacore.api.post("/v1/rules", json={
        "name": "new", "scope": "text", "condition": "(?i)brand new", "text": "Say what is new.",
        "enabled": False})
    assert r.status_code == 201, r.text
    try:
        sign_in(page, evacore)
        open_rules(page)
        page.get_by_role("link", name="new", exact=True).click()
        editor = page.get_by_role("region", name="Rule new")
        expect(editor.get_by_role("heading", name="new", exact=True)).to_be_visible()
        expect(page.get_by_role("textbox", name="Condition", exact=True)).to_have_value(
            "(?i)brand new")
        page.get_by_role("link", name="New rule").click()  # the blank form still opens
        expect(page.get_by_role("region", name="New rule")).to_be_visible()
        expect(page.get_by_role("textbox", name="Name", exact=True)).to_have_value("")
    finally:
        evacore.api.delete("/v1/rules/new")
