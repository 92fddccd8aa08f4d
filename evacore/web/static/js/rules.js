// The Rules view: the stream rules (each opened by its name), an editor that shows the API's
// validation errors next to their fields, enable/disable, and a live "would it fire" test
// of the open rule as edited, without saving it.
// Must not: validate rules itself (the API does, so every surface says the same).

import { useEffect, useState } from "preact/hooks";
import { api, ApiError } from "./api.js";
import { html, useLoad, ErrorNote, ConfirmButton } from "./ui.js";

const FLAGS = ["telegram", "client_ops", "master", "trusted", "picture"];
const FIELDS = ["name", "scope", "condition", "negate", "when", "text", "repeat", "enabled"];
const BLANK = { name: "", scope: "text", condition: "", negate: false, when: [], text: "",
  repeat: null, enabled: true };

function formOf(rule) {
  const form = {};
  for (const key of FIELDS) form[key] = rule[key] ?? BLANK[key];
  return form;
}

/** Problems by field ("condition: …" → condition); the rest under "". */
function byField(error) {
  const out = {};
  if (!error) return out;
  const problems = error instanceof ApiError ? error.problems : [error.message];
  for (const p of problems) {
    const m = /^([a-z_]+)(\[\d+\])?:\s*(.*)$/s.exec(p);
    const key = m && FIELDS.includes(m[1]) ? m[1] : "";
    (out[key] = out[key] || []).push(key ? m[3] : p);
  }
  return out;
}

/** A labelled control: the label is the field's name, the hint describes it. */
function Field({ id, label, hint, problems, children }) {
  return html`<div class="field">
    <div class="field-label"><label for=${id}>${label}</label>
      ${hint ? html`<span class="muted" id=${`${id}-hint`}>${hint}</span>` : null}</div>
    ${children}
    <${Problems} list=${problems} />
  </div>`;
}

function Problems({ list }) {
  return list && list.length
    ? html`<div class="field-error" role="alert">${list.map((p) => html`<div>${p}</div>`)}</div>` : null;
}

// The blank form's place: "+" is in no rule name ([a-z0-9_]), so a rule named "new" opens.
const NEW = "+new";

