"""The hook contract R3.1-R3.6 for interceptors and postprocess hooks, with real plugin files."""

from __future__ import annotations

import asyncio
import logging
import random
import time

import pytest

from tests.plugins.conftest import Loader, element, prompt, tour


def _tagger(name: str, priority: int, hooks: list[str]) -> str:
    """A plugin whose hooks append `<plugin>.<hook>` to the last message's content."""
    body = [f"from evacore.plugins import Plugin\nplugin = Plugin(name={name!r}, version='1')\n"]
    for hook in hooks:
        body.append(
            f"@plugin.interceptor(priority={priority})\n"
            f"async def {hook}(ctx):\n"
            f"    ctx.messages[-2]['content'] += ' {name}.{hook}'\n"
        )
    return "\n".join(body)


async def test_r3_1_equal_priorities_run_in_one_order_whatever_the_registration(
        load_plugins: Loader, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="evacore.plugins.dispatch")
    specs = [("zeta", 100, ["b_hook", "a_hook"]), ("alpha", 100, ["only"]),
             ("mid", 100, ["x"]), ("early", 5, ["first"]), ("late", 900, ["last"])]
    expected = ["early.first", "alpha.only", "mid.x", "zeta.a_hook", "zeta.b_hook", "late.last"]
    rng = random.Random(7)
    for round_ in range(12):
        rng.shuffle(specs)
        files = {f"{i:02d}_{n}.py": _tagger(n, p, rng.sample(h, len(h))) for i, (n, p, h) in enumerate(specs)}
        manager = load_plugins(files)
        base = tour()
        result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=base)
        assert result.order == expected, round_
        assert result.messages[-2]["content"].split()[2:] == expected
        summary = base.changelog.records[0]
        assert summary.actor == "stage" and summary.order == expected
    order_lines = [r for r in caplog.records if r.getMessage() == "plugin hook order"]
    assert len(order_lines) == 12  # once per stage per tour
    assert order_lines[-1].order == expected and order_lines[-1].tour_id == "tour-1"


async def test_r3_5_raising_hooks_are_skipped_counted_and_their_changes_discarded(
        load_plugins: Loader, caplog: pytest.LogCaptureFixture) -> None:
    failures: list[tuple[str, str, str]] = []
    manager = load_plugins({
        "boom.py": """
            from evacore.plugins import Plugin
            plugin = Plugin(name="boom", version="1")

            @plugin.interceptor(priority=1)
            async def raises(ctx):
                ctx.messages[1]["content"] = "half-done edit"
                ctx.messages.pop(2)
                raise RuntimeError("bad plugin")

            @plugin.interceptor(priority=2)
            async def exits(ctx):
                ctx.messages.clear()
                raise SystemExit(3)

            @plugin.interceptor(priority=3)
            async def interrupts(ctx):
                ctx.messages[1]["content"] = "nope"
                raise KeyboardInterrupt
        """,
        "good.py": """
            from evacore.plugins import Plugin
            plugin = Plugin(name="good", version="1")

            @plugin.interceptor(priority=50)
            async def note(ctx):
                ctx.messages[1]["content"] += " (seen)"
        """,
    }, on_failure=lambda p, h, k: failures.append((p, h, k)))
    original = prompt()
    base = tour()
    result = await manager.dispatcher.run_interceptors(original, ctx_base=base)
    outcomes = {r.key: (r.outcome, r.reason) for r in result.log}
    assert outcomes["boom.raises"] == ("error", "RuntimeError: bad plugin")
    assert outcomes["boom.exits"] == ("error", "SystemExit: 3")
    assert outcomes["boom.interrupts"][0] == "error"
    assert outcomes["good.note"] == ("applied", None)
    assert [m["content"] for m in result.messages] == [
        m["content"] + (" (seen)" if i == 1 else "") for i, m in enumerate(prompt())
    ]
    assert original == prompt()  # the caller's list was never touched
    assert failures == [("boom", "raises", "error"), ("boom", "exits", "error"), ("boom", "interrupts", "error")]
    assert manager.state("boom").failures == 3
    assert "KeyboardInterrupt" in (manager.state("boom").last_error or "")
    logged = [r for r in caplog.records if r.getMessage().startswith("plugin hook failed")]
    assert [(r.plugin, r.hook) for r in logged] == [("boom", "raises"), ("boom", "exits"), ("boom", "interrupts")]
    assert logged[0].exc_info is not None and "bad plugin" in caplog.text
    skipped = {s["hook"]: s["reason"] for s in base.changelog.records[0].skipped}
    assert skipped["boom.raises"] == "error: RuntimeError: bad plugin"


