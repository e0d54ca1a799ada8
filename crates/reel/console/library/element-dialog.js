// The dialog of one element (a slot, mail slot or drive) of the library page: what it holds,
// and the actions an operator has there. It only chooses: the page carries the choice out.

import { openDialog } from "../dialogs.js";
import { h, kindLabel } from "../ui.js";
import { isMailLike } from "./model.js";

/**
 * Opens the dialog of element `el` (as allElements gives it). Resolves to the chosen action,
 * `{ move }`, `{ moveHere }`, `{ export }` or `{ import }`, or to undefined.
 */
export function openElementDialog(el, { canOperate, mags }) {
  return openDialog({
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
      const mailLike = isMailLike(el, mags);
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
}
