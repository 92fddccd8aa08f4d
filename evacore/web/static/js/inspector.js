// The inspector of one answer's tour: the exact request sent, the change log by stage and
// plugin, what context shifting cut, lorebook activations, rule firings, stage timings.
// Must not: render any of that text as HTML (it is shown as text, never parsed).

import { api } from "./api.js";
import { html, useLoad, ErrorNote, ms, num } from "./ui.js";

const STAGE_COLORS = ["#6366f1", "#0ea5e9", "#14b8a6", "#22c55e", "#eab308", "#f97316",
  "#ef4444", "#ec4899", "#a855f7", "#64748b", "#06b6d4", "#84cc16", "#f59e0b", "#8b5cf6"];

export function Inspector({ tourId, onClose }) {
  const [tour, error] = useLoad(() => api(`tours/${tourId}`), [tourId]);
  const d = (tour && tour.diagnostics) || {};
  return html`<aside class="inspector" aria-label="Inspector">
    <header class="inspector-head">
      <h2>Inspector</h2>
      <button type="button" class="btn btn-ghost" onClick=${onClose}>Close</button>
    </header>
    <${ErrorNote} error=${error} />
    ${!tour && !error ? html`<p class="muted pad">Loading…</p>` : null}
    ${tour ? html`<div class="inspector-body">
      <${Summary} tour=${tour} d=${d} />
      <${Timings} timings=${d.timings || {}} />
      <${Stages} d=${d} />
      <${Requests} requests=${d.requests || []} />
      <${Shift} d=${d} />
      <${Lore} lore=${d.lore} />
      <${Rules} d=${d} />
      <details class="raw"><summary>All diagnostics (JSON)</summary>
        <pre>${JSON.stringify(d, null, 2)}</pre></details>
    </div>` : null}
  </aside>`;
}

function modelOf(d) {
  const req = (d.requests || [])[0];
  return (req && req.body && req.body.model) || "";
}

function Summary({ tour, d }) {
  const tokens = d.tokens || {};
  const usage = (d.steps || []).reduce((sum, s) => sum + ((s.usage && s.usage.completion_tokens) || 0), 0);
  const rows = [
    ["status", tour.status], ["mode", tour.mode], ["model", modelOf(d)],
    ["prompt", tokens.prompt !== undefined ? `${num(tokens.fitted ?? tokens.prompt)} / ${num(tokens.budget)} tokens (${tokens.profile || "?"})` : "–"],
    ["answer", `${num(usage)} tokens`], ["first token", ms(d.first_token_ms)],
    ["requests", num((d.requests || []).length)],
  ];
  if (tour.error) rows.push(["error", `${tour.error.code}: ${tour.error.message}`]);
  return html`<section class="insp-section" aria-label="Summary"><dl class="facts">
    ${rows.map(([k, v]) => html`<div><dt>${k}</dt><dd class=${k === "model" ? "mono" : ""}>${v || "–"}</dd></div>`)}
  </dl></section>`;
}

function Timings({ timings }) {
  const entries = Object.entries(timings).filter(([, v]) => typeof v === "number");
  const total = entries.reduce((s, [, v]) => s + v, 0);
  if (!entries.length) return null;
  return html`<section class="insp-section" aria-label="Stage timings">
    <h3>Stage timings <span class="muted">${ms(total)}</span></h3>
    <div class="stack-bar" role="img" aria-label="stage timings">
      ${entries.map(([name, v], i) => html`<span class="seg"
        style=${{ flexGrow: Math.max(v, total / 400), background: STAGE_COLORS[i % STAGE_COLORS.length] }}
        title=${`${name}: ${ms(v)}`} />`)}
    </div>
    <ul class="legend">${entries.map(([name, v], i) => html`<li>
      <span class="swatch" style=${{ background: STAGE_COLORS[i % STAGE_COLORS.length] }} />
      ${name} <span class="muted">${ms(v)}</span></li>`)}</ul>
  </section>`;
}