async def test_r3_2_a_hook_past_its_timeout_is_cancelled_and_the_tour_goes_on(load_plugins: Loader) -> None:
    manager = load_plugins({
        "slow.py": """
            import asyncio
            from evacore.plugins import Plugin
            plugin = Plugin(name="slow", version="1")
            state = {"sleeping": False, "cancelled": False, "stubborn_sleeping": False,
                     "stubborn_cancelled": False}

            @plugin.interceptor(priority=1, timeout=0.05)
            async def sleeps(ctx):
                ctx.messages[1]["content"] = "edited before the deadline"
                state["sleeping"] = True
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    state["cancelled"] = True
                    raise

            @plugin.interceptor(priority=2, timeout=0.05)
            async def stubborn(ctx):
                ctx.messages[1]["content"] = "swallowed the cancellation"
                state["stubborn_sleeping"] = True
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    state["stubborn_cancelled"] = True

            @plugin.interceptor(priority=3)
            async def after(ctx):
                ctx.messages[1]["content"] += "!"
        """,
    })
    t0 = time.perf_counter()
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=tour())
    assert time.perf_counter() - t0 < 2
    outcomes = {r.key: (r.outcome, r.reason) for r in result.log}
    assert outcomes["slow.sleeps"] == ("timeout", "timeout after 0.05s")
    assert outcomes["slow.stubborn"] == ("timeout", "timeout after 0.05s")
    assert outcomes["slow.after"][0] == "applied"
    assert result.messages[1]["content"] == "message 1!"
    state = manager.plugin("slow").hooks[0].fn.__globals__["state"]
    # both hooks were asleep when their deadline came, and both saw the cancellation
    assert state == {"sleeping": True, "cancelled": True, "stubborn_sleeping": True,
                     "stubborn_cancelled": True}


async def test_r3_3_a_hook_sees_the_abort_signal_fire(load_plugins: Loader) -> None:
    manager = load_plugins({
        "waiter.py": """
            from evacore.plugins import Plugin
            plugin = Plugin(name="waiter", version="1")

            @plugin.interceptor(priority=1, timeout=5)
            async def waits(ctx):
                assert not ctx.abort.is_set()
                await ctx.abort.wait()
                ctx.messages[1]["content"] = f"aborted={ctx.abort.is_set()}"

            @plugin.interceptor(priority=2)
            async def later(ctx):
                ctx.messages[1]["content"] = "should not run"
        """,
    })
    abort = asyncio.Event()
    asyncio.get_running_loop().call_later(0.02, abort.set)
    t0 = time.perf_counter()
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=tour(abort=abort))
    assert time.perf_counter() - t0 < 2
    assert result.messages[1]["content"] == "aborted=True"
    assert [(r.key, r.outcome, r.reason) for r in result.log][1] == ("waiter.later", "skipped", "tour aborted")


async def test_r3_3_the_tours_own_cancellation_propagates(load_plugins: Loader) -> None:
    manager = load_plugins({
        "sleepy.py": """
            import asyncio
            from evacore.plugins import Plugin
            plugin = Plugin(name="sleepy", version="1")

            asleep = asyncio.Event()
            state = {"cancelled": False}

            @plugin.interceptor(timeout=30)
            async def sleeps(ctx):
                asleep.set()
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    state["cancelled"] = True
                    raise
        """,
    })
    module = manager.plugin("sleepy").hooks[0].fn.__globals__
    task = asyncio.create_task(manager.dispatcher.run_interceptors(prompt(), ctx_base=tour()))
    await asyncio.wait_for(module["asleep"].wait(), 5)  # the hook is running before the cancel
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert module["state"]["cancelled"] is True
    assert manager.state("sleepy").failures == 0


