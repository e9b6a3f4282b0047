// A sandbox's edges on its page: its services with their public URLs, and small charts of its
// CPU, memory and processes (the last 15 minutes of GET …/metrics, refreshed every 15 s).
import { api } from '../api.js';
import { h, notice } from '../dom.js';

const SVG = 'http://www.w3.org/2000/svg';
const CHARTS = [
  ['sandbox.cpu.usage', 'CPU', (v) => `${v.toFixed(2)} cores`],
  ['sandbox.memory.usage', 'memory', (v) => `${(v / 2 ** 20).toFixed(1)} MiB`],
  ['sandbox.process.count', 'processes', (v) => `${Math.round(v)}`],
];

function svg(tag, attrs) {
  const element = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) element.setAttribute(key, String(value));
  return element;
}

// Presentation attributes only (no style attribute): the console's CSP allows no inline style.
export function sparkline(points, width = 160, height = 32) {
  const chart = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, class: 'spark', role: 'img' });
  if (points.length < 2) return chart;
  const times = points.map((p) => Date.parse(p.time));
  const values = points.map((p) => p.value);
  const [t0, t1] = [Math.min(...times), Math.max(...times)];
  const top = Math.max(...values) || 1;
  const xy = points.map((p, i) => `${((times[i] - t0) / (t1 - t0 || 1)) * (width - 2) + 1},${height - 1 - (p.value / top) * (height - 2)}`);
  chart.append(svg('polyline', { points: xy.join(' '), fill: 'none', stroke: 'currentColor', 'stroke-width': 1.5 }));
  return chart;
}

export function mountEdges(root, sandboxId) {
  const base = `/sandboxes/${encodeURIComponent(sandboxId)}`;
  const services = h('tbody');
  const charts = h('div', { id: 'metrics', class: 'charts' });
  root.append(h('h2', {}, 'Services'),
    h('table', { id: 'services', class: 'grid' },
      h('thead', {}, h('tr', {}, ['service', 'port', 'runtime', 'public URL'].map((c) => h('th', {}, c)))), services),
    h('h2', {}, 'Metrics'), charts);

  async function refreshServices() {
    const data = await api('GET', `${base}/services`);
    services.replaceChildren(...data.services.map((s) => h('tr', { dataset: { service: s.id } },
      h('td', {}, s.display_name || s.id), h('td', {}, s.port), h('td', {}, (s.runtime || { type: 'manual' }).type),
      h('td', {}, s.public_url ? h('a', { href: s.public_url, target: '_blank', rel: 'noopener' }, s.public_url)
        : h('span', { class: 'muted' }, (s.publish_blockers || []).join(', '))))));
    if (!data.services.length) services.append(h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'no services')));
  }

  async function refreshMetrics() {
    const start = new Date(Date.now() - 15 * 60 * 1000).toISOString();
    const query = `metrics=${CHARTS.map(([name]) => name).join(',')}&start_time=${encodeURIComponent(start)}`;
    const data = await api('GET', `${base}/metrics?${query}`);
    charts.replaceChildren(...CHARTS.map(([name, label, show]) => {
      const series = data.series.find((s) => s.metric === name);
      const points = series ? series.segments.flatMap((segment) => segment.points) : [];
      const last = points.length ? show(points[points.length - 1].value) : 'no data';
      return h('figure', { class: 'chart', dataset: { metric: name } }, sparkline(points),
        h('figcaption', {}, `${label}: `, h('span', { class: 'last' }, last)));
    }));
  }

  const tick = async () => {
    try { await Promise.all([refreshServices(), refreshMetrics()]); } catch (error) { notice(`edges: ${error.message}`, 'error'); }
  };
  tick();
  const timer = setInterval(tick, 15000);
  return () => clearInterval(timer);
}
