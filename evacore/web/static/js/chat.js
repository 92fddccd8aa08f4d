// One open chat: its messages, the streaming answer, the composer, and the actions of the
// last answer (regenerate, continue, variants, edit, delete, inspect).
// Must not: re-render the history per token: tokens go straight into a StreamView.

import { useState, useEffect, useRef, useMemo, useCallback } from "preact/hooks";
import { api, sseEvents } from "./api.js";
import { html, ErrorNote, dataUrl } from "./ui.js";
import { MessageArticle, StreamingArticle } from "./messages.js";

const NEAR_BOTTOM = 120;

export function ChatPane({ chatId, title, onActivity, onInspect }) {
  const [messages, setMessages] = useState(null);
  const [failure, setFailure] = useState(null);
  const [stream, setStream] = useState(null);
  const live = useRef({ controller: null, tourId: null, view: null, early: "" });
  const scroller = useRef(null);
  const stick = useRef(true);

  const load = useCallback(async () => {
    const body = await api(`chats/${chatId}/messages`);
    setMessages(body.messages);
  }, [chatId]);

  useEffect(() => {
    setMessages(null);
    setFailure(null);
    load().catch(setFailure);
  }, [chatId]);

  const scrollDown = () => {
    const el = scroller.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  };
  useEffect(scrollDown, [messages, stream]);

  const onScroll = () => {
    const el = scroller.current;
    stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < NEAR_BOTTOM;
  };

  async function generate(mode, message) {
    const last = messages && messages[messages.length - 1];
    const target = mode !== "normal" && last && last.role === "assistant" ? last : null;
    const state = { controller: new AbortController(), tourId: null, view: null, early: "" };
    live.current = state;
    setFailure(null);
    stick.current = true;
    if (mode === "normal") {
      setMessages((list) => [...(list || []), {
        id: "pending", role: "user", content: message.content, images: message.images,
        variants: [], name: "You",
      }]);
    }
    setStream({ mode, targetId: target && target.id, held: false, tools: [], error: null,
                name: target ? target.name : "Assistant",
                initial: mode === "continue" && target ? target.content : "" });
    const body = { mode, stream: true };
    if (message) body.message = message;
    try {
      const response = await api(`chats/${chatId}/generate`, {
        body, signal: state.controller.signal, raw: true,
      });
      for await (const { event, data } of sseEvents(response)) {
        if (event === "tour") {
          state.tourId = data.tour_id;
          if (data.held) setStream((s) => ({ ...s, held: true }));
        } else if (event === "hold") {
          setStream((s) => ({ ...s, held: true }));
        } else if (event === "delta") {
          if (state.view) state.view.append(data.text); else state.early += data.text;
          setStream((s) => (s.held ? { ...s, held: false } : s));
        } else if (event === "tool_call") {
          setStream((s) => ({ ...s, tools: [...s.tools, { ...data, result: undefined }] }));
        } else if (event === "tool_result") {
          setStream((s) => ({ ...s, tools: s.tools.map((c) => (c.id === data.id
            ? { ...c, result: data.content } : c)) }));
        } else if (event === "error") {
          setFailure(new Error(data.message || data.code));
        }
      }
    } catch (error) {
      if (error.name !== "AbortError") setFailure(error);
    } finally {
      live.current = { controller: null, tourId: null, view: null, early: "" };
      try { await load(); } catch (error) { setFailure(error); }
      setStream(null);
      onActivity();
    }
  }

  async function stop() {
    const state = live.current;
    if (!state.controller) return;
    if (state.tourId) {
      try { await api(`tours/${state.tourId}/abort`, { method: "POST" }); } catch { /* gone */ }
    }
    state.controller.abort();
  }

  const busy = stream !== null;
  const actions = useMemo(() => ({
    generate: (mode) => generate(mode),
    async variant(message, index) {
      const variants = message.variants || [];
      if (index < 0) return;
      if (index >= variants.length) return generate("swipe");
      try {
        const updated = await api(`chats/${chatId}/messages/${message.id}`, {
          method: "PATCH", body: { active_variant: variants[index].id },
        });
        setMessages((list) => list.map((m) => (m.id === updated.id ? updated : m)));
      } catch (error) { setFailure(error); }
    },
    async edit(message, content) {
      try {
        const updated = await api(`chats/${chatId}/messages/${message.id}`, {
          method: "PATCH", body: { content },
        });
        setMessages((list) => list.map((m) => (m.id === updated.id ? updated : m)));
      } catch (error) { setFailure(error); }
    },
    async remove(message) {
      try {
        await api(`chats/${chatId}/messages/${message.id}`, { method: "DELETE" });
        await load();
      } catch (error) { setFailure(error); }
    },
    inspect: (tourId) => onInspect(tourId),
  }), [chatId, messages]);

  const onView = useCallback((view) => {
    const state = live.current;
    state.view = view;
    if (view) {
      view.onFlush = scrollDown;
      if (state.early) { view.append(state.early); state.early = ""; }
    }
  }, []);

  const list = messages || [];
  const lastIndex = list.length - 1;
  // the last answer keeps its actions when messages follow it (a system note, say); what
  // only works on the chat's end (a new variant, continue, regenerate) is then disabled
  const lastAnswer = list.findLastIndex((m) => m.role === "assistant");
  const endsWithAnswer = lastIndex >= 0 && lastAnswer === lastIndex;
  const streaming = stream && html`<${StreamingArticle} key="streaming" name=${stream.name}
    initial=${stream.initial} held=${stream.held} tools=${stream.tools} onView=${onView} />`;
  return html`<section class="chat" aria-label=${title || "Chat"}>
    <div class="messages" ref=${scroller} onScroll=${onScroll}>
      ${messages === null && !failure ? html`<p class="muted center">Loading…</p>` : null}
      ${messages && list.length === 0 && !stream
        ? html`<div class="empty"><p>Say something to start the conversation.</p></div>` : null}
      ${list.map((m, i) => (stream && stream.targetId === m.id ? streaming
        : html`<${MessageArticle} key=${m.id} message=${m} busy=${busy}
            last=${i === lastAnswer} followed=${i < lastIndex} actions=${actions} />`))}
      ${stream && !stream.targetId ? streaming : null}
      ${!busy && messages && list.length > 0 && !endsWithAnswer ? html`
        <div class="row-center"><button type="button" class="btn btn-ghost"
          onClick=${() => generate("regenerate")}>Answer</button></div>` : null}
      <${ErrorNote} error=${failure} role="alert" />
    </div>
    <${Composer} busy=${busy} onSend=${(message) => generate("normal", message)} onStop=${stop} />
  </section>`;
}