async def test_r3_4_a_hook_without_granted_permission_is_skipped_with_the_reason(load_plugins: Loader) -> None:
    manager = load_plugins({
        "writer.py": """
            from evacore.plugins import Plugin
            plugin = Plugin(name="writer", version="1")

            @plugin.interceptor(capabilities=["prompt:write", "network"])
            async def rewrite(ctx):
                ctx.messages[1]["content"] = "rewritten"
        """,
    }, grant={"writer": ["prompt:write"]})
    base = tour()
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=base)
    assert [(r.outcome, r.reason) for r in result.log] == [("skipped", "permission not granted: network")]
    assert result.messages == prompt()
    assert base.changelog.records[0].skipped == [{"hook": "writer.rewrite", "reason": "permission not granted: network"}]
    manager.update("writer", permissions=["prompt:write", "network"])
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=tour())
    assert result.messages[1]["content"] == "rewritten"


async def test_r3_4_third_party_plugins_start_enabled_without_permissions(load_plugins: Loader) -> None:
    manager = load_plugins({
        "fresh.py": """
            from evacore.plugins import Plugin
            plugin = Plugin(name="fresh", version="1")

            @plugin.interceptor
            async def touch(ctx):
                ctx.messages[1]["content"] = "x"
        """,
    }, grant_declared=False)
    entry = manager.describe("fresh")
    assert (entry["enabled"], entry["permissions"], entry["state"]) == (True, [], "waiting_permission")
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=tour())
    assert result.log[0].reason == "permission not granted: prompt:write"
    manager.update("fresh", enabled=False, permissions=["prompt:write"])
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=tour())
    assert result.log[0].reason == "plugin disabled"


async def test_r3_4_a_read_only_hook_that_mutates_is_rejected(load_plugins: Loader) -> None:
    manager = load_plugins({
        "reader.py": """
            from evacore.plugins import Plugin
            plugin = Plugin(name="reader", version="1")

            @plugin.interceptor(priority=1, capabilities=["prompt:read"])
            async def sneaky(ctx):
                ctx.messages[1]["content"] = "changed by a reader"

            @plugin.interceptor(priority=2, capabilities=["prompt:read"])
            async def honest(ctx):
                ctx.log.info("%d messages", len(ctx.messages))
                assert ctx.messages[1]["content"] == "message 1"
        """,
    })
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=tour())
    assert [(r.key, r.outcome, r.reason) for r in result.log] == [
        ("reader.sneaky", "rejected", "read-only hook changed the prompt"),
        ("reader.honest", "no_change", None),
    ]
    assert result.messages == prompt() and not result.changed


@pytest.mark.parametrize("edit, reason", [
    ("del ctx.messages[0]", "removed protected element 'sys'"),
    ("ctx.messages[:] = ctx.messages[1:]", "removed protected element 'sys'"),
    ("ctx.messages[0]['role'] = 'user'", "altered protected element 'sys' (role)"),
    ("ctx.messages[0]['protected'] = False", "altered protected element 'sys' (protected)"),
    ("ctx.messages[-1]['role'] = 'system'", "altered protected element 'input' (role)"),
    ("ctx.messages[1]['protected'] = True",
     "marked element 'h1' protected (a plugin cannot create protected content)"),
    ("ctx.messages[1]['source'] = 'system'", "changed the source of element 'h1'"),
    ("ctx.messages.append({'id': 'h2', 'role': 'user', 'content': 'x'})", "duplicate element id 'h2'"),
    ("ctx.messages.append({'role': 'wizard', 'content': 'x'})", "role must be one of"),
    ("ctx.messages.append('just text')", "element 6 is a str, not a dict"),
])
async def test_r3_4_removing_protected_content_changing_its_role_or_flag_and_bad_shapes_are_rejected(
        load_plugins: Loader, edit: str, reason: str) -> None:
    manager = load_plugins({"bad.py": f"""
        from evacore.plugins import Plugin
        plugin = Plugin(name="bad", version="1")

        @plugin.interceptor
        async def edit(ctx):
            ctx.messages[2]["content"] = "an allowed edit, lost with the rest"
            {edit}
    """})
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=tour())
    record = result.log[0]
    assert record.outcome == "rejected" and reason in (record.reason or "")
    assert result.messages == prompt()
    assert manager.state("bad").failures == 1


