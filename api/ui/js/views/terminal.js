// A PTY session in xterm.js: the retained output replayed, then live input, output and
// resize over the session WebSocket, resumed from the last rendered seq after any drop.
import { Terminal } from '../../vendor/xterm/xterm.mjs';
import { FitAddon } from '../../vendor/addon-fit/addon-fit.mjs';
import { encodeBase64, decodeBase64, randomId } from '../api.js';
import { AttemptWatch } from '../attempt-watch.js';
import { h, notice } from '../dom.js';
import { JournalSocket } from '../journal-socket.js';

const encoder = new TextEncoder();

export function mountTerminal(root, sandboxId, sessionId) {
  const banner = h('span', { id: 'banner', class: 'banner', role: 'alert' });
  const size = h('span', { id: 'term-size' });
  const state = h('span', { id: 'term-status' }, 'connecting');
  const process = h('span', { id: 'attempt-state' });
  const screen = h('div', { id: 'terminal', class: 'terminal' });
  // The banner sits in the fixed-height status bar: its coming and going never reflows the terminal.
  root.append(h('div', { class: 'statusbar' }, state, process, size, banner), screen);

  const term = new Terminal({ scrollback: 10000, cursorBlink: true, fontSize: 14,
    fontFamily: 'DejaVu Sans Mono, Liberation Mono, monospace' });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(screen);

  let outputAttempt = null;  // whose output was written last, and whether it ended mid-line
  let midLine = false;
  const watch = new AttemptWatch(sandboxId, sessionId, banner, () => sendSize());
  const socket = new JournalSocket(sandboxId, sessionId, {
    onSession: (session) => watch.fromSession(session),
    onEvent: (event) => {
      watch.fromEvent(event);
      if (event.type === 'output') {
        const bytes = decodeBase64(event.data_base64);
        if (event.attempt_id !== outputAttempt && midLine) term.write('\r\n');  // a new attempt starts a line
        outputAttempt = event.attempt_id;
        if (bytes.length) midLine = bytes[bytes.length - 1] !== 0x0a;
        term.write(bytes);
      }
      else if (event.type === 'attempt.started') {
        process.textContent = 'attempt running';
        if (event.attempt_id === watch.attemptId) sendSize();
      }
      else if (event.type === 'attempt.exited') {
        process.textContent = `attempt exited (${event.reason || 'exit'}${'exit_code' in event ? `, code ${event.exit_code}` : ''})`;
      }
      screen.dataset.lastSeq = String(event.seq);
    },
    onStatus: (status, detail) => {
      state.textContent = detail ? `${status}: ${detail}` : status;
      state.dataset.state = status;
      if (status === 'live') { sized = null; sendSize(); }
      if (status === 'unauthorized') notice('the token was refused', 'error');
    },
    onReply: (reply) => {
      if (reply.type !== 'error') return;
      if (reply.request_id === sizeRequest) sized = null;  // e.g. not running yet: again on attempt.started
      else notice(`server: ${reply.error}`, 'error');
    },
    onGap: (from, to) => notice(`output up to seq ${to} was trimmed by retention; showing what is retained`, 'warn'),
  });

  // The PTY follows the window: sent on connect, on every resize, and to each new attempt
  // once its process exists (a resize before that is refused, and then sent again).
  let sized = null;  // "attempt rows cols" last sent and not refused
  let sizeRequest = null;
  function sendSize() {
    size.textContent = `${term.rows}×${term.cols}`;
    size.dataset.rows = String(term.rows);
    size.dataset.cols = String(term.cols);
    const wanted = `${watch.attemptId} ${term.rows} ${term.cols}`;
    if (!socket.open || !watch.attemptId || wanted === sized) return;
    sized = wanted;
    sizeRequest = socket.send({ type: 'resize', rows: term.rows, cols: term.cols, expected_attempt_id: watch.attemptId });
  }
  const input = (bytes) => socket.send({ type: 'input', input_id: randomId('in'),
    data_base64: encodeBase64(bytes), expected_attempt_id: watch.attemptId });
  term.onData((text) => input(encoder.encode(text)));
  term.onBinary((text) => input(Uint8Array.from(text, (c) => c.charCodeAt(0) & 0xff)));
  term.onResize(() => sendSize());

  let frame = 0;
  const refit = () => { cancelAnimationFrame(frame); frame = requestAnimationFrame(() => fit.fit()); };
  const observer = new ResizeObserver(refit);
  observer.observe(screen);
  fit.fit();
  sendSize();
  term.focus();
  socket.start(0);

  return () => {
    observer.disconnect();
    cancelAnimationFrame(frame);
    socket.close();
    term.dispose();
  };
}
