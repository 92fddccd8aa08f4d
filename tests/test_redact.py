"""The one redactor (R2.15, R12.2): known secrets and secret shapes go, ordinary text stays."""

from __future__ import annotations

import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evacore import redact as r
from evacore.errors import ProviderProtocolError


@pytest.mark.parametrize(("text", "expected"), [
    ("Authorization: Bearer abc.def-123456", "Authorization: Bearer ***"),
    ("auth: Basic dGVzdDp0ZXN0", "auth: Basic ***"),
    ("key sk-proj-AbCdEf0123456789 rejected", "key sk-*** rejected"),
    ("token evc_Zm9vYmFyYmF6cXV4 unknown", "token evc_*** unknown"),
    ("GET https://h/v1/x?model=m&api_key=abc123&x=1#f", "GET https://h/v1/x?model=m&api_key=***&x=1#f"),
    ("see https://h/x?access_token=t0k3n", "see https://h/x?access_token=***"),
    ("postgresql://evacore:hunter2@db/x", "postgresql://evacore:***@db/x"),
])
def test_secret_shapes_are_masked(text: str, expected: str) -> None:
    assert r.redact(text) == expected


@pytest.mark.parametrize("text", [
    "the bearer of bad news", "Basic training starts at nine", "a task-1234567 for the desk-lamp",
    "https://example.org/books?author=me&page=2", "max_tokens=512 and top_k=40",
    "A long story without anything secret in it. " * 50,
])
def test_ordinary_text_is_kept(text: str) -> None:
    assert r.redact(text) == text


def _shape_by_shape(text: str) -> str:
    """Every shape's own `re.sub`, in order, where its literal is in the text: what
    `redact` does for the shapes, the plain way."""
    for literal, shape in r._SHAPES:
        if literal in text:
            text = shape.sub(r._mask_tail, text)
    return text


_PIECES = ["?", "&", ";", "=", "://", "@", ":", " ", "\n", "-", "_", ".", "é", "…", "K",
           "key", "Token", "AUTH", "author", "session", "pwd", "Bearer ", "basic ", "sk-",
           "evc_", "ghp_", "AIza", "user", "x1", "0123456789", "aBc", '"', "'", "#", "<",
           "?api_key=abc123", "&Token=zz9", ";session=q", "&x.Secret-y=1", "?author=me",
           "Bearer abcdef123", "sk-proj-AbCdEf0123456789", "https://u:pw@h/", "ghp_" + "a" * 20,
           "x" * 300, "a prose sentence; with a question? and more … " * 4]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=60).map("".join))
def test_redact_masks_what_each_shape_masks_on_its_own(text: str) -> None:
    """Short and long texts (a long one's literals are found in one pass, and the query
    shape is tried only at its possible starts): the same as each shape's `re.sub`."""
    assert r.redact(text) == _shape_by_shape(text)


def test_a_long_text_with_a_lone_surrogate_is_still_redacted() -> None:
    text = "\ud800 " + "x" * 600 + " https://h/x?api_key=abc123 and sk-proj-AbCdEf0123456789"
    assert r.redact(text) == _shape_by_shape(text)
    assert "abc123" not in r.redact(text) and "AbCdEf" not in r.redact(text)


def test_remembered_secrets_go_in_every_form() -> None:
    r.remember(["Bearer odd+secret/value 991", "abc"])  # "abc" is too short to replace
    text = "sent odd+secret/value 991, quoted odd%2Bsecret%2Fvalue%20991, abc stays"
    assert r.redact(text) == "sent ***, quoted ***, abc stays"


def test_known_secrets_are_found_in_long_texts_and_past_the_probed_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prose = "An ordinary paragraph of a long prompt, nothing secret here. " * 400
    r.remember(['quo"ted\\key-7731', "plain-key-55120"])
    escaped = 'quo\\"ted\\\\key-7731'  # as it stands inside a JSON text
    text = prose + escaped + " and plain-key-55120 " + prose
    assert r.redact(text) == prose + "*** and *** " + prose
    assert r.redact(prose) == prose
    monkeypatch.setattr(r, "_MAX_PROBED", 0)  # many known secrets: the pattern alone
    r.remember(["one-more-secret-8812"])
    assert r._known_re is not None and r._known_re[1] is None
    assert r.redact("x one-more-secret-8812 plain-key-55120 y") == "x *** *** y"


