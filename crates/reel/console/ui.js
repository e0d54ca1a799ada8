// Small DOM helpers, the message area, form fields and number formatting (the modal
// dialogs are in dialogs.js).

/**
 * h("button", {class: "x", onclick: fn, dataset: {...}}, "text", child…) builds an element.
 * Text is always set as text (never parsed as HTML).
 */
export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on") && typeof value === "function") {
        node.addEventListener(key.slice(2), value);
      } else if (key in node && typeof value !== "string") node[key] = value;
      else node.setAttribute(key, value === true ? "" : value);
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else if (child instanceof Node) node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
  }
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

/**
 * Keeps one child of `box` per item, found by its `data-testid` (`keyOf(item)`): makes the
 * missing ones with `create(key)`, redraws each with `update(node, item)`, and removes the
 * children whose item is gone. Nodes that stay keep their focus and listeners.
 */
export function keyedChildren(box, items, keyOf, create, update) {
  const seen = new Set();
  for (const item of items) {
    const key = keyOf(item);
    seen.add(key);
    let node = box.querySelector(`[data-testid="${key}"]`);
    if (!node) {
      node = create(key);
      box.appendChild(node);
    }
    update(node, item);
  }
  for (const node of [...box.children]) if (!seen.has(node.dataset.testid)) node.remove();
}

/**
 * Replaces the rows of `tbody` with `row(item)` for each item; with none, one muted row
 * across `columns` columns says `empty` (when given).
 */
export function fillRows(tbody, items, row, empty, columns) {
  clear(tbody);
  for (const item of items) tbody.appendChild(row(item));
  if (items.length === 0 && empty) tbody.appendChild(h("tr", {}, h("td", { colspan: String(columns), class: "muted", text: empty })));
}

// ---------------------------------------------------------------- messages

const messageArea = () => document.getElementById("messages");

/**
 * Shows a message in the visible message area. kind: "error" | "success" | "info".
 * Errors stay until dismissed (or until 12 identical-slot replacements); others fade.
 */
export function showMessage(text, kind = "info") {
  const area = messageArea();
  if (!area) return;
  const item = h(
    "div",
    {
      class: `message message-${kind}`,
      role: kind === "error" ? "alert" : "status",
      "data-testid": `message-${kind}`,
    },
    h("span", { class: "message-text" }, text),
    h("button", {
      type: "button",
      class: "message-close",
      "aria-label": "Dismiss message",
      text: "×",
      onclick: () => item.remove(),
    }),
  );
  area.appendChild(item);
  while (area.children.length > 3) area.firstChild.remove();
  if (kind !== "error") setTimeout(() => item.remove(), 8000);
  return item;
}

export function showError(error, context) {
  const text = error && error.message ? error.message : String(error);
  const code = error && error.code && error.status ? ` [${error.status} ${error.code}]` : "";
  return showMessage(context ? `${context}: ${text}${code}` : `${text}${code}`, "error");
}

/** Drops the success and info messages (on navigation); errors stay until dismissed. */
export function clearTransientMessages() {
  const area = messageArea();
  if (area) for (const node of [...area.querySelectorAll(".message:not(.message-error)")]) node.remove();
}

export function clearMessages() {
  const area = messageArea();
  if (area) clear(area);
}

/** Runs an async action; errors go to the message area (never unhandled). */
export async function attempt(context, fn) {
  try {
    return await fn();
  } catch (e) {
    if (e && e.status === 401) return undefined; // the login page says why
    showError(e, context);
    return undefined;
  }
}

// ---------------------------------------------------------------- form fields

let fieldSeq = 0;

/** A labelled input: returns {wrap, input}. */
export function field(label, attrs = {}, hint) {
  const id = attrs.id || `f${++fieldSeq}`;
  const input = attrs.tag === "select" ? h("select", { ...attrs, tag: undefined, id }) : h("input", { ...attrs, id });
  const hintId = hint ? `${id}-hint` : undefined;
  if (hintId) input.setAttribute("aria-describedby", hintId);
  const wrap = h(
    "div",
    { class: attrs.type === "checkbox" ? "field field-check" : "field" },
    attrs.type === "checkbox" ? [input, h("label", { for: id, text: label })] : [h("label", { for: id, text: label }), input],
    hint ? h("small", { id: hintId, class: "hint", text: hint }) : null,
  );
  return { wrap, input };
}

export function options(select, items, selected) {
  clear(select);
  for (const item of items) {
    const [value, label] = Array.isArray(item) ? item : [item, item];
    const opt = h("option", { value: String(value), text: label });
    if (String(value) === String(selected)) opt.defaultSelected = opt.selected = true;
    select.appendChild(opt);
  }
  return select;
}

// ---------------------------------------------------------------- formatting

const UNITS = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];

/** Decimal sizes: 1 MB = 10^6 bytes. */
export function bytes(n) {
  if (n === null || n === undefined || Number.isNaN(Number(n))) return "–";
  let value = Number(n);
  let unit = 0;
  while (Math.abs(value) >= 1000 && unit < UNITS.length - 1) {
    value /= 1000;
    unit += 1;
  }
  const digits = unit === 0 ? 0 : value < 10 ? 2 : value < 100 ? 1 : 0;
  return `${value.toFixed(digits)} ${UNITS[unit]}`;
}

/** Bytes per second as MB/s (decimal). */
export function mbps(bps) {
  const v = Number(bps || 0) / 1e6;
  return `${v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0)} MB/s`;
}

export function num(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(Number(n))) return "–";
  return Number(n).toLocaleString(undefined, { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function ratio(r) {
  if (r === null || r === undefined || !Number.isFinite(Number(r))) return "–";
  return `${Number(r).toFixed(2)} : 1`;
}

export function time(unix) {
  if (!unix) return "never";
  const d = new Date(Number(unix) * 1000);
  return d.toLocaleString();
}

/** Parses "800G", "1.5T", "64M", "123456" into bytes (decimal units; Ki/Mi/Gi/Ti binary). */
export function parseSize(text) {
  const m = String(text).trim().match(/^(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?)b?$/i);
  if (!m) return null;
  const power = { "": 0, k: 1, m: 2, g: 3, t: 4, p: 5 }[m[2].toLowerCase()];
  const base = m[3] ? 1024 : 1000;
  return Math.round(Number(m[1]) * base ** power);
}

/** Element kind as people say it. */
export function kindLabel(kind) {
  return (
    {
      slot: "slot",
      import_export: "mail slot",
      drive: "drive",
      transport: "robot",
    }[kind] || kind
  );
}

export function debounce(fn, ms) {
  let timer;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
