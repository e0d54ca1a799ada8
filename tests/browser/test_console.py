"""The web console in a real (headless) Chromium against a real `reel serve`.

run.sh starts the server and sets:
  REEL_URL            http://127.0.0.1:PORT/  (the console and the API)
  REEL_DATA           the data directory (for initial-admin-password)
  REEL_ISCSI_PORTAL   127.0.0.1:PORT of the iSCSI portal (for the traffic generator)
  REEL_ARTIFACTS      where screenshots go
  REEL_CHROMIUM       the browser binary (default /usr/bin/chromium)

The tests run in file order and share one browser page: each step starts where the
previous one left the library. See docs/testing/browser.md.
"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

HERE = Path(__file__).resolve().parent
URL = os.environ.get("REEL_URL", "http://127.0.0.1:8080/")
DATA = Path(os.environ.get("REEL_DATA", "."))
PORTAL = os.environ.get("REEL_ISCSI_PORTAL", "127.0.0.1:3260")
ARTIFACTS = Path(os.environ.get("REEL_ARTIFACTS", HERE.parent.parent / "target" / "browser-artifacts"))
CHROMIUM = os.environ.get("REEL_CHROMIUM", "/usr/bin/chromium")

# Console errors a step provokes on purpose: the browser logs every 4xx/5xx response as
# "Failed to load resource", which is expected where the test asks for a refusal.
EXPECTED_HTTP_ERRORS = re.compile(r"Failed to load resource: the server responded with a status of (401|409)")

state = {"errors": [], "allow_http_errors": False, "shot": 0}


def shot(page, name, full_page=True):
    state["shot"] += 1
    path = ARTIFACTS / f"{state['shot']:02d}-{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def api(page, method, path, body=None):
    """Calls the API with the page's own session token (for cross-checks only)."""
    token = page.evaluate("sessionStorage.getItem('reel.token')")
    req = urllib.request.Request(
        URL.rstrip("/") + "/api/v1" + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read()
        return json.loads(text) if text else None


@pytest.fixture(scope="module")
def page():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15000)

        def on_console(msg):
            if msg.type != "error":
                return
            if state["allow_http_errors"] and EXPECTED_HTTP_ERRORS.search(msg.text):
                return
            state["errors"].append(f"console.error: {msg.text} ({msg.location.get('url', '')})")

        page.on("console", on_console)
        page.on("pageerror", lambda e: state["errors"].append(f"pageerror: {e}"))
        yield page
        context.close()
        browser.close()


def library_name(page):
    return api(page, "GET", "/libraries")[0]["name"]


def goto(page, route):
    page.get_by_test_id(f"nav-{route}").click()
    expect(page.locator("#view")).to_have_attribute("data-page", route)


def full_slot_cells(page):
    return page.locator('[data-testid="slot-grid"] .cell[data-barcode]')


# ---------------------------------------------------------------------------- steps


def test_login(page):
    page.goto(URL)
    expect(page.get_by_test_id("login-form")).to_be_visible()
    shot(page, "login")
    # A wrong password is refused with a visible message.
    state["allow_http_errors"] = True
    page.get_by_test_id("login-username").fill("admin")
    page.get_by_test_id("login-password").fill("not-the-password")
    page.get_by_test_id("login-submit").click()
    expect(page.get_by_test_id("login-message")).to_contain_text("Wrong username or password")
    state["allow_http_errors"] = False
    password = (DATA / "initial-admin-password").read_text().strip()
    page.get_by_test_id("login-password").fill(password)
    page.get_by_test_id("login-submit").click()
    expect(page.get_by_test_id("whoami")).to_contain_text("admin")
    expect(page.locator("#view")).to_have_attribute("data-page", "library")


