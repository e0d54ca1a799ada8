// Cartridges: the list with search, bulk creation, and one cartridge's details (with its space
// in the store) and actions (write protection, import, export/vault, archive/restore, erase,
// delete).

import { del, get, hasRole, patch, post, seg } from "./api.js";
import { confirmDialog, formDialog, openDialog } from "./dialogs.js";
import { exportCartridge, openImportDialog } from "./moves.js";
import { attempt, bytes, clear, debounce, field, fillRows, h, kindLabel, options, parseSize, ratio, showMessage, time } from "./ui.js";

const PAGE = 100;
const MEDIA = ["lto5", "lto6", "lto7", "lto8", "lto9"];

/** "LTO-9", "LTO-8 WORM" from the API's media name and worm flag. */
export function mediaLabel(c) {
  const base = String(c.media || "?").toUpperCase().replace(/[-_ ]?WORM$/, "");
  return c.worm ? `${base} WORM` : base;
}

export function locationText(loc) {
  if (!loc || loc.vault) return "vault";
  return `${loc.library} — ${kindLabel(loc.kind)} at address ${loc.address}`;
}

/** The archive state as a badge: available, archiving, archived or restoring. */
export function archiveBadge(c) {
  const s = c.archive_state || "available";
  const tone = s === "available" ? "ok" : s === "archived" ? "state-empty" : "warn";
  return h("span", { class: `badge ${tone}`, "data-testid": "archive-state", "data-state": s, text: s });
}

function usage(c) {
  const pct = c.capacity ? Math.min(100, (100 * (c.written || 0)) / c.capacity) : 0;
  return h(
    "span",
    { class: "usage" },
    h("span", { class: "usage-bar", "aria-hidden": "true" }, h("span", { style: `width:${pct.toFixed(1)}%` })),
    `${bytes(c.written)} / ${bytes(c.capacity)}`,
  );
}

/** The bulk creation dialog (admin). Resolves to the created cartridges or undefined. */
async function openCreateDialog() {
  const libraries = await get("/libraries").catch(() => []);
  return formDialog({
    title: "Create cartridges",
    testid: "create-cartridges-dialog",
    form: { class: "dialog-body form-grid", "data-testid": "create-cartridges-form", novalidate: true },
    submit: { text: "Create", "data-testid": "create-submit" },
    failure: "Creating cartridges failed",
    build: () => {
      const prefix = field("Barcode prefix", { name: "prefix", required: true, value: "REL", maxlength: "5", "data-testid": "create-prefix", autocomplete: "off", pattern: "[A-Za-z0-9]{1,5}" }, "Letters and digits; the number and media suffix (e.g. L9) follow: 8 characters in all.");
      const first = field("First number", { name: "first", type: "number", min: "0", value: "1", required: true, "data-testid": "create-first" });
      const count = field("How many", { name: "count", type: "number", min: "1", max: "10000", value: "10", required: true, "data-testid": "create-count" });
      const media = field("Media", { tag: "select", name: "media", "data-testid": "create-media" });
      options(media.input, [...MEDIA.map((m) => [m, m.toUpperCase()]), ...MEDIA.map((m) => [`${m}-worm`, `${m.toUpperCase()} WORM`])], "lto9");
      const capacity = field("Capacity (optional)", { name: "capacity", placeholder: "native, or e.g. 64M, 2G, 800G", "data-testid": "create-capacity", autocomplete: "off" }, "Leave empty for the media's native capacity. Decimal units (M = 10⁶ bytes); Mi/Gi for binary.");
      const wp = field("Write-protected", { name: "write_protected", type: "checkbox", "data-testid": "create-write-protected" });
      const target = field("Put them into", { tag: "select", name: "library", "data-testid": "create-target" });
      options(target.input, [["", "The vault"], ...libraries.map((l) => [l.name, `Library ${l.name} (free slots)`])], "");
      let body; // the request, as validate() read it from the form
      return {
        content: [prefix.wrap, first.wrap, count.wrap, media.wrap, capacity.wrap, target.wrap, wp.wrap],
        focus: prefix.input,
        validate: () => {
          body = {
            prefix: prefix.input.value.trim().toUpperCase(),
            first: Number(first.input.value),
            count: Number(count.input.value),
            media: media.input.value,
          };
          if (!/^[A-Z0-9]{1,5}$/.test(body.prefix)) {
            prefix.input.focus();
            return "The prefix must be 1 to 5 letters or digits.";
          }
          if (!Number.isInteger(body.first) || body.first < 0 || !Number.isInteger(body.count) || body.count < 1) {
            return "First number and count must be whole numbers (count at least 1).";
          }
          if (capacity.input.value.trim()) {
            const size = parseSize(capacity.input.value);
            if (!size) {
              capacity.input.focus();
              return "Capacity: a number of bytes, or with a unit such as 64M, 2G, 800G.";
            }
            body.capacity = size;
          }
          if (wp.input.checked) body.write_protected = true;
          if (target.input.value) body.library = target.input.value;
          return undefined;
        },
        send: async () => {
          const created = await post("/cartridges", body);
          const list = Array.isArray(created) ? created : [];
          showMessage(
            `Created ${list.length} cartridge${list.length === 1 ? "" : "s"}` +
              (list.length ? ` (${list[0].barcode} … ${list[list.length - 1].barcode})` : "") +
              (body.library ? ` in ${body.library}.` : " in the vault."),
            "success",
          );
          return list;
        },
      };
    },
  });
}

