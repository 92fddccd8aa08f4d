// One chat message as an <article data-role>: Markdown body, images, tool steps, variants
// and the actions of the last answer; and the article an answer streams into.
// Must not: call the API (the chat view passes the actions in) or re-render on every token.

import { useState, useRef, useEffect, useMemo } from "preact/hooks";
import { html, Pure } from "./ui.js";
import { renderMarkdown, StreamView } from "./markdown.js";

const EMBEDDED = /^data:image\/(png|jpe?g|gif|webp);/i;

function Body({ text }) {
  const markup = useMemo(() => renderMarkdown(text), [text]);
  return html`<div class="md" dangerouslySetInnerHTML=${{ __html: markup }} />`;
}

function Images({ images }) {
  const urls = (images || []).map((i) => (typeof i === "string" ? i : i && i.url))
    .filter((u) => typeof u === "string" && EMBEDDED.test(u));
  if (!urls.length) return null;
  return html`<div class="msg-images">${urls.map((u) => html`<img src=${u} alt="attached image" />`)}</div>`;
}

function ToolSteps({ steps }) {
  const calls = [];
  for (const step of steps || []) {
    const results = new Map((step.results || []).map((r) => [r.id, r.content]));
    for (const call of step.tool_calls || []) calls.push({ ...call, result: results.get(call.id) });
  }
  if (!calls.length) return null;
  return html`<div class="tools">${calls.map((c) => html`<${ToolCall} call=${c} />`)}</div>`;
}

export function ToolCall({ call }) {
  return html`<details class="tool">
    <summary><span class="tool-icon" aria-hidden="true">⚙</span> ${call.name}
      ${call.result === undefined ? html`<span class="muted"> running…</span>` : null}</summary>
    <div class="tool-label">arguments</div><pre>${pretty(call.arguments)}</pre>
    ${call.result !== undefined ? html`<div class="tool-label">result</div><pre>${call.result}</pre>` : null}
  </details>`;
}

function pretty(args) {
  try { return JSON.stringify(JSON.parse(args), null, 2); } catch { return String(args ?? ""); }
}

function Editor({ text, onSave, onCancel }) {
  const [value, setValue] = useState(text);
  const ref = useRef(null);
  useEffect(() => { ref.current && ref.current.focus(); }, []);
  return html`<form class="msg-edit" onSubmit=${(e) => { e.preventDefault(); onSave(value); }}>
    <textarea ref=${ref} aria-label="Edited text" rows=${Math.min(16, Math.max(3, value.split("\n").length))}
      value=${value} onInput=${(e) => setValue(e.currentTarget.value)}
      onKeyDown=${(e) => { if (e.key === "Escape") onCancel(); }} />
    <div class="row-end">
      <button type="button" class="btn btn-ghost" onClick=${onCancel}>Cancel</button>
      <button type="submit" class="btn btn-primary">Save</button>
    </div>
  </form>`;
}

function Header({ message, extra }) {
  const label = message.role === "user" ? (message.name || "You")
    : message.role === "assistant" ? (message.name || "Assistant") : "System";
  return html`<header class="msg-head">
    <span class=${`avatar avatar-${message.role}`} aria-hidden="true">${label.slice(0, 1).toUpperCase()}</span>
    <span class="msg-name">${label}</span>
    ${extra}
  </header>`;
}

const AT_THE_END = "Only the answer at the end of the chat can be rewritten or continued";

/** A stored message. Re-renders only when its props change (not while another streams).
 * `last`: the chat's last answer (its actions); `followed`: messages come after it. */
export class MessageArticle extends Pure {
  constructor() {
    super();
    this.state = { editing: false, armed: false };
  }

  render({ message, last, followed, busy, actions }, { editing, armed }) {
    const variants = message.variants || [];
    const index = variants.findIndex((v) => v.id === message.active_variant);
    const variant = index >= 0 ? variants[index] : null;
    const finish = variant && variant.finish_reason;
    const tags = html`${finish && !["stop", "greeting", "manual", "tool_calls"].includes(finish)
      ? html`<span class="tag">${finish}</span>` : null}
      ${message.hidden ? html`<span class="tag">hidden</span>` : null}`;
    const position = variants.length > 1 || last
      ? html`<span class="variant-pos" aria-label="variant position">${index + 1}/${variants.length}</span>` : null;
    return html`<article class=${`msg msg-${message.role}`} data-role=${message.role}
        data-message-id=${message.id}>
      <${Header} message=${message} extra=${tags} />
      ${editing
        ? html`<${Editor} text=${message.content}
            onCancel=${() => this.setState({ editing: false })}
            onSave=${(text) => { this.setState({ editing: false }); actions.edit(message, text); }} />`
        : html`<${Body} text=${message.content} />`}
      <${Images} images=${message.images} />
      <${ToolSteps} steps=${variant && variant.steps} />
      <footer class="msg-actions">
        ${message.role === "assistant" && last ? html`
          <button type="button" class="btn btn-icon" disabled=${busy || index <= 0}
            title="Previous variant" aria-label="Previous variant"
            onClick=${() => actions.variant(message, index - 1)}>‹</button>
          ${position}
          <button type="button" class="btn btn-icon"
            disabled=${busy || (followed && index >= variants.length - 1)}
            title=${index < variants.length - 1 ? "Next variant"
              : followed ? AT_THE_END : "Next variant (writes a new one)"}
            aria-label="Next variant" onClick=${() => actions.variant(message, index + 1)}>›</button>
          <span class="sep" />
          <button type="button" class="btn btn-ghost" disabled=${busy || followed}
            title=${followed ? AT_THE_END : null}
            onClick=${() => actions.generate("regenerate")}>Regenerate</button>
          <button type="button" class="btn btn-ghost" disabled=${busy || followed}
            title=${followed ? AT_THE_END : null}
            onClick=${() => actions.generate("continue")}>Continue</button>
          <button type="button" class="btn btn-ghost" disabled=${!variant || !variant.tour_id}
            onClick=${() => actions.inspect(variant.tour_id)}>Inspect</button>
        ` : position}
        <span class="grow" />
        <button type="button" class="btn btn-ghost btn-small" disabled=${busy} title="Edit the text"
          onClick=${() => this.setState({ editing: true })}>Edit</button>
        <button type="button" class=${`btn btn-ghost btn-small ${armed ? "btn-danger" : ""}`}
          disabled=${busy} title="Delete"
          onClick=${() => {
            if (!armed) { this.setState({ armed: true }); setTimeout(() => this.setState({ armed: false }), 4000); }
            else actions.remove(message);
          }}>${armed ? "Really delete?" : "Delete"}</button>
      </footer>
    </article>`;
  }
}

/**
 * The answer being written. The chat view gets a StreamView through `onView` and appends
 * tokens to it directly; this component renders again only for hold, tool and error events.
 */
export function StreamingArticle({ name, initial, held, tools, error, onView }) {
  const body = useRef(null);
  useEffect(() => {
    const view = new StreamView(body.current, initial || "");
    onView(view);
    return () => onView(null);
  }, []);
  const message = { role: "assistant", name };
  return html`<article class="msg msg-assistant msg-streaming" data-role="assistant"
      aria-busy="true">
    <${Header} message=${message} extra=${held ? html`<span class="tag tag-hold" role="status">checking…</span>` : null} />
    <div class="md" ref=${body} />
    ${tools && tools.length ? html`<div class="tools">${tools.map((c) => html`<${ToolCall} call=${c} />`)}</div>` : null}
    ${error ? html`<div class="note note-error" role="alert">${error.message}</div>` : html`<span class="cursor" aria-hidden="true" />`}
  </article>`;
}
