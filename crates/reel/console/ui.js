// Small DOM helpers, the message area, modal dialogs and number formatting.

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

// ---------------------------------------------------------------- dialogs

const FOCUSABLE =
  'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

/**
 * Opens a modal <dialog> (focus kept inside, Escape closes). `build(close)` returns the
 * body; the promise resolves with the value passed to close() (undefined on Escape).
 */
export function openDialog({ title, testid, build, className }) {
  return new Promise((resolve) => {
    const opener = document.activeElement;
    const titleId = `dialog-title-${Math.random().toString(36).slice(2)}`;
    const dialog = h("dialog", {
      class: `dialog ${className || ""}`,
      "aria-labelledby": titleId,
      "data-testid": testid,
    });
    let result;
    const close = (value) => {
      result = value;
      if (dialog.open) dialog.close();
    };
    const header = h(
      "div",
      { class: "dialog-header" },
      h("h2", { id: titleId, text: title }),
      h("button", {
        type: "button",
        class: "icon-button",
        "aria-label": "Close dialog",
        "data-testid": "dialog-close",
        text: "×",
        onclick: () => close(undefined),
      }),
    );
    dialog.append(header, build(close));
    dialog.addEventListener("keydown", (event) => {
      if (event.key !== "Tab") return;
      const items = [...dialog.querySelectorAll(FOCUSABLE)].filter(
        (n) => n.offsetParent !== null || n === document.activeElement,
      );
      if (items.length === 0) return;
      const first = items[0];
      const last = items[items.length - 1];
      if (event.shiftKey && document.activeElement === first) {
        event.preventDefault();
        last.focus();
      } else if (!event.shiftKey && document.activeElement === last) {
        event.preventDefault();
        first.focus();
      }
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (opener && opener.isConnected && typeof opener.focus === "function") opener.focus();
      resolve(result);
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    const autofocus = dialog.querySelector("[autofocus]") || dialog.querySelector(
      ".dialog-body " + FOCUSABLE.split(", ").join(", .dialog-body "),
    );
    if (autofocus) autofocus.focus();
  });
}

/** A yes/no confirmation; resolves true when confirmed. */
export function confirmDialog(title, text, confirmLabel = "Confirm", danger = true) {
  return openDialog({
    title,
    testid: "confirm-dialog",
    build: (close) =>
      h(
        "div",
        { class: "dialog-body" },
        h("p", {}, text),
        h(
          "div",
          { class: "dialog-actions" },
          h("button", {
            type: "button",
            class: "button",
            text: "Cancel",
            "data-testid": "confirm-cancel",
            onclick: () => close(false),
          }),
          h("button", {
            type: "button",
            class: danger ? "button danger" : "button primary",
            text: confirmLabel,
            "data-testid": "confirm-ok",
            autofocus: true,
            onclick: () => close(true),
          }),
        ),
      ),
  }).then((v) => v === true);
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