export function mountCartridges(view) {
  const isAdmin = hasRole("admin");
  const state = { list: [], page: 0, alive: true };
  const search = field("Search barcodes", { type: "search", placeholder: "e.g. REL00", "data-testid": "cartridge-search", autocomplete: "off" });
  const where = field("Location", { tag: "select", "data-testid": "cartridge-location" });
  options(where.input, [["", "Anywhere"], ["library", "In a library"], ["vault", "In the vault"]], "");
  const createButton = h("button", {
    type: "button",
    class: "button primary",
    text: "Create cartridges…",
    "data-testid": "open-create-cartridges",
    hidden: !isAdmin,
  });
  const count = h("p", { class: "muted", "aria-live": "polite", "data-testid": "cartridge-count" });
  const tbody = h("tbody");
  const table = h(
    "table",
    { class: "table", "data-testid": "cartridge-table" },
    h("caption", { class: "visually-hidden", text: "Cartridges" }),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Barcode", "Media", "Used", "Location", "State", "Protection", "Last written"].map((t) => h("th", { scope: "col", text: t })),
      ),
    ),
    tbody,
  );
  const pager = h("nav", { class: "pager", "aria-label": "Cartridge pages" });
  view.appendChild(
    h(
      "section",
      { class: "page", "aria-labelledby": "cart-title" },
      h("div", { class: "page-head" }, h("h1", { id: "cart-title", text: "Cartridges" }), h("div", { class: "toolbar" }, createButton)),
      h("div", { class: "filters" }, search.wrap, where.wrap),
      count,
      h("div", { class: "table-wrap" }, table),
      pager,
    ),
  );

  function render() {
    const list = state.list;
    const pages = Math.max(1, Math.ceil(list.length / PAGE));
    if (state.page >= pages) state.page = pages - 1;
    const rows = list.slice(state.page * PAGE, (state.page + 1) * PAGE);
    count.textContent = `${list.length} cartridge${list.length === 1 ? "" : "s"}`;
    fillRows(
      tbody,
      rows,
      (c) =>
        h(
          "tr",
          { "data-testid": `cartridge-row-${c.barcode}`, "data-barcode": c.barcode },
          h("th", { scope: "row" }, h("a", { href: `#/cartridge/${encodeURIComponent(c.barcode)}`, text: c.barcode, class: "barcode" })),
          h("td", { text: mediaLabel(c) }),
          h("td", {}, usage(c)),
          h("td", { "data-testid": "cartridge-location", text: locationText(c.location) }),
          h("td", {}, archiveBadge(c)),
          h("td", { text: c.write_protected ? "write-protected" : "–" }),
          h("td", { text: time(c.last_written) }),
        ),
      "No cartridges match.",
      7,
    );
    clear(pager);
    if (pages > 1) {
      pager.append(
        h("button", { type: "button", class: "button small", text: "‹ Previous", disabled: state.page === 0, onclick: () => { state.page--; render(); } }),
        h("span", { text: ` Page ${state.page + 1} of ${pages} ` }),
        h("button", { type: "button", class: "button small", text: "Next ›", disabled: state.page >= pages - 1, onclick: () => { state.page++; render(); } }),
      );
    }
  }

  async function load() {
    const params = new URLSearchParams();
    if (search.input.value.trim()) params.set("search", search.input.value.trim());
    if (where.input.value) params.set("location", where.input.value);
    const q = params.toString();
    const list = await get(`/cartridges${q ? `?${q}` : ""}`);
    if (!state.alive) return;
    state.list = list.slice().sort((a, b) => a.barcode.localeCompare(b.barcode));
    render();
  }

  const reload = () => attempt("Loading cartridges", load);
  search.input.addEventListener("input", debounce(() => { state.page = 0; reload(); }, 250));
  where.input.addEventListener("change", () => { state.page = 0; reload(); });
  createButton.addEventListener("click", () =>
    attempt("Create cartridges", async () => {
      const created = await openCreateDialog();
      if (created) await load();
    }),
  );
  reload();
  return () => {
    state.alive = false;
  };
}