def test_library_drawn(page):
    detail = api(page, "GET", "/libraries/" + urllib.request.quote(library_name(page), safe=""))
    slots = [e for e in detail["elements"] if e["kind"] == "slot"]
    mail = [e for e in detail["elements"] if e["kind"] == "import_export"]
    for i in range(4):
        expect(page.get_by_test_id(f"drive-{i}")).to_be_visible()
    assert page.locator('article.drive[data-testid^="drive-"]').count() == len(detail["drives"]) == 4
    expect(page.locator('[data-testid="slot-grid"] .cell')).to_have_count(min(len(slots), 400))
    expect(page.locator('[data-testid="mail-slots"] .cell')).to_have_count(len(mail))
    # Every full slot shows its barcode.
    for e in slots[:40]:
        cell = page.locator(f'[data-testid="cell-{e["address"]}"]')
        if e["barcode"]:
            expect(cell).to_have_attribute("data-barcode", e["barcode"])
            expect(cell).to_contain_text(e["barcode"])
        else:
            expect(cell).not_to_have_attribute("data-barcode", re.compile(".+"))
    shot(page, "library")
    # Each drive card offers the physical drive model's curves for its type (LTO-9 FH here).
    assert detail["drives"][0]["physical_model"] == "lto9-fh"
    expect(page.get_by_test_id("drive-0")).not_to_contain_text("null")
    curves = page.get_by_test_id("drive-curves-0")
    curves.locator("summary").click()
    chart = curves.locator("img").first
    expect(chart).to_be_visible()
    page.wait_for_function("el => el.complete && el.naturalWidth > 0", arg=chart.element_handle(), timeout=30000)
    shot(page, "drive-curves")
    curves.locator("summary").click()


def test_create_ten_cartridges(page):
    goto(page, "cartridges")
    page.get_by_test_id("open-create-cartridges").click()
    dialog = page.get_by_test_id("create-cartridges-dialog")
    expect(dialog).to_be_visible()
    page.get_by_test_id("create-prefix").fill("TST")
    page.get_by_test_id("create-first").fill("1")
    page.get_by_test_id("create-count").fill("10")
    page.get_by_test_id("create-media").select_option("lto8")
    page.get_by_test_id("create-target").select_option("")  # the vault
    shot(page, "create-cartridges-form", full_page=False)
    page.get_by_test_id("create-submit").click()
    expect(dialog).to_have_count(0)
    expect(page.get_by_test_id("message-success")).to_contain_text("Created 10 cartridges")
    page.get_by_test_id("cartridge-search").fill("tst")
    expect(page.locator('[data-testid^="cartridge-row-"]')).to_have_count(10)
    for n in range(1, 11):
        row = page.get_by_test_id(f"cartridge-row-TST{n:03d}L8")
        expect(row).to_be_visible()
        expect(row.get_by_test_id("cartridge-location")).to_have_text("vault")
    shot(page, "cartridges-created")


def test_move_with_dialog(page):
    goto(page, "library")
    drive = page.get_by_test_id("drive-0")
    expect(drive).to_have_attribute("data-state", "empty")
    cell = full_slot_cells(page).first
    barcode = cell.get_attribute("data-barcode")
    source = cell.get_attribute("data-address")
    target = drive.get_attribute("data-address")
    page.get_by_test_id("open-move-dialog").click()
    dialog = page.get_by_test_id("move-dialog")
    expect(dialog).to_be_visible()
    page.get_by_test_id("move-source").select_option(source)
    page.get_by_test_id("move-destination").select_option(target)
    shot(page, "move-dialog", full_page=False)
    page.get_by_test_id("move-submit").click()
    expect(dialog).to_have_count(0)
    expect(drive).to_have_attribute("data-barcode", barcode)
    expect(drive).to_have_attribute("data-state", re.compile("loaded|unloaded"))
    expect(page.get_by_test_id("drive-bay-0")).to_contain_text(barcode)
    expect(page.locator(f'[data-testid="cell-{source}"]')).not_to_have_attribute("data-barcode", re.compile(".+"))
    state["loaded"] = barcode
    shot(page, "moved-into-drive-0")


