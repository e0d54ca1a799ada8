// The library page: the changer drawn as a library (drives, mail slots or magazines,
// storage slots as a grid of cartridge cells), moves by drag-and-drop and by the Move
// dialog, import and export through the mail slots.
//
// This file composes the page and owns its state (which library, its last detail, the
// refresh every REFRESH_MS); the parts are in library/: the panels (drives.js, mail.js,
// slots.js, drawn from cells.js), the element dialog, drag and drop, and model.js, which
// reads the API's LibraryDetail. The Move and Import dialogs are in moves.js, shared with
// the cartridge pages.
//
// A library may have 10,000 slots: slots are shown a page at a time, cells are plain
// buttons without listeners of their own (one delegated listener per event type on the
// board), and a refresh only touches the cells whose content changed.

import { get, hasRole, seg } from "./api.js";
import { exportCartridge, moveCartridge, openImportDialog, openMoveDialog } from "./moves.js";
import { attempt, clear, field, h, options, showError } from "./ui.js";
import { cellLegend } from "./library/cells.js";
import { dragMoves } from "./library/drag.js";
import { drivesPanel } from "./library/drives.js";
import { openElementDialog } from "./library/element-dialog.js";
import { mailPanel } from "./library/mail.js";
import { allElements, elementName, layoutOf, magazinesOf, summaryText } from "./library/model.js";
import { slotsPanel } from "./library/slots.js";

const REFRESH_MS = 2000;

/** The page head: title, library picker, the toolbar, the summary line and the hint. */
function libraryHead(canOperate) {
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
  const hint = h(
    "p",
    { class: "hint" },
    canOperate
      ? "Drag a cartridge onto an empty slot, drive or mail slot to move it, or use the Move… button. Select a cell for its actions."
      : "You have read-only access (viewer).",
  );
  const nodes = [h("div", { class: "page-head" }, title, picker, h("div", { class: "toolbar" }, moveButton, importButton, refreshButton)), summary, hint];
  return { nodes, title, picker, summary, moveButton, importButton, refreshButton };
}

/** The picker between libraries (none when there is only one); choosing one changes the route. */
function renderPicker(picker, libraries, name) {
  clear(picker);
  if (libraries.length <= 1) return;
  const f = field("Library", { tag: "select", "data-testid": "library-select" });
  options(f.input, libraries.map((l) => [l.name, l.name]), name);
  f.input.addEventListener("change", () => {
    location.hash = `#/library/${encodeURIComponent(f.input.value)}`;
  });
  picker.appendChild(f.wrap);
}

export function mountLibrary(view, params) {
  const canOperate = hasRole("operator");
  const state = { libraries: [], name: params[0] || null, detail: null, timer: null, alive: true };
  // What the cells need to draw themselves; the find box sets `highlight`.
  const look = { canOperate, highlight: null };

  const head = libraryHead(canOperate);
  const board = h("div", { class: "library-board", "data-testid": "library-board" });
  view.appendChild(h("section", { class: "page library-page", "aria-labelledby": "library-title" }, head.nodes, board));
  const drives = drivesPanel({ canOperate });
  const mail = mailPanel(look);
  const slots = slotsPanel(look);
  board.append(drives.section, mail.section, slots.section, cellLegend());

  function render() {
    const detail = state.detail;
    if (!detail) return;
    const layout = layoutOf(detail);
    head.title.textContent = `Library ${detail.name}`;
    head.summary.textContent = summaryText(detail, layout);
    drives.render(layout.drives);
    mail.render(layout.mail, layout.mags);
    slots.render(detail.name, layout.slots, layout.mags);
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
      renderPicker(head.picker, state.libraries, state.name);
    }
    const detail = await get(`/libraries/${seg(state.name)}`);
    if (!state.alive) return;
    state.detail = detail;
    render();
  }

  /** Shows the LibraryDetail an action answered with, or reloads when it gave none. */
  function apply(detail) {
    if (detail && detail.elements) {
      state.detail = detail;
      render();
    } else {
      attempt("Loading the library", load);
    }
  }

  // ---------------------------------------------------------------- interaction (delegated)

  async function dropMove(from, to) {
    try {
      apply(await moveCartridge(state.name, state.detail, from, to));
    } catch (e) {
      const elements = allElements(state.detail);
      const [src, dst] = [from, to].map((address) => elements.find((el) => el.address === address));
      if (e.status !== 401) showError(e, `Moving from ${elementName(src)} to ${elementName(dst)} failed`);
      attempt("Loading the library", load);
    }
  }

  const drag = dragMoves(board, { canOperate, onMove: dropMove });

  function schedule() {
    clearTimeout(state.timer);
    if (!state.alive) return;
    state.timer = setTimeout(async () => {
      if (!document.hidden && !drag.dragging() && !document.querySelector("dialog[open]")) {
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

  const move = (where) => attempt("Move", async () => apply(await openMoveDialog(state.name, state.detail, where)));
  const importInto = (where) => attempt("Import", async () => apply(await openImportDialog(state.name, state.detail, where)));
  const exportFrom = (address, barcode) =>
    attempt(`Export of ${barcode}`, async () => apply(await exportCartridge(state.name, address, barcode)));

  async function elementDialog(address) {
    const el = allElements(state.detail).find((e) => e.address === Number(address));
    if (!el) return;
    const choice = await openElementDialog(el, { canOperate, mags: magazinesOf(state.detail) });
    if (!choice) return;
    if (choice.move) await move({ from: el.address });
    else if (choice.moveHere) await move({ to: el.address });
    else if (choice.export) await exportFrom(el.address, el.barcode);
    else if (choice.import) await importInto({ to: el.address });
  }

  board.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    if (!button || !board.contains(button)) return;
    if (button.dataset.action === "export") exportFrom(button.dataset.address, button.dataset.barcode);
    else if (button.dataset.action === "import") importInto({ to: Number(button.dataset.address) });
    else if (button.dataset.address) attempt("Element", () => elementDialog(button.dataset.address));
  });

  slots.findInput.addEventListener("input", () => {
    for (const node of board.querySelectorAll(".cell.highlight, .drive-bay.highlight")) node.classList.remove("highlight");
    look.highlight = null;
    const text = slots.findInput.value.trim().toUpperCase();
    if (text && state.detail) slots.reveal(text);
  });

  head.moveButton.addEventListener("click", () => {
    if (state.detail) move({});
  });
  head.importButton.addEventListener("click", () => {
    if (state.detail) importInto({});
  });
  head.refreshButton.addEventListener("click", () => attempt("Refreshing the library", load));

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