async def test_r3_4_protected_elements_may_move_and_have_their_content_edited(load_plugins: Loader) -> None:
    manager = load_plugins({"mover.py": """
        from evacore.plugins import Plugin
        plugin = Plugin(name="mover", version="1")

        @plugin.interceptor
        async def edit(ctx):
            sys_el = ctx.messages.pop(0)
            ctx.messages.insert(1, sys_el)
            assert ctx.may_edit(sys_el) and ctx.may_edit(ctx.messages[-1])
            sys_el["content"] = "You are Eva, in French."
            ctx.messages[-1]["content"] = "hello (translated)"
    """})
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=tour())
    assert result.log[0].outcome == "applied"
    assert [m["id"] for m in result.messages][:2] == ["h1", "sys"]
    sys_el = result.messages[1]
    assert sys_el["content"] == "You are Eva, in French." and sys_el["protected"] is True
    assert sys_el["tokens"] is None  # recounted by the pipeline
    assert result.messages[-1] | {"tokens": 5} == element("input", "user", "hello (translated)",
                                                          protected=True, kind="input")


async def test_r3_6_new_elements_get_host_ids_and_the_change_log_is_computed_by_the_host(
        load_plugins: Loader) -> None:
    manager = load_plugins({"lore.py": """
        from evacore.plugins import Plugin
        plugin = Plugin(name="lore-plus", version="1")

        @plugin.interceptor
        async def inject(ctx):
            ctx.messages.insert(1, {"role": "system", "content": "[Lore] The city.", "protected": True,
                                    "source": "card.description", "tokens": 0})
            ctx.messages.insert(2, {"id": "own-id", "role": "system", "content": "[Lore] Rain."})
            ctx.messages[4]["content"] = "message 2, shortened"
            del ctx.messages[3]
    """})
    budget_calls = []

    def budget_check(messages):
        budget_calls.append([m["tokens"] for m in messages])
        return [m for m in messages if m["id"] != "h3"]

    base = tour()
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=base, budget_check=budget_check)
    new = result.messages[1]
    assert (new["id"], new["source"], new["protected"], new["tokens"]) == (
        "plugin:lore-plus:1", "plugin:lore-plus", False, None)
    assert result.messages[2]["id"] == "own-id"
    assert budget_calls == [[5, None, None, None, 5, 5, 5]]
    log = base.changelog.to_json()
    assert [r["actor"] for r in log] == ["stage", "plugin:lore-plus.inject", "stage:budget"]
    hook = log[1]
    assert [a["id"] for a in hook["added"]] == ["plugin:lore-plus:1", "own-id"]
    assert [r["id"] for r in hook["removed"]] == ["h1"]
    assert hook["changed"] == [{"id": "h2", "before": {"content": "message 2", "tokens": 5},
                                "after": {"content": "message 2, shortened", "tokens": None}}]
    assert [r["id"] for r in log[2]["removed"]] == ["h3"]
    assert result.changed and result.budget is not None