def test_move_with_drag_and_drop(page):
    drive = page.get_by_test_id("drive-1")
    expect(drive).to_have_attribute("data-state", "empty")
    cell = full_slot_cells(page).first
    barcode = cell.get_attribute("data-barcode")
    cell.drag_to(page.get_by_test_id("drive-bay-1"))
    expect(drive).to_have_attribute("data-barcode", barcode)
    expect(page.get_by_test_id("message-success").last).to_contain_text(f"Moved {barcode}")
    shot(page, "dragged-into-drive-1")


def test_keyboard_move_dialog_escape(page):
    # The Move dialog opens from the keyboard, keeps focus inside and closes with Escape.
    page.get_by_test_id("open-move-dialog").focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_test_id("move-dialog")
    expect(dialog).to_be_visible()
    for _ in range(8):
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.closest('dialog') !== null")
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    assert page.evaluate("document.activeElement.dataset.testid") == "open-move-dialog"


DRIVE_WRITING_JS = """
() => Number(document.querySelector('[data-testid="monitor-drive-0"]')?.dataset.writeBps) > 1e6
"""
INITIATOR_WRITING_JS = """
() => [...document.querySelectorAll('[data-testid="monitor-initiator"]')]
  .some((r) => r.dataset.initiator.includes('browser-writer') && Number(r.dataset.writeBps) > 1e6)
"""