function Ids({ label, ids, sign }) {
  if (!ids || !ids.length) return null;
  return html`<div class="ids"><span class=${`chip chip-${sign}`}>${label} ${ids.length}</span>
    <span class="mono small">${ids.map((x) => (typeof x === "string" ? x : JSON.stringify(x))).join(", ")}</span></div>`;
}

function Stages({ d }) {
  const changes = d.changes || [];
  const hooks = d.plugins || [];
  const order = [...Object.keys(d.timings || {})];
  for (const c of [...changes, ...hooks]) if (c.stage && !order.includes(c.stage)) order.push(c.stage);
  return html`<section class="insp-section" aria-label="Change log">
    <h3>Change log by stage and plugin</h3>
    <ol class="stages">${order.map((stage) => {
      // an entry that changed nothing says nothing (a plugin's own line below says it ran)
      const own = changes.filter((c) => c.stage === stage && (c.skipped
        || [c.added, c.removed, c.changed].some((ids) => ids && ids.length)));
      const hooked = hooks.filter((p) => p.stage === stage);
      const quiet = !own.length && !hooked.length;
      return html`<li class=${quiet ? "quiet" : ""}>
        <div class="stage-name"><span class="mono">${stage}</span>
          ${d.timings && d.timings[stage] !== undefined ? html`<span class="muted small">${ms(d.timings[stage])}</span>` : null}
          ${quiet ? html`<span class="muted small">no change</span>` : null}</div>
        ${own.map((c) => html`<div class="change">
          <div class="actor">${c.actor === "stage" ? "stage" : `plugin ${String(c.actor).replace(/^plugin:/, "")}`}</div>
          <${Ids} label="added" ids=${c.added} sign="add" />
          <${Ids} label="removed" ids=${c.removed} sign="del" />
          <${Ids} label="changed" ids=${c.changed} sign="mod" />
          ${c.skipped ? html`<div class="small muted">skipped: ${JSON.stringify(c.skipped)}</div>` : null}
        </div>`)}
        ${hooked.map((p) => html`<div class="change">
          <div class="actor">plugin ${p.plugin} <span class="mono small">${p.hook}</span></div>
          <span class=${`chip chip-${p.outcome === "no_change" ? "none" : p.outcome === "changed" ? "mod" : "del"}`}>${p.outcome}</span>
          <span class="muted small"> ${ms(p.duration_ms)}</span>
          ${p.reason || p.error ? html`<div class="small">${p.reason || p.error}</div>` : null}
        </div>`)}
      </li>`;
    })}</ol>
  </section>`;
}

function partsText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((p) => (p && p.type === "text" ? p.text : `[${(p && p.type) || "part"}]`)).join("\n");
  }
  return content == null ? "" : JSON.stringify(content);
}

function Requests({ requests }) {
  if (!requests.length) return null;
  return html`<section class="insp-section" aria-label="Request">
    <h3>Request sent to the provider</h3>
    ${requests.map((r, i) => {
      const body = r.body || {};
      const { messages, prompt, tools, ...rest } = body;
      return html`<div class="request">
        <div class="request-line"><span class="chip">step ${r.step ?? i}</span>
          <span class="mono small">${r.method} ${r.url}</span></div>
        <div class="mono small muted">${Object.entries(rest).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join("  ")}</div>
        ${tools ? html`<div class="small muted">${tools.length} tools offered: ${tools.map((t) => (t.function || t).name).join(", ")}</div>` : null}
        ${prompt !== undefined ? html`<pre class="prompt">${prompt}</pre>` : null}
        ${(messages || []).map((m) => html`<div class=${`wire wire-${m.role}`}>
          <div class="wire-role">${m.role}${m.name ? ` · ${m.name}` : ""}${m.tool_call_id ? ` · ${m.tool_call_id}` : ""}</div>
          <pre>${partsText(m.content)}${m.tool_calls ? `\n${JSON.stringify(m.tool_calls, null, 2)}` : ""}</pre>
        </div>`)}
        <details class="raw"><summary>Exact body (JSON)</summary><pre>${JSON.stringify(r, null, 2)}</pre></details>
      </div>`;
    })}
  </section>`;
}