export function RulesView({ name, navigate }) {
  const [data, error, reload] = useLoad(() => api("rules"), []);
  const rules = (data && data.rules) || [];
  const open = name === NEW ? BLANK : rules.find((r) => r.name === name);

  async function toggle(rule) {
    await api(`rules/${encodeURIComponent(rule.name)}`, { method: "PATCH", body: { enabled: !rule.enabled } });
    reload();
  }
  return html`<div class="split rules">
    <aside class="sidebar" aria-label="Rule list">
      <div class="sidebar-head"><h1>Stream rules</h1>
        <a class="btn btn-primary btn-small" href=${`#/rules/${NEW}`}>New rule</a></div>
      <${ErrorNote} error=${error} />
      <ul class="rule-list">${rules.map((r) => html`<li key=${r.name} class=${r.enabled ? "" : "off"}>
        <a href=${`#/rules/${encodeURIComponent(r.name)}`} class=${r.name === name ? "active" : ""}
          aria-current=${r.name === name ? "page" : undefined} title=${r.name}>${r.name}</a>
        <span class="rule-meta"><span class="chip">${r.scope}</span>
          <label class="switch" title=${r.enabled ? "enabled" : "disabled"}>
            <input type="checkbox" checked=${r.enabled} onChange=${() => toggle(r).catch(() => reload())}
              aria-label=${`Use ${r.name}`} /><span /></label></span>
      </li>`)}</ul>
    </aside>
    <div class="main">
      ${open ? html`<${RuleEditor} key=${name} rule=${open} isNew=${name === NEW}
          onSaved=${(saved) => { reload(); navigate(`#/rules/${encodeURIComponent(saved.name)}`); }}
          onDeleted=${() => { reload(); navigate("#/rules"); }} />`
        : html`<div class="empty big"><h1>Stream rules</h1>
            <p>A rule watches answers (scope <span class="mono">text</span>) or tool calls
            (<span class="mono">${"tool:<name>"}</span>) and corrects the model where it slips.</p>
            <p class="muted">${data && name ? `No rule named ${name}.` : "Open a rule from the list, or make a new one."}</p></div>`}
    </div>
  </div>`;
}

function RuleEditor({ rule, isNew, onSaved, onDeleted }) {
  const [form, setForm] = useState(formOf(rule));
  const [saveError, setSaveError] = useState(null);
  const [saved, setSaved] = useState(false);
  useEffect(() => { setForm(formOf(rule)); }, [rule.name, rule.updated_at]);
  const set = (key) => (e) => {
    const t = e.currentTarget;
    setForm((f) => ({ ...f, [key]: t.type === "checkbox" ? t.checked : t.value }));
    setSaved(false);
  };
  const flag = (f) => (e) => {
    const on = e.currentTarget.checked;
    setForm((old) => ({ ...old, when: on ? [...old.when, f] : old.when.filter((x) => x !== f) }));
  };
  const repeatKind = form.repeat === null || form.repeat === "" ? "every"
    : form.repeat === "once" ? "once" : "after";
  const repeatN = repeatKind === "after" ? form.repeat.slice(6) : "3";
  const setRepeat = (kind, n) => setForm((f) => ({ ...f,
    repeat: kind === "every" ? null : kind === "once" ? "once" : `after:${n}` }));

  async function save(e) {
    e.preventDefault();
    setSaveError(null);
    try {
      const body = { ...form };
      const result = isNew
        ? await api("rules", { body })
        : await api(`rules/${encodeURIComponent(rule.name)}`, { method: "PATCH",
            body: Object.fromEntries(Object.entries(body).filter(([k]) => k !== "name")) });
      setSaved(true);
      onSaved(result);
    } catch (err) { setSaveError(err); }
  }
  async function remove() {
    try { await api(`rules/${encodeURIComponent(rule.name)}`, { method: "DELETE" }); onDeleted(); }
    catch (err) { setSaveError(err); }
  }
  const problems = byField(saveError);
  return html`<section class="page rule-editor" aria-label=${isNew ? "New rule" : `Rule ${rule.name}`}>
    <form onSubmit=${save} class="form">
      <div class="page-head"><h1 class="mono">${isNew ? "New rule" : rule.name}</h1>
        ${rule.mode ? html`<span class="chip">${rule.mode}</span>` : null}
        ${rule.seeded ? html`<span class="chip">seeded</span>` : null}</div>
      <${Problems} list=${problems[""]} />
      ${isNew ? html`<${Field} id="rule-name" label="Name" problems=${problems.name}>
        <input id="rule-name" class="mono" value=${form.name} onInput=${set("name")} placeholder="lower_case_name" />
      <//>` : null}
      <div class="grid2">
        <${Field} id="rule-scope" label="Scope" problems=${problems.scope}>
          <input id="rule-scope" class="mono" list="scopes" value=${form.scope} onInput=${set("scope")} />
          <datalist id="scopes"><option value="text" /><option value="tool:shell" />
            <option value="tool:write_file" /><option value="tool:read_file" /></datalist>
        <//>
        <${Field} id="rule-repeat" label="Repeat" problems=${problems.repeat}>
          <div class="row">
            <select id="rule-repeat" value=${repeatKind} onChange=${(e) => setRepeat(e.currentTarget.value, repeatN)}>
              <option value="every">every tour</option><option value="once">once per chat</option>
              <option value="after">at most every N turns</option></select>
            ${repeatKind === "after" ? html`<input type="number" min="1" class="narrow" aria-label="Turns"
              value=${repeatN} onInput=${(e) => setRepeat("after", e.currentTarget.value)} />` : null}
          </div>
        <//>
      </div>
      <${Field} id="rule-condition" label="Condition" hint="RE2 regex; empty matches everything" problems=${problems.condition}>
        <textarea id="rule-condition" aria-describedby="rule-condition-hint" class="mono" rows="3"
          value=${form.condition} onInput=${set("condition")} spellcheck=${false} />
      <//>
      <div class="row wrap">
        <label class="check"><input type="checkbox" checked=${form.negate} onChange=${set("negate")} /> Negate (act when the condition is not found)</label>
        <label class="check"><input type="checkbox" checked=${form.enabled} onChange=${set("enabled")} /> Enabled</label>
      </div>
      <fieldset class="field"><legend>When <span class="muted">all must hold; none = every tour</span></legend>
        <div class="row wrap">${FLAGS.map((f) => html`<label class="check">
          <input type="checkbox" checked=${form.when.includes(f)} onChange=${flag(f)} /> ${f}</label>`)}</div>
        <${Problems} list=${problems.when} /></fieldset>
      <${Field} id="rule-text" label="Text" hint="what the model is told, 1–400 characters" problems=${problems.text}>
        <textarea id="rule-text" aria-describedby="rule-text-hint" rows="4" value=${form.text} onInput=${set("text")} />
        <span class="muted small right" aria-hidden="true">${form.text.length}/400</span>
      <//>
      <div class="row-end">
        ${saved ? html`<span class="good small" role="status">Saved</span>` : null}
        ${!isNew ? html`<${ConfirmButton} label="Delete rule" confirm="Really delete?" onConfirm=${remove} />` : null}
        <button type="submit" class="btn btn-primary">${isNew ? "Create rule" : "Save"}</button>
      </div>
    </form>
    <${Probe} form=${form} />
  </section>`;
}

function Probe({ form }) {
  const [text, setText] = useState("");
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  // a verdict (or an error) was about the rule as it was when tested
  useEffect(() => { setResult(null); setError(null); }, [form]);
  const tool = form.scope.startsWith("tool:") ? form.scope.slice(5) : null;
  async function test(e) {
    e.preventDefault();
    setError(null);
    setResult(null);
    const body = { rule: { ...form, name: form.name || "draft" } };
    if (tool) { body.tool = tool; body.arguments = text || "{}"; } else body.text = text;
    try { setResult(await api("rules/test", { body })); } catch (err) { setError(err); }
  }
  return html`<form class="probe" onSubmit=${test}>
    <h2>Try it</h2>
    <p class="muted small">${tool ? `Arguments of a ${tool} call, as JSON.` : "A sample answer."} The rule is tried as edited above; nothing is saved.</p>
    <label class="sr-only" for="probe-text">Test text</label>
    <textarea id="probe-text" rows="3" value=${text} onInput=${(e) => setText(e.currentTarget.value)}
      placeholder=${tool ? '{"command": "ls"}' : "Look: ![a cat](https://example.com/cat.png)"} />
    <div class="row-end"><button type="submit" class="btn btn-primary">Test</button></div>
    <div class="verdict-box" aria-live="polite">
      ${result ? html`<p class=${`verdict ${result.fires ? "verdict-yes" : "verdict-no"}`}>
        <strong>${result.fires ? "fires" : "does not fire"}</strong>
        <span class="muted"> — ${result.reason}</span></p>` : null}
      <${ErrorNote} error=${error} />
    </div>
  </form>`;
}