def test_live_monitor_moves_while_writing(page):
    soft_failures = []
    drive = page.get_by_test_id("drive-0")
    lun = drive.get_attribute("data-lun")
    target = library_name(page)
    goto(page, "monitor")
    chart = page.locator("#throughput-chart")
    expect(chart).to_be_visible()
    # The feed delivers a snapshot a second, over server-sent events (not the polling fallback).
    page.wait_for_function("Number(document.querySelector('#throughput-chart').dataset.points) >= 2")
    expect(page.get_by_test_id("monitor-mode")).to_have_text("live (server-sent events)")
    writer = subprocess.Popen(
        [sys.executable, str(HERE / "iscsi_tape_writer.py"), PORTAL, target, lun, "--mb", "200", "--rate", "20", "--seconds", "40"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        page.wait_for_function(
            "Number(document.querySelector('#throughput-chart').dataset.latestWriteBps) > 1e6", timeout=30000
        )
        expect(page.get_by_test_id("monitor-initiators")).to_contain_text("browser-writer")
        expect(page.get_by_test_id("monitor-drive-0")).to_contain_text(state["loaded"])
        page.wait_for_function(DRIVE_WRITING_JS, timeout=10000)
        shot(page, "monitor-while-writing")
        # Checked softly so that the rest of the step still runs: reported at the end.
        try:
            page.wait_for_function(INITIATOR_WRITING_JS, timeout=8000)
        except Exception:
            soft_failures.append("the per-initiator write rate of the writer never rose above 1 MB/s")
        goto(page, "sessions")
        expect(page.get_by_test_id("sessions-table")).to_contain_text("browser-writer")
        shot(page, "sessions-while-writing")
        goto(page, "monitor")
        out, err = writer.communicate(timeout=90)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0, f"writer failed: {err}"
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["bytes"] >= 20_000_000, summary
    (ARTIFACTS / "writer.json").write_text(out)
    # The write rate falls back to zero once the writer has stopped.
    page.wait_for_function(
        "Number(document.querySelector('#throughput-chart').dataset.latestWriteBps) === 0", timeout=15000
    )
    assert float(chart.get_attribute("data-peak-write-bps")) > 1e6
    expect(page.get_by_test_id("tile-dedup")).to_contain_text(":")
    # Both reductions: the packs alone and the whole data directory (catalog included).
    expect(page.get_by_test_id("tile-reduction-store")).to_contain_text(":")
    expect(page.get_by_test_id("tile-reduction-disk")).to_contain_text(":")
    shot(page, "monitor-after-writing")
    assert soft_failures == [], soft_failures


def test_export_through_mail_slot_and_vault(page):
    goto(page, "library")
    cell = full_slot_cells(page).first
    barcode = cell.get_attribute("data-barcode")
    source = cell.get_attribute("data-address")
    mail = page.locator('[data-testid="mail-slots"] .cell:not([data-barcode])').first
    mail_address = mail.get_attribute("data-address")
    # Into a mail slot with the move dialog, submitted from the keyboard.
    page.get_by_test_id("open-move-dialog").click()
    page.get_by_test_id("move-source").select_option(source)
    page.get_by_test_id("move-destination").select_option(mail_address)
    page.get_by_test_id("move-submit").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("move-dialog")).to_have_count(0)
    expect(page.get_by_test_id(f"mail-{mail_address}")).to_have_attribute("data-barcode", barcode)
    shot(page, "in-mail-slot")
    # Export: the operator takes it out, it goes to the vault.
    page.get_by_test_id(f"export-{mail_address}").click()
    expect(page.get_by_test_id(f"mail-{mail_address}")).not_to_have_attribute("data-barcode", re.compile(".+"))
    expect(page.get_by_test_id("message-success").last).to_contain_text(f"Exported {barcode}")
    assert api(page, "GET", f"/cartridges/{barcode}")["location"] == {"vault": True}
    # Import a cartridge from the vault into that mail slot, then vault it from its page.
    page.get_by_test_id(f"import-{mail_address}").click()
    page.get_by_test_id("import-barcode").select_option("TST001L8")
    page.get_by_test_id("import-submit").click()
    expect(page.get_by_test_id(f"mail-{mail_address}")).to_have_attribute("data-barcode", "TST001L8")
    page.goto(URL + "#/cartridge/TST001L8")
    expect(page.get_by_test_id("cartridge-facts")).to_contain_text("mail slot")
    shot(page, "cartridge-in-mail-slot")
    page.get_by_test_id("cartridge-vault").click()
    expect(page.get_by_test_id("cartridge-facts")).to_contain_text("vault")
    assert api(page, "GET", "/cartridges/TST001L8")["location"] == {"vault": True}
    shot(page, "cartridge-vaulted")


def test_cartridge_details_write_protect_and_delete(page):
    page.goto(URL + "#/cartridge/TST002L8")
    facts = page.get_by_test_id("cartridge-facts")
    expect(facts).to_contain_text(re.compile("LTO-?8"))
    toggle = page.get_by_test_id("write-protect-toggle")
    expect(toggle).not_to_be_checked()
    toggle.check()
    expect(page.get_by_test_id("message-success").last).to_contain_text("write-protected")
    assert api(page, "GET", "/cartridges/TST002L8")["write_protected"] is True
    # A refusal from the API (409: it is loaded in a drive) shows in the message area.
    state["allow_http_errors"] = True
    page.goto(URL + f"#/cartridge/{state['loaded']}")
    expect(page.get_by_test_id("cartridge-facts")).to_contain_text(state["loaded"])
    page.get_by_test_id("cartridge-delete").click()
    page.get_by_test_id("confirm-ok").click()
    error = page.get_by_test_id("message-error").last
    expect(error).to_be_visible()
    expect(error).to_contain_text("409")
    shot(page, "delete-refused")
    state["allow_http_errors"] = False
    error.get_by_role("button", name="Dismiss message").click()
    expect(page.get_by_test_id("message-error")).to_have_count(0)
    # Deleting a vaulted cartridge works after the confirmation.
    page.goto(URL + "#/cartridge/TST010L8")
    expect(page.get_by_test_id("cartridge-facts")).to_contain_text("vault")
    page.get_by_test_id("cartridge-delete").click()
    expect(page.get_by_test_id("confirm-dialog")).to_be_visible()
    page.get_by_test_id("confirm-ok").click()
    expect(page.locator("#view")).to_have_attribute("data-page", "cartridges")
    page.get_by_test_id("cartridge-search").fill("TST")
    expect(page.locator('[data-testid^="cartridge-row-"]')).to_have_count(9)


def archive_action(page, barcode, action, title, message):
    """Clicks the `action` button of `barcode`'s detail, confirms, waits for the job to end
    well and reloads the page."""
    page.get_by_test_id(f"cartridge-{action}").click()
    expect(page.get_by_test_id("confirm-dialog")).to_contain_text(f"{title} {barcode}")
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("message-success").last).to_contain_text(f"{message} {barcode}")
    for _ in range(600):
        status = api(page, "GET", "/archive")
        if status["state"] != "running":
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the {action} job did not finish")
    assert status["state"] == "done", status
    page.reload()


