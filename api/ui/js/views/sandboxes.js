// Sandboxes at a glance: id, template, status, generation, session count; pause, resume,
// delete, and claim a new one.
import { api } from '../api.js';
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
    h('table', { id: 'sandboxes', class: 'grid' },
      h('thead', {}, h('tr', {}, ['id', 'template', 'status', 'generation', 'sessions', ''].map((c) => h('th', {}, c)))),
      body));

  let shown = '';
  async function refresh() {
    let listed;
    try { listed = await api('GET', '/sandboxes?limit=200'); } catch (error) {
      notice(`sandboxes: ${error.message}`, 'error');
      return;
    }
    // A session call resumes a paused sandbox (auto_resume), so a paused one is not asked.
    const counts = await Promise.all(listed.sandboxes.map(async (sandbox) => {
      if (sandbox.paused) return '—';
      try { return (await api('GET', `/sandboxes/${encodeURIComponent(sandbox.id)}/sessions`)).sessions.length; } catch { return '?'; }
    }));
    const key = JSON.stringify([listed.sandboxes, counts]);
    if (key === shown) return;  // unchanged: keep the rows as they are
    shown = key;
    const rows = listed.sandboxes.map((sandbox, i) => {
      const count = counts[i];
      const path = `/sandboxes/${encodeURIComponent(sandbox.id)}`;
      const button = (label, call) => h('button', { type: 'button', class: `act-${label}`, onclick: () => act(label, call) }, label);
      return h('tr', { dataset: { sandbox: sandbox.id } },
        h('td', {}, h('a', { href: `#${path}` }, sandbox.id)), h('td', {}, sandbox.template_id),
        h('td', { class: `status ${sandbox.status}` }, sandbox.status), h('td', {}, sandbox.runtime_generation),
        h('td', { class: 'count' }, count),
        h('td', { class: 'actions' },
          sandbox.paused ? button('resume', () => api('POST', `${path}/resume`, {}))
            : button('pause', () => api('POST', `${path}/pause`, {})),
          button('delete', () => confirm(`Delete sandbox ${sandbox.id} and its sessions?`) && api('DELETE', path))));
    });
    body.replaceChildren(...rows);
    if (!rows.length) body.append(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'no sandboxes yet: claim one')));
  }
  return every(2000, refresh);
}
