// A pipes session as a live log: stdout and stderr lines (stderr marked), lifecycle
// events in between, and an input line writing to the process's stdin.
import { encodeBase64, decodeBase64, randomId } from '../api.js';
import { AttemptWatch } from '../attempt-watch.js';
import { h, notice } from '../dom.js';
import { JournalSocket } from '../journal-socket.js';

const encoder = new TextEncoder();
const MAX_LINES = 5000;  // the page keeps the latest lines; the journal keeps them all

export function mountPipeLog(root, sandboxId, sessionId) {
  const banner = h('span', { id: 'banner', class: 'banner', role: 'alert' });
  const state = h('span', { id: 'log-status' }, 'connecting');
  const log = h('div', { id: 'log', class: 'log', role: 'log', 'aria-live': 'polite' });
  const line = h('input', { id: 'input-line', type: 'text', autocomplete: 'off', placeholder: 'a line for stdin' });
  const form = h('form', { id: 'input-form', class: 'inputline' }, line,
    h('button', { type: 'submit' }, 'send ⏎'),
    h('button', { type: 'button', id: 'send-eof', onclick: () => write(new Uint8Array(), true) }, 'close stdin (EOF)'));
  root.append(h('div', { class: 'statusbar' }, state, banner), log, form);

  const streams = { stdout: openStream('stdout'), stderr: openStream('stderr') };
  function openStream(name) { return { name, decoder: new TextDecoder(), open: null }; }

  function append(stream, text) {  // text may end mid-line: the open line keeps growing
    const pinned = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    const parts = text.split('\n');
    parts.forEach((part, i) => {
      if (!stream.open) {
        stream.open = h('div', { class: `line ${stream.name}` },
          h('span', { class: 'tag' }, stream.name === 'stderr' ? 'err' : 'out'), h('span', { class: 'text' }));
        log.append(stream.open);
      }
      stream.open.lastChild.append(part);
      if (i < parts.length - 1) stream.open = null;
    });
    if (stream.open && !stream.open.lastChild.textContent) { stream.open.remove(); stream.open = null; }
    while (log.childElementCount > MAX_LINES) log.firstElementChild.remove();
    if (pinned) log.scrollTop = log.scrollHeight;
  }

  function lifecycle(event) {
    const detail = [event.reason, 'exit_code' in event ? `exit ${event.exit_code}` : ''].filter(Boolean).join(', ');
    log.append(h('div', { class: 'line event' }, h('span', { class: 'tag' }, '·'),
      h('span', { class: 'text' }, `${event.type}${detail ? ` (${detail})` : ''}`)));
  }

  const watch = new AttemptWatch(sandboxId, sessionId, banner);
  const socket = new JournalSocket(sandboxId, sessionId, {
    onSession: (session) => watch.fromSession(session),
    onEvent: (event) => {
      watch.fromEvent(event);
      if (event.type === 'output') {
        const stream = streams[event.stream] || streams.stdout;
        append(stream, stream.decoder.decode(decodeBase64(event.data_base64), { stream: true }));
      } else if (event.type.startsWith('attempt.') || event.type.startsWith('session.')) {
        lifecycle(event);
      }
      log.dataset.lastSeq = String(event.seq);
    },
    onStatus: (status, detail) => {
      state.textContent = detail ? `${status}: ${detail}` : status;
      state.dataset.state = status;
    },
    onReply: (reply) => { if (reply.type === 'error') notice(`server: ${reply.error}`, 'error'); },
    onGap: (from, to) => log.append(h('div', { class: 'line event' }, h('span', { class: 'tag' }, '…'),
      h('span', { class: 'text' }, `events up to seq ${to} were trimmed by retention`))),
  });

  function write(bytes, eof = false) {
    socket.send({ type: 'input', input_id: randomId('in'), data_base64: bytes.length ? encodeBase64(bytes) : undefined,
      eof, expected_attempt_id: watch.attemptId });
  }
  form.addEventListener('submit', (submitted) => {
    submitted.preventDefault();
    write(encoder.encode(`${line.value}\n`));
    line.value = '';
  });
  socket.start(0);
  return () => socket.close();
}
