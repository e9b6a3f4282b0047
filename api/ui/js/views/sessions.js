// The sessions of one sandbox: name, phase, attempt, exit reason, last activity; create a
// session (argv, pipes or PTY) and drive it: stop, start, replace the attempt, signal.
import { api, randomId, sessionPath } from '../api.js';
import { asleepPanel, sandboxState } from '../awake.js';
import { crumbs, every, h, notice, shortTime } from '../dom.js';
import { act } from './sandboxes.js';
import { mountEdges } from './sandbox-edges.js';
import { mountRootfs } from './sandbox-rootfs.js';

const MiB = 1024 * 1024;
const size = (bytes) => (bytes === undefined ? '—' : `${(bytes / MiB).toFixed(1)} MiB`);

// Resource usage and the network policy: sandbox routes, which never resume a sandbox.
function sandboxPanel(sandbox, status, network) {
  const usage = status.resource_usage || {};
  const egress = network.egress || {};
  const rules = ['allowedCidrs', 'deniedCidrs', 'allowedPorts', 'deniedPorts', 'allowedDomains', 'deniedDomains']
    .filter((k) => (egress[k] || []).length)
    .map((k) => `${k}: ${egress[k].map((r) => (typeof r === 'object' ? `${r.port}${r.endPort ? `-${r.endPort}` : ''}/${r.protocol || 'tcp'}` : r)).join(', ')}`);
  return h('dl', { id: 'sandbox-info', class: 'facts' },
    h('dt', {}, 'status'), h('dd', { id: 'info-status', class: `status ${sandbox.status}` }, `${sandbox.status}, generation ${sandbox.runtime_generation}`),
    h('dt', {}, 'memory'), h('dd', { id: 'info-memory' }, `${size(usage.container_memory_usage)}`
      + (usage.container_memory_limit ? ` of ${size(usage.container_memory_limit)}` : '')),
    h('dt', {}, 'processes'), h('dd', { id: 'info-pids' }, usage.pids ?? '—'),
    h('dt', {}, 'workspace'), h('dd', { id: 'info-workspace' }, size(usage.workspace_bytes)),
    h('dt', {}, 'network'), h('dd', { id: 'info-network' }, [network.mode, ...rules].join('; ')),
    h('dt', {}, 'expires'), h('dd', {}, sandbox.expires_at && !sandbox.expires_at.startsWith('0001-') ? shortTime(sandbox.expires_at) : 'never'));
}

const SIGNALS = ['INT', 'TERM', 'HUP', 'KILL', 'QUIT', 'USR1', 'USR2', 'STOP', 'CONT', 'WINCH'];

export function parseArgv(text) {
  const trimmed = text.trim();
  if (trimmed.startsWith('[')) return JSON.parse(trimmed);  // exact argv as JSON
  return trimmed.split(/\s+/).filter(Boolean);
}

