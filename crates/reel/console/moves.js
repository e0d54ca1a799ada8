// Moving cartridges, shared by the library page and the cartridge pages: the Move dialog
// (between two elements of a library, as SCSI MOVE MEDIUM through the changer), the Import
// dialog (a vaulted cartridge into a free mail slot) and Export (out of a mail slot into the
// vault). Each says what it did in the message area.

import { get, post, seg } from "./api.js";
import { formDialog } from "./dialogs.js";
import { field, h, options, showMessage } from "./ui.js";
import { allElements, elementName, isMailLike, magazinesOf } from "./library/model.js";

/**
 * Moves the cartridge at address `from` to the empty element at `to` (addresses of
 * `detail`, the library as last read) and says so; resolves to the new LibraryDetail or
 * throws ApiError.
 */
export async function moveCartridge(library, detail, from, to) {
  const elements = allElements(detail);
  const src = elements.find((e) => e.address === Number(from));
  const dst = elements.find((e) => e.address === Number(to));
  const answer = await post(`/libraries/${seg(library)}/move`, { from: Number(from), to: Number(to) });
  showMessage(`Moved ${src && src.barcode ? src.barcode : "the cartridge"} from ${elementName(src)} to ${elementName(dst)}.`, "success");
  return answer;
}

/** The Move dialog: source and destination element. Resolves to the new detail or undefined. */
export function openMoveDialog(library, detail, { from, to } = {}) {
  const elements = allElements(detail).filter((e) => e.kind !== "transport");
  const full = elements.filter((e) => e.barcode);
  const empty = elements.filter((e) => !e.barcode);
  // Drives first, then mail slots, then storage slots.
  const order = (list) => [
    ...list.filter((e) => e.kind === "drive"),
    ...list.filter((e) => e.kind === "import_export"),
    ...list.filter((e) => e.kind === "slot"),
  ];
  return formDialog({
    title: "Move a cartridge",
    testid: "move-dialog",
    form: { "data-testid": "move-form" },
    submit: { text: "Move", "data-testid": "move-submit" },
    failure: "Move failed",
    build: () => {
      const source = field("From (source element)", { tag: "select", name: "from", "data-testid": "move-source", required: true });
      const dest = field("To (destination element)", { tag: "select", name: "to", "data-testid": "move-destination", required: true });
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
      return {
        content: [full.length === 0 ? h("p", { text: "There is no cartridge in this library." }) : null, source.wrap, dest.wrap],
        focus: from !== undefined ? dest.input : source.input,
        validate: () =>
          !source.input.value || !dest.input.value ? "Choose a source with a cartridge and an empty destination." : undefined,
        send: () => moveCartridge(library, detail, source.input.value, dest.input.value),
      };
    },
  });
}

/** The Import dialog: a vaulted cartridge into a free mail slot (or magazine slot). */
export async function openImportDialog(library, detail, { barcode, to } = {}) {
  const vaulted = await get(`/cartridges?location=vault`);
  const mags = magazinesOf(detail);
  const targets = (detail.elements || []).filter((e) => !e.barcode && isMailLike(e, mags));
  return formDialog({
    title: `Import a cartridge into ${library}`,
    testid: "import-dialog",
    submit: { text: "Import", "data-testid": "import-submit" },
    failure: "Import failed",
    build: () => {
      const cart = field("Cartridge (from the vault)", { tag: "select", "data-testid": "import-barcode" });
      options(cart.input, vaulted.map((c) => [c.barcode, `${c.barcode} (${String(c.media).toUpperCase()}${c.worm && !/worm/i.test(c.media) ? " WORM" : ""})`]), barcode);
      const dest = field("Into", { tag: "select", "data-testid": "import-destination" });
      options(dest.input, [["", "Any free mail slot"], ...targets.map((e) => [e.address, elementName(e)])], to ?? "");
      return {
        content: [
          vaulted.length === 0 ? h("p", { text: "The vault is empty." }) : null,
          targets.length === 0 ? h("p", { text: "There is no free mail slot." }) : null,
          cart.wrap,
          dest.wrap,
        ],
        focus: cart.input,
        validate: () => (cart.input.value ? undefined : "Choose a cartridge."),
        send: async () => {
          const body = { barcode: cart.input.value };
          if (dest.input.value) body.to = Number(dest.input.value);
          const answer = await post(`/libraries/${seg(library)}/import`, body);
          showMessage(`Imported ${body.barcode} into ${library}.`, "success");
          return answer;
        },
      };
    },
  });
}

/** Export: the operator takes the cartridge out of a mail slot; it goes to the vault. */
export async function exportCartridge(library, address, barcode) {
  const answer = await post(`/libraries/${seg(library)}/export`, { from: Number(address) });
  showMessage(`Exported ${barcode || "the cartridge"}: it is in the vault now.`, "success");
  return answer;
}
