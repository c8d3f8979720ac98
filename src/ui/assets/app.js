// treefork ui: the pages. Everything from the store is inserted as text (h()),
// never as markup. The server relays each call() to the daemon.
import { rail } from './graph.js';
import { diffPage, filePage } from './diff.js';
import { h, call, fill, showError, short, bytes, ago, clock, ms, shellJoin, sessionLink } from './util.js';

const main = document.getElementById('main');

function crumbs(...parts) {
  const nav = document.getElementById('crumbs');
  fill(nav, ...parts.flatMap((p, i) => (i ? [h('span', {}, '/'), p] : [p])));
}

// ---- The sessions page ----
async function sessionsPage() {
  crumbs(h('a', { href: '#/' }, 'sessions'));
  const { sessions } = await call('sessions');
  const shown = await Promise.all(sessions.slice(0, 200).map((s) =>
    call('session_show', { name: s.name }).catch(() => null)));
  const info = Object.fromEntries(sessions.map((s, i) => [s.name, shown[i]]));
  const remote = (n) => {
    const i = info[n]?.info;
    if (!i) return '—';
    if (i.evicted) return `evicted to ${i.evicted.remote ?? '?'}`;
    return i.policy?.evict_to ? `evicts to ${i.policy.evict_to}` : '—';
  };
  const rows = sessions.map((s) => h('tr', { dataset: { session: s.name } },
    h('td', {}, sessionLink(s.name)),
    h('td', {}, h('span', { class: `badge ${s.state}` }, s.state), ' ', h('span', { class: 'muted' }, s.lifecycle ?? '')),
    h('td', { class: 'task' }, s.task ?? h('span', { class: 'muted' }, '—')),
    h('td', { class: 'num' }, ago(s.age)),
    h('td', { class: 'num' }, ago(s.idle)),
    h('td', { class: 'num' }, bytes(s.bytes)),
    h('td', { class: 'num touched' }, s.touched ?? '—'),
    h('td', {}, s.transport ?? '—'),
    h('td', {}, s.parent ? sessionLink(s.parent) : '—'),
    h('td', {}, remote(s.name))));
  const table = h('table', { id: 'sessions-table' },
    h('thead', {}, h('tr', {}, ['session', 'state', 'task', 'age', 'idle', 'size', 'touched', 'transport', 'forked from', 'remote']
      .map((c) => h('th', { class: ['age', 'idle', 'size', 'touched'].includes(c) ? 'num' : null }, c)))),
    h('tbody', {}, rows));
  fill(main, 
    h('h1', {}, `Sessions (${sessions.length})`),
    sessions.length ? table : h('p', { class: 'muted' }, 'No sessions yet: `treefork mount DIR --session NAME` makes one.'),
    h('h2', {}, 'Lineage'), lineage(sessions));
}

// Sessions as a tree of forks: children under the session they were made in.
function lineage(sessions) {
  const names = new Set(sessions.map((s) => s.name));
  const kids = new Map();
  for (const s of sessions) {
    const p = s.parent && names.has(s.parent) ? s.parent : null;
    if (!kids.has(p)) kids.set(p, []);
    kids.get(p).push(s);
  }
  const seen = new Set();
  const list = (parent, top) => h('ul', { class: top ? 'tree top' : 'tree' },
    (kids.get(parent) || []).filter((s) => !seen.has(s.name) && seen.add(s.name)).map((s) =>
      h('li', { dataset: { lineage: s.name } }, sessionLink(s.name), ' ',
        h('span', { class: 'muted' }, s.state), kids.has(s.name) ? list(s.name, false) : null)));
  return h('div', { id: 'lineage' }, list(null, true));
}

// ---- A session's timeline ----
function entryText(e) {
  const m = e.meta || {};
  switch (e.kind) {
    case 'exec': {
      const x = m.exec || {};
      const ok = x.exit === 0;
      return [h('code', { class: 'cmd' }, shellJoin(x.argv || e.request?.argv)), ' ',
        h('span', { class: `badge ${ok ? 'ok' : 'bad'} exit` }, x.signal ? `signal ${x.signal}` : `exit ${x.exit ?? '?'}`), ' ',
        h('span', { class: 'muted' }, ms(x.duration_ms))];
    }
    case 'checkpoint': return [h('span', { class: 'text' }, e.request?.message || '(no message)'), ' ',
      h('span', { class: 'badge' }, e.request?.trigger ?? 'manual'), ' ', h('code', { class: 'muted' }, short(e.after?.head))];
    case 'note': return h('span', { class: 'text' }, m.note?.text ?? e.request?.text ?? '');
    case 'fork': return ['forked ', sessionLink(m.fork?.session ?? e.request?.name ?? '?'), ' at ', h('code', {}, short(m.fork?.checkpoint))];
    case 'experiment': {
      const runs = m.runs || [];
      const link = h('a', { href: `#/s/${encodeURIComponent(e.session)}/exp/${m.id}` }, `experiment ${m.id}`);
      if (m.aborted) return [link, `: ${runs.length} runs, `, h('span', { class: 'badge bad interrupted' }, interrupted(m)), ': every run stopped'];
      return [link, `: ${runs.length} runs`, m.winner ? `, winner run ${m.winner}` : ', no winner',
        m.decided_by ? h('span', { class: 'muted' }, ` (${m.decided_by})`) : null];
    }
    default: return h('span', { class: 'text muted' }, e.summary ?? '');
  }
}