def test_connection_secrets_are_the_key_secret_headers_query_and_password() -> None:
    found = r.connection_secrets(
        "the-api-key", "https://u:pass-word@h/v1?key=qk-123456&model=m",
        {"extra_headers": {"X-Custom-Token": "hdr-123456", "X-Title": "my app",
                           "api-key": "azure-123456", "Cookie": "sid=1234567"}},
    )
    assert set(found) == {"the-api-key", "hdr-123456", "azure-123456", "sid=1234567",
                          "qk-123456", "pass-word"}


def test_urls_keep_everything_but_their_secrets() -> None:
    url = "https://h/v1?model=m&Key=abc%20d&sig=ok#frag"
    assert r.redact_url(url) == "https://h/v1?model=m&Key=***&sig=ok#frag"
    assert r.redact_url(url, shown=r.mask) == "https://h/v1?model=m&Key=****&sig=ok#frag"
    assert r.redact_url("http://h:8080") == "http://h:8080"


def test_headers_are_masked_by_name() -> None:
    headers = {"Authorization": "Bearer x", "x-goog-api-key": "k", "X-Title": "app",
               "anthropic-version": "2023-06-01"}
    assert r.redact_headers(headers) == {"Authorization": "***", "x-goog-api-key": "***",
                                         "X-Title": "app", "anthropic-version": "2023-06-01"}


def test_errors_are_redacted_when_made() -> None:
    r.remember(["upstream-echoed-secret-1"])
    err = ProviderProtocolError("bad event: upstream-echoed-secret-1",
                                upstream_message="Bearer tok-1234567 said upstream-echoed-secret-1")
    assert err.message == "bad event: ***" and str(err) == "bad event: ***"
    assert err.to_dict()["details"] == {"upstream_message": "Bearer *** said ***"}


def test_log_events_are_redacted_and_meta_kept() -> None:
    r.remember(["log-line-secret-22"])
    exc_info = (ValueError, ValueError("x"), None)
    event = {"event": "provider.failed log-line-secret-22", "n": 3,
             "fields": {"url": "http://h/?token=abc123"}, "obj": ValueError("log-line-secret-22"),
             "exc_info": exc_info}
    out = r.structlog_processor(None, "info", event)
    assert out == {"event": "provider.failed ***", "n": 3,
                   "fields": {"url": "http://h/?token=***"}, "obj": "ValueError('***')",
                   "exc_info": exc_info}


def test_json_documents_are_redacted_in_one_pass() -> None:
    r.remember(['quote"and\\slash-secret'])
    doc = {"url": "http://h/v1?key=abc123", "n": 5, "said": 'he typed quote"and\\slash-secret',
           "nested": [{"Authorization": "Bearer abcdef123456"}]}
    assert r.redact_json(doc) == {"url": "http://h/v1?key=***", "n": 5, "said": "he typed ***",
                                  "nested": [{"Authorization": "Bearer ***"}]}
    clean = {"a": ["nothing", "secret", 1.5]}
    assert r.redact_json(clean) is clean  # nothing to hide: the same value back
    assert r.redact_json({1: "sk-abcdefgh1"}) == {1: "sk-***"}  # not JSON: the slow road


