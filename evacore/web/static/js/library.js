// The Characters and Lorebooks views: import (file input labelled `Import`, or drop files on
// the page), list, export and delete.
// Must not: parse the files (the server does) or keep copies of them.

import { useEffect, useState } from "preact/hooks";
import { api, download } from "./api.js";
import { html, useLoad, ErrorNote, ConfirmButton, when, num } from "./ui.js";

function ImportBar({ accept, hint, onFiles, results }) {
  return html`<div class="import-bar">
    <label class="btn btn-primary" for="import-file">Import</label>
    <input id="import-file" class="sr-only" type="file" multiple accept=${accept}
      onChange=${(e) => { const files = [...e.currentTarget.files]; e.currentTarget.value = ""; onFiles(files); }} />
    <span class="muted small">${hint}</span>
    ${results && results.length ? html`<ul class="import-results" role="status">
      ${results.map((r) => html`<li class=${r.error ? "bad" : "good"}>
        ${r.error ? `${r.file.name}: ${r.error.message}` : `Imported ${r.result.name || r.file.name}`}
      </li>`)}</ul>` : null}
  </div>`;
}

function Avatar({ id, name }) {
  const [url, setUrl] = useState(null);
  useEffect(() => {
    let live = true;
    let made = null;
    api(`characters/${id}/avatar`).then((blob) => {
      if (!live || !(blob instanceof Blob)) return;
      made = URL.createObjectURL(blob);
      setUrl(made);
    }, () => {});
    return () => { live = false; if (made) URL.revokeObjectURL(made); };
  }, [id]);
  return url ? html`<img class="card-avatar" src=${url} alt="" />`
    : html`<span class="card-avatar card-avatar-empty" aria-hidden="true">${(name || "?").slice(0, 1)}</span>`;
}

export function CharactersView({ tick, results, onFiles, navigate }) {
  const [data, error, reload] = useLoad(() => api("characters?limit=1000"), [tick]);
  const [problem, setProblem] = useState(null);
  const list = (data && data.characters) || [];

  async function chatWith(c) {
    try {
      const chat = await api("chats", { body: { character_id: c.id } });
      navigate(`#/chats/${chat.id}`);
    } catch (err) { setProblem(err); }
  }
  async function remove(c) {
    try { await api(`characters/${c.id}`, { method: "DELETE" }); reload(); }
    catch (err) { setProblem(err); }
  }
  const exporter = (c, format) => () => download(`characters/${c.id}/export?format=${format}`,
    `${c.name}.${format}`).catch(setProblem);

  return html`<section class="page" aria-labelledby="characters-title">
    <div class="page-head"><h1 id="characters-title">Characters</h1>
      <span class="muted">${data ? `${num(data.total ?? list.length)} stored` : ""}</span></div>
    <${ImportBar} accept=".png,.json,.charx,image/png,application/json"
      hint="Character cards: PNG, JSON or CHARX (V1, V2, V3). You can also drop files anywhere on the page."
      onFiles=${(files) => onFiles(files, "character")} results=${results} />
    <${ErrorNote} error=${error || problem} />
    <ul class="cards">${list.map((c) => html`<li class="card" key=${c.id} data-character-id=${c.id}>
      <${Avatar} id=${c.id} name=${c.name} />
      <div class="card-body">
        <h2 class="card-name">${c.name}</h2>
        <div class="muted small">${[c.creator && `by ${c.creator}`, c.spec, when(c.created_at)].filter(Boolean).join(" · ")}</div>
        ${c.tags.length ? html`<div class="tags">${c.tags.slice(0, 6).map((t) => html`<span class="tag">${t}</span>`)}</div>` : null}
        <div class="card-actions">
          <button type="button" class="btn btn-primary btn-small" onClick=${() => chatWith(c)}>Chat with ${c.name}</button>
          <span class="export">Export
            <button type="button" class="btn btn-ghost btn-small" onClick=${exporter(c, "png")}>PNG</button>
            <button type="button" class="btn btn-ghost btn-small" onClick=${exporter(c, "json")}>JSON</button>
            <button type="button" class="btn btn-ghost btn-small" onClick=${exporter(c, "charx")}>CHARX</button></span>
          <${ConfirmButton} label="Delete" confirm="Really delete?" className="btn-small" onConfirm=${() => remove(c)} />
        </div>
      </div>
    </li>`)}</ul>
    ${data && !list.length ? html`<div class="empty"><p>No characters yet. Import a card to start.</p></div>` : null}
  </section>`;
}

function Entries({ id }) {
  const [book, error] = useLoad(() => api(`lorebooks/${id}`), [id]);
  if (error) return html`<${ErrorNote} error=${error} />`;
  if (!book) return html`<p class="muted small">Loading…</p>`;
  return html`<table class="table small"><thead><tr><th>uid</th><th>keys</th><th>comment</th><th>content</th></tr></thead>
    <tbody>${book.entries.map((e) => html`<tr class=${e.disable ? "muted" : ""}>
      <td>${e.uid}</td><td>${(e.key || []).join(", ")}${e.constant ? " (constant)" : ""}</td>
      <td>${e.comment || ""}</td><td class="clip">${(e.content || "").slice(0, 160)}</td></tr>`)}</tbody></table>`;
}

function Book({ book, onError, onDelete }) {
  const [open, setOpen] = useState(false);
  const links = book.links.length ? book.links.map((l) => l.target_kind).join(", ") : "not linked";
  return html`<li class="book">
    <details onToggle=${(e) => setOpen(e.currentTarget.open)}>
      <summary><span class="book-name">${book.name}</span>
        <span class="muted small">${num(book.entries)} entries · ${links}</span></summary>
      ${book.description ? html`<p class="small">${book.description}</p>` : null}
      ${open ? html`<${Entries} id=${book.id} />` : null}
    </details>
    <div class="card-actions">
      <button type="button" class="btn btn-ghost btn-small"
        onClick=${() => download(`lorebooks/${book.id}/export`, `${book.name}.json`).catch(onError)}>Export</button>
      <${ConfirmButton} label="Delete" confirm="Really delete?" className="btn-small" onConfirm=${onDelete} />
    </div>
  </li>`;
}

export function LorebooksView({ tick, results, onFiles }) {
  const [data, error, reload] = useLoad(() => api("lorebooks"), [tick]);
  const [problem, setProblem] = useState(null);
  const list = (data && data.lorebooks) || [];
  async function remove(b) {
    try { await api(`lorebooks/${b.id}`, { method: "DELETE" }); reload(); }
    catch (err) { setProblem(err); }
  }
  return html`<section class="page" aria-labelledby="lorebooks-title">
    <div class="page-head"><h1 id="lorebooks-title">Lorebooks</h1>
      <span class="muted">${data ? `${num(list.length)} stored` : ""}</span></div>
    <${ImportBar} accept=".json,application/json"
      hint="SillyTavern World Info JSON, a lorebook_v3 object or a card's character book."
      onFiles=${(files) => onFiles(files, "lorebook")} results=${results} />
    <${ErrorNote} error=${error || problem} />
    <ul class="books">${list.map((b) => html`<${Book} key=${b.id} book=${b} onError=${setProblem}
      onDelete=${() => remove(b)} />`)}</ul>
    ${data && !list.length ? html`<div class="empty"><p>No lorebooks yet. Import a World Info file.</p></div>` : null}
  </section>`;
}