async def test_r3_2_postprocess_hooks_follow_the_same_contract(load_plugins: Loader) -> None:
    manager = load_plugins({"post.py": """
        import asyncio
        from evacore.plugins import Plugin
        plugin = Plugin(name="post", version="1")

        @plugin.postprocess(priority=1)
        async def shout(ctx):
            ctx.text = ctx.text.upper()

        @plugin.postprocess(priority=2, timeout=0.05)
        async def slow(ctx):
            ctx.text = "lost"
            await asyncio.sleep(10)

        @plugin.postprocess(priority=3, capabilities=["response:read"])
        async def peek(ctx):
            ctx.text = "a reader may not write"

        @plugin.postprocess(priority=4)
        async def sign(ctx):
            ctx.text += " -- Eva"
    """})
    base = tour()
    text, log = await manager.dispatcher.run_postprocess("hello", ctx_base=base)
    assert text == "HELLO -- Eva"
    assert [(r.hook, r.outcome) for r in log] == [("shout", "applied"), ("slow", "timeout"),
                                                  ("peek", "rejected"), ("sign", "applied")]
    assert base.changelog.records[0].stage == "postprocess_hooks"


async def test_r3_5_a_plugin_that_keeps_failing_is_short_circuited(load_plugins: Loader) -> None:
    manager = load_plugins({"flaky.py": """
        from evacore.plugins import Plugin
        plugin = Plugin(name="flaky", version="1")

        @plugin.interceptor
        async def fails(ctx):
            raise ValueError("still broken")
    """}, breaker_threshold=3)
    for _ in range(3):
        await manager.dispatcher.run_interceptors(prompt(), ctx_base=tour())
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=tour())
    assert result.log[0].outcome == "skipped"
    assert result.log[0].reason == "circuit open after 3 consecutive failures"
    assert manager.describe("flaky")["state"] == "circuit_open"
    manager.update("flaky", enabled=True)
    result = await manager.dispatcher.run_interceptors(prompt(), ctx_base=tour())
    assert result.log[0].outcome == "error"


async def test_r3_no_plugins_costs_nothing_and_returns_the_prompt(load_plugins: Loader) -> None:
    manager = load_plugins({})
    msgs = prompt()
    result = await manager.dispatcher.run_interceptors(msgs, ctx_base=tour())
    assert result.messages == msgs and result.log == [] and result.messages is not msgs
    assert await manager.dispatcher.run_postprocess("x", ctx_base=tour()) == ("x", [])


async def test_r3_multimodal_content_is_copied_deeply(load_plugins: Loader) -> None:
    manager = load_plugins({"parts.py": """
        from evacore.plugins import Plugin
        plugin = Plugin(name="parts", version="1")

        @plugin.interceptor(capabilities=["prompt:read"])
        async def mutate_parts(ctx):
            ctx.messages[1]["content"][0]["text"] = "changed"
    """})
    msgs = prompt()
    msgs[1]["content"] = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]
    result = await manager.dispatcher.run_interceptors(msgs, ctx_base=tour())
    assert result.log[0].outcome == "rejected"
    assert msgs[1]["content"][0]["text"] == "look"


def test_r3_element_helper_shape() -> None:
    assert set(element("a")) >= {"id", "role", "content", "protected", "source", "kind", "tokens"}


async def test_a_hook_that_never_reads_the_prompt_costs_no_copy_of_it(load_plugins: Loader) -> None:
    """Given a function that makes the messages, the dispatcher calls it only when a hook
    reads them: a hook with nothing to do (regex scripts with none set) leaves the prompt
    unbuilt; one that reads it gets it, and its change comes back."""
    made: list[int] = []

    def make() -> list[dict]:  # type: ignore[type-arg]
        made.append(1)
        return prompt()

    idle = load_plugins({"idle.py": """
        from evacore.plugins import Plugin
        plugin = Plugin(name="idle", version="1")

        @plugin.interceptor(capabilities=["prompt:write"])
        async def nothing(ctx):
            return None
    """})
    result = await idle.dispatcher.run_interceptors(make, ctx_base=tour())
    assert made == [] and result.messages is None and not result.changed
    assert [r.outcome for r in result.log] == ["no_change"]

    reader = load_plugins({"idle.py": _tagger("idle", 100, ["tag"])})
    result = await reader.dispatcher.run_interceptors(make, ctx_base=tour())
    assert made == [1] and result.changed
    assert result.messages is not None
    assert result.messages[-2]["content"].endswith("idle.tag")