// An interrupted experiment, by which signal when it was kept.
const SIGNALS = { 1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 9: 'SIGKILL', 15: 'SIGTERM' };
function interrupted(x) {
  const s = x.interrupted_by;
  return s ? `interrupted by ${SIGNALS[s] ?? `signal ${s}`}` : 'interrupted';
}

// The operation's `--explanation`, cut to a row's width.
function why(e) {
  const x = e.explanation;
  if (!x) return null;
  return h('div', { class: 'why muted' }, 'why: ', x.length > 600 ? `${x.slice(0, 600)}…` : x);
}

function filesList(e) {
  const f = e.files;
  if (!f || !f.count) return null;
  const diff = e.before?.head && e.after?.head && e.before.head !== e.after.head
    ? h('a', { href: `#/s/${encodeURIComponent(e.session)}/diff?a=${e.before.head}&b=${e.after.head}` }, 'diff') : null;
  return h('details', { class: 'files' }, h('summary', {}, `${f.count} file${f.count === 1 ? '' : 's'} changed `, diff),
    h('ul', {}, f.paths.map((p) => h('li', { class: `change-${p.change}` }, `${p.change[0].toUpperCase()} ${p.path}`))));
}

function messageText(c) {
  const s = typeof c === 'string' ? c : JSON.stringify(c);
  return s.length > 600 ? `${s.slice(0, 600)}…` : s;
}

function eventRow(item, branchOf) {
  if (item.message) {
    const m = item.message;
    return h('div', { class: 'event message', dataset: { kind: 'message', seq: m.seq } },
      h('div', { class: 'rail' }, rail({ kind: 'message' })),
      h('div', { class: 'body' }, h('div', { class: 'head' }, h('span', { class: 'time' }, clock(m.time)),
        h('span', { class: 'kind' }, m.role)), h('div', { class: 'text' }, messageText(m.content))));
  }
  const e = item.entry;
  const x = e.meta?.exec;
  const runs = e.kind === 'experiment' ? (e.meta?.runs || []).map((r) => ({ ok: r.exit === 0, winner: r.run === e.meta.winner })) : null;
  const cls = e.undone ? 'event undone' : 'event';
  return h('div', { class: `${cls} ${e.kind}`, dataset: { kind: e.kind, seq: e.seq } },
    h('div', { class: 'rail' }, rail({ kind: e.kind, ok: x ? x.exit === 0 : null, runs, fork: e.meta?.fork?.session, branch: branchOf(e) })),
    h('div', { class: 'body' },
      h('div', { class: 'head' }, h('span', { class: 'time' }, clock(e.time)), h('span', { class: 'kind' }, `#${e.seq} ${e.kind}`),
        e.actor?.role && e.actor.role !== 'user' ? h('span', { class: 'badge' }, e.actor.role) : null),
      h('div', {}, entryText(e)), why(e), filesList(e)));
}

