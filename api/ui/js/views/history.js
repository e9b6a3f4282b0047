// What an auditor reads: every attempt (…/attempts) with the lifecycle events between
// them (…/history, never trimmed), and the retained journal (…/events), where a 410
// shows the retained window and offers to continue from its start.
import { api, ApiError, sessionPath } from '../api.js';
import { crumbs, h, notice, shortTime } from '../dom.js';

const PAGE = 1000;
const JOURNAL_PAGE = 50;  // output events can be 256 KiB each

async function allPages(path) {
  let after = 0;
  const events = [];
  for (;;) {
    const page = await api('GET', `${path}?after=${after}&limit=${PAGE}`);
    events.push(...page.events);
    if (page.events.length < PAGE) return { events, cursor: page.cursor };
    after = page.events[page.events.length - 1].seq;
  }
}

function attemptSummary(attempt) {
  const ending = attempt.finished_at
    ? [attempt.reason, 'signal' in attempt ? `signal ${attempt.signal}` : '', 'exit_code' in attempt ? `exit code ${attempt.exit_code}` : '']
      .filter(Boolean).join(', ')
    : 'running';
  return h('div', { class: 'attempt-head' },
    h('strong', {}, `Attempt #${attempt.number}`), ` ${attempt.id}`,
    h('span', { class: 'pill' }, `generation ${attempt.runtime_generation}`),
    attempt.start_reason ? h('span', { class: 'pill' }, `started: ${attempt.start_reason}`) : '',
    h('div', { class: 'times' }, `start ${shortTime(attempt.started_at) || '—'} · end ${shortTime(attempt.finished_at) || '—'}`),
    h('div', { class: `ending ${attempt.finished_at ? 'ended' : 'running'}` }, ending));
}

function eventItem(event) {
  return h('li', { class: `event ${event.type.replace(/\./g, '-')}` },
    h('span', { class: 'seq' }, `#${event.seq}`), ` ${event.type}`,
    event.reason ? h('span', { class: 'reason' }, ` ${event.reason}`) : '',
    'exit_code' in event ? ` exit ${event.exit_code}` : '',
    h('span', { class: 'when' }, ` ${shortTime(event.occurred_at)}`));
}

export function mountHistory(root, sandboxId, sessionId) {
  crumbs(['sandboxes', '#/'], [sandboxId, `#/sandboxes/${encodeURIComponent(sandboxId)}`],
    [sessionId, `#${sessionPath(sandboxId, sessionId)}`], ['history']);
  const timeline = h('ol', { id: 'timeline', class: 'timeline' });
  const journal = h('div', { id: 'journal' });
  root.append(h('h1', {}, `History of ${sessionId}`), timeline, h('h2', {}, 'Retained journal'), journal);
  let alive = true;

  async function loadTimeline() {
    const [{ attempts }, { events }] = await Promise.all([
      api('GET', sessionPath(sandboxId, sessionId, '/attempts')),
      allPages(sessionPath(sandboxId, sessionId, '/history'))]);
    if (!alive) return;
    const byAttempt = new Map(attempts.map((a) => [a.id, { attempt: a, events: [] }]));
    const groups = [{ attempt: null, events: [] }];  // session events before any attempt
    for (const event of events) {
      const group = byAttempt.get(event.attempt_id);
      if (group && !groups.includes(group)) groups.push(group);
      (group || groups[groups.length - 1]).events.push(event);
    }
    for (const group of byAttempt.values()) if (!groups.includes(group)) groups.push(group);
    timeline.replaceChildren(...groups.filter((g) => g.attempt || g.events.length).map((group) =>
      h('li', { class: group.attempt ? 'attempt' : 'session', dataset: group.attempt ? { attempt: group.attempt.id } : {} },
        group.attempt ? attemptSummary(group.attempt) : h('div', { class: 'attempt-head' }, h('strong', {}, 'Session')),
        h('ul', { class: 'events' }, group.events.map(eventItem)))));
  }

  // One page at a time: the retained journal holds the output too (up to the retention budget).
  async function loadJournal(after) {
    journal.replaceChildren(h('p', { class: 'muted' }, 'loading…'));
    try {
      const page = await api('GET', `${sessionPath(sandboxId, sessionId, '/events')}?after=${after}&limit=${JOURNAL_PAGE}`);
      const { events, cursor } = page;
      const counts = {};
      for (const event of events) counts[event.type] = (counts[event.type] || 0) + 1;
      const last = events.length ? events[events.length - 1].seq : after;
      journal.replaceChildren(
        h('p', { id: 'journal-window' }, `retained seq ${cursor.earliest}–${cursor.latest}; `
          + `${events.length} events after seq ${after}`),
        h('ul', { class: 'counts' }, Object.entries(counts).map(([type, n]) => h('li', {}, `${type}: ${n}`))),
        last < cursor.latest ? h('button', { type: 'button', id: 'journal-next', onclick: () => loadJournal(last) },
          `next page (after seq ${last})`) : '');
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 410 || !error.details) throw error;
      const { earliest, latest } = error.details;
      journal.replaceChildren(h('div', { id: 'journal-expired', class: 'expired' },
        `Seq ${after + 1}…${earliest - 1} is no longer retained; the retained window is seq ${earliest}–${latest}. `,
        h('button', { type: 'button', id: 'continue-from-earliest', onclick: () => loadJournal(earliest - 1) },
          `continue from seq ${earliest}`)));
    }
  }

  loadTimeline().catch((error) => notice(`history: ${error.message}`, 'error'));
  loadJournal(0).catch((error) => notice(`journal: ${error.message}`, 'error'));
  return () => { alive = false; };
}
