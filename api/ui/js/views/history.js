// What an auditor reads: every attempt (…/attempts) with the lifecycle events between
// them (…/history, never trimmed), and the retained journal (…/events) event by event,
// a page at a time from the newest window back, where a 410 shows the retained window
// and offers to continue from its start.
import { api, ApiError, decodeBase64, sessionPath } from '../api.js';
import { whenAwake } from '../awake.js';
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

const OUTPUT_SHOWN = 200;  // characters of an output event shown in the journal list
const text = new TextDecoder();

function journalItem(event) {
  let detail = [event.reason, 'exit_code' in event ? `exit ${event.exit_code}` : '', event.input_id || '']
    .filter(Boolean).join(' ');
  if (event.type === 'output') {
    const decoded = text.decode(decodeBase64(event.data_base64));
    detail = `${event.stream} ${JSON.stringify(decoded.length > OUTPUT_SHOWN ? `${decoded.slice(0, OUTPUT_SHOWN)}…` : decoded)}`;
  }
  return h('tr', { class: `journal-event ${event.type.replace(/\./g, '-')}`, dataset: { seq: event.seq } },
    h('td', { class: 'seq' }, event.seq), h('td', { class: 'when' }, shortTime(event.occurred_at)),
    h('td', {}, event.type), h('td', { class: 'attempt-id' }, event.attempt_id || ''), h('td', { class: 'detail' }, detail));
}

export function mountHistory(root, sandboxId, sessionId) {
  crumbs(['sandboxes', '#/'], [sandboxId, `#/sandboxes/${encodeURIComponent(sandboxId)}`],
    [sessionId, `#${sessionPath(sandboxId, sessionId)}`], ['history']);
  return whenAwake(root, sandboxId, () => mountAwakeHistory(root, sandboxId, sessionId));
}

function mountAwakeHistory(root, sandboxId, sessionId) {
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

  // One page at a time (the retained journal holds the output too), the newest page first:
  // ``after`` null means the newest window, found from the session's cursor.
  async function loadJournal(after) {
    journal.replaceChildren(h('p', { class: 'muted' }, 'loading…'));
    try {
      if (after === null) {
        const { cursor } = await api('GET', sessionPath(sandboxId, sessionId));
        after = Math.max(cursor.earliest - 1, cursor.latest - JOURNAL_PAGE);
      }
      const page = await api('GET', `${sessionPath(sandboxId, sessionId, '/events')}?after=${after}&limit=${JOURNAL_PAGE}`);
      const { events, cursor } = page;
      const last = events.length ? events[events.length - 1].seq : after;
      const older = Math.max(cursor.earliest - 1, after - JOURNAL_PAGE);
      journal.replaceChildren(
        h('p', { id: 'journal-window' }, `retained seq ${cursor.earliest}–${cursor.latest}; `
          + `showing ${events.length ? `seq ${events[0].seq}–${last}` : 'nothing'}`),
        h('div', { class: 'toolbar' },
          after > cursor.earliest - 1 ? h('button', { type: 'button', id: 'journal-older', onclick: () => loadJournal(older) },
            `older (from seq ${older + 1})`) : '',
          last < cursor.latest ? h('button', { type: 'button', id: 'journal-next', onclick: () => loadJournal(last) },
            `newer (after seq ${last})`) : '',
          h('button', { type: 'button', id: 'journal-newest', onclick: () => loadJournal(null) }, 'newest'),
          h('button', { type: 'button', id: 'journal-oldest', onclick: () => loadJournal(0) }, 'from seq 1')),
        h('div', { class: 'scroll' }, h('table', { id: 'journal-events', class: 'grid' },
          h('thead', {}, h('tr', {}, ['seq', 'time', 'type', 'attempt', 'detail'].map((c) => h('th', {}, c)))),
          h('tbody', {}, events.map(journalItem)))));
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
  loadJournal(null).catch((error) => notice(`journal: ${error.message}`, 'error'));
  return () => { alive = false; };
}