/** The cartridge's space in the store (docs/design/api.md, `Usage`). */
function usagePanel(c, onExclusive) {
  const u = c.usage;
  const body = [];
  if (!u) {
    body.push(h("p", { class: "muted", text: "The store could not say." }));
  } else {
    const estimate = u.exact ? "" : " (estimated)";
    const rows = [
      ["Host bytes", bytes(u.logical_bytes), "usage-logical"],
      ["Unique", bytes(u.unique_bytes) + estimate, "usage-unique"],
      ["Stored", bytes(u.stored_bytes) + estimate, "usage-stored"],
      ["Dedup", ratio(u.dedup_ratio), "usage-dedup"],
      ["Compression", ratio(u.compression_ratio), "usage-compression"],
      ["Reduction (store: packs)", ratio(u.reduction_ratio), "usage-reduction"],
    ];
    if (u.reduction_ratio_on_disk !== undefined) {
      rows.push(["Reduction (on disk, its estimated share)", `${ratio(u.reduction_ratio_on_disk)} (${bytes(u.on_disk_bytes)})`, "usage-reduction-disk"]);
    }
    if (u.exclusive_stored_bytes !== undefined) {
      rows.push(["Only here", `${bytes(u.exclusive_stored_bytes)} stored, ${bytes(u.exclusive_unique_bytes)} unique`, "usage-exclusive"]);
    }
    body.push(
      h(
        "dl",
        { class: "kv", "data-testid": "cartridge-usage" },
        rows.map(([k, v, testid]) => [h("dt", { text: k }), h("dd", { text: v, "data-testid": testid })]),
      ),
      h(
        "p",
        { class: "hint" },
        "Host bytes: what the cartridge holds now. Unique: its distinct chunks before compression. " +
          "Stored: their estimated share of the compressed blobs on disk. " +
          "Data written since the drive's last flush is not counted yet.",
      ),
    );
    if (u.exclusive_stored_bytes === undefined) {
      body.push(
        h("button", {
          type: "button",
          class: "button small",
          text: "Count what only this cartridge holds",
          "data-testid": "usage-count-exclusive",
          onclick: onExclusive,
        }),
      );
    }
  }
  return h("section", { class: "panel", "aria-labelledby": "cd-usage" }, h("h2", { id: "cd-usage", text: "Space in the store" }), body);
}

