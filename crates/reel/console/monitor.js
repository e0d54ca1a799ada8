// Live monitor: one Monitor snapshot per second from the SSE stream (polling
// GET /api/v1/monitor when EventSource fails), kept for 5 minutes from login on, and the
// page that shows it: throughput chart, per-drive and per-initiator rates, CPU, store.

import { get, token } from "./api.js";
import { attempt, bytes, clear, fillRows, h, mbps, num, ratio, time } from "./ui.js";

const WINDOW_S = 300;

const feed = {
  source: null,
  pollTimer: null,
  watchdog: null,
  mode: "off", // "stream" | "polling" | "off"
  history: [], // {t (ms), read, write}
  latest: null,
  lastAt: 0,
  listeners: new Set(),
  streamFailures: 0,
};

function receive(snapshot) {
  if (!snapshot || typeof snapshot !== "object") return;
  const now = Date.now();
  feed.latest = snapshot;
  feed.lastAt = now;
  const totals = snapshot.totals || {};
  feed.history.push({ t: now, read: Number(totals.read_bps) || 0, write: Number(totals.write_bps) || 0 });
  const cutoff = now - (WINDOW_S + 5) * 1000;
  while (feed.history.length && feed.history[0].t < cutoff) feed.history.shift();
  for (const fn of feed.listeners) {
    try {
      fn(snapshot);
    } catch (e) {
      console.warn("monitor listener", e);
    }
  }
}

function startPolling() {
  if (feed.pollTimer) return;
  feed.mode = "polling";
  const tick = async () => {
    if (!token()) return stopFeed();
    try {
      receive(await get("/monitor"));
    } catch (e) {
      if (e.status === 401) return stopFeed();
    }
    if (feed.mode === "polling") feed.pollTimer = setTimeout(tick, 1000);
  };
  feed.pollTimer = setTimeout(tick, 0);
}

function startStream() {
  if (typeof EventSource === "undefined") return startPolling();
  let opened = false;
  const es = new EventSource(`/api/v1/monitor/stream?token=${encodeURIComponent(token())}`);
  feed.source = es;
  feed.mode = "stream";
  const onData = (event) => {
    try {
      receive(JSON.parse(event.data));
    } catch {
      // not a Monitor: ignore
    }
  };
  es.addEventListener("monitor", onData);
  es.onmessage = onData;
  es.onopen = () => {
    opened = true;
    feed.streamFailures = 0;
  };
  es.onerror = () => {
    // Closed for good (e.g. 401, wrong content type), or never opened: poll instead.
    if (es.readyState === EventSource.CLOSED || !opened || ++feed.streamFailures > 3) {
      es.close();
      if (feed.source === es) feed.source = null;
      startPolling();
    }
  };
}

/** Starts the feed (after login). */
export function startFeed() {
  stopFeed();
  if (!token()) return;
  feed.history = [];
  feed.latest = null;
  startStream();
  // If the stream stays silent, poll instead.
  feed.watchdog = setInterval(() => {
    if (feed.mode === "stream" && Date.now() - feed.lastAt > 5000 && feed.source) {
      feed.source.close();
      feed.source = null;
      startPolling();
    }
  }, 2500);
}

export function stopFeed() {
  if (feed.source) feed.source.close();
  feed.source = null;
  clearTimeout(feed.pollTimer);
  feed.pollTimer = null;
  clearInterval(feed.watchdog);
  feed.watchdog = null;
  feed.mode = "off";
}

export function subscribe(fn) {
  feed.listeners.add(fn);
  return () => feed.listeners.delete(fn);
}

// ---------------------------------------------------------------- chart

