// The timeline's graph: one SVG per row, drawn so the rows join into a rail.
// The session's line runs down the left; each operation is a dot on it (its
// colour says what kind, an exec's says how it ended); a fork leaves the line to
// the right; an experiment fans out into one dot per run (green: exited 0, red:
// failed, ringed: the winner) and back in; a branch made here gets a tag.
const NS = 'http://www.w3.org/2000/svg';
const X = 18;

function s(tag, attrs, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

const COLOURS = {
  checkpoint: '#3b5bdb', exec: '#2b8a3e', note: '#868e96', message: '#7048e8', fork: '#e67700',
  experiment: '#1098ad', undo: '#c2255c', redo: '#c2255c', checkout: '#5f3dc4', restore: '#5f3dc4',
};

export function rail({ kind, ok = null, runs = null, fork = null, branch = null }) {
  const svg = s('svg', { class: `rail-${kind}`, role: 'img', 'aria-label': kind });
  svg.append(s('line', { x1: X, y1: '0', x2: X, y2: '100%', stroke: '#c7cde0', 'stroke-width': 2 }));
  let colour = COLOURS[kind] || '#495057';
  if (kind === 'exec' && ok === false) colour = '#c92a2a';
  if (runs && runs.length) {
    const n = Math.min(runs.length, 8);
    runs.slice(0, n).forEach((r, i) => {
      const y = `${n === 1 ? 50 : 15 + (70 * i) / (n - 1)}%`;
      svg.append(s('line', { x1: X, y1: '50%', x2: 70, y2: y, stroke: COLOURS.experiment, 'stroke-width': 1.5 }));
      svg.append(s('line', { x1: 70, y1: y, x2: 122, y2: '50%', stroke: COLOURS.experiment, 'stroke-width': 1.5, 'stroke-dasharray': r.winner ? '' : '3 3' }));
      svg.append(s('circle', { cx: 70, cy: y, r: r.winner ? 6 : 4.5, fill: r.ok ? '#2b8a3e' : '#c92a2a', stroke: r.winner ? '#f59f00' : '#fff', 'stroke-width': r.winner ? 2.5 : 1, class: r.winner ? 'run winner' : 'run' }));
    });
    svg.append(s('circle', { cx: 122, cy: '50%', r: 4, fill: '#fff', stroke: COLOURS.experiment, 'stroke-width': 2 }));
  }
  if (fork) {
    svg.append(s('line', { x1: X, y1: '50%', x2: 62, y2: '50%', stroke: COLOURS.fork, 'stroke-width': 2 }));
    svg.append(s('circle', { cx: 62, cy: '50%', r: 5, fill: '#fff', stroke: COLOURS.fork, 'stroke-width': 2 }));
    svg.append(s('text', { x: 72, y: '50%', dy: '.35em', 'font-size': 11, fill: COLOURS.fork }, fork.length > 10 ? `${fork.slice(0, 9)}…` : fork));
  }
  if (branch) {
    svg.append(s('rect', { x: 32, y: 'calc(50% - 8px)', width: 100, height: 16, rx: 4, fill: '#f3f0ff', stroke: '#5f3dc4' }));
    svg.append(s('text', { x: 38, y: '50%', dy: '.35em', 'font-size': 11, fill: '#5f3dc4' }, branch.length > 14 ? `${branch.slice(0, 13)}…` : branch));
  }
  if (kind === 'message') {
    svg.append(s('rect', { x: X - 6, y: 'calc(50% - 6px)', width: 12, height: 12, rx: 3, fill: colour }));
  } else {
    svg.append(s('circle', { cx: X, cy: '50%', r: 6, fill: colour, stroke: '#fff', 'stroke-width': 2, class: 'dot' }));
  }
  return svg;
}