export function mountSessions(root, sandboxId) {
  crumbs(['sandboxes', '#/'], [sandboxId]);
  const base = `/sandboxes/${encodeURIComponent(sandboxId)}/sessions`;
  const body = h('tbody');
  const chosenSignal = new Map();  // survives the periodic re-render of the rows
  const name = h('input', { id: 'new-name', placeholder: 'name', size: 10 });
  const argv = h('input', { id: 'new-argv', placeholder: 'bash   or   ["sh","-c","echo hi"]', size: 36, required: true });
  const mode = h('select', { id: 'new-mode' }, h('option', { value: 'pty' }, 'PTY'), h('option', { value: 'pipes' }, 'pipes'));
  const restart = h('select', { id: 'new-restart' }, ['never', 'on_failure', 'always'].map((p) => h('option', { value: p }, p)));
  const create = h('form', { id: 'create-form', class: 'toolbar' }, name, argv, mode, 'restart ', restart,
    h('button', { type: 'submit' }, 'create session'));
  create.addEventListener('submit', async (submitted) => {
    submitted.preventDefault();
    let command;
    try { command = parseArgv(argv.value); } catch (error) { notice(`argv: ${error.message}`, 'error'); return; }
    const spec = { command, io: { mode: mode.value }, lifecycle: { restart: { policy: restart.value } } };
    if (name.value.trim()) spec.name = name.value.trim();
    try {
      const session = await api('POST', base, spec, { idempotencyKey: randomId('ui') });
      location.hash = `#${sessionPath(sandboxId, session.id)}`;
    } catch (error) { notice(`create: ${error.message}`, 'error'); }
  });
  const info = h('div', { id: 'sandbox-panel' });
  root.append(h('h1', {}, `Sessions of ${sandboxId}`), info, create,
    h('div', { class: 'scroll' }, h('table', { id: 'sessions', class: 'grid' },
      h('thead', {}, h('tr', {}, ['name', 'id', 'mode', 'phase', 'attempt', 'exit reason', 'last activity', ''].map((c) => h('th', {}, c)))),
      body)));

  function row(session) {
    const path = sessionPath(sandboxId, session.id);
    const attempt = session.attempt || {};
    const button = (label, call) => h('button', { type: 'button', class: `act-${label.replace(/\s+/g, '-')}`,
      onclick: () => act(label, call).then(refresh) }, label);
    const signal = h('select', { class: 'signal', onchange: () => chosenSignal.set(session.id, signal.value) },
      SIGNALS.map((s) => h('option', { value: s, selected: s === (chosenSignal.get(session.id) || 'INT') }, s)));
    const running = session.spec.lifecycle.desired_state === 'running';
    return h('tr', { dataset: { session: session.id } },
      h('td', {}, session.spec.name || ''), h('td', {}, h('a', { href: `#${path}` }, session.id)),
      h('td', {}, session.spec.io.mode), h('td', { class: `phase ${session.phase}` }, session.phase),
      h('td', { class: 'attempt' }, attempt.number ?? ''),
      h('td', {}, [attempt.reason, attempt.signal ? `SIG${attempt.signal}` : '', 'exit_code' in attempt && attempt.finished_at ? `exit ${attempt.exit_code}` : ''].filter(Boolean).join(', ')),
      h('td', {}, shortTime(session.last_activity_at)),
      h('td', { class: 'actions' },
        h('a', { href: `#${path}/history`, class: 'act-history' }, 'history'),
        running ? button('stop', () => api('PUT', `${base}/${session.id}/desired-state`, { state: 'stopped' }))
          : button('start', () => api('PUT', `${base}/${session.id}/desired-state`, { state: 'running' })),
        button('replace attempt', () => api('POST', `${base}/${session.id}/attempts`, { replace_current: true })),
        signal, button('signal', () => api('POST', `${base}/${session.id}/signals`, { signal: signal.value, expected_attempt_id: attempt.id })),
        button('delete', () => confirm(`Delete session ${session.id}?`) && api('DELETE', `${base}/${session.id}`))));
  }

  let shown = '';
  let infoShown = '';
  async function refresh() {
    try {
      // Asked before every session call: listing the sessions of a paused sandbox resumes it.
      const state = await sandboxState(sandboxId);
      const path = `/sandboxes/${encodeURIComponent(sandboxId)}`;
      const [status, network] = await Promise.all([api('GET', `${path}/status`), api('GET', `${path}/network`)]);
      const infoKey = JSON.stringify([state.sandbox, status, network]);
      if (infoKey !== infoShown) { infoShown = infoKey; info.replaceChildren(sandboxPanel(state.sandbox, status, network)); }
      if (!state.awake) {
        const key = `asleep ${state.shown} ${state.sandbox.runtime_generation}`;
        if (key !== shown) {
          shown = key;
          body.replaceChildren(h('tr', {}, h('td', { colspan: 8 }, asleepPanel(sandboxId, state, refresh))));
        }
        return;
      }
      const { sessions } = await api('GET', base);
      const key = JSON.stringify(sessions);
      if (key === shown) return;  // unchanged: keep the rows (and any open <select>) as they are
      shown = key;
      body.replaceChildren(...sessions.map(row));
      if (!sessions.length) body.append(h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'no sessions yet')));
    } catch (error) { notice(`sessions: ${error.message}`, 'error'); }
  }
  const stopEdges = mountEdges(root, sandboxId);  // services and metrics charts
  const stopRootfs = mountRootfs(root, sandboxId);  // snapshots, fork
  const stopSessions = every(2000, refresh);
  return () => { stopSessions(); stopEdges(); stopRootfs(); };
}
