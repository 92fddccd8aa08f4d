// The page's shell: sign-in with a token, the navigation (Chats, Characters, Lorebooks,
// Rules, Stats), hash routes, the inspector panel, and files dropped on the page.
// Must not: hold any view's logic; views live in their own modules.

import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, auth } from "./api.js";
import { html } from "./ui.js";
import { ChatsView } from "./chats.js";
import { CharactersView, LorebooksView } from "./library.js";
import { RulesView } from "./rules.js";
import { StatsView } from "./stats.js";
import { Inspector } from "./inspector.js";
import { importFiles } from "./imports.js";

const VIEWS = [["chats", "Chats"], ["characters", "Characters"], ["lorebooks", "Lorebooks"],
  ["rules", "Rules"], ["stats", "Stats"]];

function parseRoute(hash) {
  const [view, ...rest] = hash.replace(/^#\/?/, "").split("/");
  const known = VIEWS.some(([v]) => v === view);
  return { view: known ? view : "chats", arg: rest.length ? decodeURIComponent(rest.join("/")) : "" };
}

function useRoute() {
  const [route, setRoute] = useState(parseRoute(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.hash));
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return route;
}

const navigate = (hash) => { if (location.hash !== hash) location.hash = hash; };

function SignIn({ onSignedIn, reason }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState(reason || "");
  const [busy, setBusy] = useState(false);
  async function submit(e) {
    e.preventDefault();
    setBusy(true);
    setError("");
    try {
      const me = await api("me", { token: token.trim() });
      auth.save(token.trim());
      onSignedIn(me);
    } catch (err) {
      setError(err.status === 401 ? "That token is not valid. Check it and try again."
        : `Could not sign in: ${err.message}`);
    } finally { setBusy(false); }
  }
  return html`<main class="signin">
    <form class="signin-card" onSubmit=${submit}>
      <div class="brand brand-big"><span class="logo" aria-hidden="true">◆</span> evacore</div>
      <p class="muted">Sign in with your evacore token. <span class="small">The master token is printed once when the server first starts; <span class="mono">evacore token create</span> makes more.</span></p>
      <label class="field"><span>Token</span>
        <input type="password" autocomplete="current-password" value=${token} required
          onInput=${(e) => setToken(e.currentTarget.value)} placeholder="evc_…" autofocus /></label>
      ${error ? html`<div class="note note-error" role="alert">${error}</div>` : null}
      <button type="submit" class="btn btn-primary btn-block" disabled=${busy}>Sign in</button>
    </form>
  </main>`;
}

function App() {
  const [me, setMe] = useState(null);
  const [checking, setChecking] = useState(Boolean(auth.token));
  const [reason, setReason] = useState("");
  const [inspect, setInspect] = useState(null);
  const [imports, setImports] = useState({ tick: 0, results: [] });
  const [dragging, setDragging] = useState(false);
  const route = useRoute();
  useEffect(() => setInspect(null), [route.view, route.arg]);

  useEffect(() => {
    auth.onUnauthorized(() => {
      auth.clear();
      setMe(null);
      setReason("Your token is no longer valid. Sign in again.");
    });
    if (!auth.token) return;
    api("me").then(setMe, () => {}).finally(() => setChecking(false));
  }, []);

  async function onFiles(files, kind) {
    const results = await importFiles(files, kind);
    setImports((s) => ({ tick: s.tick + 1, results }));
    return results;
  }

  useEffect(() => {
    if (!me) return undefined;
    let depth = 0;
    const has = (e) => [...(e.dataTransfer && e.dataTransfer.types) || []].includes("Files");
    const enter = (e) => { if (has(e)) { depth += 1; setDragging(true); } };
    const leave = (e) => { if (has(e)) { depth = Math.max(0, depth - 1); if (!depth) setDragging(false); } };
    const over = (e) => { if (has(e)) e.preventDefault(); };
    const drop = async (e) => {
      if (!has(e)) return;
      e.preventDefault();
      depth = 0;
      setDragging(false);
      const files = [...e.dataTransfer.files];
      // a dropped file goes where its kind says (a lorebook dropped on Characters is still a
      // lorebook), and the page shows the view it went to
      const current = parseRoute(location.hash).view;
      const results = await onFiles(files, null);
      const first = results.find((r) => !r.error) || results[0];
      const view = first && (first.kind === "lorebook" ? "lorebooks" : "characters");
      if (view && view !== current) navigate(`#/${view}`);
    };
    addEventListener("dragenter", enter);
    addEventListener("dragleave", leave);
    addEventListener("dragover", over);
    addEventListener("drop", drop);
    return () => {
      removeEventListener("dragenter", enter);
      removeEventListener("dragleave", leave);
      removeEventListener("dragover", over);
      removeEventListener("drop", drop);
    };
  }, [me]);

  if (checking) return html`<main class="signin"><p class="muted">Loading…</p></main>`;
  if (!me) return html`<${SignIn} reason=${reason} onSignedIn=${(who) => { setReason(""); setMe(who); }} />`;

  const signOut = () => { auth.clear(); setMe(null); setInspect(null); };
  let view;
  if (route.view === "chats") {
    view = html`<${ChatsView} chatId=${route.arg} navigate=${navigate} onInspect=${setInspect} />`;
  } else if (route.view === "characters") {
    view = html`<${CharactersView} tick=${imports.tick} results=${imports.results} onFiles=${onFiles} navigate=${navigate} />`;
  } else if (route.view === "lorebooks") {
    view = html`<${LorebooksView} tick=${imports.tick} results=${imports.results} onFiles=${onFiles} />`;
  } else if (route.view === "rules") {
    view = html`<${RulesView} name=${route.arg} navigate=${navigate} />`;
  } else {
    view = html`<${StatsView} />`;
  }
  const inspecting = route.view === "chats" ? inspect : null;
  return html`<div class=${`app ${inspecting ? "with-inspector" : ""}`}>
    <header class="topbar">
      <a class="brand" href="#/chats"><span class="logo" aria-hidden="true">◆</span> evacore</a>
      <nav class="tabs" aria-label="Views">
        ${VIEWS.map(([v, label]) => html`<a href=${`#/${v}`} class=${route.view === v ? "active" : ""}
          aria-current=${route.view === v ? "page" : undefined}>${label}</a>`)}
      </nav>
      <div class="who"><span class="muted small">${me.name} · ${me.role}</span>
        <button type="button" class="btn btn-ghost btn-small" onClick=${signOut}>Sign out</button></div>
    </header>
    <main class="content">${view}</main>
    ${inspecting ? html`<${Inspector} key=${inspecting} tourId=${inspecting} onClose=${() => setInspect(null)} />` : null}
    ${dragging ? html`<div class="dropzone" aria-hidden="true"><div>Drop character cards (PNG, JSON, CHARX) or World Info files to import them</div></div>` : null}
  </div>`;
}

render(html`<${App} />`, document.getElementById("app"));