function Composer({ busy, onSend, onStop }) {
  const [text, setText] = useState("");
  const [images, setImages] = useState([]);
  const [problem, setProblem] = useState(null);
  const box = useRef(null);
  const canSend = !busy && (text.trim() !== "" || images.length > 0);

  const send = () => {
    if (!canSend) return;
    onSend({ content: text, images });
    setText("");
    setImages([]);
    if (box.current) box.current.style.height = "auto";
    box.current && box.current.focus();
  };
  const keyDown = (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  };
  const attach = async (e) => {
    const files = [...e.currentTarget.files];
    e.currentTarget.value = "";
    try {
      const urls = await Promise.all(files.filter((f) => f.type.startsWith("image/")).map(dataUrl));
      setImages((list) => [...list, ...urls].slice(0, 16));
      setProblem(null);
    } catch (error) { setProblem(error); }
  };
  const grow = (e) => {
    setText(e.currentTarget.value);
    const el = e.currentTarget;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight, 240)}px`;
  };
  return html`<form class="composer" onSubmit=${(e) => { e.preventDefault(); send(); }}>
    ${images.length ? html`<div class="attachments">${images.map((url, i) => html`
      <span class="thumb"><img src=${url} alt=${`attachment ${i + 1}`} />
        <button type="button" class="thumb-x" aria-label=${`Remove image ${i + 1}`}
          onClick=${() => setImages((list) => list.filter((_, j) => j !== i))}>×</button></span>`)}
    </div>` : null}
    <${ErrorNote} error=${problem} />
    <div class="composer-row">
      <label class="btn btn-icon attach" title="Attach an image (vision connections see it)">
        <svg aria-hidden="true" viewBox="0 0 20 20" width="18" height="18"><path d="M10 4v12M4 10h12" stroke="currentColor" stroke-width="2" stroke-linecap="round" fill="none" /></svg><span class="sr-only">Attach image</span>
        <input type="file" accept="image/png,image/jpeg,image/gif,image/webp" multiple
          class="sr-only" onChange=${attach} />
      </label>
      <label class="sr-only" for="composer-text">Message</label>
      <textarea id="composer-text" ref=${box} rows="1" value=${text} onInput=${grow}
        onKeyDown=${keyDown} placeholder="Write a message…" />
      ${busy
        ? html`<button type="button" class="btn btn-stop" onClick=${onStop}>Stop</button>`
        : html`<button type="submit" class="btn btn-primary" disabled=${!canSend}>Send</button>`}
    </div>
    <div class="hint muted small">Enter sends · Shift+Enter adds a line</div>
  </form>`;
}
