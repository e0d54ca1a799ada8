// Reading a library as the API describes it (`LibraryDetail`, docs/design/api.md): its
// elements by kind, its drives, its magazines, and the names people use for an element.

import { kindLabel } from "../ui.js";

/** "slot 3 (1027)" */
export function elementName(el) {
  if (!el) return "?";
  return `${kindLabel(el.kind)} ${Number(el.index) + 1} (${el.address})`;
}

/** "slot 3, address 1027: REL003L9" (or ": empty"): a cell's accessible name. */
export function cellLabel(el) {
  const where = `${kindLabel(el.kind)} ${Number(el.index) + 1}, address ${el.address}`;
  return el.barcode ? `${where}: ${el.barcode}` : `${where}: empty`;
}

/** The drive objects of a LibraryDetail (its `drives` is a list, Library's is a count). */
export function detailDrives(detail) {
  return Array.isArray(detail.drives) ? detail.drives : [];
}

/** The magazines of an autoloader, or null when the library has none. */
export function magazinesOf(detail) {
  const m = detail.magazines;
  if (m && Number(m.count) > 0 && Number(m.slots_each) > 0) return m;
  return null;
}

/** All elements of a LibraryDetail, drives merged in with kind "drive". */
export function allElements(detail) {
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

/** The elements of one kind ("slot", "import_export"), in address order. */
function elementsOf(detail, kind) {
  return (detail.elements || []).filter((e) => e.kind === kind).sort((a, b) => a.address - b.address);
}

/** What the page draws: storage slots, mail slots and drives in order, and the magazines. */
export function layoutOf(detail) {
  return {
    slots: elementsOf(detail, "slot"),
    mail: elementsOf(detail, "import_export"),
    drives: detailDrives(detail).slice().sort((a, b) => a.index - b.index),
    mags: magazinesOf(detail),
  };
}

/** The line under the title: "IBM 3584 (…), 4 × LTO-9 drives, 40 slots (20 full), …". */
export function summaryText(detail, { slots, mail, drives, mags }) {
  const changer = detail.changer || {};
  const full = slots.filter((s) => s.barcode).length;
  return (
    `${changer.vendor || ""} ${changer.product || ""} (${changer.model || "changer"}), ` +
    `${drives.length} × ${detail.drive_model || "drive"} drives, ${slots.length} slots (${full} full)` +
    (mags ? ` in ${mags.count} magazines` : "") +
    (mail.length || !mags ? `, ${mail.length} mail slots` : "") +
    `, ${detail.cartridges ?? "?"} cartridges`
  );
}

/** Elements whose cartridges the operator reaches by hand: mail slots, and magazine slots. */
export function isMailLike(el, mags) {
  return el.kind === "import_export" || Boolean(mags && el.kind === "slot");
}
