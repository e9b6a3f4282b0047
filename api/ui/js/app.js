// Boot: take the token, check it against the API, then route by the URL fragment:
//   #/                                   sandboxes
//   #/sandboxes/{id}                     its sessions
//   #/sandboxes/{id}/sessions/{sid}      the terminal (PTY) or the live log (pipes)
//   #/sandboxes/{id}/sessions/{sid}/history
import './csp-shim.js';
import { api, forgetToken, sessionPath, setToken, takeTokenFromFragment, token } from './api.js';
import { whenAwake } from './awake.js';
import { crumbs, h, notice } from './dom.js';
import { mountHistory } from './views/history.js';
import { mountPipeLog } from './views/pipelog.js';
import { mountSandboxes } from './views/sandboxes.js';
import { mountSessions } from './views/sessions.js';
import { mountTerminal } from './views/terminal.js';

const main = document.getElementById('main');
let unmount = () => {};

function mountSession(root, sandboxId, sessionId) {
  crumbs(['sandboxes', '#/'], [sandboxId, `#/sandboxes/${encodeURIComponent(sandboxId)}`], [sessionId]);
  return whenAwake(root, sandboxId, () => mountAwakeSession(root, sandboxId, sessionId));
}

async function mountAwakeSession(root, sandboxId, sessionId) {
  const session = await api('GET', sessionPath(sandboxId, sessionId));
  const pty = session.spec.io.mode === 'pty';
  root.classList.add(pty ? 'terminal-view' : 'log-view');
  root.append(h('div', { class: 'toolbar' },
    h('strong', {}, session.spec.name || session.id), ` ${session.spec.command.join(' ')} `,
    h('a', { href: `#${sessionPath(sandboxId, sessionId)}/history`, id: 'open-history' }, 'history')));
  return pty ? mountTerminal(root, sandboxId, sessionId) : mountPipeLog(root, sandboxId, sessionId);
}

const ROUTES = [
  [/^#?\/?$/, mountSandboxes],
  [/^#\/sandboxes\/([^/]+)\/?$/, mountSessions],
  [/^#\/sandboxes\/([^/]+)\/sessions\/([^/]+)\/?$/, mountSession],
  [/^#\/sandboxes\/([^/]+)\/sessions\/([^/]+)\/history\/?$/, mountHistory],
];

async function route() {
  unmount();
  unmount = () => {};
  notice('');
  const view = h('section', { id: 'view' });
  main.replaceChildren(view);
  for (const [pattern, mount] of ROUTES) {
    const match = location.hash.match(pattern);
    if (!match) continue;
    try {
      const stop = await mount(view, ...match.slice(1).map(decodeURIComponent));
      if (view.isConnected) unmount = stop || (() => {}); else if (stop) stop();
    } catch (error) {
      if (error.status === 401) { askForToken('the token was refused'); return; }
      view.append(h('p', { class: 'error' }, error.message));
    }
    return;
  }
  view.append(h('p', { class: 'error' }, 'no such page'), h('a', { href: '#/' }, 'sandboxes'));
}

function askForToken(reason) {
  unmount();
  unmount = () => {};
  crumbs(['sign in']);
  const input = h('input', { id: 'token-input', type: 'password', autocomplete: 'off', required: true });
  const form = h('form', { id: 'token-form', class: 'prompt' },
    h('h1', {}, 'Token required'), h('p', {}, reason),
    h('label', {}, 'API token ', input), h('button', { type: 'submit' }, 'open console'));
  form.addEventListener('submit', (submitted) => {
    submitted.preventDefault();
    setToken(input.value.trim());
    start();
  });
  main.replaceChildren(form);
  input.focus();
}

async function start() {
  try {
    await api('GET', '/sandboxes?limit=1');
  } catch (error) {
    if (error.status === 401) { askForToken(token() ? 'the server refused this token' : 'this server needs a token'); return; }
    notice(error.message, 'error');
  }
  document.getElementById('forget-token').hidden = !token();
  route();
}

document.getElementById('forget-token').addEventListener('click', () => { forgetToken(); start(); });
window.addEventListener('hashchange', () => { if (!takeTokenFromFragment()) route(); else start(); });
takeTokenFromFragment();
start();