function Shift({ d }) {
  const shift = d.shift || {};
  const removed = shift.removed || [];
  const memoryCut = (d.memory && d.memory.retrieval && d.memory.retrieval.cut) || [];
  return html`<section class="insp-section" aria-label="Context shifting">
    <h3>Context shifting</h3>
    ${removed.length ? html`<table class="table small"><thead><tr><th>removed</th><th>kind</th><th>tokens</th><th>reason</th></tr></thead>
      <tbody>${removed.map((r) => html`<tr><td class="mono">${r.id}</td><td>${r.kind}</td><td>${num(r.tokens)}</td><td>${r.reason}</td></tr>`)}</tbody></table>`
      : html`<p class="muted small">Nothing was cut: the whole history fit (${num(shift.history_loaded)} messages loaded${shift.history_reached_start ? ", from the start" : ""}).</p>`}
    ${memoryCut.length ? html`<p class="small">Memory retrieval left out ${memoryCut.length} older ${memoryCut.length === 1 ? "passage" : "passages"}: ${memoryCut.map((c) => `#${c.id} (${c.reason}${c.score !== undefined ? `, score ${c.score}` : ""})`).join(", ")}</p>` : null}
  </section>`;
}

function Lore({ lore }) {
  if (!lore) return null;
  const activated = lore.activated || [];
  const cut = lore.cut || [];
  return html`<section class="insp-section" aria-label="Lorebook">
    <h3>Lorebook</h3>
    ${activated.length ? html`<table class="table small"><thead><tr><th>entry</th><th>why</th><th>tokens</th></tr></thead>
      <tbody>${activated.map((a) => html`<tr><td>${a.book} #${a.uid} ${a.comment ? html`<span class="muted">${a.comment}</span>` : null}</td>
        <td>${(a.reasons || []).join(", ")}${a.pass ? ` (pass ${a.pass})` : ""}</td><td>${num(a.tokens)}</td></tr>`)}</tbody></table>`
      : html`<p class="muted small">No entry activated${(lore.books || []).length ? "" : " (no lorebook in this chat)"}.</p>`}
    ${cut.length ? html`<p class="small"><strong>Left out:</strong> ${cut.map((c) => `${c.book} #${c.uid} (${c.reason}${c.detail ? `: ${c.detail}` : ""})`).join("; ")}</p>` : null}
    ${(lore.problems || []).length ? html`<p class="small">${lore.problems.map((p) => JSON.stringify(p)).join("; ")}</p>` : null}
  </section>`;
}

function Rules({ d }) {
  const rules = d.rules || {};
  const fired = rules.fired || [];
  const discarded = d.discarded || [];
  const notes = [];
  for (const r of d.requests || []) {
    for (const m of (r.body && r.body.messages) || []) {
      const text = partsText(m.content);
      for (const tag of text.match(/<system-(interrupt|reminder)[\s\S]*?<\/system-\1>/g) || []) {
        if (!notes.includes(tag)) notes.push(tag);
      }
    }
  }
  return html`<section class="insp-section" aria-label="Stream rules">
    <h3>Stream rules</h3>
    <p class="small">armed: ${(rules.armed || []).length ? rules.armed.join(", ") : html`<span class="muted">none</span>`}</p>
    ${fired.length ? html`<table class="table small"><thead><tr><th>rule</th><th>on</th><th>turn</th><th>effect</th></tr></thead>
      <tbody>${fired.map((f) => html`<tr><td class="mono">${f.rule}</td><td>${f.scope}</td><td>${f.turn ?? ""}</td>
        <td>${f.retry ? "answer discarded, written again" : f.event || ""}</td></tr>`)}</tbody></table>`
      : html`<p class="muted small">No rule fired.</p>`}
    ${discarded.length ? html`<p class="small"><strong>Discarded answers:</strong> ${discarded.map((x) => `step ${x.step} by ${x.rule}`).join("; ")}</p>` : null}
    ${notes.map((n) => html`<pre class="note-text">${n}</pre>`)}
  </section>`;
}
