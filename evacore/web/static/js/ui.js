// Small shared pieces of the page: the `html` template tag, a pure component, error notes,
// a two-step delete button, and formatting of numbers and dates.
// Must not: call the API (views do) or hold state beyond one component.

import { h, Component } from "preact";
import { useState, useEffect, useRef } from "preact/hooks";
import htm from "htm";

export const html = htm.bind(h);

/** A component that renders again only for its own state or a changed prop (shallowly). */
export class Pure extends Component {
  shouldComponentUpdate(next, nextState) {
    if (nextState !== this.state) return true;
    for (const key in next) if (next[key] !== this.props[key]) return true;
    for (const key in this.props) if (!(key in next)) return true;
    return false;
  }
}

/** An error from the API or the browser, shown inline. */
export function ErrorNote({ error, role = "status" }) {
  if (!error) return null;
  const problems = error.problems || [error.message || String(error)];
  return html`<div class="note note-error" role=${role}>
    ${problems.length === 1 ? problems[0]
      : html`<ul>${problems.map((p) => html`<li>${p}</li>`)}</ul>`}
  </div>`;
}

/** A button that asks once more before it acts ("Delete" → "Really delete?"). */
export function ConfirmButton({ label, confirm = "Confirm", onConfirm, className = "" }) {
  const [armed, setArmed] = useState(false);
  const timer = useRef(0);
  useEffect(() => () => clearTimeout(timer.current), []);
  const click = () => {
    if (!armed) {
      setArmed(true);
      timer.current = setTimeout(() => setArmed(false), 4000);
      return;
    }
    clearTimeout(timer.current);
    setArmed(false);
    onConfirm();
  };
  return html`<button type="button" class=${`btn btn-ghost ${armed ? "btn-danger" : ""} ${className}`}
    onClick=${click}>${armed ? confirm : label}</button>`;
}

/** Load something once per `deps`; returns [value, error, reload]. */
export function useLoad(load, deps) {
  const [state, setState] = useState({ value: undefined, error: null });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    load().then((value) => live && setState({ value, error: null }),
                (error) => live && setState({ value: undefined, error }));
    return () => { live = false; };
  }, [...deps, tick]);
  return [state.value, state.error, () => setTick((t) => t + 1)];
}

const NUMBER = new Intl.NumberFormat();
export const num = (n) => (typeof n === "number" ? NUMBER.format(n) : "–");

export function ms(n) {
  if (typeof n !== "number") return "–";
  return n >= 1000 ? `${(n / 1000).toFixed(2)} s` : `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms`;
}

export function when(iso) {
  if (!iso) return "";
  const date = new Date(/Z|[+-]\d\d:\d\d$/.test(iso) ? iso : `${iso}Z`);
  const today = new Date();
  return date.toDateString() === today.toDateString()
    ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : date.toLocaleDateString([], { month: "short", day: "numeric" });
}

/** Read a File as a data URL (images sent to vision connections). */
export function dataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}