async function timelinePage(name) {
  crumbs(h('a', { href: '#/' }, 'sessions'), sessionLink(name));
  const show = await call('session_show', { name });
  const facts = h('div', { class: 'facts' },
    [['state', show.mounted ? 'mounted' : 'stopped'], ['task', show.info.task ?? '—'], ['age', ago(show.age)],
      ['idle', ago(show.idle)], ['touched', show.touched], ['mountpoint', show.mountpoint ?? '—'], ['transport', show.transport ?? '—'],
      ['from', show.info.origin?.path ?? '—']]
      .map(([k, v]) => h('div', { dataset: { fact: k } }, h('span', {}, k), String(v))));
  const enc = encodeURIComponent(name);
  const toolbar = h('div', { class: 'toolbar' },
    h('a', { href: `#/s/${enc}/diff?a=HEAD&b=WORKING`, id: 'diff-pending' }, 'Pending changes'),
    h('a', { href: `#/s/${enc}/diff?a=baseline&b=WORKING`, id: 'diff-baseline' }, 'Changes since baseline'),
    h('a', { href: `#/s/${enc}/promote` }, 'Promote preview'));
  if (!show.mounted) {
    fill(main, h('h1', {}, name), facts, toolbar,
      h('p', { class: 'muted', id: 'stopped' }, 'This session is stopped: mount it (`treefork mount DIR --session NAME`) to see its timeline.'));
    return;
  }
  toolbar.prepend(
    h('button', { id: 'do-checkpoint', onclick: () => mutate('checkpoint', { session: name, message: 'from the web UI', trigger: 'ui' }) }, 'Checkpoint'),
    h('button', { id: 'do-undo', onclick: () => mutate('undo', { session: name }) }, 'Undo'));
  const [tl, msgs] = await Promise.all([
    call('timeline', { session: name, limit: 1000 }),
    call('messages', { session: name, limit: 1000 }).catch(() => ({ messages: [] }))]);
  const items = [...tl.entries.map((entry) => ({ entry, t: BigInt(entry.time_ns) })),
    ...msgs.messages.map((message) => ({ message, t: BigInt(message.time_ns) }))]
    .sort((a, b) => (a.t < b.t ? 1 : a.t > b.t ? -1 : 0));
  // A branch made by this operation gets a tag on the rail.
  const branchOf = (e) => (e.kind === 'checkout' ? e.request?.create : e.kind === 'branch' ? e.request?.name : null) ?? null;
  fill(main, h('h1', {}, name), facts, toolbar,
    h('h2', {}, `Timeline (${tl.entries.length} operations, ${msgs.messages.length} messages, newest first)`),
    items.length ? h('div', { class: 'timeline', id: 'timeline' }, items.map((i) => eventRow(i, branchOf)))
      : h('p', { class: 'muted' }, 'Nothing recorded yet.'));
}

async function mutate(op, args) {
  try {
    const r = await call(op, args);
    showError(null);
    document.body.dataset.lastMutation = `${op}:${r.id ?? r.op ?? 'ok'}`;
    await render();
  } catch (e) { showError(e); }
}

// ---- An experiment ----
async function experimentPage(name, id) {
  const enc = encodeURIComponent(name);
  crumbs(h('a', { href: '#/' }, 'sessions'), sessionLink(name), h('a', { href: `#/s/${enc}/exp/${id}` }, `experiment ${id}`));
  const x = await call('experiment_show', { session: name, id });
  const runs = [...x.runs].sort((a, b) => x.ranking.indexOf(a.run) - x.ranking.indexOf(b.run));
  const table = h('table', { id: 'runs' }, h('thead', {}, h('tr', {}, ['run', 'fork', 'exit', 'duration', 'score', 'files', 'command', 'output']
    .map((c) => h('th', {}, c)))),
  h('tbody', {}, runs.map((r) => h('tr', { class: r.run === x.winner ? 'winner' : null, dataset: { run: r.run } },
    h('td', {}, `${r.run}${r.run === x.winner ? ' ★' : ''}`),
    h('td', {}, sessionLink(r.fork)),
    h('td', {}, h('span', { class: `badge ${r.exit === 0 && !r.interrupted ? 'ok' : 'bad'}` }, r.interrupted ? 'stopped' : r.timed_out ? 'timed out' : r.signal ? `signal ${r.signal}` : `exit ${r.exit}`)),
    h('td', { class: 'num' }, ms(r.duration_ms)),
    h('td', { class: 'num score' }, r.score ?? (r.score_error ? h('span', { class: 'bad' }, r.score_error) : '—')),
    h('td', { class: 'num' }, r.files_changed),
    h('td', {}, h('code', {}, r.command)),
    h('td', {}, h('pre', { class: 'mono' }, `${r.stdout}${r.stderr}`.slice(0, 2000) || '—'))))));
  const pairs = (x.pairs || []).map((p) => h('div', { class: 'pair' },
    h('h3', {}, `run ${p.a} ↔ run ${p.b}: ${p.files.length}${p.files_truncated ? '+' : ''} file${p.files.length === 1 ? '' : 's'} differ`, ' ',
      h('a', { href: `#/s/${enc}/diff?a=${runById(x, p.a)}&b=${runById(x, p.b)}` }, 'diff')),
    h('ul', {}, p.files.map((f) => h('li', { class: `change-${f.type}` }, `${f.type} ${f.path}`)))));
  fill(main, h('h1', {}, `Experiment ${x.id}`),
    h('div', { class: 'facts' }, h('div', {}, h('span', {}, 'base'), short(x.base)), h('div', {}, h('span', {}, 'ranked by'), x.rank_by),
      x.aborted ? h('div', { id: 'winner', class: 'bad' }, h('span', {}, 'outcome'), `${interrupted(x)}: every run stopped, no winner`)
        : [h('div', { id: 'winner' }, h('span', {}, 'winner'), x.winner ? `run ${x.winner}` : 'none'),
          h('div', {}, h('span', {}, 'decided by'), x.decided_by ?? '—'),
          h('div', {}, h('span', {}, 'success rate'), `${Math.round((x.stats?.success_rate ?? 0) * 100)}%`)]),
    table, h('h2', {}, 'Pairwise differences'), pairs.length ? pairs : h('p', { class: 'muted' }, 'One run: nothing to compare.'));
}
const runById = (x, n) => x.runs.find((r) => r.run === n)?.run_checkpoint ?? '';

