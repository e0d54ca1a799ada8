// The storage slots panel of the library page: the slot grid a page of PAGE_SIZE slots at a
// time (with a pager), or an autoloader's magazines, and the find box. The grid is rebuilt
// only when the library, the page or the number of slots changes; a refresh otherwise
// redraws the cells whose content changed.

import { clear, field, h } from "../ui.js";
import { makeCell, updateCell } from "./cells.js";

const PAGE_SIZE = 400;

/**
 * The panel. `render(name, slots, mags)` draws library `name`'s slots (in address order) and
 * its magazines (or null); `reveal(text)` shows and highlights the first slot whose barcode
 * contains `text` (upper case), turning the page if need be. `findInput` is the find box's
 * input. `look` as for makeCell; reveal sets `look.highlight`.
 */
export function slotsPanel(look) {
  let page = 0;
  let last = null; // what render() was last given
  let builtFor = null; // "name|page|slotcount|m" the grid was built for
  const cells = new Map(); // address -> cell, for the slots on the grid
  const box = h("div", { class: "slots-area" });
  const pager = h("nav", { class: "pager", "aria-label": "Slot pages" });
  const find = field("Find a barcode in the slots", {
    type: "search",
    placeholder: "e.g. REL007",
    "data-testid": "slot-find",
    autocomplete: "off",
  });
  const title = h("h2", { id: "slots-title", text: "Storage slots" });
  const section = h(
    "section",
    { class: "panel", "aria-labelledby": "slots-title" },
    h("div", { class: "panel-head" }, title, find.wrap),
    pager,
    box,
  );

  /** Full (re)build of the grid for the current page, or of every magazine. */
  function build(slots, mags) {
    clear(box);
    cells.clear();
    const add = (grid, el) => {
      const cell = makeCell(el, look);
      cells.set(el.address, cell);
      grid.appendChild(cell);
    };
    if (mags) {
      title.textContent = `Magazines (${mags.count} × ${mags.slots_each} slots)`;
      for (let m = 0; m < mags.count; m++) {
        const grid = h("div", { class: "slot-grid magazine-grid", role: "group", "aria-label": `Magazine ${m + 1}` });
        for (const el of slots.filter((s) => Math.floor(s.index / mags.slots_each) === m)) add(grid, el);
        box.appendChild(h("div", { class: "magazine", "data-testid": `magazine-${m}` }, h("h3", { text: `Magazine ${m + 1}` }), grid));
      }
      return;
    }
    title.textContent = "Storage slots";
    const grid = h("div", { class: "slot-grid", role: "group", "aria-label": "Storage slots", "data-testid": "slot-grid" });
    const frag = document.createDocumentFragment();
    for (const el of slots.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE)) add(frag, el);
    grid.appendChild(frag);
    box.appendChild(grid);
  }

  function renderPager(total) {
    clear(pager);
    const pages = Math.ceil(total / PAGE_SIZE);
    pager.hidden = pages <= 1;
    if (pages <= 1) return;
    const prev = h("button", { type: "button", class: "button small", text: "‹ Previous", "data-page": page - 1, disabled: page === 0 });
    const next = h("button", { type: "button", class: "button small", text: "Next ›", "data-page": page + 1, disabled: page >= pages - 1 });
    const select = h("select", { "aria-label": "Slot page", "data-testid": "slot-page" });
    for (let p = 0; p < pages; p++) {
      const first = p * PAGE_SIZE + 1;
      const lastOnPage = Math.min(total, (p + 1) * PAGE_SIZE);
      select.appendChild(h("option", { value: String(p), text: `Slots ${first}–${lastOnPage}`, selected: p === page }));
    }
    pager.append(prev, select, next, h("span", { class: "muted", text: ` ${total.toLocaleString()} slots` }));
  }

  function draw() {
    const { name, slots, mags } = last;
    const pages = Math.max(1, Math.ceil(slots.length / PAGE_SIZE));
    if (page >= pages) page = pages - 1;
    const key = `${name}|${page}|${slots.length}|${mags ? "m" : ""}`;
    if (builtFor !== key) {
      build(slots, mags);
      renderPager(slots.length);
      builtFor = key;
    } else {
      const visible = mags ? slots : slots.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE);
      for (const el of visible) {
        const node = cells.get(el.address);
        if (node) updateCell(node, el, look);
      }
    }
    if (slots.length === 0) box.textContent = "This library has no storage slots.";
  }

  function turnTo(p) {
    page = p;
    draw();
  }

  pager.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-page]");
    if (button) turnTo(Number(button.dataset.page));
  });
  pager.addEventListener("change", (event) => {
    if (event.target.matches('[data-testid="slot-page"]')) turnTo(Number(event.target.value));
  });

  function render(name, slots, mags) {
    last = { name, slots, mags };
    draw();
  }

  function reveal(text) {
    if (!last) return;
    const { slots, mags } = last;
    const i = slots.findIndex((s) => s.barcode && s.barcode.toUpperCase().includes(text));
    if (i < 0) return;
    look.highlight = slots[i].barcode;
    const p = Math.floor(i / PAGE_SIZE);
    if (p !== page && !mags) turnTo(p);
    const node = cells.get(slots[i].address);
    if (node) {
      node.classList.add("highlight");
      node.scrollIntoView({ block: "nearest" });
    }
  }

  return { section, findInput: find.input, render, reveal };
}
