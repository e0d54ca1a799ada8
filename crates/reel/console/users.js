// Users (admins) and API tokens (everyone: their own; admins: all).

import { currentUser, del, get, hasRole, post, put, seg } from "./api.js";
import { confirmDialog, openDialog } from "./dialogs.js";
import { attempt, field, fillRows, h, options, showError, showMessage, time } from "./ui.js";

// Your own password needs the current one; an admin setting someone else's does not. The
// server ends every other session and API token of that user.
function passwordDialog(username) {
  const own = currentUser()?.username === username;
  return openDialog({
    title: `New password for ${username}`,
    testid: "password-dialog",
    build: (close) => {
      const current = own
        ? field("Current password", { type: "password", autocomplete: "current-password", required: true, "data-testid": "current-password" })
        : null;
      const pw = field("New password", { type: "password", autocomplete: "new-password", required: true, "data-testid": "new-password" });
      const again = field("Repeat it", { type: "password", autocomplete: "new-password", required: true, "data-testid": "new-password-again" });
      const error = h("div", { class: "dialog-error", role: "alert" });
      const form = h(
        "form",
        { class: "dialog-body" },
        current ? current.wrap : null,
        pw.wrap,
        again.wrap,
        error,
        h(
          "div",
          { class: "dialog-actions" },
          h("button", { type: "button", class: "button", text: "Cancel", onclick: () => close(false) }),
          h("button", { type: "submit", class: "button primary", text: "Set password" }),
        ),
      );
      (current ?? pw).input.setAttribute("autofocus", "");
      form.addEventListener("submit", async (e) => {
        e.preventDefault();
        if (current && !current.input.value) return void (error.textContent = "Enter your current password.");
        if (!pw.input.value) return void (error.textContent = "Enter a password.");
        if (pw.input.value !== again.input.value) return void (error.textContent = "The two passwords differ.");
        try {
          const body = { password: pw.input.value };
          if (current) body.current_password = current.input.value;
          await put(`/users/${seg(username)}/password`, body);
          showMessage(`The password of ${username} is changed; their other sessions and API tokens are ended.`, "success");
          close(true);
        } catch (err) {
          if (err.status === 401) return close(false);
          error.textContent = err.message;
          showError(err, "Changing the password failed");
        }
      });
      return form;
    },
  });
}

/** Shows a new token's secret once. */
function showTokenDialog(answer) {
  return openDialog({
    title: "New API token",
    testid: "new-token-dialog",
    build: (close) => {
      const secret = field("Token (shown only now: copy it)", { readOnly: true, value: answer.token, "data-testid": "new-token-value", class: "mono" });
      const status = h("span", { class: "muted", role: "status" });
      return h(
        "div",
        { class: "dialog-body" },
        h("p", { text: `Token “${answer.name || answer.id}” is created. reel keeps only its hash: this is the only time it is shown.` }),
        secret.wrap,
        h(
          "div",
          { class: "dialog-actions" },
          status,
          h("button", {
            type: "button",
            class: "button",
            text: "Copy",
            onclick: async () => {
              secret.input.select();
              try {
                await navigator.clipboard.writeText(answer.token);
                status.textContent = "Copied.";
              } catch {
                status.textContent = "Select the text and copy it.";
              }
            },
          }),
          h("button", { type: "button", class: "button primary", text: "Done", autofocus: true, onclick: () => close(true) }),
        ),
      );
    },
  });
}

/**
 * A one-line create form under a list: its fields and submit button; on submit,
 * `act(form)` runs through attempt() under `context`.
 */
function inlineForm({ label, testid, fields, submit, context, act }) {
  const form = h(
    "form",
    { class: "inline-form", "data-testid": testid, "aria-label": label },
    fields.map((f) => f.wrap),
    h("button", { type: "submit", class: "button primary", ...submit }),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    attempt(context, () => act(form));
  });
  return form;
}

/** A panel with a table (`heads`, rows in `tbody`) and, under it, the form that adds to it. */
function listPanel({ id, title, testid, heads, tbody, formTitle, form }) {
  return h(
    "section",
    { class: "panel", "aria-labelledby": id },
    h("h2", { id, text: title }),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "table", "data-testid": testid },
        h("thead", {}, h("tr", {}, heads.map((t) => h("th", { scope: "col", text: t })))),
        tbody,
      ),
    ),
    h("h3", { text: formTitle }),
    form,
  );
}

