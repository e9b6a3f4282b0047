// A tiny element builder: h('td', {class: 'x', onclick: f}, 'text', child). Text is always
// set as text (never parsed as HTML), so nothing from the API can inject markup.
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') element.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(element.dataset, value);
    else element.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

// ISO 8601 in UTC, as the API and sessionctl print times (never the browser's locale).
export function shortTime(rfc3339) {
  if (!rfc3339) return '';
  const date = new Date(rfc3339);
  return Number.isNaN(date.getTime()) ? rfc3339 : date.toISOString().replace(/\.(\d{3})Z$/, '.$1Z');
}

export function notice(text, kind = 'info') {
  const element = document.getElementById('notice');
  element.textContent = text || '';
  element.className = text ? kind : '';
}

export function crumbs(...parts) {  // [label, href] pairs; the last is the current page
  const nav = document.getElementById('crumbs');
  nav.replaceChildren(...parts.map(([label, href], i) =>
    i === parts.length - 1 || !href ? h('span', {}, label) : h('a', {href}, label)));
}

// Every few seconds while a view is shown; the returned function stops it.
export function every(ms, fn) {
  let stopped = false;
  let timer = null;
  const tick = async () => {
    if (stopped) return;
    try { await fn(); } catch (error) { notice(error.message, 'error'); } finally { if (!stopped) timer = setTimeout(tick, ms); }
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}
