// Maintenance: verify (re-read and re-hash everything) and reclaim (free the space of deleted,
// erased and overwritten data) as background jobs, one at a time, with live progress.

import { get, hasRole, post } from "./api.js";
import { attempt, bytes, clear, field, h, num, options, showMessage, time } from "./ui.js";

const POLL_RUNNING_MS = 500;
const POLL_IDLE_MS = 5000;

const JOBS = {
  verify: {
    title: "Verify",
    role: "operator",
    what: "Re-reads and re-hashes every pack; damage is named by cartridge and record. Read-only: initiators keep writing while it runs.",
    button: "Start verify",
    outcome: { clean: "clean: no damage", damaged: "damaged", done: "done" },
    facts: (s) => [
      ["Checked", `${bytes(s.bytes_checked)} in ${num(s.chunks_checked)} chunks`],
      ["Bad chunks", num(s.bad_chunks)],
    ],
  },
  reclaim: {
    title: "Reclaim",
    role: "admin",
    what: "Frees the space of deleted, erased and overwritten data. Tape writes, reads and changes wait while it runs.",
    button: "Start reclaim",
    outcome: { done: "done" },
    facts: (s) => [
      ["Freed", bytes(s.bytes_freed)],
      ["Stored before → after", s.state === "idle" ? "–" : `${bytes(s.stored_before)} → ${bytes(s.stored_after)}`],
      ["Packs deleted / rewritten", `${num(s.packs_deleted)} / ${num(s.packs_rewritten)}`],
      ["Chunks dropped", num(s.chunks_dropped)],
    ],
  },
};

function stateText(job, s) {
  if (s.state === "idle") return "not run since the server started";
  if (s.state === "running") return "running";
  if (s.state === "failed") return `failed: ${s.error || "unknown error"}`;
  return job.outcome[s.state] || s.state;
}

/** One job's panel; returns {node, render(status), button, setBusy}. */
function jobPanel(name, onStart) {
  const job = JOBS[name];
  const titleId = `job-${name}-title`;
  const allowed = hasRole(job.role);
  const progress = h("progress", {
    id: `job-${name}-progress`,
    max: "1",
    value: "0",
    "data-testid": `${name}-progress`,
  });
  const progressLabel = h("label", { for: `job-${name}-progress`, text: "Packs done" });
  const progressText = h("span", { class: "muted", "data-testid": `${name}-progress-text` });
  const state = h("strong", { "data-testid": `${name}-state` });
  // Announced when the state changes, not at every progress step.
  const announce = h("p", { class: "visually-hidden", role: "status", "aria-live": "polite" });
  const facts = h("dl", { class: "kv", "data-testid": `${name}-facts` });
  const extra = h("div");
  const controls = h("div", { class: "inline-form" });
  const button = h("button", {
    type: "button",
    class: "button primary",
    text: job.button,
    "data-testid": `start-${name}`,
    hidden: !allowed,
  });
  let rewrite;
  if (name === "reclaim" && allowed) {
    rewrite = field("Rewrite packs with less live than", { tag: "select", "data-testid": "reclaim-rewrite-below" }, "Lower: less rewriting, less space freed now.");
    options(rewrite.input, [["0", "0 % (only delete empty packs)"], ["0.25", "25 %"], ["0.5", "50 % (default)"], ["0.75", "75 %"], ["1", "100 % (rewrite every pack with dead data)"]], "0.5");
    controls.appendChild(rewrite.wrap);
  }
  controls.appendChild(button);
  if (!allowed) controls.appendChild(h("p", { class: "muted", text: `Starting it needs the ${job.role} role.` }));
  button.addEventListener("click", () => {
    const body = rewrite ? { rewrite_below: Number(rewrite.input.value) } : {};
    onStart(name, body);
  });
  const node = h(
    "section",
    { class: "panel", "aria-labelledby": titleId, "data-testid": `job-${name}` },
    h("h2", { id: titleId, text: job.title }),
    h("p", { text: job.what }),
    h("p", {}, "State: ", state),
    h("div", { class: "job-progress" }, progressLabel, progress, progressText),
    announce,
    facts,
    extra,
    controls,
  );
  let lastState = null;
  function render(s) {
    node.dataset.state = s.state;
    state.textContent = stateText(job, s);
    const total = Number(s.packs_total) || 0;
    const done = Number(s.packs_done) || 0;
    const ratio = s.state === "running" ? (total ? done / total : 0) : s.state === "idle" ? 0 : 1;
    progress.value = ratio;
    progress.setAttribute("aria-valuetext", `${done} of ${total} packs`);
    progressText.textContent = `${num(done)} / ${num(total)} packs (${(ratio * 100).toFixed(0)} %)`;
    if (lastState !== null && lastState !== s.state) announce.textContent = `${job.title}: ${stateText(job, s)}`;
    lastState = s.state;
    clear(facts).append(
      ...[
        ["Started", s.started ? time(s.started) : "–"],
        ["Finished", s.finished ? time(s.finished) : "–"],
        ...job.facts(s),
      ].map(([k, v]) => [h("dt", { text: k }), h("dd", { text: v })]).flat(),
    );
    clear(extra);
    if (name === "verify" && Array.isArray(s.damage) && s.damage.length) {
      extra.appendChild(
        h(
          "ul",
          { class: "damage-list", "data-testid": "verify-damage" },
          s.damage.map((d) =>
            h(
              "li",
              {},
              `${d.barcode || "(no cartridge)"} partition ${d.partition}` +
                (d.records ? ` records ${d.records[0]}–${d.records[1]}` : "") +
                `: ${d.reason}`,
            ),
          ),
        ),
      );
    }
  }
  function setBusy(busy) {
    button.disabled = busy;
    if (rewrite) rewrite.input.disabled = busy;
  }
  return { node, render, setBusy };
}

export function mountMaintenance(view) {
  let alive = true;
  let timer = null;
  const panels = {};
  const note = h("p", { class: "muted", text: "One job runs at a time." });
  const start = (name, body) =>
    attempt(`Starting ${name}`, async () => {
      panels.verify.setBusy(true);
      panels.reclaim.setBusy(true);
      try {
        const status = await post(`/${name}`, body);
        panels[name].render(status);
        showMessage(`${JOBS[name].title} started.`, "info");
      } finally {
        schedule(0);
      }
    });
  panels.verify = jobPanel("verify", start);
  panels.reclaim = jobPanel("reclaim", start);
  view.appendChild(
    h(
      "section",
      { class: "page", "aria-labelledby": "maint-title" },
      h("div", { class: "page-head" }, h("h1", { id: "maint-title", text: "Maintenance" })),
      note,
      h("div", { class: "detail-grid" }, panels.verify.node, panels.reclaim.node),
    ),
  );

  async function load() {
    const [verify, reclaim] = await Promise.all([get("/verify"), get("/reclaim")]);
    if (!alive) return false;
    panels.verify.render(verify);
    panels.reclaim.render(reclaim);
    const running = verify.state === "running" || reclaim.state === "running";
    panels.verify.setBusy(running);
    panels.reclaim.setBusy(running);
    return running;
  }

  function schedule(ms) {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (!alive) return;
      let running = false;
      if (!document.hidden) running = (await attempt("Loading job status", load)) === true;
      if (alive) schedule(running ? POLL_RUNNING_MS : POLL_IDLE_MS);
    }, ms);
  }

  schedule(0);
  return () => {
    alive = false;
    clearTimeout(timer);
  };
}
