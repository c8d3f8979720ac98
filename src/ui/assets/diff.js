// The diff page (unified or side by side) and the file-at-a-ref page.
import { h, call, fill, sessionLink } from './util.js';

// A unified diff split into files, each into hunks of lines.
export function parsePatch(text) {
  const files = [];
  let f = null;
  let oldN = 0; let newN = 0;
  for (const line of (text || '').split('\n')) {
    // `diff --treefork a/P b/P` (ours) or `diff --git ...`.
    if (/^diff --\S+ /.test(line) || (!f && line.startsWith('--- '))) {
      f = { header: line, path: line.replace(/^diff --\S+ a\/(.*) b\/.*$/, '$1'), lines: [] };
      files.push(f);
      continue;
    }
    if (!f) continue;
    if (line.startsWith('+++ ')) { f.path = line.slice(4).replace(/^b\//, ''); continue; }
    if (line.startsWith('--- ') || line.startsWith('index ') || /^(new|deleted) file mode|^old mode|^new mode|^similarity|^rename /.test(line)) continue;
    const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (m) { oldN = +m[1]; newN = +m[2]; f.lines.push({ t: 'hunk', s: line }); continue; }
    if (line.startsWith('+')) f.lines.push({ t: 'add', s: line.slice(1), n: newN++ });
    else if (line.startsWith('-')) f.lines.push({ t: 'del', s: line.slice(1), o: oldN++ });
    else if (line.startsWith(' ')) f.lines.push({ t: 'ctx', s: line.slice(1), o: oldN++, n: newN++ });
    else if (line.startsWith('\\')) f.lines.push({ t: 'hunk', s: line });
    else if (line.startsWith('Binary')) f.lines.push({ t: 'hunk', s: line });
  }
  return files;
}

function unified(f) {
  return h('table', { class: 'diff unified' }, h('tbody', {}, f.lines.map((l) => (l.t === 'hunk'
    ? h('tr', { class: 'hunk' }, h('td', { colspan: 3 }, l.s))
    : h('tr', { class: l.t }, h('td', { class: 'ln' }, l.o ?? ''), h('td', { class: 'ln' }, l.n ?? ''),
      h('td', { class: 'code' }, `${l.t === 'add' ? '+' : l.t === 'del' ? '-' : ' '}${l.s}`))))));
}

// Side by side: within a run of changes, the i-th removed line faces the i-th
// added one.
function split(f) {
  const rows = [];
  let dels = []; let adds = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) {
      const d = dels[i]; const a = adds[i];
      rows.push(h('tr', {}, h('td', { class: 'ln' }, d?.o ?? ''), h('td', { class: `code ${d ? 'del' : ''}` }, d?.s ?? ''),
        h('td', { class: 'ln' }, a?.n ?? ''), h('td', { class: `code ${a ? 'add' : ''}` }, a?.s ?? '')));
    }
    dels = []; adds = [];
  };
  for (const l of f.lines) {
    if (l.t === 'del') dels.push(l);
    else if (l.t === 'add') adds.push(l);
    else {
      flush();
      rows.push(l.t === 'hunk' ? h('tr', { class: 'hunk' }, h('td', { colspan: 4 }, l.s))
        : h('tr', {}, h('td', { class: 'ln' }, l.o), h('td', { class: 'code' }, l.s), h('td', { class: 'ln' }, l.n), h('td', { class: 'code' }, l.s)));
    }
  }
  flush();
  return h('table', { class: 'diff split' }, h('tbody', {}, rows));
}

function crumbsFor(name, last) {
  const nav = document.getElementById('crumbs');
  fill(nav, h('a', { href: '#/' }, 'sessions'), h('span', {}, '/'), sessionLink(name), h('span', {}, '/'), last);
}

export async function diffPage(name, q) {
  const enc = encodeURIComponent(name);
  const a = q.get('a') || 'HEAD';
  const b = q.get('b') || 'WORKING';
  const view = q.get('view') === 'split' ? 'split' : 'unified';
  crumbsFor(name, h('span', {}, 'diff'));
  const go = (na, nb, nv) => { location.hash = `#/s/${enc}/diff?a=${encodeURIComponent(na)}&b=${encodeURIComponent(nb)}&view=${nv}`; };
  const ia = h('input', { type: 'text', id: 'diff-a', value: a, list: 'refs' });
  const ib = h('input', { type: 'text', id: 'diff-b', value: b, list: 'refs' });
  const [d, br] = await Promise.all([
    call('diff', { session: name, a, b, mode: 'patch' }),
    call('branches', { session: name }).catch(() => ({ branches: [] }))]);
  const refs = h('datalist', { id: 'refs' }, ['HEAD', 'WORKING', 'baseline', 'HEAD~1', ...(br.branches || []).map((x) => x.name)].map((r) => h('option', { value: r })));
  const toolbar = h('form', { class: 'toolbar', onsubmit: (e) => { e.preventDefault(); go(ia.value, ib.value, view); } },
    'from', ia, 'to', ib, h('button', { type: 'submit' }, 'Compare'),
    h('button', { type: 'button', id: 'view-unified', class: view === 'unified' ? 'active' : null, onclick: () => go(a, b, 'unified') }, 'Unified'),
    h('button', { type: 'button', id: 'view-split', class: view === 'split' ? 'active' : null, onclick: () => go(a, b, 'split') }, 'Side by side'), refs);
  const files = parsePatch(d.patch);
  const entries = d.entries || [];
  const list = h('ul', { id: 'diff-files' }, entries.map((e) => h('li', { class: `change-${e.change}`, dataset: { path: e.path } },
    `${e.change} `, b === 'WORKING' || e.change === 'deleted' ? e.path
      : h('a', { href: `#/s/${enc}/file?ref=${encodeURIComponent(b)}&path=${encodeURIComponent(e.path)}` }, e.path))));
  const main = document.getElementById('main');
  fill(main, h('h1', {}, `Diff ${a} → ${b}`), toolbar,
    entries.length ? list : h('p', { class: 'muted', id: 'no-diff' }, 'No differences.'),
    files.map((f) => h('div', { class: 'file-diff', dataset: { path: f.path } }, h('h3', {}, f.path), view === 'split' ? split(f) : unified(f))));
}

export async function filePage(name, q) {
  const ref = q.get('ref') || 'HEAD';
  const path = q.get('path') || '';
  crumbsFor(name, h('span', {}, `${ref}:${path}`));
  const main = document.getElementById('main');
  const enc = encodeURIComponent(name);
  const shown = await call('show', { session: name, ref, path: path || null });
  const title = h('h1', {}, h('code', {}, `${ref}:${path || '/'}`));
  if (shown.kind === 'dir' || shown.entries) {
    fill(main, title, h('ul', { id: 'dir' }, (shown.entries || []).map((e) => h('li', {},
      h('a', { href: `#/s/${enc}/file?ref=${encodeURIComponent(ref)}&path=${encodeURIComponent(path ? `${path}/${e.name}` : e.name)}` }, e.name)))));
    return;
  }
  const body = typeof shown.text === 'string'
    ? [h('pre', { class: 'file', id: 'file-text' }, shown.text), shown.truncated ? h('p', { class: 'muted' }, '(the first MiB)') : null]
    : h('p', { class: 'muted' }, `${shown.kind}, ${shown.size} bytes${shown.kind === 'file' ? ' (not text)' : ''}`);
  fill(main, title, h('p', { class: 'muted' }, `${shown.size} bytes · checkpoint ${String(shown.checkpoint).slice(0, 12)}`), body);
}