export function mountUsers(view) {
  const isAdmin = hasRole("admin");
  const me = currentUser() || {};
  let alive = true;
  const page = h("section", { class: "page", "aria-labelledby": "users-title" }, h("div", { class: "page-head" }, h("h1", { id: "users-title", text: isAdmin ? "Users and tokens" : "API tokens" })));
  view.appendChild(page);

  // ---------------------------------------------------------------- users
  const usersBody = h("tbody");
  if (isAdmin) {
    const username = field("Username", { name: "username", required: true, autocomplete: "off", "data-testid": "user-name" });
    const password = field("Password", { name: "password", type: "password", required: true, autocomplete: "new-password", "data-testid": "user-password" });
    const role = field("Role", { tag: "select", name: "role", "data-testid": "user-role" });
    options(role.input, [["viewer", "viewer: reads"], ["operator", "operator: also moves, imports, exports"], ["admin", "admin: everything"]], "operator");
    const form = inlineForm({
      label: "Create a user",
      testid: "create-user-form",
      fields: [username, password, role],
      submit: { text: "Create user", "data-testid": "create-user-submit" },
      context: "Creating the user",
      act: async (form) => {
        const name = username.input.value.trim();
        if (!name || !password.input.value) {
          showMessage("A new user needs a username and a password.", "error");
          return;
        }
        await post("/users", { username: name, password: password.input.value, role: role.input.value });
        showMessage(`User ${name} (${role.input.value}) is created.`, "success");
        form.reset();
        await loadUsers();
      },
    });
    page.append(
      listPanel({
        id: "u-title",
        title: "Users",
        testid: "users-table",
        heads: ["User", "Role", "Created", "Actions"],
        tbody: usersBody,
        formTitle: "Create a user",
        form,
      }),
    );
  } else {
    page.append(
      h(
        "section",
        { class: "panel", "aria-labelledby": "pw-title" },
        h("h2", { id: "pw-title", text: "Your password" }),
        h("button", { type: "button", class: "button", text: "Change my password…", onclick: () => attempt("Password", () => passwordDialog(me.username)) }),
      ),
    );
  }

  async function loadUsers() {
    if (!isAdmin) return;
    const users = await get("/users");
    if (!alive) return;
    fillRows(
      usersBody,
      users,
      (u) =>
        h(
          "tr",
          { "data-testid": `user-row-${u.username}` },
          h("th", { scope: "row", text: u.username }),
          h("td", { text: u.role }),
          h("td", { text: time(u.created) }),
          h(
            "td",
            { class: "row-actions" },
            h("button", {
              type: "button",
              class: "button small",
              text: "Set password…",
              "aria-label": `Set the password of ${u.username}`,
              onclick: () => attempt("Password", () => passwordDialog(u.username)),
            }),
            h("button", {
              type: "button",
              class: "button small danger",
              text: "Delete…",
              "data-testid": `delete-user-${u.username}`,
              "aria-label": `Delete user ${u.username}`,
              onclick: () =>
                attempt(`Deleting ${u.username}`, async () => {
                  const ok = await confirmDialog(`Delete user ${u.username}?`, "Their API tokens are revoked too.", "Delete");
                  if (!ok) return;
                  await del(`/users/${seg(u.username)}`);
                  showMessage(`User ${u.username} is deleted.`, "success");
                  await loadUsers();
                  await loadTokens();
                }),
            }),
          ),
        ),
    );
  }

  // ---------------------------------------------------------------- tokens
  const tokensBody = h("tbody");
  const tokenName = field("Token name", { name: "name", required: true, placeholder: "e.g. backup-script", autocomplete: "off", "data-testid": "token-name" });
  const tokenForm = inlineForm({
    label: "Create an API token",
    testid: "create-token-form",
    fields: [tokenName],
    submit: { text: "Create token", "data-testid": "create-token-submit" },
    context: "Creating the token",
    act: async (form) => {
      const name = tokenName.input.value.trim();
      if (!name) {
        showMessage("Give the token a name.", "error");
        return;
      }
      const answer = await post("/tokens", { name });
      form.reset();
      await loadTokens();
      await showTokenDialog({ name, ...answer });
    },
  });
  page.append(
    listPanel({
      id: "t-title",
      title: isAdmin ? "API tokens (all users)" : "Your API tokens",
      testid: "tokens-table",
      heads: ["Name", "User", "ID", "Created", "Last used", "Actions"],
      tbody: tokensBody,
      formTitle: "Create a token",
      form: tokenForm,
    }),
  );

  async function loadTokens() {
    const tokens = await get("/tokens");
    if (!alive) return;
    fillRows(
      tokensBody,
      tokens,
      (t) =>
        h(
          "tr",
          { "data-testid": `token-row-${t.id}` },
          h("th", { scope: "row", text: t.name || "–" }),
          h("td", { text: t.username }),
          h("td", { class: "mono", text: String(t.id) }),
          h("td", { text: time(t.created) }),
          h("td", { text: time(t.last_used) }),
          h(
            "td",
            {},
            h("button", {
              type: "button",
              class: "button small danger",
              text: "Revoke…",
              "aria-label": `Revoke token ${t.name || t.id}`,
              "data-testid": `revoke-token-${t.id}`,
              onclick: () =>
                attempt("Revoking the token", async () => {
                  const ok = await confirmDialog(`Revoke token ${t.name || t.id}?`, "Scripts using it stop working at once.", "Revoke");
                  if (!ok) return;
                  await del(`/tokens/${seg(t.id)}`);
                  showMessage(`Token ${t.name || t.id} is revoked.`, "success");
                  await loadTokens();
                }),
            }),
          ),
        ),
      "No API tokens.",
      6,
    );
  }

  attempt("Loading users", loadUsers);
  attempt("Loading tokens", loadTokens);
  return () => {
    alive = false;
  };
}