// ---- Promote preview ----
async function promotePage(name) {
  const enc = encodeURIComponent(name);
  crumbs(h('a', { href: '#/' }, 'sessions'), sessionLink(name), h('a', { href: `#/s/${enc}/promote` }, 'promote preview'));
  const p = await call('promote', { session: name, dry_run: true });
  const drifted = new Set((p.drifted || []).map((d) => d.path));
  const rows = (p.changes || []).map((c) => h('tr', { class: drifted.has(c.path) ? 'conflict' : null, dataset: { path: c.path } },
    h('td', { class: 'path' }, c.path),
    h('td', { class: `change-${c.change}` }, c.change),
    h('td', {}, c.drifted ? h('span', { class: 'badge bad' }, `conflict: ${c.drifted}`) : h('span', { class: 'badge ok' }, 'clean')),
    h('td', { class: 'num' }, bytes(c.size))));
  fill(main, h('h1', {}, `Promote preview: ${name}`),
    h('div', { class: `callout ${drifted.size ? '' : 'ok'}`, id: 'next' }, p.next ?? (drifted.size ? 'conflicts' : 'a promote would apply cleanly')),
    h('div', { class: 'facts' }, h('div', {}, h('span', {}, 'strategy'), p.strategy), h('div', {}, h('span', {}, 'onto'), p.target?.ref ?? '—'),
      h('div', {}, h('span', {}, 'base'), short(p.target?.base))),
    h('table', { id: 'promote-changes' }, h('thead', {}, h('tr', {}, ['path', 'change', 'state', 'size'].map((c) => h('th', {}, c)))), h('tbody', {}, rows)),
    (p.skipped || []).length ? [h('h2', {}, 'Skipped'), h('ul', {}, p.skipped.map((s) => h('li', {}, JSON.stringify(s))))] : null);
}

// ---- Router and live updates ----
function route() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, query] = raw.split('?');
  const q = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] !== 's' || !parts[1]) return { page: 'sessions', run: sessionsPage };
  const name = parts[1];
  switch (parts[2]) {
    case 'diff': return { page: 'diff', session: name, run: () => diffPage(name, q), static: true };
    case 'file': return { page: 'file', session: name, run: () => filePage(name, q), static: true };
    case 'exp': return { page: 'experiment', session: name, run: () => experimentPage(name, parts[3]) };
    case 'promote': return { page: 'promote', session: name, run: () => promotePage(name) };
    default: return { page: 'timeline', session: name, run: () => timelinePage(name) };
  }
}

let renders = 0;
let current = null;
// One render at a time: a live refresh of the previous page that finished after a
// navigation overwrote the new page with the old one. A render asked for while one
// runs is done once, after it, for the route current then.
let rendering = null;
let renderAgain = false;
function render() {
  if (rendering) {
    renderAgain = true;
    return rendering;
  }
  rendering = (async () => {
    do {
      renderAgain = false;
      await renderOnce();
    } while (renderAgain);
    rendering = null;
  })();
  return rendering;
}

async function renderOnce() {
  const r = route();
  current = r;
  try {
    await r.run();
    showError(null);
  } catch (e) {
    showError(e);
  }
  document.body.dataset.page = r.page;
  document.body.dataset.rendered = String(++renders);
}

let source = null;
let watching = undefined;
function watch() {
  const s = current?.session ?? null;
  if (source && watching === s) return;
  if (source) source.close();
  watching = s;
  source = new EventSource(`/api/events${s ? `?session=${encodeURIComponent(s)}` : ''}`);
  let first = true;
  source.addEventListener('changed', () => {
    document.getElementById('live').classList.add('on');
    if (first) { first = false; return; }
    if (!current?.static) render();
  });
  source.onerror = () => document.getElementById('live').classList.remove('on');
}

window.addEventListener('hashchange', () => render().then(watch));
render().then(watch);
