// Which attempt (and runtime generation) the console is talking to, and a banner when
// that changes under it: a restart, a replaced attempt, a recovered runtime. What the
// first page load replays is history, not news, so only later changes raise the banner.
import { api, sessionPath } from './api.js';
import { h } from './dom.js';

export class AttemptWatch {
  constructor(sandboxId, sessionId, bannerElement, onChange) {
    Object.assign(this, { sandboxId, sessionId, bannerElement, onChange });
    this.known = null;
    this.previous = null;
    this.firstLatest = null;  // the journal's latest seq at the first load
  }

  get attemptId() { return this.known ? this.known.id : undefined; }

  fromSession(session) {  // every (re)connect: a change while disconnected shows here first
    const attempt = session.attempt && { id: session.attempt.id, number: session.attempt.number,
      generation: session.attempt.runtime_generation, reason: '' };
    if (this.firstLatest === null) {
      this.firstLatest = session.cursor.latest;
      this.known = attempt || null;
    } else if (attempt) {
      this.update(attempt);
    }
  }

  fromEvent(event) {
    if (event.type !== 'attempt.starting' || this.firstLatest === null) return;
    if (this.known && this.known.id === event.attempt_id && !this.known.reason && this.previous) {
      this.known.reason = event.reason || '';  // the start reason only the journal carries
      this.render();
    }
    if (event.seq > this.firstLatest) {
      this.update({ id: event.attempt_id, number: null, generation: event.runtime_generation, reason: event.reason || '' });
    }
  }

  update(next) {
    const known = this.known;
    if (known && known.id === next.id && known.generation === next.generation) return;
    this.previous = known || { id: '', generation: next.generation };
    this.known = next;
    this.render();
    this.onChange?.(next);
    if (!next.number) this.lookUpNumber(next);
  }

  render() {
    const { previous, known } = this;
    const which = known.number ? `attempt #${known.number}` : 'a new attempt';
    const why = known.reason ? `, ${known.reason}` : '';
    const generation = previous.generation !== known.generation
      ? `runtime generation ${previous.generation} → ${known.generation}` : `runtime generation ${known.generation}`;
    this.bannerElement.replaceChildren(
      h('span', { class: 'banner-text' }, `Now attached to ${which} (${known.id}${why}); ${generation}.`),
      h('button', { type: 'button', onclick: () => this.bannerElement.replaceChildren() }, 'dismiss'));
  }

  async lookUpNumber(attempt) {
    try {
      const session = await api('GET', sessionPath(this.sandboxId, this.sessionId));
      if (session.attempt && session.attempt.id === attempt.id && this.known === attempt) {
        attempt.number = session.attempt.number;
        this.render();
      }
    } catch { /* the banner keeps the id */ }
  }
}
