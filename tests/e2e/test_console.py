"""`ratebound console` in a real browser (Debian's Chromium, through
Playwright): what the screen says where a number is typed, the warning,
errors at their fields, operations' counter cost, save (and `ratebound
check` on the file written), export, and live refusals of a demo Envoy
under load. The screenshots docs/console.md shows are taken here: into
target/console-screenshots/ on every run, into docs/console/ only with
RATEBOUND_REFRESH_DOCS=1 (scripts/refresh-console-screenshots.sh)."""
import json
import re
import subprocess
import threading
import time

import pytest

from console_app import CHROMIUM, CLI, SHOTS, Console
from harness import ROOT, burst, ensure_room

# Not skipped when missing: envoy-demo/setup.sh installs it.
from playwright.sync_api import expect, sync_playwright

API = {"instance": "shop", "routes": [
    {"name": "api", "match": {"path_prefix": "/api"}, "bounds": [
        {"name": "per_address", "per": "address", "limit": 100, "window": "PT1M"},
    ]},
]}

# Figures for docs/console.md, printed at the end of the session.
FIGURES: dict[str, float] = {}


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM)
        yield b
        b.close()
    if FIGURES:
        print("\nconsole figures:", json.dumps(FIGURES, indent=1))


@pytest.fixture
def console(tmp_path):
    started: list[Console] = []

    def make(config, *args: str, name: str = "ratebound.json") -> Console:
        f = tmp_path / name
        f.write_text(config if isinstance(config, str) else json.dumps(config, indent=2))
        c = Console(f, *args)
        started.append(c)
        return c

    yield make
    for c in started:
        c.stop()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    yield pg
    context.close()
    # The page runs under its Content-Security-Policy without a complaint.
    assert problems == [], problems


def open_console(page, c: Console):
    t0 = time.perf_counter()
    page.goto(c.url)
    expect(page.locator("#status")).to_have_text(re.compile(r"^valid: "), timeout=15000)
    return time.perf_counter() - t0


def field(page, path: str):
    return page.locator(f'[data-path="{path}"]')


def reading(page, path: str):
    return page.locator(f'[data-reading="{path}"]')


def line(page, path: str):
    """A bound's reading in one line, under its number."""
    return page.locator(f'[data-line="{path}"]')


def check(path) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), "check", str(path)], capture_output=True, text=True, timeout=30)


