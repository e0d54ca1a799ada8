// The library page: the changer drawn as a library (drives, mail slots or magazines,
// storage slots as a grid of cartridge cells), moves by drag-and-drop and by the Move
// dialog, import and export through the mail slots.
//
// A library may have 10,000 slots: slots are shown a page at a time, cells are plain
// buttons without listeners of their own (one delegated listener per event type on the
// page), and a refresh only touches the cells whose content changed.

import { get, hasRole, post, seg } from "./api.js";
import {
  attempt,
  bytes,
  clear,
  field,
  h,
  kindLabel,
  openDialog,
  options,
  showError,
  showMessage,
} from "./ui.js";

const PAGE_SIZE = 400;
const REFRESH_MS = 2000;

/** "slot 3 (1027)" */
export function elementName(el) {
  if (!el) return "?";
  return `${kindLabel(el.kind)} ${Number(el.index) + 1} (${el.address})`;
}

/** All elements of a LibraryDetail, drives merged in with kind "drive". */
function allElements(detail) {
  const byAddress = new Map();
  for (const el of detail.elements || []) byAddress.set(el.address, { ...el });
  for (const d of detailDrives(detail)) {
    const prev = byAddress.get(d.address) || {};
    byAddress.set(d.address, {
      ...prev,
      address: d.address,
      kind: "drive",
      index: d.index,
      barcode: d.barcode ?? prev.barcode ?? null,
      drive: d,
    });
  }
  return [...byAddress.values()].sort((a, b) => a.address - b.address);
}

/** The drive objects of a LibraryDetail (its `drives` is a list, Library's is a count). */
function detailDrives(detail) {
  return Array.isArray(detail.drives) ? detail.drives : [];
}

function magazinesOf(detail) {
  const m = detail.magazines;
  if (m && Number(m.count) > 0 && Number(m.slots_each) > 0) return m;
  return null;
}

/** Barcode suffix colour class: L5…L9, LV… WORM. */
function mediaClass(barcode) {
  if (!barcode) return "";
  const suffix = barcode.slice(-2).toUpperCase();
  return /^L[5-9]$/.test(suffix) ? `media-${suffix.toLowerCase()}` : /^L[T-Z]$/.test(suffix) ? "media-worm" : "";
}

/** Moves a cartridge; resolves to the new LibraryDetail or throws ApiError. */
export async function moveCartridge(library, from, to) {
  return post(`/libraries/${seg(library)}/move`, { from: Number(from), to: Number(to) });
}

/** The Move dialog: source and destination element. Resolves to the new detail or undefined. */
export function openMoveDialog(library, detail, { from, to } = {}) {
  const elements = allElements(detail).filter((e) => e.kind !== "transport");
  const full = elements.filter((e) => e.barcode);
  const empty = elements.filter((e) => !e.barcode);
  return openDialog({
    title: "Move a cartridge",
    testid: "move-dialog",
    build: (close) => {
      const source = field("From (source element)", { tag: "select", name: "from", "data-testid": "move-source", required: true });
      const dest = field("To (destination element)", { tag: "select", name: "to", "data-testid": "move-destination", required: true });
      const order = (list) => [
        ...list.filter((e) => e.kind === "drive"),
        ...list.filter((e) => e.kind === "import_export"),
        ...list.filter((e) => e.kind === "slot"),
      ];
      options(
        source.input,
        order(full).map((e) => [e.address, `${e.barcode} — ${elementName(e)}`]),
        from,
      );
      options(
        dest.input,
        order(empty).map((e) => [e.address, `${elementName(e)} — empty`]),
        to,
      );
      const error = h("div", { class: "dialog-error", role: "alert", "data-testid": "dialog-error" });
      const submit = h("button", { type: "submit", class: "button primary", text: "Move", "data-testid": "move-submit" });
      const form = h(
        "form",
        { class: "dialog-body", "data-testid": "move-form" },
        full.length === 0 ? h("p", { text: "There is no cartridge in this library." }) : null,
        source.wrap,
        dest.wrap,
        error,
        h(
          "div",
          { class: "dialog-actions" },
          h("button", { type: "button", class: "button", text: "Cancel", onclick: () => close(undefined) }),
          submit,
        ),
      );
      if (from !== undefined) dest.input.setAttribute("autofocus", "");
      else source.input.setAttribute("autofocus", "");
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        error.textContent = "";
        if (!source.input.value || !dest.input.value) {
          error.textContent = "Choose a source with a cartridge and an empty destination.";
          return;
        }
        submit.disabled = true;
        try {
          const before = full.find((e) => String(e.address) === source.input.value);
          const target = empty.find((e) => String(e.address) === dest.input.value);
          const answer = await moveCartridge(library, source.input.value, dest.input.value);
          showMessage(`Moved ${before ? before.barcode : "the cartridge"} from ${elementName(before)} to ${elementName(target)}.`, "success");
          close(answer);
        } catch (e) {
          if (e.status === 401) return close(undefined);
          error.textContent = `${e.message}${e.code ? ` (${e.code})` : ""}`;
          showError(e, "Move failed");
        } finally {
          submit.disabled = false;
        }
      });
      return form;
    },
  });
}

