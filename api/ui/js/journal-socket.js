// One session's journal over the Sandbox0 WebSocket, resumed from the last seq handed on.
//
// Each (re)connection first reads the session over HTTP: a browser WebSocket cannot see
// why a handshake failed, but the HTTP answer tells 401, 404 and the retained window
// apart. The socket then opens with ?after=<last seq delivered>, so after a drop or a
// server restart the replay continues exactly where the page left off: no event is
// delivered twice, and a trimmed gap is reported instead of skipped silently.
import { api, randomId, sessionPath, webSocketProtocols, webSocketUrl } from './api.js';
import { sandboxState } from './awake.js';

const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 4000;

export class JournalSocket {
  constructor(sandboxId, sessionId, handlers) {
    this.sandboxId = sandboxId;
    this.sessionId = sessionId;
    this.handlers = handlers;  // onEvent(ev), onSession(session), onStatus(state, detail), onReply(msg), onGap(from, to)
    this.lastSeq = 0;
    this.pending = new Map();  // request_id -> input message not yet acknowledged
    this.retryMs = RETRY_MIN_MS;
    this.ws = null;
    this.timer = null;
    this.closed = false;
  }

  start(after = 0) {
    this.lastSeq = after;
    this.connect();
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close(1000, 'console closed');
  }

  get open() { return this.ws !== null && this.ws.readyState === WebSocket.OPEN; }

  // Inputs are kept until acknowledged and sent again after a reconnect with the same
  // input_id: the server's dedupe makes that exactly-once. Signals and resizes are not
  // repeated (a signal twice is not harmless; the size is sent on every connect anyway).
  send(message) {
    const framed = { ...message, request_id: randomId('req') };
    if (framed.type === 'input') this.pending.set(framed.request_id, framed);
    if (this.open) this.ws.send(JSON.stringify(framed));
    return framed.request_id;
  }

  async connect() {
    if (this.closed) return;
    this.status('connecting');
    let session;
    try {
      // A pause ends the socket; reconnecting then would resume the sandbox (auto_resume):
      // wait, without a session call, until it runs again.
      const state = await sandboxState(this.sandboxId);
      if (!state.awake) {
        this.status(state.shown, `generation ${state.sandbox.runtime_generation}; waiting until it runs again`);
        this.later(RETRY_MAX_MS / 4);
        return;
      }
      session = await api('GET', sessionPath(this.sandboxId, this.sessionId));
    } catch (error) {
      if (error.status === 401 || error.status === 404) {
        this.status(error.status === 401 ? 'unauthorized' : 'gone', error.message);
        return;
      }
      this.retry(error.message);
      return;
    }
    if (this.closed) return;
    const floor = session.cursor.earliest - 1;
    if (this.lastSeq < floor) {
      this.handlers.onGap?.(this.lastSeq, floor);
      this.lastSeq = floor;
    }
    this.handlers.onSession?.(session);
    const ws = new WebSocket(webSocketUrl(sessionPath(this.sandboxId, this.sessionId, '/ws'), this.lastSeq),
      webSocketProtocols());
    this.ws = ws;
    ws.onopen = () => {
      this.retryMs = RETRY_MIN_MS;
      this.status('live');
      for (const message of this.pending.values()) ws.send(JSON.stringify(message));
    };
    ws.onmessage = (frame) => this.receive(frame.data);
    ws.onclose = (closing) => {
      if (this.ws === ws) this.ws = null;
      if (this.closed) return;
      if (closing.code === 1000 && closing.reason === 'session deleted') {
        this.status('gone', 'session deleted');
        return;
      }
      this.retry(closing.reason || `connection closed (${closing.code})`);
    };
  }

  receive(data) {
    let message;
    try { message = JSON.parse(data); } catch { return; }
    if (message.type === 'event' && message.event) {
      if (message.event.seq <= this.lastSeq) return;  // already rendered: never twice
      this.lastSeq = message.event.seq;
      this.handlers.onEvent?.(message.event);
    } else if (message.type === 'ack' || message.type === 'error') {
      this.pending.delete(message.request_id);
      this.handlers.onReply?.(message);
    }
  }

  retry(detail) {
    if (this.closed) return;
    this.status('reconnecting', detail);
    this.later(this.retryMs);
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
  }

  later(ms) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), ms);
  }

  status(state, detail = '') {
    this.handlers.onStatus?.(state, detail);
  }
}
