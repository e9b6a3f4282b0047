// Which attempt (and runtime generation) the console is talking to, and a banner when
// that changes under it: a restart, a replaced attempt, a recovered runtime. What the
// first page load replays is history, not news, so only later changes raise the banner.
import { api, sessionPath } from './api.js';
import { h } from './dom.js';

export class AttemptWatch {
  constructor(sandboxId, sessionId, bannerElement, onChange) {
    Object.assign(this, { sandboxId, sessionId, bannerElement, onChange });
    this.known = null;
    this.firstLatest = null;  // the journal's latest seq at the first load
  }

  get attemptId() { return this.known ? this.known.id : undefined; }

  fromSession(session) {  // every (re)connect
    const attempt = session.attempt && { id: session.attempt.id, number: session.attempt.number,
      generation: session.attempt.runtime_generation };
    if (this.firstLatest === null) {
      this.firstLatest = session.cursor.latest;
      this.known = attempt || null;
      return;
    }
    if (attempt) this.update(attempt, 'seen on reconnect');
  }

  fromEvent(event) {
    if (event.type !== 'attempt.starting' || event.seq <= (this.firstLatest ?? Infinity)) return;
    this.update({ id: event.attempt_id, number: null, generation: event.runtime_generation }, event.reason);
  }

  update(next, reason) {
    const previous = this.known;
    if (previous && previous.id === next.id && previous.generation === next.generation) return;
    this.known = next;
    this.show(previous, next, reason);
    this.onChange?.(next);
  }

  async show(previous, next, reason) {
    const text = (number) => {
      const which = number ? `attempt #${number}` : 'a new attempt';
      const generation = previous && previous.generation !== next.generation
        ? `runtime generation ${previous.generation} → ${next.generation}` : `runtime generation ${next.generation}`;
      return `Now attached to ${which} (${next.id}, ${reason || 'started'}); ${generation}.`;
    };
    const message = h('span', { class: 'banner-text' }, text(next.number));
    this.bannerElement.replaceChildren(message,
      h('button', { type: 'button', onclick: () => this.bannerElement.replaceChildren() }, 'dismiss'));
    if (!next.number) {
      try {
        const session = await api('GET', sessionPath(this.sandboxId, this.sessionId));
        if (session.attempt && session.attempt.id === next.id) {
          next.number = session.attempt.number;
          message.textContent = text(next.number);
        }
      } catch { /* the banner keeps the id */ }
    }
  }
}