def test_typing_a_limit_changes_the_per_node_reading(console, page):
    c = console(API, "--nodes", "4")
    FIGURES["page_load_s"] = round(open_console(page, c), 3)
    row = line(page, "$.routes[0].bounds[0]")
    expect(row).to_have_text("on 4 nodes: up to 4 × 100 = 400 a minute per client address")
    limit = field(page, "$.routes[0].bounds[0].limit")
    limit.fill("25")
    expect(row).to_contain_text("4 × 25 = 100 a minute per client address")
    # One keystroke at a time: every one updates the reading. Timed twice:
    # in the page (input event to DOM updated) and as seen from here.
    limit.press("End")
    seen = []
    n = page.evaluate("window.__ratebound.times.length")
    for digit, want in (("0", "4 × 250 = 1,000"), ("0", "4 × 2,500 = 10,000")):
        t0 = time.perf_counter()
        limit.press(digit)
        expect(row).to_contain_text(want)
        seen.append(time.perf_counter() - t0)
    for k in range(10):
        limit.press("Backspace")
        limit.press("0")
        t0 = time.perf_counter()
        expect(row).to_contain_text("4 × 2,500 = 10,000")
        seen.append(time.perf_counter() - t0)
    in_page = sorted(page.evaluate("window.__ratebound.times")[n:])
    assert len(in_page) == 22, in_page
    seen.sort()
    FIGURES["keystroke_to_reading_ms_in_page_median"] = round(in_page[len(in_page) // 2], 2)
    FIGURES["keystroke_to_reading_ms_in_page_max"] = round(in_page[-1], 2)
    FIGURES["keystroke_to_reading_ms_seen_by_playwright_median"] = round(1000 * seen[len(seen) // 2], 1)
    # The number of nodes is typed on the page too.
    nodes = page.locator("#nodes")
    nodes.fill("3")
    expect(row).to_have_text("on 3 nodes: up to 3 × 2,500 = 7,500 a minute per client address")
    nodes.fill("4")
    expect(row).to_contain_text("on 4 nodes: up to 4 × 2,500 = 10,000 a minute")
    page.screenshot(path=str(SHOTS / "per-node.png"), full_page=True)


def test_scopes_read_in_one_line_with_the_full_reading_a_click_away(console, page):
    cfg = {"rate_limit_service": {"cluster": "rls", "domain": "shop"}, "routes": [
        {"name": "login", "account": {"json": "username"}, "bounds": [
            {"name": "addr", "per": "address", "limit": 50, "window": "PT1M"},
            {"name": "attempts", "per": "account", "limit": 5, "window": "PT1M",
             "scope": "installation"}]}]}
    c = console(cfg, "--nodes", "4")
    open_console(page, c)
    addr = line(page, "$.routes[0].bounds[0]")
    expect(addr).to_have_text("on 4 nodes: up to 4 × 50 = 200 a minute per client address")
    expect(line(page, "$.routes[0].bounds[1]")).to_have_text(
        "whole installation: one sliding count of 5 a minute per account tried")
    scope = field(page, "$.routes[0].bounds[0].scope")
    scope.select_option("installation")
    expect(addr).to_have_text("whole installation: one sliding count of 50 a minute per client address")
    # A fleet bound: one budget for all nodes, and the most it may go over,
    # in one line; the paragraph that says why is one click away.
    scope.select_option("fleet")
    expect(addr).to_have_text("on 4 nodes: one budget of 50 a minute per client address; up to ~57 in a burst")
    assert len(addr.inner_text()) <= 100
    cell = reading(page, "$.routes[0].bounds[0]")
    detail = cell.locator("[data-detail]")
    expect(detail).to_be_hidden()
    # Reached from the field before it with Tab, named, opened with Enter.
    summary = cell.locator("summary")
    expect(summary).to_have_attribute("aria-label", "full reading of bound login/addr")
    scope.focus()
    page.keyboard.press("Tab")
    expect(summary).to_be_focused()
    page.keyboard.press("Enter")
    expect(detail).to_be_visible()
    expect(detail).to_contain_text("50 a minute per client address\nfleet: one budget of 50 a minute per client address for all nodes together")
    expect(detail).to_contain_text("on 4 nodes admitting 0.2 a second each: about 1 over, a share of at most 12")
    page.screenshot(path=str(SHOTS / "scopes.png"), full_page=True)
    # It stays open while the number is typed, and says the new one.
    field(page, "$.routes[0].bounds[0].limit").fill("500")
    expect(addr).to_have_text("on 4 nodes: one budget of 500 a minute per client address; up to ~540 in a burst")
    expect(detail).to_be_visible()
    expect(detail).to_contain_text("fleet: one budget of 500 a minute per client address")


def test_narrowing_every_bound_shows_the_warning(console, page):
    cfg = {"identity": {"header": {"user": "x-user"}}, "routes": [{"name": "api", "bounds": [
        {"name": "per_user", "per": "user", "limit": 100, "window": "PT1M"},
        {"name": "per_address", "per": "address", "limit": 300, "window": "PT1M"}]}]}
    c = console(cfg)
    open_console(page, c)
    warning = page.locator('[data-route-warnings="$.routes[0]"] [data-code="narrowed-only"]')
    field(page, "$.routes[0].bounds[0].applies_to").fill("authenticated")
    # One bound still covers everybody: no warning yet.
    expect(line(page, "$.routes[0].bounds[0]")).to_have_text(
        "per node: 100 a minute per user, for any signed-in caller; N nodes admit N × 100")
    expect(warning).to_have_count(0)
    field(page, "$.routes[0].bounds[1].applies_to").fill("anonymous")
    expect(warning).to_have_count(1)
    expect(warning).to_contain_text("applies to everybody")
    page.screenshot(path=str(SHOTS / "warning.png"), full_page=True)
    # Widening one again takes it away.
    field(page, "$.routes[0].bounds[1].applies_to").fill("")
    expect(warning).to_have_count(0)


def test_a_bad_window_is_an_error_at_its_field_in_checks_words(console, page, tmp_path):
    c = console(API)
    open_console(page, c)
    window = field(page, "$.routes[0].bounds[0].window")
    window.fill("1m")
    at = page.locator('[data-error-for="$.routes[0].bounds[0].window"]')
    expect(at).to_contain_text('"1m" is not an ISO-8601 duration')
    expect(window).to_have_class("window invalid")
    expect(page.locator("#status")).to_contain_text("invalid: 1 error")
    # The same words as `ratebound check` on the same configuration.
    bad = json.loads(json.dumps(API))
    bad["routes"][0]["bounds"][0]["window"] = "1m"
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(bad))
    r = check(f)
    assert r.returncode == 1
    said = [l for l in r.stdout.splitlines() if l.startswith("error: ")]
    assert said == ["error: " + at.inner_text().strip()], (said, at.inner_text())
    page.screenshot(path=str(SHOTS / "error.png"), full_page=True)
    # Nothing invalid is saved.
    before = c.file.read_text()
    page.locator("#save").click()
    expect(page.locator("#status")).to_contain_text("not saved")
    assert c.file.read_text() == before
    # A limit that is not a number: check's words too.
    window.fill("PT1M")
    field(page, "$.routes[0].bounds[0].limit").fill("lots")
    expect(page.locator('[data-error-for="$.routes[0].bounds[0].limit"]')).to_contain_text(
        'limit must be a whole number from 1 to 4,294,967,295, not the text "lots"')


def test_choosing_two_operations_shows_their_counter_cost(console, page):
    cfg = {"routes": [{"name": "shop", "match": {"path_prefix": "/api"}, "bounds": [
        {"name": "per_address", "per": "address", "limit": 300, "window": "PT1M"}]}]}
    c = console(cfg, "--openapi", "shop=filter-config/openapi/shop.json")
    open_console(page, c)
    cost = page.locator('[data-cost="0"]')
    expect(cost).to_contain_text("no operation chosen")
    page.get_by_test_id("choose POST /api/orders/{orderId}/pay (payOrder)").click()
    expect(cost).to_contain_text("1 operation chosen: 1 bound keyed per caller × 1,252 keys = 1,252 of the")
    page.get_by_test_id("choose GET /api/orders/{orderId} (getOrder)").click()
    expect(cost).to_contain_text("2 operations chosen: 2 bounds keyed per caller × 1,252 keys = 2,504 of the")
    # Chosen one by one: a chosen operation cannot be chosen again.
    expect(page.get_by_test_id("choose POST /api/orders/{orderId}/pay (payOrder)")).to_be_disabled()
    # Its bound is edited like any other; a per-operation bound costs a key.
    field(page, "$.routes[0].operations[1].bounds[0].per").select_option("route")
    expect(cost).to_contain_text(
        "2 operations chosen: 1 bound keyed per caller × 1,252 keys + 1 bound per operation × 1 key = 1,253 of the")
    page.screenshot(path=str(SHOTS / "operations.png"), full_page=True)


def test_save_writes_the_file_and_check_passes_on_it(console, page):
    c = console(API)
    open_console(page, c)
    field(page, "$.routes[0].bounds[0].limit").fill("250")
    field(page, "$.routes[0].bounds[0].window").fill("PT30S")
    page.locator("#save").click()
    dialog = page.locator("#dialog")
    expect(dialog).to_be_visible()
    expect(page.get_by_test_id("resets")).to_contain_text("resets the counters of route api")
    expect(page.get_by_test_id("diff")).to_contain_text('+       "limit": 250,')
    expect(page.get_by_test_id("diff")).to_contain_text('-       "limit": 100,')
    page.get_by_test_id("dialog-ok").click()
    expect(page.locator("#status")).to_contain_text("saved")
    saved = json.loads(c.file.read_text())
    assert saved["routes"][0]["bounds"][0]["limit"] == 250
    assert saved["routes"][0]["bounds"][0]["window"] == "PT30S"
    assert list(saved) == ["instance", "routes"], "keys stay in their order"
    r = check(c.file)
    assert r.returncode == 0, r.stdout + r.stderr
    # A second save of the same: nothing changes, nothing is reset.
    page.locator("#save").click()
    expect(page.locator("#dialog-title")).to_have_text("Nothing to save")
    page.get_by_test_id("dialog-ok").click()


def test_from_an_empty_file_to_a_saved_one_check_passes(page, tmp_path):
    f = tmp_path / "rate-limits.yaml"
    c = Console(f)
    try:
        open_console(page, c)
        expect(page.get_by_test_id("note")).to_contain_text("does not exist yet: this is an empty configuration")
        expect(page.locator("#status")).to_have_text(re.compile(r"^valid: 0 routes"))
        page.screenshot(path=str(SHOTS / "empty.png"))
        page.get_by_test_id("add-route").click()
        name = field(page, "$.routes[0].name")
        expect(name).to_be_focused()
        name.fill("api")
        expect(line(page, "$.routes[0].bounds[0]")).to_contain_text("100 a minute per client address")
        field(page, "$.routes[0].bounds[0].limit").fill("60")
        expect(line(page, "$.routes[0].bounds[0]")).to_contain_text("60 a minute per client address")
        assert not f.exists()
        page.locator("#save").click()
        expect(page.get_by_test_id("diff")).to_contain_text("+ routes:")
        page.get_by_test_id("dialog-ok").click()
        expect(page.locator("#status")).to_contain_text("saved")
        expect(page.get_by_test_id("note")).to_be_hidden()
        written = f.read_text()
        assert "limit: 60" in written and "name: api" in written, written
        r = check(f)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        c.stop()


def test_everything_a_configuration_needs_is_on_the_page(page, tmp_path):
    """From nothing to a file `check` passes without leaving the page: a
    bound per user says at its field that it needs an identity, JWT chosen
    takes the error away, a header identity brings check's note on the
    headers to strip; routes added, matched and removed; an installation
    bound brings the rate-limit service's fields, with the error at the
    bound until they are filled. Every word from the core."""
    f = tmp_path / "rate-limits.yaml"
    c = Console(f)
    status = page.locator("#status")
    try:
        open_console(page, c)
        expect(page.get_by_test_id("service")).to_be_hidden()
        page.get_by_test_id("add-route").click()
        field(page, "$.routes[0].name").fill("api")
        b0, b1 = "$.routes[0].bounds[0]", "$.routes[0].bounds[1]"
        field(page, f"{b0}.per").select_option("user")
        per_error = page.locator(f'[data-error-for="{b0}.per"]')
        expect(per_error).to_contain_text('needs a caller identity, and "identity" configures no source')
        expect(status).to_contain_text("invalid")
        # JWT chosen (its defaults: the claim "sub" is the user): valid.
        page.get_by_test_id("identity-jwt").check()
        expect(per_error).to_have_text("")
        expect(status).to_have_text(re.compile(r"^valid: "))
        expect(field(page, "$.identity.jwt.user_claim")).to_have_attribute("placeholder", "sub")
        claim = field(page, "$.identity.jwt.roles_claim")
        claim.fill("realm..roles")
        expect(page.locator('[data-error-for="$.identity.jwt.roles_claim"]')).to_contain_text(
            "must be a claim name, dotted for nested claims")
        claim.fill("roles")
        expect(status).to_have_text(re.compile(r"^valid: "))
        # The seed's two tiers, typed in.
        field(page, f"{b0}.limit").fill("1000")
        field(page, f"{b0}.applies_to").fill("partner")
        page.get_by_test_id("add-bound-$.routes[0]").click()
        field(page, f"{b1}.per").select_option("user")
        field(page, f"{b1}.limit").fill("60")
        field(page, f"{b1}.applies_to").fill("for trial")
        expect(line(page, b0)).to_have_text(
            "per node: 1,000 a minute per user, for anyone holding partner; N nodes admit N × 1,000")
        expect(line(page, b1)).to_have_text(
            "per node: 60 a minute per user, for anyone holding trial; N nodes admit N × 60")
        # The route's match, field by field, in the core's words.
        field(page, "$.routes[0].match.path_prefix").fill("api")
        expect(page.locator('[data-error-for="$.routes[0].match.path_prefix"]')).not_to_be_empty()
        field(page, "$.routes[0].match.path_prefix").fill("/api")
        field(page, "$.routes[0].match.methods").fill("GET, post")
        expect(page.locator('[data-error-for="$.routes[0].match.methods"]')).not_to_be_empty()
        field(page, "$.routes[0].match.methods").fill("GET, POST")
        field(page, "$.routes[0].match.host").fill("shop.example")
        expect(status).to_have_text(re.compile(r"^valid: "))
        matches = page.locator('[data-matches="$.routes[0]"]')
        expect(matches).to_contain_text("/api")
        expect(matches).to_contain_text("shop.example")
        page.screenshot(path=str(SHOTS / "identity.png"), full_page=True)
        # A header identity: check's note on the headers Envoy must strip,
        # under the source; gone with the source.
        page.get_by_test_id("identity-header").check()
        field(page, "$.identity.header.user").fill("x-user")
        note = page.locator('[data-notes-for="$.identity.header"] [data-code="trusted-headers"]')
        expect(note).to_contain_text("the request header x-user says")
        expect(note).to_contain_text("must remove it from client requests")
        page.get_by_test_id("identity-header").uncheck()
        expect(note).to_have_count(0)
        # A second route, matched by Envoy's route name, with an
        # installation bound: the service's fields appear, the error stays
        # at the bound until they are filled.
        page.get_by_test_id("add-route").click()
        field(page, "$.routes[1].name").fill("login")
        field(page, "$.routes[1].match.route_name").fill("sign-in")
        field(page, "$.routes[1].bounds[0].scope").select_option("installation")
        expect(page.get_by_test_id("service")).to_be_visible()
        scope_error = page.locator('[data-error-for="$.routes[1].bounds[0].scope"]')
        expect(scope_error).to_contain_text("counted by the rate-limit service")
        field(page, "$.rate_limit_service.cluster").fill("ratelimit")
        expect(page.locator('[data-error-for="$.rate_limit_service.domain"]')).to_contain_text(
            "missing field `domain`")
        expect(status).to_contain_text("invalid")
        field(page, "$.rate_limit_service.domain").fill("shop")
        expect(scope_error).to_have_text("")
        expect(status).to_have_text(re.compile(r"^valid: 2 routes"))
        expect(page.locator('[data-notes-for="$.rate_limit_service"] [data-code="no-key-secret"]')).to_be_visible()
        field(page, "$.rate_limit_service.key_secret.env").fill("RATEBOUND_KEY_SECRET")
        expect(page.locator('[data-notes-for="$.rate_limit_service"] [data-code="no-key-secret"]')).to_have_count(0)
        field(page, "$.rate_limit_service.on_error").select_option("allow")
        # A route added, then removed.
        page.get_by_test_id("add-route").click()
        expect(page.locator("section.route")).to_have_count(3)
        page.get_by_test_id("remove-route-2").click()
        expect(page.locator("section.route")).to_have_count(2)
        expect(status).to_have_text(re.compile(r"^valid: 2 routes"))
        page.locator("#save").click()
        page.get_by_test_id("dialog-ok").click()
        expect(status).to_contain_text("saved")
        page.screenshot(path=str(SHOTS / "saved.png"), full_page=True)
        r = check(f)
        assert r.returncode == 0, r.stdout + r.stderr
        saved = subprocess.run([str(CLI), "explain", "--format", "json", str(f)], capture_output=True,
                               text=True, timeout=30)
        assert saved.returncode == 0, saved.stderr
        written = f.read_text()
        for want in ("roles_claim: roles", "path_prefix: /api", "host: shop.example", "route_name: sign-in",
                     "cluster: ratelimit", "domain: shop", "env: RATEBOUND_KEY_SECRET", "on_error: allow",
                     "scope: installation"):
            assert want in written, (want, written)
        assert "header" not in written and "route3" not in written, written
    finally:
        c.stop()


def test_the_seeds_two_tiers_typed_in_its_words(console, page):
    """The seed's pricing tiers as people write them: "a thousand a minute
    per user, for anyone holding partner" and "60 a minute per user for
    trial"; the core reads the words, says a typo's fix at its field and
    warns that nobody else is bounded."""
    c = console({"identity": {"header": {"user": "x-user", "roles": "x-roles"}},
                 "routes": [{"name": "api", "match": {"path_prefix": "/api"}, "bounds": []}]})
    open_console(page, c)
    add = page.get_by_test_id("add-bound-$.routes[0]")
    for j, (limit, who) in enumerate((("1000", "partner"), ("60", "for trial"))):
        add.click()
        b = f"$.routes[0].bounds[{j}]"
        field(page, f"{b}.per").select_option("user")
        field(page, f"{b}.limit").fill(limit)
        field(page, f"{b}.applies_to").fill(who)
    expect(line(page, "$.routes[0].bounds[0]")).to_have_text(
        "per node: 1,000 a minute per user, for anyone holding partner; N nodes admit N × 1,000")
    expect(line(page, "$.routes[0].bounds[1]")).to_have_text(
        "per node: 60 a minute per user, for anyone holding trial; N nodes admit N × 60")
    warning = page.locator('[data-route-warnings="$.routes[0]"] [data-code="narrowed-only"]')
    expect(warning).to_contain_text("everyone else is not bounded at all")
    page.screenshot(path=str(SHOTS / "tiers.png"), full_page=True)
    # A typo: the fix in the page's words, at the field; never serde's.
    trial = field(page, "$.routes[0].bounds[1].applies_to")
    trial.fill("partnr")
    error = page.locator('[data-error-for="$.routes[0].bounds[1].applies_to"]')
    expect(error).to_contain_text(
        'unknown word "partnr": write role:partner, org:NAME, signed in or anonymous')
    expect(error).not_to_contain_text("unknown field")
    expect(page.locator("#status")).to_contain_text("invalid")
    # Suggestions as it is typed, from the roles the configuration names.
    trial.fill("par")
    expect(page.locator('datalist[id="suggest-$.routes[0].bounds[1].applies_to"] option')).to_have_attribute(
        "value", "partner")
    trial.fill("partners and trial")
    expect(line(page, "$.routes[0].bounds[1]")).to_contain_text("for anyone holding partner or trial")
    trial.fill("trial")
    page.locator("#save").click()
    page.get_by_test_id("dialog-ok").click()
    expect(page.locator("#status")).to_contain_text("saved")
    bounds = json.loads(c.file.read_text())["routes"][0]["bounds"]
    assert [b["applies_to"] for b in bounds] == [{"roles": ["partner"]}, {"roles": ["trial"]}]
    assert check(c.file).returncode == 0
    # Read back, the field shows the words again.
    page.reload()
    expect(page.locator("#status")).to_have_text(re.compile(r"^valid: "))
    expect(field(page, "$.routes[0].bounds[1].applies_to")).to_have_value("trial")


def test_a_yaml_file_is_saved_as_yaml(console, page):
    text = ("instance: shop\nroutes:\n  - name: api\n    match: {path_prefix: /api}\n"
            "    bounds:\n      - {name: per_address, per: address, limit: 100, window: PT1M}\n")
    c = console(text, name="ratebound.yaml")
    open_console(page, c)
    field(page, "$.routes[0].bounds[0].limit").fill("70")
    page.locator("#save").click()
    page.get_by_test_id("dialog-ok").click()
    expect(page.locator("#status")).to_contain_text("saved")
    written = c.file.read_text()
    assert not written.lstrip().startswith("{"), written
    assert "limit: 70" in written, written
    r = check(c.file)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_commented_yaml_file_keeps_what_people_wrote(console, page):
    text = ("# Rate limits of the shop: the platform team's.\n"
            "instance: shop   # prefixes every counter\n"
            "routes:\n"
            "  # The public API.\n"
            "  - name: api\n"
            "    match: {path_prefix: /api}\n"
            "    bounds:\n"
            "      - name: per_address   # everyone, by address\n"
            "        per: address\n"
            "        limit: 100\n"
            "        window: 'PT1M'\n")
    c = console(text, name="ratebound.yaml")
    open_console(page, c)
    field(page, "$.routes[0].bounds[0].limit").fill("70")
    field(page, "$.routes[0].bounds[0].window").fill("PT30S")
    page.locator("#save").click()
    diff = page.get_by_test_id("diff")
    expect(diff).to_contain_text("+         limit: 70")
    expect(diff).to_contain_text("  # The public API.")
    page.get_by_test_id("dialog-ok").click()
    expect(page.locator("#status")).to_contain_text("saved")
    assert c.file.read_text() == text.replace("limit: 100", "limit: 70").replace("'PT1M'", "'PT30S'")
    assert check(c.file).returncode == 0


def test_export_is_a_wasmplugin_that_check_reads(console, page, tmp_path):
    c = console(API, "--url", "https://example.invalid/ratebound.wasm")
    open_console(page, c)
    page.locator("#export").click()
    manifest = page.get_by_test_id("manifest").inner_text()
    assert "kind: WasmPlugin" in manifest and "https://example.invalid/ratebound.wasm" in manifest
    f = tmp_path / "wasmplugin.yaml"
    f.write_text(manifest)
    r = check(f)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WasmPlugin istio-system/ratebound" in r.stdout


def test_live_shows_the_demo_envoys_refusals_per_second(console, page, envoy):
    cfg = {"instance": "live", "routes": [
        {"name": "hello", "match": {"path_prefix": "/hello"}, "bounds": [
            {"name": "per_address", "per": "address", "limit": 3, "window": "PT1M"}]}]}
    nodes = [envoy(cfg), envoy(cfg)]
    ensure_room(60, 30)
    c = console(cfg, "--nodes", "2",
                *[a for e in nodes for a in ("--admin", f"http://127.0.0.1:{e.admin_port}")])
    open_console(page, c)
    stop = threading.Event()

    def load():
        # Bounded: at most 30 rounds of 20 requests per node, ~15 s, to
        # 127.0.0.1 only; the first node gets twice the second's.
        for _ in range(30):
            if stop.is_set():
                return
            burst(nodes[0].port, 20, 4, path="/hello")
            burst(nodes[1].port, 10, 2, path="/hello")
            time.sleep(0.5)

    t = threading.Thread(target=load)
    t.start()
    try:
        row = page.locator('[data-live-row="hello/per_address"]')
        expect(row).to_be_visible(timeout=10000)
        cells = row.locator("[data-refused]")

        def refused() -> list[float]:
            return [float(cells.nth(k).get_attribute("data-refused") or 0) for k in range(cells.count())]

        deadline = time.time() + 20
        while time.time() < deadline and not (len(refused()) == 3 and min(refused()) > 0):
            time.sleep(0.5)
        first, second, summed = refused()
        assert min(first, second) > 0, row.inner_text()
        # Side by side and summed (one reading of both nodes).
        assert summed == pytest.approx(first + second, rel=1e-6), (first, second, summed)
        # The bound's row on the screen carries the sum.
        expect(page.locator('tr[data-live="hello/per_address"] .refusing')).to_be_visible()
        expect(row).to_contain_text("1/10000 tracked")
        expect(row).to_contain_text("2/20000 tracked")
        page.screenshot(path=str(SHOTS / "live.png"), full_page=True)
    finally:
        stop.set()
        t.join()


AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def axe_scan(pg) -> dict:
    """axe-core (scripts/install-axe.sh, pinned) run on the page as it
    stands, on WCAG 2 A and AA rules: {rules, violations}."""
    axe = subprocess.run([str(ROOT / "scripts" / "install-axe.sh")], capture_output=True,
                         text=True, timeout=300, check=True).stdout.strip()
    pg.add_script_tag(path=axe)
    result = pg.evaluate("""async (tags) => {
        const r = await axe.run(document, { runOnly: { type: "tag", values: tags } });
        const rules = new Set([...r.passes, ...r.violations, ...r.incomplete, ...r.inapplicable].map((x) => x.id));
        return { rules: rules.size, applied: r.passes.length + r.violations.length,
                 violations: r.violations.map((v) => ({ id: v.id, impact: v.impact,
                   nodes: v.nodes.map((n) => n.target.join(" ") + ": " + n.failureSummary) })) };
    }""", AXE_TAGS)
    return result


def test_the_page_passes_axe_and_works_from_the_keyboard(browser, console, tmp_path):
    # The identity (a header source, with its note) and the rate-limit
    # service sections are scanned with the routes.
    cfg = {"identity": {"header": {"user": "x-user", "roles": "x-roles"}},
           "rate_limit_service": {"cluster": "rls", "domain": "shop"}, "routes": [
        {"name": "api", "match": {"path_prefix": "/api"}, "bounds": [
            {"name": "partner", "per": "user", "limit": 1000, "window": "PT1M",
             "applies_to": {"roles": ["partner"]}},
            {"name": "trial", "per": "user", "limit": 60, "window": "PT1M",
             "applies_to": {"roles": ["trial"]}},
            {"name": "all", "per": "route", "limit": 5000, "window": "PT1M", "scope": "installation"}]}]}
    # Its own context: axe is injected past the page's Content-Security-Policy
    # (which allows only the page's scripts), for the scan only.
    context = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True)
    try:
        pg = context.new_page()
        scans = {}
        for name, c in (("configured", console(cfg, "--nodes", "4")),
                        ("empty", Console(tmp_path / "new.yaml"))):
            try:
                open_console(pg, c)
                # An error shown at its field is scanned too.
                if name == "configured":
                    expect(pg.get_by_test_id("service")).to_be_visible()
                    expect(pg.locator('[data-code="trusted-headers"]')).to_be_visible()
                    field(pg, "$.routes[0].bounds[1].applies_to").fill("partnr")
                    expect(pg.locator('[data-error-for="$.routes[0].bounds[1].applies_to"]')).to_contain_text("unknown word")
                scans[name] = axe_scan(pg)
            finally:
                if name == "empty":
                    c.stop()
        FIGURES["axe_rules_wcag2_a_aa"] = scans["configured"]["rules"]
        FIGURES["axe_rules_applied"] = scans["configured"]["applied"]
        FIGURES["axe_violations"] = sum(len(s["violations"]) for s in scans.values())
        for name, s in scans.items():
            assert s["violations"] == [], (name, json.dumps(s["violations"], indent=1))
        assert scans["configured"]["rules"] > 50, scans
    finally:
        context.close()


def test_keyboard_only_tab_order_and_enter_adds_a_bound(console, page):
    c = console(API)
    open_console(page, c)
    order = []
    for _ in range(30):
        page.keyboard.press("Tab")
        order.append(page.evaluate("""() => { const e = document.activeElement;
            return e.getAttribute("data-path") || e.getAttribute("data-testid") || e.id || e.tagName; }"""))
        if order[-1] == "add-bound-$.routes[0]":
            break
    b = "$.routes[0].bounds[0]"
    m = "$.routes[0].match"
    want = ["nodes", "save", "export", "$.routes[0].name", "remove-route-0", f"{m}.route_name",
            f"{m}.host", f"{m}.path_prefix", f"{m}.methods", f"{b}.name", f"{b}.per",
            f"{b}.applies_to", f"{b}.limit", f"{b}.window", f"{b}.scope"]
    assert order[:len(want)] == want, order
    assert order[-1] == "add-bound-$.routes[0]", order
    page.keyboard.press("Enter")
    expect(field(page, "$.routes[0].bounds[1].limit")).to_have_value("100")
    expect(line(page, "$.routes[0].bounds[1]")).to_contain_text("100 a minute per client address")