/** 1, 2, 5 × 10^n at or above v. */
function niceCeil(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

const COLORS = { read: "#1d4ed8", write: "#c2410c", grid: "#d4d8de", axis: "#3d4450", text: "#2b303a" };

/** Draws the last 5 minutes of total read/write MB/s on `canvas`. */
function drawChart(canvas, history) {
  const dpr = window.devicePixelRatio || 1;
  const cssW = Math.max(240, canvas.clientWidth || 600);
  const cssH = Math.max(160, canvas.clientHeight || 260);
  if (canvas.width !== Math.round(cssW * dpr) || canvas.height !== Math.round(cssH * dpr)) {
    canvas.width = Math.round(cssW * dpr);
    canvas.height = Math.round(cssH * dpr);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, cssW, cssH);
  const m = { left: 62, right: 14, top: 12, bottom: 42 };
  const w = cssW - m.left - m.right;
  const hgt = cssH - m.top - m.bottom;
  const now = Date.now();
  const t0 = now - WINDOW_S * 1000;
  const visible = history.filter((p) => p.t >= t0);
  const peak = visible.reduce((mx, p) => Math.max(mx, p.read, p.write), 0) / 1e6;
  const ymax = niceCeil(Math.max(peak * 1.1, 1));
  const x = (t) => m.left + ((t - t0) / (WINDOW_S * 1000)) * w;
  const y = (v) => m.top + hgt - (v / 1e6 / ymax) * hgt;

  ctx.font = "12px system-ui, sans-serif";
  ctx.lineWidth = 1;
  // horizontal grid and y labels
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (let i = 0; i <= 5; i++) {
    const v = (ymax * i) / 5;
    const yy = m.top + hgt - (i / 5) * hgt;
    ctx.strokeStyle = COLORS.grid;
    ctx.beginPath();
    ctx.moveTo(m.left, Math.round(yy) + 0.5);
    ctx.lineTo(m.left + w, Math.round(yy) + 0.5);
    ctx.stroke();
    ctx.fillStyle = COLORS.text;
    ctx.fillText(Number.isInteger(v) ? String(v) : v.toFixed(1), m.left - 6, yy);
  }
  // vertical grid and x labels, one a minute
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  for (let i = 0; i <= 5; i++) {
    const xx = m.left + (i / 5) * w;
    ctx.strokeStyle = COLORS.grid;
    ctx.beginPath();
    ctx.moveTo(Math.round(xx) + 0.5, m.top);
    ctx.lineTo(Math.round(xx) + 0.5, m.top + hgt);
    ctx.stroke();
    ctx.fillStyle = COLORS.text;
    ctx.fillText(i === 5 ? "now" : `−${5 - i} min`, xx, m.top + hgt + 6);
  }
  // axes
  ctx.strokeStyle = COLORS.axis;
  ctx.beginPath();
  ctx.moveTo(m.left + 0.5, m.top);
  ctx.lineTo(m.left + 0.5, m.top + hgt + 0.5);
  ctx.lineTo(m.left + w, m.top + hgt + 0.5);
  ctx.stroke();
  // axis titles
  ctx.fillStyle = COLORS.text;
  ctx.textAlign = "center";
  ctx.textBaseline = "bottom";
  ctx.fillText("time (last 5 minutes)", m.left + w / 2, cssH - 2);
  ctx.save();
  ctx.translate(14, m.top + hgt / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textBaseline = "middle";
  ctx.fillText("throughput (MB/s)", 0, 0);
  ctx.restore();
  // lines
  ctx.save();
  ctx.beginPath();
  ctx.rect(m.left, m.top - 2, w + 2, hgt + 4);
  ctx.clip();
  for (const key of ["read", "write"]) {
    ctx.strokeStyle = COLORS[key];
    ctx.lineWidth = 2;
    ctx.setLineDash(key === "read" ? [] : [6, 3]);
    ctx.beginPath();
    visible.forEach((p, i) => {
      const px = x(p.t);
      const py = y(p[key]);
      if (i === 0) ctx.moveTo(px, py);
      else ctx.lineTo(px, py);
    });
    ctx.stroke();
  }
  ctx.restore();
  ctx.setLineDash([]);
}

// ---------------------------------------------------------------- page

export function mountMonitor(view) {
  let stats = null;
  let alive = true;
  const canvas = h("canvas", {
    id: "throughput-chart",
    class: "chart",
    role: "img",
    "aria-label": "Total read and write throughput over the last 5 minutes",
    "data-testid": "throughput-chart",
    "data-latest-write-bps": "0",
    "data-latest-read-bps": "0",
    "data-points": "0",
  });
  const modeNote = h("span", { class: "muted", "data-testid": "monitor-mode" });
  const latestText = h("p", { class: "chart-latest", "aria-live": "off", "data-testid": "chart-latest" });
  const tiles = h("div", { class: "tiles", "data-testid": "monitor-tiles" });
  const drivesBody = h("tbody");
  const initBody = h("tbody");
  const tableOf = (caption, heads, body, testid) =>
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "table numeric", "data-testid": testid },
        h("caption", { text: caption }),
        h("thead", {}, h("tr", {}, heads.map((t, i) => h("th", { scope: "col", class: i === 0 ? "" : "num", text: t })))),
        body,
      ),
    );
  view.appendChild(
    h(
      "section",
      { class: "page", "aria-labelledby": "mon-title" },
      h("div", { class: "page-head" }, h("h1", { id: "mon-title", text: "Live monitor" }), modeNote),
      tiles,
      h(
        "section",
        { class: "panel", "aria-labelledby": "chart-title" },
        h("h2", { id: "chart-title", text: "Throughput, all drives" }),
        h(
          "p",
          { class: "legend" },
          h("span", { class: "swatch swatch-read", "aria-hidden": "true" }),
          " read (solid)  ",
          h("span", { class: "swatch swatch-write", "aria-hidden": "true" }),
          " write (dashed)",
        ),
        h("div", { class: "chart-box" }, canvas),
        latestText,
      ),
      h("section", { class: "panel", "aria-labelledby": "drv-title" }, h("h2", { id: "drv-title", text: "Drives" }),
        tableOf("Per drive, last second", ["Drive", "Cartridge", "State", "Read", "Write", "Read cmd/s", "Write cmd/s"], drivesBody, "monitor-drives")),
      h("section", { class: "panel", "aria-labelledby": "ini-title" }, h("h2", { id: "ini-title", text: "Initiators" }),
        tableOf("Per initiator, last second", ["Initiator", "Read", "Write", "Commands/s"], initBody, "monitor-initiators")),
    ),
  );

  function tile(label, value, testid, extra) {
    return h("div", { class: "tile", "data-testid": testid }, h("div", { class: "tile-label", text: label }), h("div", { class: "tile-value", text: value }), extra || null);
  }

  function renderTiles(s) {
    const store = (s && s.store) || {};
    const logical = store.logical_bytes ?? (stats && stats.logical_bytes);
    const stored = store.stored_bytes ?? (stats && stats.stored_bytes);
    const free = store.disk_free ?? (stats && stats.disk_free);
    const total = store.disk_total ?? (stats && stats.disk_total);
    const dedup = store.dedup_ratio ?? (stats && stats.dedup_ratio);
    const comp = store.compression_ratio ?? (stats && stats.compression_ratio);
    // Two reductions: the packs alone, and everything the data directory takes (catalog too).
    const reduction = store.reduction_ratio ?? (stats && stats.reduction_ratio);
    const reductionOnDisk = store.reduction_ratio_on_disk ?? (stats && stats.reduction_ratio_on_disk);
    const onDisk = store.on_disk_bytes ?? (stats && stats.on_disk_bytes);
    const storeError = s && s.store_error;
    let bar = null;
    if (total && free !== undefined) {
      const usedPct = Math.max(0, Math.min(100, (100 * (total - free)) / total));
      bar = h(
        "div",
        { class: "capacity-bar", role: "meter", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": usedPct.toFixed(0), "aria-label": "Disk used" },
        h("span", { style: `width:${usedPct.toFixed(1)}%` }),
      );
    }
    const storeErrorNote = storeError ? [h("p", { class: "error", role: "alert", "data-testid": "store-error", text: storeError })] : [];
    clear(tiles).append(
      ...storeErrorNote,
      tile("CPU", s && s.cpu_percent !== undefined ? `${Number(s.cpu_percent).toFixed(1)} %` : "–", "tile-cpu"),
      tile("Read", mbps(s && s.totals ? s.totals.read_bps : 0), "tile-read"),
      tile("Write", mbps(s && s.totals ? s.totals.write_bps : 0), "tile-write"),
      tile("Dedup ratio", ratio(dedup), "tile-dedup"),
      tile("Compression ratio", ratio(comp), "tile-compression"),
      tile("Data on cartridges", bytes(logical), "tile-logical"),
      tile("Stored (after dedup + compression)", bytes(stored), "tile-stored"),
      tile("Reduction: store (packs)", ratio(reduction), "tile-reduction-store"),
      tile("Reduction: on disk (all of the data directory)", `${ratio(reductionOnDisk)} (${bytes(onDisk)})`, "tile-reduction-disk"),
      tile("Disk free", total ? `${bytes(free)} of ${bytes(total)}` : bytes(free), "tile-free", bar),
      ...bucketTiles(store.bucket || (stats && stats.bucket)),
    );
  }

  // On object storage: where the data goes, and what is not there yet (per cartridge).
  function bucketTiles(b) {
    if (!b) return [];
    const age = (secs) => (secs === undefined || secs === null ? "–" : secs < 120 ? `${Number(secs).toFixed(0)} s` : `${(secs / 60).toFixed(0)} min`);
    const perCartridge = (b.by_cartridge || [])
      .slice()
      .sort((x, y) => y.pending_bytes - x.pending_bytes)
      .slice(0, 8)
      .map((c) => h("li", { "data-testid": `bucket-pending-${c.barcode}`, text: `${c.barcode}: ${bytes(c.pending_bytes)}, oldest ${age(c.oldest_pending_seconds)}` }));
    const state = b.failed ? h("p", { class: "error", role: "alert", text: b.failed }) : b.last_error ? h("p", { class: "muted", text: `last error (retried): ${b.last_error}` }) : null;
    return [
      tile("Bucket", `${b.location} · durability ${b.durability}`, "tile-bucket", state),
      tile(
        "Not yet in the bucket",
        b.pending_objects ? `${bytes(b.pending_bytes)} in ${b.pending_objects} objects, oldest ${age(b.oldest_pending_seconds)}` : "nothing",
        "tile-bucket-pending",
        perCartridge.length ? h("ul", { class: "compact" }, ...perCartridge) : null,
      ),
      tile("Uploaded", `${bytes(b.uploaded_bytes)} (${b.requests} requests, ${b.upload_retries} retries)`, "tile-bucket-uploaded"),
    ];
  }

  function renderTables(s) {
    fillRows(
      drivesBody,
      (s && s.drives) || [],
      (d) =>
        h(
          "tr",
          { "data-testid": `monitor-drive-${d.index}`, "data-write-bps": String(d.write_bps || 0), "data-read-bps": String(d.read_bps || 0) },
          h("th", { scope: "row", text: `Drive ${Number(d.index) + 1}${d.library ? ` · ${d.library}` : ""}` }),
          h("td", { class: "num", text: d.barcode || "–" }),
          h("td", { class: "num", text: `${d.state || ""}${d.activity && d.activity !== "idle" ? `, ${d.activity}` : ""}` }),
          h("td", { class: "num", text: mbps(d.read_bps) }),
          h("td", { class: "num", text: mbps(d.write_bps) }),
          h("td", { class: "num", text: num(d.read_iops) }),
          h("td", { class: "num", text: num(d.write_iops) }),
        ),
      "No drives.",
      7,
    );
    fillRows(
      initBody,
      (s && s.initiators) || [],
      (i) =>
        h(
          "tr",
          { "data-testid": "monitor-initiator", "data-initiator": i.initiator, "data-write-bps": String(i.write_bps || 0), "data-read-bps": String(i.read_bps || 0) },
          h("th", { scope: "row", class: "wrap-anywhere", text: i.initiator }),
          h("td", { class: "num", text: mbps(i.read_bps) }),
          h("td", { class: "num", text: mbps(i.write_bps) }),
          h("td", { class: "num", text: num(i.commands_per_s) }),
        ),
      "No initiator is logged in.",
      4,
    );
  }

  function update(s) {
    if (!alive) return;
    const last = feed.history[feed.history.length - 1];
    drawChart(canvas, feed.history);
    canvas.dataset.latestWriteBps = String(last ? last.write : 0);
    canvas.dataset.latestReadBps = String(last ? last.read : 0);
    canvas.dataset.points = String(feed.history.length);
    const peakW = feed.history.reduce((mx, p) => Math.max(mx, p.write), 0);
    canvas.dataset.peakWriteBps = String(peakW);
    const text = last ? `Latest: read ${mbps(last.read)}, write ${mbps(last.write)} (${time(s && s.time)})` : "Waiting for data…";
    latestText.textContent = text;
    canvas.setAttribute("aria-label", `Total read and write throughput over the last 5 minutes. ${text}`);
    modeNote.textContent = feed.mode === "stream" ? "live (server-sent events)" : feed.mode === "polling" ? "live (polling every second)" : "not connected";
    renderTiles(s);
    renderTables(s);
  }

  const unsubscribe = subscribe(update);
  const loadStats = () =>
    attempt("Loading store statistics", async () => {
      stats = await get("/stats");
      if (alive) renderTiles(feed.latest);
    });
  loadStats();
  const statsTimer = setInterval(loadStats, 10000);
  const ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => drawChart(canvas, feed.history)) : null;
  if (ro) ro.observe(canvas);
  update(feed.latest);
  if (feed.mode === "off") startFeed();
  return () => {
    alive = false;
    unsubscribe();
    clearInterval(statsTimer);
    if (ro) ro.disconnect();
  };
}
