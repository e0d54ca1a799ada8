// iSCSI sessions and the audit log.

import { get } from "./api.js";
import { attempt, debounce, field, fillRows, h, options, time } from "./ui.js";

function table(testid, caption, heads) {
  const tbody = h("tbody");
  const node = h(
    "table",
    { class: "table", "data-testid": testid },
    h("caption", { class: "visually-hidden", text: caption }),
    h("thead", {}, h("tr", {}, heads.map((t) => h("th", { scope: "col", text: t })))),
    tbody,
  );
  return { node, tbody };
}

function autoRefresh(load, ms) {
  let alive = true;
  let timer;
  const tick = async () => {
    if (!alive) return;
    if (!document.hidden) await attempt("Refreshing", load);
    if (alive) timer = setTimeout(tick, ms);
  };
  timer = setTimeout(tick, ms);
  return () => {
    alive = false;
    clearTimeout(timer);
  };
}

export function mountSessions(view) {
  const { node, tbody } = table("sessions-table", "iSCSI sessions", ["Initiator", "Target", "ISID", "TSIH", "Peer"]);
  const count = h("p", { class: "muted", "data-testid": "session-count" });
  const refresh = h("button", { type: "button", class: "button", text: "Refresh", "data-testid": "sessions-refresh" });
  view.appendChild(
    h(
      "section",
      { class: "page", "aria-labelledby": "ses-title" },
      h("div", { class: "page-head" }, h("h1", { id: "ses-title", text: "iSCSI sessions" }), h("div", { class: "toolbar" }, refresh)),
      count,
      h("div", { class: "table-wrap" }, node),
    ),
  );
  let alive = true;
  async function load() {
    const list = await get("/sessions");
    if (!alive) return;
    count.textContent = `${list.length} session${list.length === 1 ? "" : "s"} logged in (refreshed every 5 s)`;
    fillRows(
      tbody,
      list,
      (s) =>
        h(
          "tr",
          {},
          h("td", { class: "wrap-anywhere", text: s.initiator }),
          h("td", { class: "wrap-anywhere", text: s.target || "(discovery)" }),
          h("td", { class: "mono", text: s.isid }),
          h("td", { class: "mono", text: String(s.tsih) }),
          h("td", { class: "mono", text: s.peer }),
        ),
      "No initiator is logged in.",
      5,
    );
  }
  refresh.addEventListener("click", () => attempt("Loading sessions", load));
  attempt("Loading sessions", load);
  const stop = autoRefresh(load, 5000);
  return () => {
    alive = false;
    stop();
  };
}

export function mountEvents(view) {
  const { node, tbody } = table("events-table", "Audit log", ["#", "Time", "User", "Action", "Target", "Result"]);
  const limit = field("Show", { tag: "select", "data-testid": "events-limit" });
  options(limit.input, [["50", "last 50"], ["200", "last 200"], ["1000", "last 1000"]], "200");
  const filter = field("Filter", { type: "search", placeholder: "user, action, target…", "data-testid": "events-filter", autocomplete: "off" });
  const refresh = h("button", { type: "button", class: "button", text: "Refresh", "data-testid": "events-refresh" });
  // Pages of the log: the server reads only the page asked for (`before` = the last seq shown).
  const older = h("button", { type: "button", class: "button", text: "Older events", "data-testid": "events-older" });
  view.appendChild(
    h(
      "section",
      { class: "page", "aria-labelledby": "ev-title" },
      h("div", { class: "page-head" }, h("h1", { id: "ev-title", text: "Events (audit log)" }), h("div", { class: "toolbar" }, refresh)),
      h("div", { class: "filters" }, limit.wrap, filter.wrap),
      h("div", { class: "table-wrap" }, node),
      h("div", { class: "toolbar" }, older),
    ),
  );
  let alive = true;
  let events = [];
  let extended = false;
  function render() {
    const q = filter.input.value.trim().toLowerCase();
    const shown = q
      ? events.filter((e) => [e.user, e.action, e.target, e.result].some((v) => String(v ?? "").toLowerCase().includes(q)))
      : events;
    const row = (e) => {
      const result = String(e.result ?? "");
      const ok = /^(ok|success)/i.test(result);
      return h(
        "tr",
        { "data-testid": "event-row" },
        h("td", { class: "mono", text: String(e.seq) }),
        h("td", { class: "nowrap", text: time(e.time) }),
        h("td", { text: e.user ?? "–" }),
        h("td", { class: "mono", text: e.action }),
        h("td", { class: "wrap-anywhere", text: typeof e.target === "object" ? JSON.stringify(e.target) : String(e.target ?? "") }),
        h("td", {}, ok ? h("span", { class: "badge ok", text: result }) : h("span", { class: "result-bad", text: result || "–" })),
      );
    };
    fillRows(tbody, shown, row, "No events.", 6);
  }
  async function load() {
    const list = await get(`/events?limit=${encodeURIComponent(limit.input.value)}`);
    if (!alive) return;
    events = list;
    extended = false;
    older.disabled = list.length < Number(limit.input.value);
    render();
  }
  async function loadOlder() {
    const last = events[events.length - 1];
    if (!last) return;
    const list = await get(`/events?limit=${encodeURIComponent(limit.input.value)}&before=${last.seq}`);
    if (!alive) return;
    events = events.concat(list);
    extended = true;
    older.disabled = list.length < Number(limit.input.value);
    render();
  }
  limit.input.addEventListener("change", () => attempt("Loading events", load));
  filter.input.addEventListener("input", debounce(render, 150));
  refresh.addEventListener("click", () => attempt("Loading events", load));
  older.addEventListener("click", () => attempt("Loading older events", loadOlder));
  attempt("Loading events", load);
  // The automatic refresh shows the newest page, unless older pages were opened.
  const stop = autoRefresh(() => (extended ? Promise.resolve() : load()), 10000);
  return () => {
    alive = false;
    stop();
  };
}
