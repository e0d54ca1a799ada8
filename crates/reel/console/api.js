// The REST API client (docs/design/api.md): the bearer token kept in sessionStorage,
// JSON in and out, errors as ApiError with the API's stable code and message.

const TOKEN_KEY = "reel.token";
const USER_KEY = "reel.user";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }
}

let unauthorizedHandler = () => {};

/** Called (once per 401) when the server no longer accepts the token. */
export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** The logged-in user: {username, role}, or null. */
export function currentUser() {
  try {
    return JSON.parse(sessionStorage.getItem(USER_KEY) || "null");
  } catch {
    return null;
  }
}

export function setSession(tok, user) {
  sessionStorage.setItem(TOKEN_KEY, tok);
  sessionStorage.setItem(USER_KEY, JSON.stringify(user));
}

export function setUser(user) {
  sessionStorage.setItem(USER_KEY, JSON.stringify(user));
}

export function clearSession() {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(USER_KEY);
}

const ROLES = ["viewer", "operator", "admin"];

/** Whether the current user's role includes `role` (viewer < operator < admin). */
export function hasRole(role) {
  const user = currentUser();
  if (!user) return false;
  return ROLES.indexOf(user.role) >= ROLES.indexOf(role);
}

/** Path segment escaping for names, barcodes and user names. */
export function seg(value) {
  return encodeURIComponent(String(value));
}

/**
 * One API call. `path` is below /api/v1. Resolves to the parsed JSON body (or null for
 * 204); rejects with ApiError. A 401 also clears the session and calls the handler.
 */
export async function api(method, path, body, { auth = true } = {}) {
  const headers = { Accept: "application/json" };
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (auth) {
    const tok = token();
    if (!tok) {
      // Already logged out (the first 401 showed the login page and said why).
      throw new ApiError(401, "unauthenticated", "Not logged in.");
    }
    headers.Authorization = `Bearer ${tok}`;
  }
  let response;
  try {
    response = await fetch(`/api/v1${path}`, init);
  } catch (e) {
    throw new ApiError(0, "network", `The server cannot be reached (${e.message}).`);
  }
  let data = null;
  const text = await response.text().catch(() => "");
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const err = data && data.error ? data.error : {};
    const message = err.message || `${response.status} ${response.statusText || "error"}`;
    const error = new ApiError(response.status, err.code || "http_" + response.status, message);
    if (response.status === 401 && auth) {
      clearSession();
      unauthorizedHandler(`Your session has ended: ${message} Please log in again.`);
    }
    throw error;
  }
  return data;
}

export const get = (path) => api("GET", path);
export const post = (path, body) => api("POST", path, body === undefined ? {} : body);
export const patch = (path, body) => api("PATCH", path, body);
export const put = (path, body) => api("PUT", path, body);
export const del = (path) => api("DELETE", path);