def test_cartridge_archive_and_restore(page):
    # run.sh configures an [archive] directory; TST003L8 is in the vault.
    page.goto(URL + "#/cartridge/TST003L8")
    badge = page.get_by_test_id("cartridge-facts").locator("xpath=..").get_by_test_id("archive-state")
    expect(badge).to_have_attribute("data-state", "available")
    archive_action(page, "TST003L8", "archive", "Archive", "Archiving")
    expect(badge).to_have_attribute("data-state", "archived")
    expect(page.get_by_test_id("cartridge-import")).to_have_count(0)
    expect(page.get_by_test_id("cartridge-erase")).to_have_count(0)
    expect(page.get_by_test_id("cartridge-restore")).to_be_visible()
    # It can be deleted for good, image and all: the dialog says so (cancelled here).
    page.get_by_test_id("cartridge-delete").click()
    expect(page.get_by_test_id("confirm-dialog")).to_contain_text("archive image")
    page.get_by_test_id("confirm-cancel").click()
    expect(page.get_by_test_id("confirm-dialog")).to_have_count(0)
    shot(page, "cartridge-archived")
    # The list shows the state too.
    goto(page, "cartridges")
    page.get_by_test_id("cartridge-search").fill("TST003")
    expect(page.get_by_test_id("cartridge-row-TST003L8").get_by_test_id("archive-state")).to_have_text("archived")
    page.goto(URL + "#/cartridge/TST003L8")
    archive_action(page, "TST003L8", "restore", "Restore", "Restoring")
    expect(badge).to_have_attribute("data-state", "available")
    expect(page.get_by_test_id("cartridge-import")).to_be_visible()


def test_cartridge_usage_and_erase(page):
    loaded = state["loaded"]
    name = library_name(page)
    # Erasing the cartridge the writer filled is refused while it is in a drive (409).
    state["allow_http_errors"] = True
    page.goto(URL + f"#/cartridge/{loaded}")
    expect(page.get_by_test_id("cartridge-usage")).to_be_visible()
    page.get_by_test_id("cartridge-erase").click()
    expect(page.get_by_test_id("confirm-dialog")).to_contain_text(f"Erase {loaded}")
    page.get_by_test_id("confirm-ok").click()
    error = page.get_by_test_id("message-error").last
    expect(error).to_contain_text("409")
    state["allow_http_errors"] = False
    error.get_by_role("button", name="Dismiss message").click()
    # Unloaded into a free slot (which flushes it), it shows its space and ratios.
    detail = api(page, "GET", "/libraries/" + urllib.request.quote(name, safe=""))
    drive0 = next(e for e in detail["elements"] if e["kind"] == "drive" and e["barcode"] == loaded)
    free = next(e for e in detail["elements"] if e["kind"] == "slot" and not e["barcode"])
    api(page, "POST", "/libraries/" + urllib.request.quote(name, safe="") + "/move",
        {"from": drive0["address"], "to": free["address"]})
    page.reload()
    usage = api(page, "GET", f"/cartridges/{loaded}")["usage"]
    assert usage["logical_bytes"] > 0 and usage["dedup_ratio"] > 1, usage
    expect(page.get_by_test_id("usage-logical")).not_to_have_text("0 B")
    expect(page.get_by_test_id("usage-dedup")).to_contain_text(":")
    expect(page.get_by_test_id("usage-compression")).to_contain_text(":")
    page.get_by_test_id("usage-count-exclusive").click()
    expect(page.get_by_test_id("usage-exclusive")).to_contain_text("stored")
    shot(page, "cartridge-usage")
    # Erase it: confirmed, then empty and still in its slot.
    page.get_by_test_id("cartridge-erase").click()
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("message-success").last).to_contain_text(f"Erased {loaded}")
    expect(page.get_by_test_id("usage-logical")).to_have_text("0 B")
    expect(page.get_by_test_id("cartridge-facts")).to_contain_text("slot")
    assert api(page, "GET", f"/cartridges/{loaded}")["usage"]["logical_bytes"] == 0
    state["erased_bytes"] = usage["stored_bytes"]


