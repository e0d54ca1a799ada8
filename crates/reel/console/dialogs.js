// Modal dialogs: the <dialog> machinery (focus kept inside, Escape closes, focus given back
// to the opener), the yes/no confirmation, and the form dialog for "fill in and send"
// dialogs (fields, an error line, Cancel and submit, the request's failure shown in place).

import { h, showError } from "./ui.js";

const FOCUSABLE =
  'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

/**
 * Opens a modal <dialog> (focus kept inside, Escape closes). `build(close)` returns the
 * body; the promise resolves with the value passed to close() (undefined on Escape).
 */
export function openDialog({ title, testid, build, className }) {
  return new Promise((resolve) => {
    const opener = document.activeElement;
    const titleId = `dialog-title-${Math.random().toString(36).slice(2)}`;
    const dialog = h("dialog", {
      class: `dialog ${className || ""}`,
      "aria-labelledby": titleId,
      "data-testid": testid,
    });
    let result;
    const close = (value) => {
      result = value;
      if (dialog.open) dialog.close();
    };
    const header = h(
      "div",
      { class: "dialog-header" },
      h("h2", { id: titleId, text: title }),
      h("button", {
        type: "button",
        class: "icon-button",
        "aria-label": "Close dialog",
        "data-testid": "dialog-close",
        text: "×",
        onclick: () => close(undefined),
      }),
    );
    dialog.append(header, build(close));
    dialog.addEventListener("keydown", (event) => {
      if (event.key !== "Tab") return;
      const items = [...dialog.querySelectorAll(FOCUSABLE)].filter(
        (n) => n.offsetParent !== null || n === document.activeElement,
      );
      if (items.length === 0) return;
      const first = items[0];
      const last = items[items.length - 1];
      if (event.shiftKey && document.activeElement === first) {
        event.preventDefault();
        last.focus();
      } else if (!event.shiftKey && document.activeElement === last) {
        event.preventDefault();
        first.focus();
      }
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (opener && opener.isConnected && typeof opener.focus === "function") opener.focus();
      resolve(result);
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    const autofocus = dialog.querySelector("[autofocus]") || dialog.querySelector(
      ".dialog-body " + FOCUSABLE.split(", ").join(", .dialog-body "),
    );
    if (autofocus) autofocus.focus();
  });
}

/** A yes/no confirmation; resolves true when confirmed. */
export function confirmDialog(title, text, confirmLabel = "Confirm", danger = true) {
  return openDialog({
    title,
    testid: "confirm-dialog",
    build: (close) =>
      h(
        "div",
        { class: "dialog-body" },
        h("p", {}, text),
        h(
          "div",
          { class: "dialog-actions" },
          h("button", {
            type: "button",
            class: "button",
            text: "Cancel",
            "data-testid": "confirm-cancel",
            onclick: () => close(false),
          }),
          h("button", {
            type: "button",
            class: danger ? "button danger" : "button primary",
            text: confirmLabel,
            "data-testid": "confirm-ok",
            autofocus: true,
            onclick: () => close(true),
          }),
        ),
      ),
  }).then((v) => v === true);
}

/**
 * A form in a modal dialog: the content, an error line, Cancel and a submit button.
 * `build()` returns `{ content, focus, validate, send }`: `content` (nodes, nulls skipped)
 * goes above the error line, `focus` is the input that starts with the focus, `validate()`
 * returns a message that keeps the dialog open (or nothing), and `send()` is the request
 * whose answer closes the dialog and is what the promise resolves to. A refused request
 * (ApiError) shows in the error line and in the message area under `failure`; a 401 closes
 * the dialog, since the console is going back to the login page. Cancel and Escape resolve
 * to undefined.
 */
export function formDialog({ title, testid, form: formAttrs, submit: submitAttrs, failure, build }) {
  return openDialog({
    title,
    testid,
    build: (close) => {
      const { content, focus, validate = () => undefined, send } = build();
      const error = h("div", { class: "dialog-error", role: "alert", "data-testid": "dialog-error" });
      const submit = h("button", { type: "submit", class: "button primary", ...submitAttrs });
      const form = h(
        "form",
        { class: "dialog-body", ...formAttrs },
        content,
        error,
        h(
          "div",
          { class: "dialog-actions" },
          h("button", { type: "button", class: "button", text: "Cancel", onclick: () => close(undefined) }),
          submit,
        ),
      );
      focus.setAttribute("autofocus", "");
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        error.textContent = "";
        const invalid = validate();
        if (invalid) {
          error.textContent = invalid;
          return;
        }
        submit.disabled = true;
        try {
          close(await send());
        } catch (e) {
          if (e.status === 401) return close(undefined);
          error.textContent = `${e.message}${e.code ? ` (${e.code})` : ""}`;
          showError(e, failure);
        } finally {
          submit.disabled = false;
        }
      });
      return form;
    },
  });
}
