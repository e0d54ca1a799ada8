// reel console: login, navigation (hash routes) and the pages.

import {
  api,
  clearSession,
  currentUser,
  hasRole,
  onUnauthorized,
  setSession,
  setUser,
  token,
} from "./api.js";
import { attempt, clear, clearMessages, clearTransientMessages, showMessage } from "./ui.js";
import { mountLibrary } from "./library.js";
import { mountCartridges, mountCartridgeDetail } from "./cartridges.js";
import { mountMonitor, startFeed, stopFeed } from "./monitor.js";
import { mountSessions, mountEvents } from "./activity.js";
import { mountUsers } from "./users.js";
import { mountMaintenance } from "./maintenance.js";

const routes = {
  library: { title: "Library", mount: mountLibrary },
  cartridges: { title: "Cartridges", mount: mountCartridges },
  cartridge: { title: "Cartridge", mount: mountCartridgeDetail, nav: "cartridges" },
  monitor: { title: "Monitor", mount: mountMonitor },
  sessions: { title: "Sessions", mount: mountSessions },
  events: { title: "Events", mount: mountEvents },
  maintenance: { title: "Maintenance", mount: mountMaintenance },
  users: { title: "Users & tokens", mount: mountUsers },
};

const $ = (id) => document.getElementById(id);
let unmount = null;
let loggingOut = false;

function parseHash() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const name = routes[parts[0]] ? parts[0] : "library";
  return { name, params: parts.slice(1) };
}

function teardown() {
  if (unmount) {
    try {
      unmount();
    } catch (e) {
      console.warn("unmount", e);
    }
  }
  unmount = null;
}

function showLogin(message) {
  teardown();
  stopFeed();
  $("topbar").hidden = true;
  clear($("view"));
  $("login-view").hidden = false;
  $("login-message").textContent = message || "";
  document.title = "Log in — reel console";
  $("login-username").focus();
}

function setMenu(open) {
  $("menu-toggle").setAttribute("aria-expanded", String(open));
  $("main-nav").classList.toggle("open", open);
}

async function render() {
  if (!token()) {
    showLogin();
    return;
  }
  $("login-view").hidden = true;
  $("topbar").hidden = false;
  const user = currentUser();
  $("whoami").textContent = user ? `${user.username} (${user.role})` : "";
  $("nav-users").textContent = hasRole("admin") ? "Users & tokens" : "Tokens";
  const { name, params } = parseHash();
  const route = routes[name];
  for (const link of document.querySelectorAll("#main-nav a[data-route]")) {
    if (link.dataset.route === (route.nav || name)) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${route.title} — reel console`;
  teardown();
  const view = clear($("view"));
  view.dataset.page = name;
  setMenu(false);
  try {
    unmount = route.mount(view, params) || null;
  } catch (e) {
    showMessage(`The ${route.title} page failed: ${e.message}`, "error");
  }
}

async function login(event) {
  event.preventDefault();
  const username = $("login-username").value.trim();
  const password = $("login-password").value;
  if (!username || !password) {
    $("login-message").textContent = "Enter your username and password.";
    return;
  }
  const submit = event.target.querySelector("button[type=submit]");
  submit.disabled = true;
  try {
    const answer = await api("POST", "/login", { username, password }, { auth: false });
    setSession(answer.token, { username: answer.username || username, role: answer.role || "viewer" });
    $("login-password").value = "";
    $("login-message").textContent = "";
    clearMessages();
    loggingOut = false;
    startFeed();
    if (!location.hash || location.hash === "#" || location.hash === "#/") location.hash = "#/library";
    await render();
    $("main").focus();
  } catch (e) {
    $("login-message").textContent =
      e.status === 401 ? "Wrong username or password." : `Login failed: ${e.message}`;
  } finally {
    submit.disabled = false;
  }
}

async function logout() {
  loggingOut = true;
  try {
    await api("POST", "/logout", {});
  } catch {
    // The token is dropped either way.
  }
  clearSession();
  clearMessages();
  showLogin("You have logged out.");
}

function init() {
  onUnauthorized((message) => {
    if (loggingOut) return;
    clearSession();
    showLogin(message);
  });
  $("login-form").addEventListener("submit", (e) => {
    login(e).catch((err) => showMessage(err.message, "error"));
  });
  $("logout").addEventListener("click", () => {
    logout().catch(() => {});
  });
  $("menu-toggle").addEventListener("click", () => {
    setMenu($("menu-toggle").getAttribute("aria-expanded") !== "true");
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && $("main-nav").classList.contains("open")) {
      setMenu(false);
      $("menu-toggle").focus();
    }
  });
  window.addEventListener("hashchange", () => {
    clearTransientMessages();
    render().catch((e) => showMessage(e.message, "error"));
  });
  window.addEventListener("unhandledrejection", (e) => {
    // Last resort: an API error that escaped a page shows as a message.
    if (e.reason && e.reason.name === "ApiError") {
      e.preventDefault();
      if (e.reason.status !== 401) showMessage(e.reason.message, "error");
    }
  });
  if (token()) {
    // Check the stored token (and refresh the role) before showing anything.
    attempt("Checking the session", async () => {
      const me = await api("GET", "/me");
      setUser({ username: me.username, role: me.role });
      startFeed();
      await render();
    });
  } else {
    showLogin();
  }
}

init();
