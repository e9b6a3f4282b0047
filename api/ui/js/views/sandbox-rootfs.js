// A sandbox's rootfs snapshots on its page: the list (restore into this sandbox when it is paused,
// delete), and buttons to take a snapshot and to fork it (the child opens, paused).
// Listing snapshots never resumes a paused sandbox (it is not a session call).
import { api } from '../api.js';
import { h, notice, shortTime } from '../dom.js';

export function mountRootfs(root, sandboxId) {
  const base = `/sandboxes/${encodeURIComponent(sandboxId)}`;
  const rows = h('tbody');
  const act = (label, call) => async () => {
    try { await call(); notice(`${label}: done`); } catch (error) { notice(`${label}: ${error.message}`, 'error'); }
    refresh();
  };
  const name = h('input', { id: 'snapshot-name', placeholder: 'name (optional)', size: 16 });
  root.append(h('h2', {}, 'Snapshots'),
    h('form', { class: 'row', onsubmit: (e) => e.preventDefault() },
      name,
      h('button', { type: 'button', class: 'act-snapshot', onclick: act('snapshot', () =>
        api('POST', `${base}/snapshots`, name.value.trim() ? { name: name.value.trim() } : {})) }, 'snapshot'),
      h('button', { type: 'button', class: 'act-fork', onclick: act('fork', async () => {
        const made = await api('POST', `${base}/fork`, {});
        location.hash = `#/sandboxes/${encodeURIComponent(made.sandbox.id)}`;
      }) }, 'fork')),
    h('table', { id: 'snapshots', class: 'grid' },
      h('thead', {}, h('tr', {}, ['name', 'id', 'taken', ''].map((c) => h('th', {}, c)))), rows));

  let shown = '';
  async function refresh() {
    try {
      const { snapshots } = await api('GET', `${base}/snapshots`);
      const key = JSON.stringify(snapshots);
      if (key === shown) return;
      shown = key;
      rows.replaceChildren(...snapshots.map((s) => h('tr', { dataset: { snapshot: s.id } },
        h('td', {}, s.name || ''), h('td', {}, s.id), h('td', {}, shortTime(s.created_at)),
        h('td', { class: 'actions' },
          h('button', { type: 'button', class: 'act-restore', title: 'the sandbox must be paused', onclick: act('restore',
            () => api('POST', `${base}/rootfs/restore`, { snapshot_id: s.id })) }, 'restore'),
          h('button', { type: 'button', class: 'act-delete', onclick: act('delete', () =>
            confirm(`Delete snapshot ${s.id}?`) && api('DELETE', `/sandbox-rootfs-snapshots/${encodeURIComponent(s.id)}`)) },
          'delete')))));
      if (!snapshots.length) rows.append(h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'no snapshots')));
    } catch (error) {
      shown = '';
      rows.replaceChildren(h('tr', {}, h('td', { colspan: 4, class: 'muted' }, `snapshots: ${error.message}`)));
    }
  }
  refresh();
  const timer = setInterval(refresh, 5000);
  return () => clearInterval(timer);
}
