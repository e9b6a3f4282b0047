// Looking at a sandbox must never wake it up. Every session call resumes a paused sandbox
// (auto_resume, as the contract says, and the API keeps doing so), so the console asks the
// sandbox itself first (GET /sandboxes/{id} and …/status never resume) and calls a session
// route only while the sandbox is running and no pause, resume or delete started from this
// browser is still under way. Those are remembered in localStorage, so another tab of the
// console holds back too; an entry left by a closed tab expires.
import { api } from './api.js';
import { every, h, notice } from './dom.js';

const KEY = 'sessiond.transition.';
const EXPIRE_MS = 120_000;
const VERB = { pause: 'pausing', resume: 'resuming', delete: 'deleting' };

export function transitionOf(sandboxId) {
  try {
    const entry = JSON.parse(localStorage.getItem(KEY + sandboxId) || 'null');
    if (entry && Date.now() - entry.since < EXPIRE_MS) return entry;
  } catch { /* unreadable: as if none */ }
  localStorage.removeItem(KEY + sandboxId);
  return null;
}

// Run a pause, resume or delete, with its progress shown until it is done.
export async function transition(sandboxId, kind, call) {
  const since = Date.now();
  localStorage.setItem(KEY + sandboxId, JSON.stringify({ kind, since }));
  const tick = () => notice(`${VERB[kind]} ${sandboxId}… ${((Date.now() - since) / 1000).toFixed(1)} s`, 'warn');
  tick();
  const timer = setInterval(tick, 200);
  try {
    const result = await call();
    notice(`${kind} ${sandboxId}: done in ${((Date.now() - since) / 1000).toFixed(1)} s`);
    return result;
  } catch (error) {
    notice(`${kind} ${sandboxId}: ${error.message}`, 'error');
    return undefined;
  } finally {
    clearInterval(timer);
    localStorage.removeItem(KEY + sandboxId);
  }
}

// The sandbox as it is now, and whether a session call may be made (it would not resume it).
export async function sandboxState(sandboxId) {
  const sandbox = await api('GET', `/sandboxes/${encodeURIComponent(sandboxId)}`);
  const pending = transitionOf(sandboxId);
  const shown = pending ? VERB[pending.kind] : sandbox.status;
  return { sandbox, shown, awake: sandbox.status === 'running' && !pending };
}

// What the page shows instead of the sessions of a sandbox that is not running.
export function asleepPanel(sandboxId, state, onResumed) {
  const { sandbox, shown } = state;
  const resume = h('button', { type: 'button', id: 'resume-sandbox', onclick: async () => {
    resume.disabled = true;
    await transition(sandboxId, 'resume', () => api('POST', `/sandboxes/${encodeURIComponent(sandboxId)}/resume`, {}));
    onResumed?.();
  } }, 'resume');
  return h('div', { id: 'asleep', class: 'asleep', dataset: { status: shown } },
    h('span', { id: 'sandbox-state', class: `status ${shown}` }, shown),
    ` generation ${sandbox.runtime_generation}. `,
    shown === 'paused' ? ['Viewing it does not wake it up: ', resume]
      : 'Its sessions are shown again once it is running.');
}

// A view of a session waits while its sandbox is not running (a session call would resume
// it), and mounts once it runs: resumed from here or from anywhere else.
export function whenAwake(root, sandboxId, mount) {
  let stop = null;
  let ended = false;
  let shownState = '';
  const panel = h('div');
  root.append(panel);
  const poll = every(1000, async () => {
    if (stop) return;
    const state = await sandboxState(sandboxId);
    if (state.awake) {
      poll();
      panel.remove();
      stop = (await mount(root)) || (() => {});
      if (ended) stop();
      return;
    }
    const key = `${state.shown} ${state.sandbox.runtime_generation}`;
    if (key !== shownState) { shownState = key; panel.replaceChildren(asleepPanel(sandboxId, state)); }
  });
  return () => { ended = true; poll(); if (stop) stop(); };
}
