// treefork ui: what every page uses — building elements from text, calling
// verbs through the server, formatting. Nothing from the store becomes markup.
const CSRF = document.querySelector('meta[name=csrf]').content;

// An element: h('a', {href: '#/', class: 'x'}, 'text', child, ...).
export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const k of kids.flat(Infinity)) {
    if (k === null || k === undefined || k === false) continue;
    el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return el;
}

export class ApiError extends Error {
  constructor(e) { super(e.message); this.code = e.code; }
}

// Call a verb through the server; resolves to the answer, rejects with ApiError.
export async function call(op, args) {
  const r = await fetch('/api/call', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Treefork-Csrf': CSRF },
    body: JSON.stringify({ op, ...(args || {}) }),
  });
  const v = await r.json();
  if (!v.ok) throw new ApiError(v.error || { code: 'error', message: r.statusText });
  return v;
}

export function showError(e) {
  const box = document.getElementById('error');
  if (!e) { box.hidden = true; box.textContent = ''; return; }
  box.hidden = false;
  box.textContent = e.code ? `${e.message} (${e.code})` : String(e.message || e);
}

export const short = (id) => (id ? String(id).slice(0, 12) : '—');
export function bytes(n) {
  if (n === null || n === undefined) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0; let x = Number(n);
  while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
  return `${i ? x.toFixed(1) : x} ${u[i]}`;
}
export function ago(secs) {
  if (secs === null || secs === undefined) return '—';
  const s = Math.max(0, Math.round(secs));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}
export const clock = (t) => new Date(t * 1000).toLocaleString();
export const ms = (d) => (d === null || d === undefined ? '—' : d < 1000 ? `${d} ms` : `${(d / 1000).toFixed(1)} s`);
// A command as a shell would read it back.
// A recorded argv quoted as `treefork history` shows it (src/command/shell.rs):
// bare where a shell needs no quotes, else single quotes (double with a `'`),
// control and invisible characters escaped in $'...'.
const INVISIBLE = /[\p{Cc}\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/u;
function quoteWord(a, first) {
  if (a !== '' && (first ? /^[\p{L}\p{N}_/.:@,+-]+$/u : /^[\p{L}\p{N}_/.:@,+=-]+$/u).test(a) && !INVISIBLE.test(a)) return a;
  if (INVISIBLE.test(a)) {
    const esc = { '\\': '\\\\', "'": "\\'", '\n': '\\n', '\t': '\\t', '\r': '\\r' };
    return `$'${[...a].map((c) => esc[c] ?? (INVISIBLE.test(c)
      ? (c.codePointAt(0) < 0x80 ? `\\x${c.codePointAt(0).toString(16).padStart(2, '0')}` : `\\u${c.codePointAt(0).toString(16).padStart(4, '0')}`)
      : c)).join('')}'`;
  }
  if (!a.includes("'")) return `'${a}'`;
  if (!/[$`\\"!]/.test(a)) return `"${a}"`;
  return `'${a.replace(/'/g, "'\\''")}'`;
}
export function shellJoin(argv) {
  if (!Array.isArray(argv)) return String(argv ?? '');
  return argv.map((a, i) => quoteWord(String(a), i === 0)).join(' ');
}
export const sessionLink = (name) => h('a', { href: `#/s/${encodeURIComponent(name)}`, class: 'session-link' }, name);


// Replace el's children with kids (arrays flattened; null, undefined and false
// left out; strings as text).
export function fill(el, ...kids) {
  el.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false));
}
