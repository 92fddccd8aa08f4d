// The Stats view: firings per rule as a chart and a table, tours by status, tokens, plugin
// failures.
// Must not: compute figures (GET /v1/stats does); it only draws them.

import { html, useLoad, ErrorNote, num } from "./ui.js";
import { api } from "./api.js";

/** A horizontal bar chart of labelled values (two series: total and a part of it). */
function BarChart({ rows, label }) {
  const max = Math.max(1, ...rows.map((r) => r.value));
  const bar = 22;
  const gap = 10;
  const left = 250;
  const width = 640;
  const height = rows.length * (bar + gap) + gap + 18;
  const scale = (v) => ((width - left - 60) * v) / max;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((t) => Math.round(t * max)).filter((v, i, a) => a.indexOf(v) === i);
  return html`<svg class="chart" viewBox=${`0 0 ${width} ${height}`} role="img" aria-label=${label}>
    <title>${label}</title>
    ${ticks.map((t) => html`<g>
      <line x1=${left + scale(t)} x2=${left + scale(t)} y1="0" y2=${height - 18} class="grid" />
      <text x=${left + scale(t)} y=${height - 4} class="tick" text-anchor="middle">${num(t)}</text></g>`)}
    ${rows.map((r, i) => {
      const y = gap + i * (bar + gap);
      return html`<g>
        <text x=${left - 10} y=${y + bar / 2 + 5} text-anchor="end" class="bar-label">${r.label.length > 30 ? `${r.label.slice(0, 29)}…` : r.label}</text>
        <rect x=${left} y=${y} width=${Math.max(scale(r.value), r.value ? 2 : 0)} height=${bar} rx="4" class="bar" />
        ${r.part ? html`<rect x=${left} y=${y + bar - 7} width=${Math.max(scale(r.part), 2)} height="7" rx="3" class="bar-part" />` : null}
        <text x=${left + scale(r.value) + 8} y=${y + bar / 2 + 5} class="bar-value">${num(r.value)}</text>
      </g>`;
    })}
  </svg>`;
}

export function StatsView() {
  const [stats, error, reload] = useLoad(() => api("stats"), []);
  if (error) return html`<section class="page"><h1>Stats</h1><${ErrorNote} error=${error} /></section>`;
  if (!stats) return html`<section class="page"><h1>Stats</h1><p class="muted">Loading…</p></section>`;
  const rules = [...(stats.rules || [])].sort((a, b) => b.fired - a.fired || a.rule.localeCompare(b.rule));
  const tours = Object.entries(stats.tours || {});
  const tokens = stats.tokens || {};
  const plugins = stats.plugins || null;
  return html`<section class="page stats" aria-labelledby="stats-title">
    <div class="page-head"><h1 id="stats-title">Stats</h1>
      <button type="button" class="btn btn-ghost btn-small" onClick=${reload}>Refresh</button></div>
    <div class="tiles">
      ${tours.map(([status, n]) => html`<div class="tile"><div class="tile-value">${num(n)}</div>
        <div class="tile-label">tours ${status}</div></div>`)}
      <div class="tile"><div class="tile-value">${num(tokens.prompt)}</div><div class="tile-label">prompt tokens</div></div>
      <div class="tile"><div class="tile-value">${num(tokens.completion)}</div><div class="tile-label">completion tokens</div></div>
      ${plugins ? html`<div class="tile"><div class="tile-value">${num(plugins.failures)}</div><div class="tile-label">plugin failures</div></div>` : null}
    </div>
    <h2>Rule firings</h2>
    <div class="chart-box">
      <${BarChart} label="Firings per rule" rows=${rules.map((r) => ({ label: r.rule, value: r.fired || 0, part: r.retried || 0 }))} />
      <p class="legend small"><span class="swatch bar" /> fired <span class="swatch bar-part" /> answer written again</p>
    </div>
    <table class="table">
      <thead><tr><th>rule</th><th class="num">fired</th><th class="num">written again</th><th>status</th></tr></thead>
      <tbody>${rules.map((r) => html`<tr><td class="mono">${r.rule}</td><td class="num">${num(r.fired)}</td>
        <td class="num">${num(r.retried ?? 0)}</td><td>${r.current === false ? html`<span class="muted">deleted</span>` : "current"}</td></tr>`)}</tbody>
    </table>
    ${plugins && plugins.by_plugin ? html`<h2>Plugins</h2><table class="table"><thead><tr><th>plugin</th><th class="num">failures</th><th>last error</th></tr></thead>
      <tbody>${Object.entries(plugins.by_plugin).map(([name, p]) => html`<tr><td class="mono">${name}</td>
        <td class="num">${num(p.failures)}</td><td>${p.last_error || ""}</td></tr>`)}</tbody></table>` : null}
  </section>`;
}
