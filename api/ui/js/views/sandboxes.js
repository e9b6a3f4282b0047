// Sandboxes at a glance: id, template, status, generation, session count; pause, resume,
// delete, and claim a new one.
import { api } from '../api.js';
import { transition, transitionOf } from '../awake.js';
import { crumbs, every, h, notice } from '../dom.js';

export async function act(label, call) {
  try { await call(); notice(`${label}: done`); } catch (error) { notice(`${label}: ${error.message}`, 'error'); }
}

export function mountSandboxes(root) {
  crumbs(['sandboxes']);
  const body = h('tbody');
  const template = h('input', { id: 'claim-template', value: 'default', size: 12 });
  const claim = h('form', { id: 'claim-form', class: 'toolbar' }, 'template ', template,
    h('button', { type: 'submit' }, 'claim sandbox'));
  claim.addEventListener('submit', (submitted) => {
    submitted.preventDefault();
    act('claim', () => api('POST', '/sandboxes', { template: template.value.trim() }));
  });
  root.append(h('h1', {}, 'Sandboxes'), claim,
    h('div', { class: 'scroll' }, h('table', { id: 'sandboxes', class: 'grid' },
      h('thead', {}, h('tr', {}, ['id', 'template', 'status', 'generation', 'sessions', ''].map((c) => h('th', {}, c)))),
      body)));

  let shown = '';
  async function refresh() {
    let listed;
    try { listed = await api('GET', '/sandboxes?limit=200'); } catch (error) {
      notice(`sandboxes: ${error.message}`, 'error');
      return;
    }
    // A session call resumes a paused sandbox (auto_resume), so only a running one is asked.
    const pending = listed.sandboxes.map((sandbox) => transitionOf(sandbox.id));
    const counts = await Promise.all(listed.sandboxes.map(async (sandbox, i) => {
      if (sandbox.status !== 'running' || pending[i]) return '—';
      try { return (await api('GET', `/sandboxes/${encodeURIComponent(sandbox.id)}/sessions`)).sessions.length; } catch { return '?'; }
    }));
    const key = JSON.stringify([listed.sandboxes, counts, pending]);
    if (key === shown) return;  // unchanged: keep the rows as they are
    shown = key;
    const rows = listed.sandboxes.map((sandbox, i) => {
      const count = counts[i];
      const path = `/sandboxes/${encodeURIComponent(sandbox.id)}`;
      const busy = pending[i];
      const status = busy ? `${{ pause: 'pausing', resume: 'resuming', delete: 'deleting' }[busy.kind]}…` : sandbox.status;
      const button = (label, call) => h('button', { type: 'button', class: `act-${label}`, disabled: Boolean(busy),
        onclick: () => { transition(sandbox.id, label, call).then(refresh); refresh(); } }, label);
      return h('tr', { dataset: { sandbox: sandbox.id } },
        h('td', {}, h('a', { href: `#${path}` }, sandbox.id)), h('td', {}, sandbox.template_id),
        h('td', { class: `status ${sandbox.status}` }, status), h('td', {}, sandbox.runtime_generation),
        h('td', { class: 'count' }, count),
        h('td', { class: 'actions' },
          sandbox.paused ? button('resume', () => api('POST', `${path}/resume`, {}))
            : button('pause', () => api('POST', `${path}/pause`, {})),
          h('button', { type: 'button', class: 'act-delete', disabled: Boolean(busy), onclick: () => {
            if (!confirm(`Delete sandbox ${sandbox.id} and its sessions?`)) return;
            transition(sandbox.id, 'delete', () => api('DELETE', path)).then(refresh);
            refresh();
          } }, 'delete')));
    });
    body.replaceChildren(...rows);
    if (!rows.length) body.append(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'no sandboxes yet: claim one')));
  }
  return every(2000, refresh);
}
