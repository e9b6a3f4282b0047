// The console's only door to the server: the authenticated Sandbox0 API, and its WebSocket.
//
// The token comes from the URL fragment (/ui/#token=…, never sent to any server) or the
// prompt, and lives in sessionStorage (this tab only). HTTP calls carry it as the bearer;
// a WebSocket, which cannot carry headers from a browser, offers it as a subprotocol.
const TOKEN_KEY = 'sessiond.token';
const ROOT = new URL('../', document.baseURI);  // the server root, even behind a path prefix

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    Object.assign(this, { status, code, details });
  }
}

export function takeTokenFromFragment() {
  const match = location.hash.match(/^#token=([^&]*)/);
  if (!match) return false;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
  history.replaceState(null, '', `${location.pathname}${location.search}#/`);  // out of the address bar
  return true;
}

export const token = () => sessionStorage.getItem(TOKEN_KEY) || '';
export const setToken = (value) => sessionStorage.setItem(TOKEN_KEY, value);
export const forgetToken = () => sessionStorage.removeItem(TOKEN_KEY);

export async function api(method, path, body, { idempotencyKey } = {}) {
  const headers = { Accept: 'application/json' };
  if (token()) headers.Authorization = `Bearer ${token()}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
  let response;
  try {
    response = await fetch(new URL(`api/v1${path}`, ROOT), {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store', credentials: 'omit',
    });
  } catch (error) {
    throw new ApiError(0, 'unreachable', `server unreachable (${error.message})`);
  }
  let payload = null;
  try { payload = await response.json(); } catch { /* not JSON: reported below */ }
  if (!response.ok || !payload || payload.success !== true) {
    const error = (payload && payload.error) || {};
    throw new ApiError(response.status, error.code || `http_${response.status}`,
      error.message || response.statusText || 'request failed', error.details);
  }
  return payload.data;
}

export function sessionPath(sandboxId, sessionId, tail = '') {
  return `/sandboxes/${encodeURIComponent(sandboxId)}/sessions/${encodeURIComponent(sessionId)}${tail}`;
}

export function webSocketUrl(path, after) {
  const url = new URL(`api/v1${path}`, ROOT);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.search = `?after=${after}`;  // a cursor, never a credential
  return url.href;
}

export function webSocketProtocols() {
  const offered = ['sessiond.v1'];
  if (token()) offered.push(`sessiond.bearer.${base64url(new TextEncoder().encode(token()))}`);
  return offered;
}

export function randomId(prefix) {  // crypto.randomUUID needs a secure context; this does not
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `${prefix}-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

export function encodeBase64(bytes) {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

export function decodeBase64(text) {
  const binary = atob(text || '');
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function base64url(bytes) {
  return encodeBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