/** The Import dialog: a vaulted cartridge into a free mail slot (or magazine slot). */
export async function openImportDialog(library, detail, { barcode, to } = {}) {
  const vaulted = await get(`/cartridges?location=vault`);
  const mags = magazinesOf(detail);
  const targets = (detail.elements || []).filter(
    (e) => !e.barcode && (e.kind === "import_export" || (mags && e.kind === "slot")),
  );
  return openDialog({
    title: `Import a cartridge into ${library}`,
    testid: "import-dialog",
    build: (close) => {
      const cart = field("Cartridge (from the vault)", { tag: "select", "data-testid": "import-barcode" });
      options(cart.input, vaulted.map((c) => [c.barcode, `${c.barcode} (${String(c.media).toUpperCase()}${c.worm && !/worm/i.test(c.media) ? " WORM" : ""})`]), barcode);
      const dest = field("Into", { tag: "select", "data-testid": "import-destination" });
      options(dest.input, [["", "Any free mail slot"], ...targets.map((e) => [e.address, elementName(e)])], to ?? "");
      const error = h("div", { class: "dialog-error", role: "alert", "data-testid": "dialog-error" });
      const submit = h("button", { type: "submit", class: "button primary", text: "Import", "data-testid": "import-submit" });
      const form = h(
        "form",
        { class: "dialog-body" },
        vaulted.length === 0 ? h("p", { text: "The vault is empty." }) : null,
        targets.length === 0 ? h("p", { text: "There is no free mail slot." }) : null,
        cart.wrap,
        dest.wrap,
        error,
        h(
          "div",
          { class: "dialog-actions" },
          h("button", { type: "button", class: "button", text: "Cancel", onclick: () => close(undefined) }),
          submit,
        ),
      );
      cart.input.setAttribute("autofocus", "");
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        if (!cart.input.value) {
          error.textContent = "Choose a cartridge.";
          return;
        }
        submit.disabled = true;
        try {
          const body = { barcode: cart.input.value };
          if (dest.input.value) body.to = Number(dest.input.value);
          const answer = await post(`/libraries/${seg(library)}/import`, body);
          showMessage(`Imported ${body.barcode} into ${library}.`, "success");
          close(answer);
        } catch (e) {
          if (e.status === 401) return close(undefined);
          error.textContent = `${e.message}${e.code ? ` (${e.code})` : ""}`;
          showError(e, "Import failed");
        } finally {
          submit.disabled = false;
        }
      });
      return form;
    },
  });
}

/** Export: the operator takes the cartridge out of a mail slot; it goes to the vault. */
export async function exportCartridge(library, address, barcode) {
  const answer = await post(`/libraries/${seg(library)}/export`, { from: Number(address) });
  showMessage(`Exported ${barcode || "the cartridge"}: it is in the vault now.`, "success");
  return answer;
}

