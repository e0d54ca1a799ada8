// The mail slots panel of the library page: each import/export slot as a cartridge cell with
// its button, Export → vault when it holds a cartridge and Import… when it is empty. The
// buttons carry `data-action`; the page's delegated click listener acts on them.

import { clear, h, keyedChildren } from "../ui.js";
import { makeCell } from "./cells.js";

/**
 * The panel; `render(mail, mags)` redraws it from the mail slots in address order (an
 * autoloader with magazines and no mail slots hides it). `look` as for makeCell.
 */
export function mailPanel(look) {
  const box = h("div", { class: "mail-slots", "data-testid": "mail-slots" });
  const section = h(
    "section",
    { class: "panel", "aria-labelledby": "mail-title" },
    h("h2", { id: "mail-title", text: "Import/export (mail) slots" }),
    box,
  );
  function render(mail, mags) {
    section.hidden = mail.length === 0 && Boolean(mags);
    if (mail.length === 0) {
      clear(box);
      box.appendChild(h("p", { class: "muted", text: mags ? "No mail slots: cartridges go in and out through the magazines." : "This library has no mail slots." }));
      return;
    }
    keyedChildren(
      box,
      mail,
      (el) => `mail-${el.address}`,
      (key) => h("div", { class: "mail-slot", "data-testid": key }),
      (node, el) => renderMail(node, el, look),
    );
  }
  return { section, render };
}

/** Redraws one mail slot unless its cartridge (or exception) is the same. */
function renderMail(node, el, look) {
  const sig = `${el.barcode || ""}|${el.exception ? el.exception.message : ""}`;
  if (node.dataset.sig === sig) return;
  node.dataset.sig = sig;
  clear(node);
  node.dataset.address = el.address;
  if (el.barcode) node.dataset.barcode = el.barcode;
  else delete node.dataset.barcode;
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
        disabled: !look.canOperate,
      })
    : h("button", {
        type: "button",
        class: "button small",
        text: "Import…",
        "data-action": "import",
        "data-address": el.address,
        "data-testid": `import-${el.address}`,
        "aria-label": `Import a cartridge from the vault into mail slot ${el.index + 1}`,
        disabled: !look.canOperate,
      });
  node.append(makeCell(el, look), action);
}