def test_maintenance_verify_and_reclaim(page):
    goto(page, "maintenance")
    expect(page.get_by_test_id("verify-state")).to_be_visible()
    page.get_by_test_id("start-verify").click()
    expect(page.get_by_test_id("job-verify")).to_have_attribute("data-state", "clean", timeout=60000)
    expect(page.get_by_test_id("verify-state")).to_contain_text("clean")
    # Reclaim frees the erased cartridge's data; the bar ends full.
    page.get_by_test_id("reclaim-rewrite-below").select_option("0.5")
    page.get_by_test_id("start-reclaim").click()
    expect(page.get_by_test_id("job-reclaim")).to_have_attribute("data-state", "done", timeout=60000)
    expect(page.get_by_test_id("reclaim-progress-text")).to_contain_text("(100 %)")
    assert page.get_by_test_id("reclaim-progress").evaluate("p => p.value") == 1
    status = api(page, "GET", "/reclaim")
    assert status["bytes_freed"] > 0, status
    expect(page.get_by_test_id("reclaim-facts")).to_contain_text("Freed")
    shot(page, "maintenance-after-reclaim")
    # The store still verifies clean after the reclaim.
    page.get_by_test_id("start-verify").click()
    expect(page.get_by_test_id("job-verify")).to_have_attribute("data-state", "clean", timeout=60000)
    page.set_viewport_size({"width": 390, "height": 844})
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the maintenance page scrolls sideways by {overflow}px at 390px"
    shot(page, "narrow-maintenance")
    page.set_viewport_size({"width": 1280, "height": 900})


def test_events_and_users(page):
    goto(page, "events")
    expect(page.get_by_test_id("event-row").first).to_be_visible()
    expect(page.get_by_test_id("events-table")).to_contain_text("admin")
    shot(page, "events")
    goto(page, "users")
    expect(page.get_by_test_id("user-row-admin")).to_be_visible()
    page.get_by_test_id("user-name").fill("op1")
    page.get_by_test_id("user-password").fill("op1-password-123")
    page.get_by_test_id("user-role").select_option("operator")
    page.get_by_test_id("create-user-submit").click()
    expect(page.get_by_test_id("user-row-op1")).to_contain_text("operator")
    page.get_by_test_id("token-name").fill("browser-test")
    page.get_by_test_id("create-token-submit").click()
    secret = page.get_by_test_id("new-token-value")
    expect(secret).to_be_visible()
    value = secret.input_value()
    assert len(value) >= 32
    shot(page, "new-token-shown-once", full_page=False)
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("new-token-dialog")).to_have_count(0)
    rows = page.locator('[data-testid^="token-row-"]')
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("browser-test")
    expect(page.get_by_test_id("tokens-table")).not_to_contain_text(value)
    page.locator('[data-testid^="revoke-token-"]').first.click()
    page.get_by_test_id("confirm-ok").click()
    expect(page.locator('[data-testid^="token-row-"]')).to_have_count(0)
    page.get_by_test_id("delete-user-op1").click()
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("user-row-op1")).to_have_count(0)
    shot(page, "users")


UNLABELLED_JS = """
() => [...document.querySelectorAll('input, select, textarea')]
  .filter((n) => n.type !== 'hidden' && n.offsetParent !== null)
  .filter((n) => n.labels.length === 0 && !n.getAttribute('aria-label') && !n.getAttribute('aria-labelledby'))
  .map((n) => n.outerHTML.slice(0, 120))
"""


