// The Chats view: the list of chats, `New chat` with a character and connection picker,
// and the open chat.
// Must not: render messages itself (chat.js does).

import { useState } from "preact/hooks";
import { api } from "./api.js";
import { html, useLoad, ErrorNote, ConfirmButton, when } from "./ui.js";
import { ChatPane } from "./chat.js";

export function ChatsView({ chatId, navigate, onInspect }) {
  const [chats, chatsError, reloadChats] = useLoad(() => api("chats?limit=200"), []);
  const [characters] = useLoad(() => api("characters?limit=1000"), []);
  const [connections] = useLoad(() => api("connections"), []);
  const [character, setCharacter] = useState("");
  const [connection, setConnection] = useState("");
  const [problem, setProblem] = useState(null);
  const [drawer, setDrawer] = useState(false);

  const list = (chats && chats.chats) || [];
  const names = new Map(((characters && characters.characters) || []).map((c) => [c.id, c.name]));
  const open = list.find((c) => c.id === chatId);

  async function create(e) {
    e.preventDefault();
    setProblem(null);
    const body = {};
    if (character) body.character_id = character;
    if (connection) body.connection_id = connection;
    try {
      const chat = await api("chats", { body });
      reloadChats();
      setDrawer(false);
      navigate(`#/chats/${chat.id}`);
    } catch (error) { setProblem(error); }
  }

  async function remove(chat) {
    try {
      await api(`chats/${chat.id}`, { method: "DELETE" });
      reloadChats();
      if (chat.id === chatId) navigate("#/chats");
    } catch (error) { setProblem(error); }
  }

  return html`<div class=${`split ${drawer ? "drawer-open" : ""}`}>
    <aside class="sidebar" aria-label="Chat list">
      <form class="new-chat" onSubmit=${create}>
        <label class="field"><span>Character</span>
          <select value=${character} onChange=${(e) => setCharacter(e.currentTarget.value)}>
            <option value="">Default character</option>
            ${((characters && characters.characters) || []).map((c) => html`<option value=${c.id}>${c.name}</option>`)}
          </select></label>
        <label class="field"><span>Connection</span>
          <select value=${connection} onChange=${(e) => setConnection(e.currentTarget.value)}>
            <option value="">Default connection</option>
            ${((connections && connections.connections) || []).map((c) => html`<option value=${c.id}>${c.name}${c.model ? ` · ${c.model}` : ""}</option>`)}
          </select></label>
        <button type="submit" class="btn btn-primary btn-block">New chat</button>
        <${ErrorNote} error=${problem} />
      </form>
      <${ErrorNote} error=${chatsError} />
      <ul class="chat-list">
        ${list.map((c) => html`<li key=${c.id}>
          <a href=${`#/chats/${c.id}`} class=${c.id === chatId ? "active" : ""}
            aria-current=${c.id === chatId ? "page" : undefined} onClick=${() => setDrawer(false)}>
            <span class="chat-title">${c.title || "Untitled"}</span>
            <span class="chat-meta">${names.get(c.character_id) || ""} ${when(c.updated_at)}</span>
          </a></li>`)}
        ${chats && !list.length ? html`<li class="muted pad">No chats yet.</li>` : null}
      </ul>
    </aside>
    <div class="main">
      <div class="main-head">
        <button type="button" class="btn btn-ghost drawer-toggle" aria-expanded=${drawer}
          onClick=${() => setDrawer(!drawer)}>
          <svg aria-hidden="true" viewBox="0 0 20 20" width="20" height="20"><path d="M3 5h14M3 10h14M3 15h14" stroke="currentColor" stroke-width="2" stroke-linecap="round" /></svg>
          <span class="sr-only">All conversations</span></button>
        ${open ? html`<h1 class="chat-heading">${open.title || "Untitled"}
          ${names.get(open.character_id) && names.get(open.character_id) !== open.title
            ? html`<span class="muted">${names.get(open.character_id)}</span>` : null}</h1>
          <${ConfirmButton} label="Delete chat" confirm="Really delete this chat?"
            onConfirm=${() => remove(open)} />` : null}
      </div>
      ${chatId
        ? html`<${ChatPane} key=${chatId} chatId=${chatId} title=${open && open.title}
            onActivity=${reloadChats} onInspect=${onInspect} />`
        : html`<div class="empty big">
            <h1>Welcome to evacore</h1>
            <p>Pick a character and press <strong>New chat</strong>, or open a chat from the list.</p>
            <p class="muted">Every answer can be inspected: the exact request, what each stage and plugin changed, what was cut, which lore and rules fired.</p>
          </div>`}
    </div>
  </div>`;
}
