"""The page's chat in a real Chromium (R14.4, R10): sign-in, streaming with `Stop`, variants,
`Continue`, the inspector, the hold indicator, edit/delete, images, keyboard, phone width.

Must not: talk to anything but the loopback server and its fake upstream.
"""

from __future__ import annotations

import base64
import re
import time

from playwright.sync_api import Page, expect

from tests.fakes.script import Reply
from tests.helpers import FIXTURES
from tests.web.conftest import Evacore, Watch, new_chat, open_page, shot, sign_in

WORDS = " ".join(f"word{i}" for i in range(40))
TINY_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def assistant(page: Page):  # the last answer on the page
    return page.locator('article[data-role="assistant"]').last


def test_r14_4_wrong_token_shows_alert(page: Page, evacore: Evacore, watch: Watch) -> None:
    watch.expected_statuses.add(401)
    page.goto(evacore.url + "/")
    page.get_by_role("textbox", name="Token").fill("evc_not_a_real_token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")
    assert page.evaluate("localStorage.getItem('evacore.token')") is None
    expect(page.get_by_role("navigation")).to_have_count(0)
    shot(page, evacore, "signin")


def test_r14_4_send_streams_then_stop_hides(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    chat_id = new_chat(page, evacore)
    evacore.fake.script.add(Reply(text=f"Streaming **bold** {WORDS}", token_delay=0.04))
    box = page.get_by_role("textbox", name="Message")
    box.click()
    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    page.keyboard.press("Enter")  # Enter sends, Shift+Enter was a new line

    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    expect(assistant(page)).to_contain_text("word3")
    assert stop.is_visible(), "the answer finished before it could be seen streaming"
    assert "word39" not in assistant(page).inner_text()
    expect(stop).to_be_hidden(timeout=15_000)
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(assistant(page).locator("strong")).to_have_text("bold")  # Markdown rendered
    expect(assistant(page)).to_contain_text("word39")
    expect(page.locator('article[data-role="user"]')).to_contain_text("second line")
    # the composer is the one element labelled Message, with messages on the page too
    expect(page.get_by_label("Message")).to_have_count(1)
    shot(page, evacore, "chat")

    stored = evacore.messages(chat_id)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[0]["content"] == "first line\nsecond line"
    assert stored[1]["content"].startswith("Streaming **bold** word0")
    sent = evacore.fake.last_body["messages"]
    assert sent[-1] == {"role": "user", "content": "first line\nsecond line"}


def test_r14_4_streaming_touches_only_the_new_answer(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    new_chat(page, evacore)
    for i in range(3):
        evacore.fake.script.reply(f"Answer {i} with `code` and a list:\n\n- one\n- two")
        page.get_by_role("textbox", name="Message").fill(f"question {i}")
        page.get_by_role("button", name="Send").click()
        expect(page.get_by_role("button", name="Send")).to_be_visible()
        expect(assistant(page)).to_contain_text(f"Answer {i}")
    page.evaluate("""() => {
      window.__mutations = 0;
      const observer = new MutationObserver((list) => { window.__mutations += list.length; });
      for (const a of document.querySelectorAll('article')) {
        observer.observe(a, {subtree: true, childList: true, characterData: true, attributes: true});
      }
    }""")
    evacore.fake.script.add(Reply(text=WORDS, token_delay=0.04))
    page.get_by_role("textbox", name="Message").fill("one more")
    page.get_by_role("button", name="Send").click()
    expect(assistant(page)).to_contain_text("word2")
    before = page.evaluate("window.__mutations")
    expect(assistant(page)).to_contain_text("word25")
    assert page.get_by_role("button", name="Stop").is_visible()
    assert page.evaluate("window.__mutations") == before, "earlier messages re-rendered per token"
    expect(page.get_by_role("button", name="Send")).to_be_visible(timeout=15_000)


def test_r14_4_stop_closes_the_upstream_request(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    chat_id = new_chat(page, evacore)
    evacore.fake.client_left.clear()
    evacore.fake.script.add(Reply(text=WORDS, token_delay=0.25))
    page.get_by_role("textbox", name="Message").fill("tell me a long story")
    page.get_by_role("button", name="Send").click()
    expect(assistant(page)).to_contain_text("word1")
    page.get_by_role("button", name="Stop").click()
    assert evacore.fake.wait_client_left(5), "the upstream request stayed open after Stop"
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    # the tour settles as aborted once the server has seen the stream close
    deadline = time.monotonic() + 5
    tours = evacore.api.get("/v1/stats").json()["tours"]
    while tours.get("aborted", 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
        tours = evacore.api.get("/v1/stats").json()["tours"]
    assert tours.get("aborted", 0) >= 1, tours
    stored = evacore.messages(chat_id)
    assert "word39" not in (stored[-1]["content"] if stored[-1]["role"] == "assistant" else "")


def _answer_twice(page: Page, evacore: Evacore) -> str:
    """A new chat whose one answer has two variants (the second regenerated, active)."""
    sign_in(page, evacore)
    chat_id = new_chat(page, evacore)
    evacore.fake.script.reply("The first answer.").reply("The second answer.")
    page.get_by_role("textbox", name="Message").fill("hello")
    page.get_by_role("button", name="Send").click()
    expect(assistant(page)).to_contain_text("The first answer.")
    page.get_by_role("button", name="Regenerate").click()
    expect(assistant(page)).to_contain_text("The second answer.")
    expect(assistant(page)).to_contain_text("2/2")
    return chat_id


def test_r14_4_regenerate_and_switch_variants(page: Page, evacore: Evacore) -> None:
    chat_id = _answer_twice(page, evacore)
    expect(page.locator('article[data-role="assistant"]')).to_have_count(1)

    page.get_by_role("button", name="Previous variant").click()
    expect(assistant(page)).to_contain_text("The first answer.")
    expect(assistant(page)).to_contain_text("1/2")
    stored = evacore.messages(chat_id)[-1]
    assert stored["active_variant"] == stored["variants"][0]["id"]

    page.get_by_role("button", name="Next variant").click()
    expect(assistant(page)).to_contain_text("The second answer.")
    expect(assistant(page)).to_contain_text("2/2")
    stored = evacore.messages(chat_id)[-1]
    assert stored["active_variant"] == stored["variants"][1]["id"]
    assert len(evacore.fake.generation_requests) >= 2


def test_r14_4_the_last_answer_keeps_its_actions_when_a_system_note_follows(
        page: Page, evacore: Evacore) -> None:
    """R14.4: the last assistant message offers its buttons even when a system message comes
    after it; what only works at the chat's end is disabled and says why, the variants
    still switch, and `Answer` answers after the note."""
    chat_id = _answer_twice(page, evacore)
    note = evacore.api.post(f"/v1/chats/{chat_id}/messages",
                            json={"role": "system", "content": "The night falls."})
    assert note.status_code == 201, note.text
    page.reload()
    expect(page.locator('article[data-role="system"]')).to_contain_text("The night falls.")
    answer = assistant(page)
    for name in ("Regenerate", "Continue"):
        expect(answer.get_by_role("button", name=name)).to_be_disabled()
    expect(answer.get_by_role("button", name="Next variant")).to_be_disabled()
    expect(answer.get_by_role("button", name="Inspect")).to_be_enabled()
    shot(page, evacore, "answer-followed-by-a-note")
    answer.get_by_role("button", name="Previous variant").click()
    expect(answer).to_contain_text("The first answer.")
    expect(answer).to_contain_text("1/2")
    stored = evacore.messages(chat_id)
    assert [m["role"] for m in stored] == ["user", "assistant", "system"]
    assert stored[1]["active_variant"] == stored[1]["variants"][0]["id"]
    answer.get_by_role("button", name="Next variant").click()
    expect(answer).to_contain_text("The second answer.")
    expect(answer.get_by_role("button", name="Next variant")).to_be_disabled()

    evacore.fake.script.reply("After the note.")
    page.get_by_role("button", name="Answer").click()
    expect(assistant(page)).to_contain_text("After the note.")
    expect(assistant(page).get_by_role("button", name="Regenerate")).to_be_enabled()
    expect(page.locator('article[data-role="assistant"]').first.get_by_role(
        "button", name="Regenerate")).to_have_count(0)
    assert [m["role"] for m in evacore.messages(chat_id)] == [
        "user", "assistant", "system", "assistant"]


def test_r14_4_continue_extends_the_same_message(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    chat_id = new_chat(page, evacore)
    evacore.fake.script.reply("The story begins.").reply(" And then it goes on.")
    page.get_by_role("textbox", name="Message").fill("tell a story")
    page.get_by_role("button", name="Send").click()
    expect(assistant(page)).to_contain_text("The story begins.")
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    first_id = assistant(page).get_attribute("data-message-id")
    page.get_by_role("button", name="Continue").click()
    expect(assistant(page)).to_contain_text("The story begins. And then it goes on.")
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(page.locator('article[data-role="assistant"]')).to_have_count(1)
    assert assistant(page).get_attribute("data-message-id") == first_id
    stored = evacore.messages(chat_id)
    assert len(stored) == 2 and stored[-1]["id"] == first_id
    assert stored[-1]["content"] == "The story begins. And then it goes on."


def test_r14_4_inspect_shows_request_model_and_stages(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    new_chat(page, evacore)
    evacore.fake.script.reply("Here is what you asked for.")
    page.get_by_role("textbox", name="Message").fill("Show me the inspector, please")
    page.get_by_role("button", name="Send").click()
    expect(assistant(page)).to_contain_text("Here is what you asked for.")
    page.get_by_role("button", name="Inspect").click()
    inspector = page.get_by_role("complementary", name="Inspector")
    expect(inspector).to_contain_text("Show me the inspector, please")  # the request sent
    expect(inspector).to_contain_text("fake-model")
    changes = inspector.get_by_role("region", name="Change log")
    for stage in ("user_input", "character", "context_shift", "interceptors", "save"):
        expect(changes).to_contain_text(stage)
    expect(changes).to_contain_text("plugin regex_scripts")  # the built-in plugin's hook ran
    expect(changes).not_to_contain_text("plugin plugin:")
    expect(inspector.get_by_role("img", name="stage timings")).to_be_visible()
    expect(inspector).to_contain_text("Context shifting")
    expect(inspector).to_contain_text("Stream rules")
    shot(page, evacore, "inspector")
    inspector.get_by_role("button", name="Close").click()
    expect(inspector).to_have_count(0)


def test_r14_4_hold_shows_checking_and_hides_the_discarded_answer(
    page: Page, evacore: Evacore
) -> None:
    r = evacore.api.post("/v1/rules", json={
        "name": "web_no_forbidden", "scope": "text", "condition": "FORBIDDEN",
        "text": "Do not write that word.",
    })
    assert r.status_code == 201, r.text
    try:
        sign_in(page, evacore)
        new_chat(page, evacore)
        evacore.fake.script.add(Reply(text="FORBIDDEN " + WORDS[:60], token_delay=0.05))
        evacore.fake.script.add(Reply(text="A clean answer.", token_delay=0.05))
        page.evaluate("""() => {
          window.__seen = false;
          new MutationObserver(() => {
            if (document.body.innerText.includes('FORBIDDEN')) window.__seen = true;
          }).observe(document.body, {subtree: true, childList: true, characterData: true});
        }""")
        page.get_by_role("textbox", name="Message").fill("say something")
        page.get_by_role("button", name="Send").click()
        expect(page.get_by_text("checking…")).to_be_visible()
        expect(assistant(page)).to_contain_text("A clean answer.", timeout=15_000)
        expect(page.get_by_text("checking…")).to_have_count(0)
        assert page.evaluate("window.__seen") is False, "the discarded answer was shown"
        page.get_by_role("button", name="Inspect").click()
        inspector = page.get_by_role("complementary", name="Inspector")
        rules = inspector.get_by_role("region", name="Stream rules")
        expect(rules).to_contain_text("web_no_forbidden")
        expect(rules).to_contain_text("answer discarded, written again")
        expect(rules).to_contain_text("Do not write that word.")  # the interrupt sent back
    finally:
        evacore.api.delete("/v1/rules/web_no_forbidden")


def test_r14_4_edit_and_delete_a_message(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    chat_id = new_chat(page, evacore)
    evacore.fake.script.reply("An answer to edit.")
    page.get_by_role("textbox", name="Message").fill("a question")
    page.get_by_role("button", name="Send").click()
    expect(assistant(page)).to_contain_text("An answer to edit.")
    answer = assistant(page)
    answer.hover()
    answer.get_by_role("button", name="Edit").click()
    answer.get_by_role("textbox", name="Edited text").fill("An edited *answer*.")
    answer.get_by_role("button", name="Save").click()
    expect(answer.locator("em")).to_have_text("answer")
    assert evacore.messages(chat_id)[-1]["content"] == "An edited *answer*."

    user = page.locator('article[data-role="user"]').first
    user.hover()
    user.get_by_role("button", name="Delete").click()
    user.get_by_role("button", name="Really delete?").click()
    expect(page.locator('article[data-role="user"]')).to_have_count(0)
    assert [m["role"] for m in evacore.messages(chat_id)] == ["assistant"]


def test_r14_4_image_reaches_a_vision_connection(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    new_chat(page, evacore)
    evacore.fake.script.reply("A single pixel.")
    page.get_by_label("Attach image").set_input_files(
        files=[{"name": "dot.png", "mimeType": "image/png", "buffer": TINY_PNG}])
    expect(page.get_by_role("img", name="attachment 1")).to_be_visible()
    page.get_by_role("textbox", name="Message").fill("What is in this picture?")
    page.get_by_role("button", name="Send").click()
    expect(assistant(page)).to_contain_text("A single pixel.")
    expect(page.locator('article[data-role="user"] img')).to_have_count(1)
    content = evacore.fake.last_body["messages"][-1]["content"]
    assert isinstance(content, list), content
    urls = [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]
    assert urls and urls[0].startswith("data:image/png;base64,")


def test_r14_4_model_and_user_text_is_sanitized(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    new_chat(page, evacore)
    hostile = ('<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
               '[link](javascript:window.__pwned=3) ![remote](http://example.com/x.png)')
    evacore.fake.script.reply("Echo: " + hostile)
    page.get_by_role("textbox", name="Message").fill(hostile)
    page.get_by_role("button", name="Send").click()
    expect(assistant(page)).to_contain_text("Echo:")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("article script, article [onerror]").count() == 0
    assert page.locator('article a[href^="javascript:"]').count() == 0
    assert page.locator('article img[src^="http"]').count() == 0
    expect(assistant(page)).to_contain_text("[image: remote]")


def test_r14_4_phone_width_layout(browser, evacore: Evacore, watch: Watch) -> None:
    page = open_page(browser, evacore, watch, width=390, height=844)
    try:
        sign_in(page, evacore)
        page.get_by_role("button", name="All conversations").click()
        page.get_by_label("Connection").select_option(evacore.fake_connection_id)
        page.get_by_role("button", name="New chat").click()
        evacore.fake.script.reply("Short answers fit a phone. " * 4)
        page.get_by_role("textbox", name="Message").fill("Does this fit a phone?")
        page.get_by_role("button", name="Send").click()
        expect(assistant(page)).to_contain_text("fit a phone")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways ({width}px)"
        send = page.get_by_role("button", name="Send").bounding_box()
        assert send and send["x"] + send["width"] <= 390 and send["y"] + send["height"] <= 844
        for name in ("Chats", "Characters", "Lorebooks", "Rules", "Stats"):
            box = page.get_by_role("navigation").get_by_role("link", name=name).bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, name
        shot(page, evacore, "phone")
        page.get_by_role("button", name="Inspect").click()
        inspector = page.get_by_role("complementary", name="Inspector")
        expect(inspector).to_contain_text("fake-model")
        box = inspector.bounding_box()
        assert box and box["width"] <= 390
    finally:
        page.context.close()
    watch.check()


def test_r14_4_token_is_kept_in_the_browser(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    page.reload()
    expect(page.get_by_role("button", name="New chat")).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("textbox", name="Token")).to_be_visible()
    assert re.search("evacore", page.title())


def test_r14_4_inspector_shows_lore_and_context_cuts(page: Page, evacore: Evacore) -> None:
    card = FIXTURES / "cards" / "st_default_Seraphina.v2.png"  # its book holds "Eldoria"
    r = evacore.api.post("/v1/characters", files={"file": (card.name, card.read_bytes(),
                                                             "image/png")})
    assert r.status_code == 201, r.text
    character_id = r.json()["id"]
    r = evacore.api.post("/v1/connections", json={
        "name": "fake-small", "kind": "openai-chat", "base_url": evacore.fake.base_url,
        "api_key": "sk-fake", "model": "fake-small-model", "context_size": 2400,
        "max_tokens": 64, "tokenizer": "heuristic",
    })
    assert r.status_code == 201, r.text
    chat = evacore.chat(connection_id=r.json()["id"], character_id=character_id)
    filler = "The weather report goes on and on about clouds and rain. " * 12
    for i in range(8):  # more history than the small context holds
        r = evacore.api.post(f"/v1/chats/{chat['id']}/messages",
                             json={"role": "user", "content": f"{i}: {filler}"})
        assert r.status_code == 201, r.text
    evacore.fake.script.reply("The forest is called Eldoria.")
    sign_in(page, evacore)
    page.goto(f"{evacore.url}/#/chats/{chat['id']}")
    page.get_by_role("textbox", name="Message").fill("Tell me about the forest of Eldoria.")
    page.get_by_role("button", name="Send").click()
    expect(assistant(page)).to_contain_text("The forest is called Eldoria.")
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    page.get_by_role("button", name="Inspect").click()
    inspector = page.get_by_role("complementary", name="Inspector")
    lore = inspector.get_by_role("region", name="Lorebook")
    expect(lore.locator("tbody tr").first).to_contain_text("Eldoria")
    shift = inspector.get_by_role("region", name="Context shifting")
    expect(shift.locator("tbody tr").first).to_contain_text("history")
    tour_id = evacore.messages(chat["id"])[-1]["variants"][0]["tour_id"]
    diagnostics = evacore.api.get(f"/v1/tours/{tour_id}").json()["diagnostics"]
    removed = diagnostics["shift"]["removed"]
    assert removed and shift.locator("tbody tr").count() == len(removed)
    activated = diagnostics["lore"]["activated"]
    assert activated and lore.locator("tbody tr").count() == len(activated)
    shift.scroll_into_view_if_needed()
    shot(page, evacore, "inspector-context")


def test_r14_4_a_provider_failure_is_shown(page: Page, evacore: Evacore, watch: Watch) -> None:
    sign_in(page, evacore)
    new_chat(page, evacore)
    evacore.fake.script.error(400, "the upstream refused this request", times=5)
    page.get_by_role("textbox", name="Message").fill("this will fail")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("alert")).to_contain_text("refused")
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(page.locator('article[data-role="user"]')).to_contain_text("this will fail")
    while evacore.fake.script.pending():
        evacore.fake.script.next()
    evacore.fake.script.reply("Recovered.")
    page.get_by_role("button", name="Answer").click()  # the chat ends with the question
    expect(assistant(page)).to_contain_text("Recovered.")
    expect(page.get_by_role("alert")).to_have_count(0)


def test_r14_4_streamed_markdown_matches_the_whole_render(page: Page, evacore: Evacore) -> None:
    """The incremental renderer cuts only between finished blocks, never inside a code fence:
    fed in small pieces, it shows what rendering the whole text at once shows."""
    page.goto(evacore.url + "/")
    result = page.evaluate(r"""async (docs) => {
      const m = await import('./web/js/markdown.js');
      const out = [];
      for (const text of docs) {
        const el = document.createElement('div');
        const view = new m.StreamView(el);
        for (let i = 0; i < text.length; i += 3) { view.append(text.slice(i, i + 3)); view.flush(); }
        const whole = document.createElement('div');
        whole.innerHTML = m.renderMarkdown(text);
        out.push({
          same: el.textContent.replace(/\s+/g, ' ').trim() === whole.textContent.replace(/\s+/g, ' ').trim(),
          pre: [el.querySelectorAll('pre').length, whole.querySelectorAll('pre').length],
          frozen: el.querySelector('.md-frozen').children.length,
          cut: m.stableCut(text, 0),
        });
      }
      return out;
    }""", [
        "One paragraph.\n\nTwo **bold**.\n\nThree.",
        "Code:\n\n```python\ndef f():\n\n    return 1\n```\n\nAfter the code.",
        "~~~\nopen fence\n\nstill inside",
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n> quoted\n\ndone",
    ])
    for doc in result:
        assert doc["same"], result
        assert doc["pre"][0] == doc["pre"][1], result
    assert result[0]["frozen"] == 2  # two finished paragraphs were parsed once each
    assert result[1]["pre"] == [1, 1]  # the blank line inside the fence did not split it
    assert result[2]["cut"] == 0  # an open fence is never cut


def test_r14_4_tool_calls_show_in_the_answer(page: Page, evacore: Evacore) -> None:
    sign_in(page, evacore)
    chat_id = new_chat(page, evacore)
    evacore.fake.script.tool_call("list_dir", {}, text="Let me look.")
    evacore.fake.script.reply("The workspace is listed above.")
    page.get_by_role("textbox", name="Message").fill("What is in the workspace?")
    page.get_by_role("button", name="Send").click()
    expect(assistant(page)).to_contain_text("The workspace is listed above.")
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    tool = assistant(page).locator("details.tool")
    expect(tool).to_have_count(1)
    expect(tool.locator("summary")).to_contain_text("list_dir")
    tool.locator("summary").click()
    stored = evacore.messages(chat_id)[-1]["variants"][0]["steps"]
    result = stored[0]["results"][0]["content"]
    expect(tool).to_contain_text("result")
    assert result is not None and tool.locator("pre").nth(1).inner_text() == result