export function mountLibrary(view, params) {
  const canOperate = hasRole("operator");
  const state = {
    libraries: [],
    name: params[0] || null,
    detail: null,
    page: 0,
    cells: new Map(), // address -> node (slots on this page, mail slots, drives)
    dragFrom: null,
    timer: null,
    alive: true,
    highlight: null,
  };

  const root = h("section", { class: "page library-page", "aria-labelledby": "library-title" });
  const title = h("h1", { id: "library-title", text: "Library" });
  const picker = h("div", { class: "library-picker" });
  const summary = h("p", { class: "library-summary", "data-testid": "library-summary" });
  const moveButton = h("button", {
    type: "button",
    class: "button primary",
    text: "Move…",
    "data-testid": "open-move-dialog",
    disabled: !canOperate,
    title: canOperate ? "Move a cartridge between two elements" : "Operators only",
  });
  const importButton = h("button", {
    type: "button",
    class: "button",
    text: "Import…",
    "data-testid": "open-import-dialog",
    disabled: !canOperate,
  });
  const refreshButton = h("button", { type: "button", class: "button", text: "Refresh", "data-testid": "library-refresh" });
  const board = h("div", { class: "library-board", "data-testid": "library-board" });
  const hint = h(
    "p",
    { class: "hint" },
    canOperate
      ? "Drag a cartridge onto an empty slot, drive or mail slot to move it, or use the Move… button. Select a cell for its actions."
      : "You have read-only access (viewer).",
  );
  root.append(
    h("div", { class: "page-head" }, title, picker, h("div", { class: "toolbar" }, moveButton, importButton, refreshButton)),
    summary,
    hint,
    board,
  );
  view.appendChild(root);

  // ---------------------------------------------------------------- rendering

  const drivesBox = h("div", { class: "drives", "data-testid": "drives" });
  const mailBox = h("div", { class: "mail-slots", "data-testid": "mail-slots" });
  const slotsBox = h("div", { class: "slots-area" });
  const pager = h("nav", { class: "pager", "aria-label": "Slot pages" });
  const findInput = field("Find a barcode in the slots", {
    type: "search",
    placeholder: "e.g. REL007",
    "data-testid": "slot-find",
    autocomplete: "off",
  });
  const drivesSection = h("section", { class: "panel", "aria-labelledby": "drives-title" }, h("h2", { id: "drives-title", text: "Drives" }), drivesBox);
  const mailTitle = h("h2", { id: "mail-title", text: "Import/export (mail) slots" });
  const mailSection = h("section", { class: "panel", "aria-labelledby": "mail-title" }, mailTitle, mailBox);
  const slotsTitle = h("h2", { id: "slots-title", text: "Storage slots" });
  const slotsSection = h(
    "section",
    { class: "panel", "aria-labelledby": "slots-title" },
    h("div", { class: "panel-head" }, slotsTitle, findInput.wrap),
    pager,
    slotsBox,
  );
  const legend = h(
    "p",
    { class: "legend", "aria-hidden": "true" },
    h("span", { class: "cell-swatch full" }),
    " cartridge  ",
    h("span", { class: "cell-swatch empty" }),
    " empty  ",
    h("span", { class: "cell-swatch exception" }),
    " exception",
  );
  board.append(drivesSection, mailSection, slotsSection, legend);

  function cellLabel(el) {
    const where = `${kindLabel(el.kind)} ${Number(el.index) + 1}, address ${el.address}`;
    return el.barcode ? `${where}: ${el.barcode}` : `${where}: empty`;
  }

  /** A cartridge cell (slot or mail slot). No listeners: the board delegates. */
  function makeCell(el) {
    const node = h("button", { type: "button", class: "cell" });
    node.appendChild(h("span", { class: "cell-index" }));
    node.appendChild(h("span", { class: "cell-label" }));
    updateCell(node, el);
    return node;
  }

  function updateCell(node, el) {
    const sig = `${el.barcode || ""}|${el.exception ? el.exception.message : ""}|${el.source ?? ""}`;
    if (node.dataset.sig === sig) return;
    node.dataset.sig = sig;
    node.dataset.address = el.address;
    node.dataset.kind = el.kind;
    node.setAttribute("data-testid", `cell-${el.address}`);
    if (el.barcode) node.dataset.barcode = el.barcode;
    else delete node.dataset.barcode;
    node.className = `cell ${el.barcode ? "full" : "empty"} ${mediaClass(el.barcode)} ${el.exception ? "exception" : ""}`;
    node.draggable = Boolean(el.barcode) && canOperate;
    node.firstChild.textContent = String(Number(el.index) + 1);
    node.lastChild.textContent = el.barcode || "";
    node.setAttribute("aria-label", cellLabel(el));
    node.title = el.exception ? `${cellLabel(el)} — ${el.exception.message}` : cellLabel(el);
    if (state.highlight && el.barcode === state.highlight) node.classList.add("highlight");
  }

  function renderDrive(node, d) {
    const sig = JSON.stringify([d.state, d.activity, d.barcode, d.removal_prevented, d.stats]);
    if (node.dataset.sig === sig) return;
    node.dataset.sig = sig;
    node.dataset.address = d.address;
    node.dataset.kind = "drive";
    node.dataset.state = d.state;
    node.dataset.lun = d.lun;
    node.dataset.activity = d.activity;
    if (d.barcode) node.dataset.barcode = d.barcode;
    else delete node.dataset.barcode;
    node.className = `drive drive-${d.state} activity-${d.activity}`;
    const stats = d.stats || {};
    clear(node);
    const label = `Drive ${d.index + 1} (address ${d.address}, LUN ${d.lun}): ${d.state}${d.barcode ? `, ${d.barcode}` : ""}, ${d.activity}`;
    node.append(
      h(
        "div",
        { class: "drive-head" },
        h("strong", { text: `Drive ${d.index + 1}` }),
        h("span", { class: "muted", text: ` LUN ${d.lun} · ${d.address}` }),
      ),
      h(
        "button",
        {
          type: "button",
          class: `drive-bay ${d.barcode ? `full ${mediaClass(d.barcode)}` : "empty"}`,
          draggable: Boolean(d.barcode) && canOperate,
          "data-address": d.address,
          "data-kind": "drive",
          "data-barcode": d.barcode || undefined,
          "data-testid": `drive-bay-${d.index}`,
          "aria-label": label,
          title: label,
        },
        h("span", { class: "bay-slot", "aria-hidden": "true" }),
        h("span", { class: "cell-label", text: d.barcode || "empty" }),
      ),
      h(
        "div",
        { class: "drive-badges" },
        h("span", { class: `badge state-${d.state}`, "data-testid": `drive-state-${d.index}`, text: d.state }),
        h("span", { class: `badge activity activity-${d.activity}`, "data-testid": `drive-activity-${d.index}`, text: d.activity }),
        d.removal_prevented ? h("span", { class: "badge warn", text: "removal prevented" }) : null,
      ),
      h(
        "dl",
        { class: "drive-stats" },
        h("dt", { text: "Model" }),
        h("dd", { text: `${d.vendor || ""} ${d.product || ""}`.trim() || "–" }),
        h("dt", { text: "Serial" }),
        h("dd", { text: d.serial || "–" }),
        h("dt", { text: "Written" }),
        h("dd", { text: bytes(stats.bytes_written) }),
        h("dt", { text: "Read" }),
        h("dd", { text: bytes(stats.bytes_read) }),
        h("dt", { text: "Loads" }),
        h("dd", { text: stats.loads ?? "–" }),
      ),
    );
  }

  function renderMail(node, el) {
    const sig = `${el.barcode || ""}|${el.exception ? el.exception.message : ""}`;
    if (node.dataset.sig === sig) return;
    node.dataset.sig = sig;
    clear(node);
    node.dataset.address = el.address;
    if (el.barcode) node.dataset.barcode = el.barcode;
    else delete node.dataset.barcode;
    const cell = makeCell(el);
    state.cells.set(el.address, cell);
    const action = el.barcode
      ? h("button", {
          type: "button",
          class: "button small",
          text: "Export → vault",
          "data-action": "export",
          "data-address": el.address,
          "data-barcode": el.barcode,
          "data-testid": `export-${el.address}`,
          "aria-label": `Export ${el.barcode} from mail slot ${el.index + 1}: the operator takes it out, it goes to the vault`,
          disabled: !canOperate,
        })
      : h("button", {
          type: "button",
          class: "button small",
          text: "Import…",
          "data-action": "import",
          "data-address": el.address,
          "data-testid": `import-${el.address}`,
          "aria-label": `Import a cartridge from the vault into mail slot ${el.index + 1}`,
          disabled: !canOperate,
        });
    node.append(cell, action);
  }

  function renderPager(total) {
    clear(pager);
    const pages = Math.ceil(total / PAGE_SIZE);
    pager.hidden = pages <= 1;
    if (pages <= 1) return;
    const prev = h("button", { type: "button", class: "button small", text: "‹ Previous", "data-page": state.page - 1, disabled: state.page === 0 });
    const next = h("button", { type: "button", class: "button small", text: "Next ›", "data-page": state.page + 1, disabled: state.page >= pages - 1 });
    const select = h("select", { "aria-label": "Slot page", "data-testid": "slot-page" });
    for (let p = 0; p < pages; p++) {
      const first = p * PAGE_SIZE + 1;
      const last = Math.min(total, (p + 1) * PAGE_SIZE);
      select.appendChild(h("option", { value: String(p), text: `Slots ${first}–${last}`, selected: p === state.page }));
    }
    pager.append(prev, select, next, h("span", { class: "muted", text: ` ${total.toLocaleString()} slots` }));
  }

  /** Full (re)build of the slot grid for the current page. */
  function buildSlots(slots) {
    clear(slotsBox);
    for (const [address, node] of state.cells) if (node.dataset.kind === "slot") state.cells.delete(address);
    const start = state.page * PAGE_SIZE;
    const pageSlots = slots.slice(start, start + PAGE_SIZE);
    const mags = magazinesOf(state.detail);
    if (mags) {
      slotsTitle.textContent = `Magazines (${mags.count} × ${mags.slots_each} slots)`;
      for (let m = 0; m < mags.count; m++) {
        const inMag = slots.filter((s) => Math.floor(s.index / mags.slots_each) === m);
        const grid = h("div", { class: "slot-grid magazine-grid", role: "group", "aria-label": `Magazine ${m + 1}` });
        for (const el of inMag) {
          const cell = makeCell(el);
          state.cells.set(el.address, cell);
          grid.appendChild(cell);
        }
        slotsBox.appendChild(h("div", { class: "magazine", "data-testid": `magazine-${m}` }, h("h3", { text: `Magazine ${m + 1}` }), grid));
      }
      return;
    }
    slotsTitle.textContent = "Storage slots";
    const grid = h("div", { class: "slot-grid", role: "group", "aria-label": "Storage slots", "data-testid": "slot-grid" });
    const frag = document.createDocumentFragment();
    for (const el of pageSlots) {
      const cell = makeCell(el);
      state.cells.set(el.address, cell);
      frag.appendChild(cell);
    }
    grid.appendChild(frag);
    slotsBox.appendChild(grid);
  }

  let builtFor = null; // "name|page|slotcount" the grid was built for

  function render() {
    const detail = state.detail;
    if (!detail) return;
    const elements = detail.elements || [];
    const slots = elements.filter((e) => e.kind === "slot").sort((a, b) => a.address - b.address);
    const mail = elements.filter((e) => e.kind === "import_export").sort((a, b) => a.address - b.address);
    const drives = detailDrives(detail).slice().sort((a, b) => a.index - b.index);
    const mags = magazinesOf(detail);
    const changer = detail.changer || {};
    const full = slots.filter((s) => s.barcode).length;
    title.textContent = `Library ${detail.name}`;
    summary.textContent =
      `${changer.vendor || ""} ${changer.product || ""} (${changer.model || "changer"}), ` +
      `${drives.length} × ${detail.drive_model || "drive"} drives, ${slots.length} slots (${full} full)` +
      (mags ? ` in ${mags.count} magazines` : "") +
      (mail.length || !mags ? `, ${mail.length} mail slots` : "") +
      `, ${detail.cartridges ?? "?"} cartridges`;

    // Drives
    const seenDrives = new Set();
    for (const d of drives) {
      const key = `drive-${d.index}`;
      seenDrives.add(key);
      let node = drivesBox.querySelector(`[data-testid="${key}"]`);
      if (!node) {
        node = h("article", { class: "drive", "data-testid": key });
        drivesBox.appendChild(node);
      }
      renderDrive(node, d);
      state.cells.set(d.address, node);
    }
    for (const node of [...drivesBox.children]) if (!seenDrives.has(node.dataset.testid)) node.remove();
    if (drives.length === 0) drivesBox.textContent = "This library has no drives.";

    // Mail slots
    mailSection.hidden = mail.length === 0 && Boolean(mags);
    if (mail.length === 0) {
      clear(mailBox);
      mailBox.appendChild(h("p", { class: "muted", text: mags ? "No mail slots: cartridges go in and out through the magazines." : "This library has no mail slots." }));
    } else {
      const seen = new Set();
      for (const el of mail) {
        const key = `mail-${el.address}`;
        seen.add(key);
        let node = mailBox.querySelector(`[data-testid="${key}"]`);
        if (!node) {
          node = h("div", { class: "mail-slot", "data-testid": key });
          mailBox.appendChild(node);
        }
        renderMail(node, el);
      }
      for (const node of [...mailBox.children]) if (!seen.has(node.dataset.testid)) node.remove();
    }

    // Slots
    const pages = Math.max(1, Math.ceil(slots.length / PAGE_SIZE));
    if (state.page >= pages) state.page = pages - 1;
    const key = `${detail.name}|${state.page}|${slots.length}|${mags ? "m" : ""}`;
    if (builtFor !== key) {
      buildSlots(slots);
      renderPager(slots.length);
      builtFor = key;
    } else {
      const start = state.page * PAGE_SIZE;
      const visible = mags ? slots : slots.slice(start, start + PAGE_SIZE);
      for (const el of visible) {
        const node = state.cells.get(el.address);
        if (node) updateCell(node, el);
      }
    }
    if (slots.length === 0) slotsBox.textContent = "This library has no storage slots.";
  }

  function renderPicker() {
    clear(picker);
    if (state.libraries.length <= 1) return;
    const f = field("Library", { tag: "select", "data-testid": "library-select" });
    options(f.input, state.libraries.map((l) => [l.name, l.name]), state.name);
    f.input.addEventListener("change", () => {
      location.hash = `#/library/${encodeURIComponent(f.input.value)}`;
    });
    picker.appendChild(f.wrap);
  }

  async function load() {
    if (!state.alive) return;
    if (!state.libraries.length) {
      state.libraries = await get("/libraries");
      if (!state.libraries.length) {
        clear(board).appendChild(h("p", { text: "No library is configured." }));
        return;
      }
      if (!state.name || !state.libraries.some((l) => l.name === state.name)) state.name = state.libraries[0].name;
      renderPicker();
    }
    const detail = await get(`/libraries/${seg(state.name)}`);
    if (!state.alive) return;
    state.detail = detail;
    render();
  }

  function apply(detail) {
    if (detail && detail.elements) {
      state.detail = detail;
      render();
    } else {
      attempt("Loading the library", load);
    }
  }

  function schedule() {
    clearTimeout(state.timer);
    if (!state.alive) return;
    state.timer = setTimeout(async () => {
      if (!document.hidden && !state.dragFrom && !document.querySelector("dialog[open]")) {
        try {
          await load();
        } catch (e) {
          if (e.status !== 401) showError(e, "Refreshing the library");
          if (e.status === 401) return;
        }
      }
      schedule();
    }, REFRESH_MS);
  }

  // ---------------------------------------------------------------- interaction (delegated)

  const elementAt = (address) => allElements(state.detail).find((e) => e.address === Number(address));

  async function doMove(from, to) {
    const src = elementAt(from);
    const dst = elementAt(to);
    try {
      const answer = await moveCartridge(state.name, from, to);
      showMessage(`Moved ${src && src.barcode ? src.barcode : "the cartridge"} from ${elementName(src)} to ${elementName(dst)}.`, "success");
      apply(answer);
    } catch (e) {
      if (e.status !== 401) showError(e, `Moving from ${elementName(src)} to ${elementName(dst)} failed`);
      attempt("Loading the library", load);
    }
  }

  async function elementDialog(address) {
    const el = elementAt(address);
    if (!el) return;
    const mags = magazinesOf(state.detail);
    const result = await openDialog({
      title: el.kind === "drive" ? `Drive ${el.index + 1}` : `${kindLabel(el.kind)} ${el.index + 1}`.replace(/^./, (c) => c.toUpperCase()),
      testid: "element-dialog",
      build: (close) => {
        const rows = [
          ["Address", String(el.address)],
          ["Kind", kindLabel(el.kind)],
          ["Cartridge", el.barcode || "none"],
        ];
        if (el.drive) rows.push(["State", el.drive.state], ["Activity", el.drive.activity]);
        if (el.source) rows.push(["Came from", String(el.source)]);
        if (el.exception) rows.push(["Exception", `${el.exception.message} (ASC ${el.exception.asc}, ASCQ ${el.exception.ascq})`]);
        const actions = [];
        if (canOperate && el.barcode) {
          actions.push(h("button", { type: "button", class: "button primary", text: "Move…", "data-testid": "element-move", onclick: () => close({ move: true }) }));
        }
        if (canOperate && !el.barcode) {
          actions.push(h("button", { type: "button", class: "button primary", text: "Move a cartridge here…", "data-testid": "element-move-here", onclick: () => close({ moveHere: true }) }));
        }
        const mailLike = el.kind === "import_export" || (mags && el.kind === "slot");
        if (canOperate && mailLike && el.barcode) {
          actions.push(h("button", { type: "button", class: "button", text: "Export → vault", "data-testid": "element-export", onclick: () => close({ export: true }) }));
        }
        if (canOperate && mailLike && !el.barcode) {
          actions.push(h("button", { type: "button", class: "button", text: "Import…", "data-testid": "element-import", onclick: () => close({ import: true }) }));
        }
        if (el.barcode) {
          actions.push(h("a", { class: "button", href: `#/cartridge/${encodeURIComponent(el.barcode)}`, text: "Cartridge details", onclick: () => close(undefined) }));
        }
        actions.push(h("button", { type: "button", class: "button", text: "Close", onclick: () => close(undefined) }));
        return h(
          "div",
          { class: "dialog-body" },
          h("dl", { class: "kv" }, rows.map(([k, v]) => [h("dt", { text: k }), h("dd", { text: v })])),
          h("div", { class: "dialog-actions" }, actions),
        );
      },
    });
    if (!result) return;
    if (result.move) apply(await openMoveDialog(state.name, state.detail, { from: el.address }));
    else if (result.moveHere) apply(await openMoveDialog(state.name, state.detail, { to: el.address }));
    else if (result.export) {
      await attempt(`Export of ${el.barcode}`, async () => apply(await exportCartridge(state.name, el.address, el.barcode)));
    } else if (result.import) {
      await attempt("Import", async () => apply(await openImportDialog(state.name, state.detail, { to: el.address })));
    }
  }

  board.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    if (!button || !board.contains(button)) return;
    if (button.dataset.page !== undefined) {
      state.page = Number(button.dataset.page);
      render();
      return;
    }
    if (button.dataset.action === "export") {
      attempt(`Export of ${button.dataset.barcode}`, async () =>
        apply(await exportCartridge(state.name, button.dataset.address, button.dataset.barcode)),
      );
      return;
    }
    if (button.dataset.action === "import") {
      attempt("Import", async () => apply(await openImportDialog(state.name, state.detail, { to: Number(button.dataset.address) })));
      return;
    }
    if (button.dataset.address) {
      attempt("Element", () => elementDialog(button.dataset.address));
    }
  });

  board.addEventListener("change", (event) => {
    if (event.target.matches('[data-testid="slot-page"]')) {
      state.page = Number(event.target.value);
      render();
    }
  });

  findInput.input.addEventListener("input", () => {
    const text = findInput.input.value.trim().toUpperCase();
    for (const node of board.querySelectorAll(".cell.highlight, .drive-bay.highlight")) node.classList.remove("highlight");
    state.highlight = null;
    if (!text || !state.detail) return;
    const slots = (state.detail.elements || []).filter((e) => e.kind === "slot").sort((a, b) => a.address - b.address);
    const i = slots.findIndex((s) => s.barcode && s.barcode.toUpperCase().includes(text));
    if (i < 0) return;
    state.highlight = slots[i].barcode;
    const page = Math.floor(i / PAGE_SIZE);
    if (page !== state.page && !magazinesOf(state.detail)) {
      state.page = page;
      render();
    }
    const node = state.cells.get(slots[i].address);
    if (node) {
      node.classList.add("highlight");
      node.scrollIntoView({ block: "nearest" });
    }
  });

  const draggableAt = (target) => target.closest && target.closest('[draggable="true"][data-address]');
  const dropAt = (target) => {
    const node = target.closest && target.closest("[data-address]");
    if (!node || !board.contains(node) || node.dataset.barcode || node.dataset.action) return null;
    return node;
  };

  board.addEventListener("dragstart", (event) => {
    const node = draggableAt(event.target);
    if (!node || !canOperate) {
      event.preventDefault();
      return;
    }
    state.dragFrom = Number(node.dataset.address);
    event.dataTransfer.effectAllowed = "move";
    event.dataTransfer.setData("text/plain", `${node.dataset.barcode || ""}@${node.dataset.address}`);
    node.classList.add("dragging");
    board.classList.add("drag-active");
  });

  board.addEventListener("dragover", (event) => {
    if (state.dragFrom === null) return;
    const node = dropAt(event.target);
    if (!node) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "move";
    for (const n of board.querySelectorAll(".drop-hover")) if (n !== node) n.classList.remove("drop-hover");
    node.classList.add("drop-hover");
  });

  board.addEventListener("dragleave", (event) => {
    const node = dropAt(event.target);
    if (node && !node.contains(event.relatedTarget)) node.classList.remove("drop-hover");
  });

  const endDrag = () => {
    state.dragFrom = null;
    board.classList.remove("drag-active");
    for (const n of board.querySelectorAll(".dragging, .drop-hover")) n.classList.remove("dragging", "drop-hover");
  };

  board.addEventListener("drop", (event) => {
    const node = dropAt(event.target);
    const from = state.dragFrom;
    endDrag();
    if (!node || from === null) return;
    event.preventDefault();
    const to = Number(node.dataset.address);
    if (to === from) return;
    doMove(from, to);
  });

  board.addEventListener("dragend", endDrag);

  moveButton.addEventListener("click", () => {
    if (!state.detail) return;
    attempt("Move", async () => apply(await openMoveDialog(state.name, state.detail)));
  });
  importButton.addEventListener("click", () => {
    if (!state.detail) return;
    attempt("Import", async () => apply(await openImportDialog(state.name, state.detail)));
  });
  refreshButton.addEventListener("click", () => attempt("Refreshing the library", load));

  board.appendChild(h("p", { class: "muted loading", text: "Loading…" }));
  attempt("Loading the library", async () => {
    await load();
    const loading = board.querySelector(".loading");
    if (loading) loading.remove();
  }).finally(schedule);

  return () => {
    state.alive = false;
    clearTimeout(state.timer);
  };
}