export function mountCartridgeDetail(view, params) {
  const barcode = params[0];
  const isAdmin = hasRole("admin");
  const canOperate = hasRole("operator");
  const state = { alive: true, magazines: new Set() };
  const body = h("div", { class: "detail-body" });
  const head = h("h1", { id: "cd-title", text: `Cartridge ${barcode || ""}` });
  view.appendChild(
    h(
      "section",
      { class: "page", "aria-labelledby": "cd-title", "data-testid": "cartridge-detail", "data-barcode": barcode },
      h("p", {}, h("a", { href: "#/cartridges", text: "← All cartridges" })),
      h("div", { class: "page-head" }, head),
      body,
    ),
  );
  if (!barcode) {
    body.textContent = "No cartridge given.";
    return () => {};
  }

  function kvValue(key, v) {
    if (v === null || v === undefined) return "–";
    if (typeof v === "object") return JSON.stringify(v);
    if (typeof v === "number" && /manufactured|time|last_|_at$/.test(key) && v > 1e8) return time(v);
    if (typeof v === "number" && /bytes/.test(key)) return `${bytes(v)} (${v.toLocaleString()})`;
    return String(v);
  }

  function kvList(obj) {
    const entries = Object.entries(obj || {});
    if (entries.length === 0) return h("p", { class: "muted", text: "–" });
    return h(
      "dl",
      { class: "kv" },
      entries.map(([k, v]) => [
        h("dt", { text: k.replace(/_/g, " ") }),
        h("dd", { text: kvValue(k, v) }),
      ]),
    );
  }

  function render(c) {
    clear(body);
    const loc = c.location || { vault: true };
    // Operators reach mail slots, and the slots of an autoloader's magazines.
    const inMail = !loc.vault && (loc.kind === "import_export" || (loc.kind === "slot" && state.magazines.has(loc.library)));
    const inVault = Boolean(loc.vault);
    const inDrive = !loc.vault && loc.kind === "drive";
    // Archived (or on its way to or from the archive): its data is not in the store.
    const archiveState = c.archive_state || "available";
    const available = archiveState === "available";
    const wpId = "cd-wp";
    const wp = h("input", {
      type: "checkbox",
      id: wpId,
      role: "switch",
      checked: Boolean(c.write_protected),
      disabled: !isAdmin || inDrive || !available,
      "data-testid": "write-protect-toggle",
    });
    wp.addEventListener("change", () =>
      attempt("Changing write protection", async () => {
        try {
          const answer = await patch(`/cartridges/${seg(c.barcode)}`, { write_protected: wp.checked });
          showMessage(`${c.barcode} is ${answer.write_protected ? "write-protected" : "writable"} now.`, "success");
          render(answer);
        } catch (e) {
          wp.checked = !wp.checked;
          throw e;
        }
      }),
    );
    const actions = h("div", { class: "toolbar" });
    if (inVault && canOperate && available) {
      actions.appendChild(
        h("button", {
          type: "button",
          class: "button",
          text: "Archive…",
          "data-testid": "cartridge-archive",
          onclick: () =>
            attempt(`Archiving ${c.barcode}`, async () => {
              const ok = await confirmDialog(
                `Archive ${c.barcode}?`,
                `Its ${bytes(c.written)} go to the archive location as a verified image, then leave the store ` +
                  "(the space comes back with the next reclaim). It stays in the vault as archived and must be " +
                  "restored before it can be imported into a library.",
                "Archive",
              );
              if (!ok) return;
              await post(`/cartridges/${seg(c.barcode)}/archive`, {});
              showMessage(`Archiving ${c.barcode}; see its state here and the job under Maintenance.`, "success");
              await load();
            }),
        }),
      );
    }
    if (inVault && canOperate && (archiveState === "archived" || archiveState === "restoring")) {
      actions.appendChild(
        h("button", {
          type: "button",
          class: "button primary",
          text: archiveState === "restoring" ? "Restore again…" : "Restore…",
          "data-testid": "cartridge-restore",
          onclick: () =>
            attempt(`Restoring ${c.barcode}`, async () => {
              const ok = await confirmDialog(
                `Restore ${c.barcode}?`,
                `Its image (${bytes(c.archive ? c.archive.data_bytes : c.written)}) is read back into the store; ` +
                  "then it is available in the vault and can be imported. The image is deleted once the store holds it.",
                "Restore",
              );
              if (!ok) return;
              await post(`/cartridges/${seg(c.barcode)}/restore`, {});
              showMessage(`Restoring ${c.barcode}.`, "success");
              await load();
            }),
        }),
      );
    }
    if (inVault && canOperate && available) {
      actions.appendChild(
        h("button", {
          type: "button",
          class: "button primary",
          text: "Import into a library…",
          "data-testid": "cartridge-import",
          onclick: () =>
            attempt("Import", async () => {
              const libraries = await get("/libraries");
              let name = libraries[0] && libraries[0].name;
              if (libraries.length > 1) {
                name = await openDialog({
                  title: "Which library?",
                  testid: "pick-library-dialog",
                  build: (close) => {
                    const f = field("Library", { tag: "select" });
                    options(f.input, libraries.map((l) => [l.name, l.name]));
                    return h("form", { class: "dialog-body", onsubmit: (e) => { e.preventDefault(); close(f.input.value); } }, f.wrap,
                      h("div", { class: "dialog-actions" }, h("button", { type: "submit", class: "button primary", text: "Next" })));
                  },
                });
              }
              if (!name) return;
              const detail = await get(`/libraries/${seg(name)}`);
              const answer = await openImportDialog(name, detail, { barcode: c.barcode });
              if (answer) await load();
            }),
        }),
      );
    }
    if (inMail && canOperate) {
      actions.appendChild(
        h("button", {
          type: "button",
          class: "button primary",
          text: loc.kind === "slot" ? "Vault (take out of the magazine)" : "Vault (take out of the mail slot)",
          "data-testid": "cartridge-vault",
          onclick: () =>
            attempt(`Vaulting ${c.barcode}`, async () => {
              const answer = await post(`/cartridges/${seg(c.barcode)}/vault`, {});
              showMessage(`${c.barcode} is in the vault now.`, "success");
              if (answer && answer.barcode) render(answer);
              else await load();
            }),
        }),
        h("button", {
          type: "button",
          class: "button",
          text: "Export through the library",
          "data-testid": "cartridge-export",
          onclick: () =>
            attempt(`Export of ${c.barcode}`, async () => {
              await exportCartridge(loc.library, loc.address, c.barcode);
              await load();
            }),
        }),
      );
    }
    if (!inVault) {
      actions.appendChild(h("a", { class: "button", href: `#/library/${encodeURIComponent(loc.library)}`, text: "Show in the library" }));
    }
    if (isAdmin && available) {
      actions.appendChild(
        h("button", {
          type: "button",
          class: "button danger",
          text: "Erase…",
          "data-testid": "cartridge-erase",
          onclick: () =>
            attempt(`Erasing ${c.barcode}`, async () => {
              const held = c.usage ? bytes(c.usage.logical_bytes) : "all its data";
              const ok = await confirmDialog(
                `Erase ${c.barcode}?`,
                `Everything on it (${held}) is discarded for good. It keeps its barcode and place and can be written again; ` +
                  "the disk space comes back with the next reclaim. " +
                  "reel refuses while it is in a drive, write-protected, or WORM with data.",
                "Erase",
              );
              if (!ok) return;
              const answer = await post(`/cartridges/${seg(c.barcode)}/erase`, {});
              showMessage(`Erased ${c.barcode}.`, "success");
              render(answer);
            }),
        }),
      );
    }
    // An archived cartridge can be deleted too: its image in the archive location goes with it.
    if (isAdmin && (available || archiveState === "archived")) {
      actions.appendChild(
        h("button", {
          type: "button",
          class: "button danger",
          text: "Delete…",
          "data-testid": "cartridge-delete",
          onclick: () =>
            attempt(`Deleting ${c.barcode}`, async () => {
              const ok = await confirmDialog(
                `Delete ${c.barcode}?`,
                available
                  ? `The cartridge and its ${bytes(c.written)} of data are deleted for good. ` +
                      (inVault ? "" : "It must be in the vault first; reel refuses otherwise.")
                  : `The cartridge and its archive image (${bytes(c.archive ? c.archive.image_bytes : 0)}, ` +
                      `holding ${bytes(c.archive ? c.archive.data_bytes : c.written)} of data) are deleted for good; ` +
                      "the image is removed from the archive location.",
                "Delete",
              );
              if (!ok) return;
              await del(`/cartridges/${seg(c.barcode)}`);
              showMessage(`Deleted ${c.barcode}.`, "success");
              location.hash = "#/cartridges";
            }),
        }),
      );
    }
    const rows = [
      ["Barcode", c.barcode],
      ["Media", mediaLabel(c)],
      ["Location", locationText(loc)],
      ["Archive", c.archive ? `${archiveState}, image ${bytes(c.archive.image_bytes)} of ${bytes(c.archive.data_bytes)}` : archiveState],
      ["Capacity", bytes(c.capacity)],
      ["Written", bytes(c.written)],
      ["Load count", c.load_count ?? "–"],
      ["Last written", time(c.last_written)],
      ["Early warning", c.early_warning_percent !== undefined ? `${c.early_warning_percent} %` : "–"],
      ["Partitions", Array.isArray(c.partitions) ? c.partitions.map(bytes).join(", ") || "–" : "–"],
    ];
    body.append(
      actions,
      h(
        "div",
        { class: "detail-grid" },
        h(
          "section",
          { class: "panel", "aria-labelledby": "cd-general" },
          h("h2", { id: "cd-general" }, "Cartridge ", archiveBadge(c)),
          h("dl", { class: "kv", "data-testid": "cartridge-facts" }, rows.map(([k, v]) => [h("dt", { text: k }), h("dd", { text: String(v) })])),
          h(
            "div",
            { class: "field field-check" },
            wp,
            h("label", { for: wpId, text: "Write-protected" }),
            !isAdmin ? h("small", { class: "hint", text: " (admins only)" }) : inDrive ? h("small", { class: "hint", text: " (not while loaded in a drive)" }) : null,
          ),
          h("p", {}, usage(c)),
        ),
        usagePanel(c, () =>
          attempt("Counting what only this cartridge holds", async () => {
            const answer = await get(`/cartridges/${seg(c.barcode)}?exclusive=true`);
            if (state.alive) render(answer);
          }),
        ),
        h("section", { class: "panel", "aria-labelledby": "cd-mam" }, h("h2", { id: "cd-mam", text: "Medium auxiliary memory (MAM)" }), kvList(c.mam)),
        h("section", { class: "panel", "aria-labelledby": "cd-counters" }, h("h2", { id: "cd-counters", text: "Counters" }), kvList(c.counters)),
      ),
    );
  }

  async function load() {
    const [c, libraries] = await Promise.all([get(`/cartridges/${seg(barcode)}`), get("/libraries")]);
    state.magazines = new Set(libraries.filter((l) => l.magazines).map((l) => l.name));
    if (state.alive) render(c);
  }
  attempt(`Loading ${barcode}`, load);
  return () => {
    state.alive = false;
  };
}
