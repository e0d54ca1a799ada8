// A cartridge cell: one storage slot or mail slot drawn as a button. Cells have no listeners
// of their own (the library page delegates one listener per event type, so 10,000 cells stay
// cheap), and an update only touches a cell whose content changed.

import { h } from "../ui.js";
import { cellLabel } from "./model.js";

/** Barcode suffix colour class: L5…L9, LT…LZ WORM. */
export function mediaClass(barcode) {
  if (!barcode) return "";
  const suffix = barcode.slice(-2).toUpperCase();
  return /^L[5-9]$/.test(suffix) ? `media-${suffix.toLowerCase()}` : /^L[T-Z]$/.test(suffix) ? "media-worm" : "";
}

/**
 * A new cell for element `el`. `look` is the page's shared view state: `canOperate` (cells
 * with a cartridge are draggable) and `highlight` (the barcode the find box picked).
 */
export function makeCell(el, look) {
  const node = h("button", { type: "button", class: "cell" });
  node.appendChild(h("span", { class: "cell-index" }));
  node.appendChild(h("span", { class: "cell-label" }));
  updateCell(node, el, look);
  return node;
}

/** Redraws a cell for `el` unless it already shows the same content. */
export function updateCell(node, el, look) {
  const sig = `${el.barcode || ""}|${el.exception ? el.exception.message : ""}|${el.source ?? ""}`;
  if (node.dataset.sig === sig) return;
  node.dataset.sig = sig;
  node.dataset.address = el.address;
  node.dataset.kind = el.kind;
  node.setAttribute("data-testid", `cell-${el.address}`);
  if (el.barcode) node.dataset.barcode = el.barcode;
  else delete node.dataset.barcode;
  node.className = `cell ${el.barcode ? "full" : "empty"} ${mediaClass(el.barcode)} ${el.exception ? "exception" : ""}`;
  node.draggable = Boolean(el.barcode) && look.canOperate;
  node.firstChild.textContent = String(Number(el.index) + 1);
  node.lastChild.textContent = el.barcode || "";
  node.setAttribute("aria-label", cellLabel(el));
  node.title = el.exception ? `${cellLabel(el)} — ${el.exception.message}` : cellLabel(el);
  if (look.highlight && el.barcode === look.highlight) node.classList.add("highlight");
}

/** The key to the cell colours, under the slots. */
export function cellLegend() {
  return h(
    "p",
    { class: "legend", "aria-hidden": "true" },
    h("span", { class: "cell-swatch full" }),
    " cartridge  ",
    h("span", { class: "cell-swatch empty" }),
    " empty  ",
    h("span", { class: "cell-swatch exception" }),
    " exception",
  );
}