def test_help_opens_the_user_guide(page):
    with page.context.expect_page() as opened:
        page.get_by_test_id("nav-help").click()
    guide = opened.value
    guide.wait_for_load_state()
    expect(guide.locator("h1")).to_contain_text("reel user guide")
    guide.get_by_role("link", name="bacula.md").click()
    expect(guide.locator("h1")).to_contain_text("Bacula")
    # The configuration the VM test runs, shown as code.
    expect(guide.locator("pre").first).to_contain_text("Autochanger")
    shot(guide, "help-bacula")
    guide.close()


def test_every_input_has_a_label(page):
    for route in ["library", "cartridges", "monitor", "sessions", "events", "maintenance", "users"]:
        goto(page, route)
        page.wait_for_timeout(300)
        assert page.evaluate(UNLABELLED_JS) == [], route
    goto(page, "library")
    page.get_by_test_id("open-move-dialog").click()
    expect(page.get_by_test_id("move-dialog")).to_be_visible()
    assert page.evaluate(UNLABELLED_JS) == []
    page.keyboard.press("Escape")
    goto(page, "cartridges")
    page.get_by_test_id("open-create-cartridges").click()
    expect(page.get_by_test_id("create-cartridges-dialog")).to_be_visible()
    assert page.evaluate(UNLABELLED_JS) == []
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("create-cartridges-dialog")).to_have_count(0)


def test_narrow_viewport(page):
    page.set_viewport_size({"width": 390, "height": 844})
    goto_narrow = page.get_by_test_id("menu-toggle")
    expect(goto_narrow).to_be_visible()
    expect(page.get_by_test_id("nav-library")).to_be_hidden()
    goto_narrow.click()
    expect(page.get_by_test_id("nav-library")).to_be_visible()
    page.get_by_test_id("nav-library").click()
    expect(page.locator("#view")).to_have_attribute("data-page", "library")
    expect(page.get_by_test_id("drive-0")).to_be_visible()
    expect(page.get_by_test_id("nav-library")).to_be_hidden()  # the menu closes after navigating
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the page scrolls sideways by {overflow}px at 390px"
    shot(page, "narrow-library", full_page=False)
    shot(page, "narrow-library-full")
    # The menu is keyboard reachable: Tab from the top reaches the toggle, Enter opens it.
    page.get_by_test_id("menu-toggle").focus()
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.testid") == "nav-library"
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.locator("#view")).to_have_attribute("data-page", "cartridges")
    shot(page, "narrow-cartridges", full_page=False)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_unauthorized_returns_to_login(page):
    goto(page, "library")
    state["allow_http_errors"] = True
    # The bad token and the click on Refresh in one task of the page: between two steps the
    # library's own refresh (every 2 s) could meet the 401 first and take the button away.
    page.evaluate(
        """() => {
            sessionStorage.setItem('reel.token', 'no-longer-valid');
            document.querySelector('[data-testid="library-refresh"]').click();
        }"""
    )
    expect(page.get_by_test_id("login-form")).to_be_visible()
    expect(page.get_by_test_id("login-message")).to_contain_text("session has ended")
    state["allow_http_errors"] = False
    shot(page, "back-to-login")
    # And logging in again works; logging out returns to the login page.
    page.get_by_test_id("login-username").fill("admin")
    page.get_by_test_id("login-password").fill((DATA / "initial-admin-password").read_text().strip())
    page.get_by_test_id("login-submit").click()
    expect(page.get_by_test_id("drive-0")).to_be_visible()
    page.get_by_test_id("logout").click()
    expect(page.get_by_test_id("login-form")).to_be_visible()
    expect(page.get_by_test_id("login-message")).to_contain_text("logged out")


def test_no_console_errors(page):
    page.wait_for_timeout(500)
    assert state["errors"] == [], "\n".join(state["errors"])
