// The drives panel of the library page: one card per drive with its bay (a drop target, and
// draggable while it holds a cartridge), its state and activity, and its counters.

import { bytes, clear, h, keyedChildren } from "../ui.js";
import { mediaClass } from "./cells.js";

/** The panel; `render(drives)` redraws it from the drives in index order. */
export function drivesPanel({ canOperate }) {
  const box = h("div", { class: "drives", "data-testid": "drives" });
  const section = h("section", { class: "panel", "aria-labelledby": "drives-title" }, h("h2", { id: "drives-title", text: "Drives" }), box);
  function render(drives) {
    keyedChildren(
      box,
      drives,
      (d) => `drive-${d.index}`,
      (key) => h("article", { class: "drive", "data-testid": key }),
      (node, d) => renderDrive(node, d, canOperate),
    );
    if (drives.length === 0) box.textContent = "This library has no drives.";
  }
  return { section, render };
}

/** Redraws a drive card unless nothing it shows has changed. */
function renderDrive(node, d, canOperate) {
  const sig = JSON.stringify([d.state, d.activity, d.barcode, d.removal_prevented, d.stats, d.physical, d.physical_model]);
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
    ...[d.physical ? physicalState(d) : null, d.physical_model ? modelCurves(d) : null].filter(Boolean),
  );
}

const MOTION = {
  idle: "idle",
  streaming: "streaming",
  repositioning: "repositioning (back-hitch)",
  waiting_for_data: "stopped, waiting for data",
  loading: "loading",
  unloading: "unloading",
  rewinding: "rewinding",
  locating: "locating",
};

/** What the physical model of an emulated drive is doing (the library emulates real timing). */
function physicalState(d) {
  const p = d.physical;
  const fill = p.buffer_capacity ? Math.round((100 * p.buffer_bytes) / p.buffer_capacity) : 0;
  return h(
    "div",
    { class: "drive-physical", "data-testid": `drive-physical-${d.index}` },
    h("h3", { text: `Emulating ${p.model_name}` }),
    h("span", { class: `badge motion-${p.motion}`, "data-testid": `drive-motion-${d.index}`, text: MOTION[p.motion] || p.motion }),
    h(
      "dl",
      { class: "drive-stats" },
      h("dt", { text: "Tape speed" }),
      h("dd", { text: p.tape_speed > 0 ? `${(p.tape_speed / 1e6).toFixed(0)} MB/s` : "stopped" }),
      h("dt", { text: "Buffer" }),
      h("dd", { text: `${fill} % of ${bytes(p.buffer_capacity)}` }),
      h("dt", { text: "Back-hitches" }),
      h("dd", { "data-testid": `drive-back-hitches-${d.index}`, text: String(p.back_hitches) }),
      h("dt", { text: "Repositioning" }),
      h("dd", { text: `${p.repositioning_seconds.toFixed(1)} s` }),
    ),
  );
}

/** The model's throughput curves for this drive type (served by /model/{id}/…). */
function modelCurves(d) {
  const id = encodeURIComponent(d.physical_model);
  const img = (file, alt) => h("img", { src: `/model/${id}/${file}`, alt, loading: "lazy", class: "model-curve" });
  return h(
    "details",
    { class: "drive-curves", "data-testid": `drive-curves-${d.index}` },
    h("summary", { text: `Physical drive curves (${d.physical_model})` }),
    img("record-size.svg", `Modelled throughput of ${d.physical_model} against record size`),
    img("compressible.svg", `Modelled throughput of ${d.physical_model} against the compressible share`),
  );
}