def _tools(extra: str = "") -> list[dict[str, object]]:
    """A provider request's tool definitions: a large list of small parts, as every tour
    sends them."""
    return [{"type": "function", "function": {
        "name": f"tool_{i}", "description": f"Does thing {i} with care. " * 12 + extra,
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}
        for i in range(12)]


def _diagnostics(tools: list[dict[str, object]], said: str) -> dict[str, object]:
    return {"seed": 7, "timings": {"save": 1.5},
            "requests": [{"url": "http://h/v1/chat/completions",
                          "body": {"messages": [{"role": "user", "content": said}],
                                   "tools": tools}}]}


def _whole_text_scan(doc: object) -> object:
    import orjson
    return orjson.loads(r.redact(orjson.dumps(doc).decode()))


def test_a_large_document_masks_what_a_whole_text_scan_masks() -> None:
    r.remember(["known-secret-9f8e7d"])
    tools = _tools()
    assert r.redact_json(_diagnostics(tools, "hello")) == _diagnostics(tools, "hello")
    for said, extra in [("my key is known-secret-9f8e7d", ""), ("hi", "sk-abcdefgh12345"),
                        ("hi", "Bearer abcdef123456"), ("see http://u:hunter2@h/x", ""),
                        ("hi", "https://h/x?access_token=t0k3n")]:
        doc = _diagnostics(_tools(extra), said)
        masked = r.redact_json(doc)
        assert masked == _whole_text_scan(doc)
        assert masked != doc


def test_a_part_known_clean_is_scanned_again_once_a_new_secret_is_known() -> None:
    tools = _tools("uses the value late-secret-0a1b2c")
    doc = _diagnostics(tools, "hello")
    assert r.redact_json(doc) is doc  # scanned, nothing secret: known clean from now on
    assert r.redact_json(doc) is doc
    r.remember(["late-secret-0a1b2c"])
    masked = r.redact_json(doc)
    assert "late-secret-0a1b2c" not in str(masked)
    assert masked["requests"][0]["body"]["tools"][3]["function"]["description"].endswith(
        "uses the value ***")


def test_a_secret_in_a_key_or_beside_a_clean_part_is_masked() -> None:
    tools = _tools()
    r.redact_json(_diagnostics(tools, "hello"))  # the tools are known clean now
    doc = _diagnostics(tools, "hello")
    doc["headers"] = {"x-note sk-abcdefgh12345": "v"}
    assert r.redact_json(doc)["headers"] == {"x-note sk-***": "v"}
    doc = _diagnostics(tools, "Authorization: Bearer abcdef123456")
    assert r.redact_json(doc)["requests"][0]["body"]["messages"][0]["content"] == (
        "Authorization: Bearer ***")


def _chat_request(said: list[object]) -> dict[str, object]:
    """A provider request of a chat whose messages the next tour repeats, one more each."""
    return {"seed": 7, "requests": [{"url": "http://h/v1/chat/completions", "body": {
        "tools": _tools(), "messages": [
            {"role": "user" if i % 2 == 0 else "assistant",
             "content": f"Message {i}: {text} " + "and some more words of it " * 5}
            if isinstance(text, str) else text
            for i, text in enumerate(said)]}}]}


def _scanned(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    texts: list[str] = []
    real = r.redact
    monkeypatch.setattr(r, "redact", lambda text: texts.append(text) or real(text))
    return texts


def test_a_chats_messages_known_clean_are_not_scanned_again_only_the_new_ones(
        monkeypatch) -> None:  # type: ignore[no-untyped-def]
    said = [f"line {i}" for i in range(40)]
    doc = _chat_request(said)
    assert r.redact_json(doc) is doc
    scanned = _scanned(monkeypatch)
    longer = _chat_request([*said, "the newest line"])
    assert r.redact_json(longer) is longer
    assert "the newest line" in scanned[0]
    assert not any(f"Message {i}:" in scanned[0] for i in range(40))
    assert r.redact_json(_chat_request(said)) is not None  # the same list again: nothing new
    assert not any(f"Message {i}:" in scanned[-1] for i in range(40))
    secret = _chat_request([*said, "my key is sk-abcdefgh12345"])
    masked = r.redact_json(secret)
    assert masked == _whole_text_scan(secret)
    assert masked["requests"][0]["body"]["messages"][40]["content"].startswith(
        "Message 40: my key is sk-***")


def test_a_list_is_clean_at_its_front_only_where_whole_parts_repeat() -> None:
    """A known list's bytes at the front of another are its parts only when a part boundary
    follows them: `[…, 5` is not the front of `[…, 55, …]`."""
    said: list[object] = [f"line {i}" for i in range(30)]
    assert r.redact_json(_chat_request([*said, 5])) is not None
    doc = _chat_request([*said, 55, "my key is sk-abcdefgh12345"])
    assert r.redact_json(doc) == _whole_text_scan(doc)
    assert "sk-abcdefgh12345" not in str(r.redact_json(doc))


def test_a_message_known_clean_is_scanned_again_once_a_new_secret_is_known() -> None:
    said = [f"line {i}" for i in range(10)] + ["it used the value later-secret-5e6f7a"]
    doc = _chat_request(said)
    assert r.redact_json(doc) is doc
    r.remember(["later-secret-5e6f7a"])
    masked = r.redact_json(_chat_request([*said, "next"]))
    assert "later-secret-5e6f7a" not in str(masked)
    assert masked["requests"][0]["body"]["messages"][10]["content"].startswith(
        "Message 10: it used the value ***")


def test_the_lists_known_clean_stay_within_their_bounds() -> None:
    for chat in range(r._CLEAN_LISTS + 20):
        r.redact_json(_chat_request([f"chat {chat} line {i}" for i in range(12)]))
    assert len(r._clean.lists) <= r._CLEAN_LISTS
    assert sum(len(k) for k in r._clean.lists) <= r._CLEAN_LIST_BYTES


def test_a_chats_front_is_found_among_many_known_lists_that_begin_the_same_way(
        monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Lists are looked for among those with the same first bytes: every chat's messages
    begin with the same role and words, yet each chat's own front is found (and only its
    new message scanned), before and after older lists are dropped past the bound."""
    chats = r._CLEAN_LISTS + 30
    for chat in range(chats):
        r.redact_json(_chat_request([f"line {i} of chat {chat}" for i in range(12)]))
    kept = r._clean
    assert len(kept.lists) <= r._CLEAN_LISTS
    assert sorted(front for fronts in kept.heads.values() for front in fronts) == sorted(
        kept.lists)
    assert kept.list_bytes == sum(len(front) for front in kept.lists)
    scanned = _scanned(monkeypatch)
    newest = chats - 1
    r.redact_json(_chat_request([*[f"line {i} of chat {newest}" for i in range(12)], "new"]))
    assert "new" in scanned[0]
    assert "line 3 of chat" not in scanned[0]
    scanned.clear()
    r.redact_json(_chat_request([*[f"line {i} of chat 0" for i in range(12)], "again"]))
    assert "line 3 of chat 0" in scanned[0]  # dropped past the bound: scanned whole again


def test_scans_in_several_threads_at_once_do_not_trip_over_each_other() -> None:
    """Lists found clean are reordered as they are used: a scan in one thread must not fail
    while another one's changes them (a log line can be redacted off the event loop)."""
    errors: list[str] = []

    def scan(thread: int) -> None:
        try:
            for i in range(300):
                said = [f"thread {thread} chat {i % 7} line {j} " + "word " * 20
                        for j in range(20 + i % 5)]
                r.redact_json({"requests": [{"body": {"messages": [
                    {"role": "user", "content": s} for s in said]}}]})
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            errors.append(repr(exc))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        threads = [threading.Thread(target=scan, args=(t,)) for t in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def _change_log(ids: list[str]) -> dict[str, object]:
    """A tour's diagnostics with the character stage's change log: the ids of the elements
    it added, a chat's history among them and the new-chat line after it."""
    return {"seed": 7, "changes": [{"stage": "character", "actor": "stage",
                                    "added": ["main", "persona", *ids, "new_chat"],
                                    "removed": [], "changed": []}]}


def test_a_long_list_of_strings_is_scanned_whole_and_masked_as_a_whole_text_scan_masks(
        monkeypatch) -> None:  # type: ignore[no-untyped-def]
    ids = [f"history:01a24ce783f70cb2e46dab{i:04d}" for i in range(200)]
    doc = _change_log(ids)
    scanned = _scanned(monkeypatch)
    assert r.redact_json(doc) is doc
    # one text for the whole list (not a serialization a part), and not kept as a known list
    assert any(text.count("history:") == 200 for text in scanned)
    assert not any(front.startswith(b'["main"') for front in r._clean.lists)
    for secret in ("lore:sk-abcdefgh12345", "Bearer abcdef123456", "http://u:hunter2@h/x"):
        leaky = _change_log([*ids[:100], secret, *ids[100:]])
        masked = r.redact_json(leaky)
        assert masked == _whole_text_scan(leaky)
        assert masked != leaky
    # a string holding a bracket takes the part-by-part way, with the same outcome
    odd = _change_log([*ids, "lore:[entry] {x}", "key sk-abcdefgh12345"])
    assert r.redact_json(odd) == _whole_text_scan(odd)
