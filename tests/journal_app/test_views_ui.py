"""Issue 17 on the journal's pages: errors keep the page, the side panel and its URL state,
evidence ranges, history restores, time and cost, the sessions list's sort, totals and
fact-text search, the audit link, the log-scale chart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from journal_app.charts import FoldPoint, token_chart
from journal_app.formats import parse_path
from journal_app.formats.base import message
from journal_app.hashing import display
from journal_app.models import Entry, Membership
from journal_app.pricing import Price, call_cost, entry_cost, source_model
from journal_app.times import entry_time
from journal_app.views.timeline_page import provider_usage, span_text
from ledger_app.services import ledger_fold
from tests.factories import MembershipFactory, TenantFactory, UserFactory, journal_build
from tests.support.writers import ScriptedWriter

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def acme():
    return TenantFactory(slug="acme")


@pytest.fixture
def member(acme):
    return MembershipFactory(tenant=acme, user=UserFactory(username="alice")).user


@pytest.fixture
def journal(acme):
    return journal_build(tenant=acme, key="refunds", title="Fix refund rounding")


def _timeline(client, key: str) -> str:
    """The timeline page of session ``key`` of tenant acme (main/main), as text."""
    return client.get(
        reverse("journal:timeline", args=["acme", key, "main", "main"])
    ).content.decode()


def _entry_url(entry, query=""):
    return reverse("journal:entry", args=[display(entry.entry_hash)]) + query


# Errors keep the page -------------------------------------------------------------------------


@pytest.mark.parametrize("debug", [True, False])
def test_it_never_loads_the_debug_handler_that_replaces_the_page(client, member, settings, debug):
    settings.DEBUG = debug
    client.force_login(member)
    body = client.get("/").content.decode()
    assert "django-htmx.js" not in body  # its DEBUG handler swapped error replies over the page
    assert "django_htmx/htmx-2.min.js" in body and "js/app.js" in body
    assert 'id="toasts"' in body


# Side panel -------------------------------------------------------------------------------------


def test_an_entry_opens_in_the_side_panel_and_pushes_it_into_the_url(client, member, journal):
    client.force_login(member)
    entry = Entry.objects.get(journal=journal, seq=2)
    host = "http://testserver/ledger/acme/refunds/main/main/?category=decision&panel=/old/"
    url = _entry_url(entry, "?quote=refund+rounding")
    response = client.get(
        url, **HTMX, HTTP_HX_TARGET="side-panel", HTTP_HX_CURRENT_URL=host, HTTP_HX_TRIGGER="x"
    )
    body = response.content.decode()
    assert body.lstrip().startswith('<aside id="side-panel"')  # the region, not the page
    assert "<html" not in body and '<mark id="quote-p" class="cited">refund rounding</mark>' in body
    pushed = urlsplit(response["HX-Push-Url"])
    assert pushed.path == "/ledger/acme/refunds/main/main/"
    assert parse_qs(pushed.query) == {"category": ["decision"], "panel": [url]}
    assert f'href="{url}"' in body  # the full page stays one click away
    # loaded by the page itself (?panel= already in the URL): nothing pushed
    again = client.get(
        url,
        **HTMX,
        HTTP_HX_TARGET="side-panel",
        HTTP_HX_CURRENT_URL=host,
        HTTP_HX_TRIGGER="side-panel",
    )
    assert "HX-Push-Url" not in again


def test_a_page_with_panel_in_its_url_loads_the_panel(client, member, journal):
    client.force_login(member)
    entry = Entry.objects.get(journal=journal, seq=2)
    panel = _entry_url(entry)
    body = client.get(reverse("journal:session_list"), {"panel": panel}).content.decode()
    assert f'hx-get="{panel}" hx-trigger="load"' in body
    evil = client.get(reverse("journal:session_list"), {"panel": "//evil.example/x"})
    assert "evil.example" not in evil.content.decode().split('id="side-panel"')[1][:200]


def test_closing_the_panel_pushes_the_page_without_it(client, member):
    client.force_login(member)
    url = reverse("journal:panel_close") + "?next=/t/acme/refunds/%3Fpage%3D2%26panel%3D/e/x/"
    response = client.get(url, **HTMX)
    assert (
        response.content.decode()
        == '<aside id="side-panel" class="side-panel" aria-label="Side panel"></aside>'
    )
    assert response["HX-Push-Url"] == "/t/acme/refunds/?page=2"
    plain = client.get(url)
    assert plain.status_code == 302 and plain["Location"] == "/t/acme/refunds/?page=2"
    away = client.get(reverse("journal:panel_close") + "?next=https://evil.example/")
    assert away["Location"] == "/"


def test_a_history_restore_gets_the_whole_page_not_the_fragment(client, member, journal):
    client.force_login(member)
    url = reverse("journal:timeline", args=["acme", "refunds", "main", "main"])
    fragment = client.get(url, **HTMX).content.decode()
    assert "<html" not in fragment and 'id="entry-list"' in fragment
    restored = client.get(url, **HTMX, HTTP_HX_HISTORY_RESTORE_REQUEST="true").content.decode()
    assert "<html" in restored and 'id="entry-list"' in restored


# Evidence ----------------------------------------------------------------------------------------


@pytest.fixture
def long_entry(acme):
    j = journal_build(tenant=acme, key="long", items=[message("user", "word " * 5000)])
    entry = Entry.objects.get(journal=j, seq=1)
    assert entry.chunks.count() >= 3
    return entry


def test_it_highlights_a_range_of_chunks(client, member, long_entry):
    client.force_login(member)
    body = client.get(_entry_url(long_entry, "?chunks=1-2")).content.decode()
    assert '<mark id="chunk-1" class="cited"' in body and '<mark id="chunk-2" class="cited"' in body
    assert '<span id="chunk-0"' in body
    assert "Cited: chunks 1, 2 of the body" in body


def test_it_highlights_a_byte_range_exactly(client, member, long_entry):
    client.force_login(member)
    raw = long_entry.body.encode()
    start = raw.index(b"word")
    body = client.get(_entry_url(long_entry, f"?bytes={start}-{start + 9}")).content.decode()
    assert '<mark id="bytes" class="cited">word word</mark>' in body  # [start, end)


def test_a_support_items_range_highlights_exactly_its_quote(client, member, journal):
    """Fresh-eyes finding: the mark ran one byte past the quote (the range was
    drawn end-inclusive; support ranges are end-exclusive)."""
    from ledger_app.outcomes import support_item
    from ledger_app.selectors.links import support_links

    client.force_login(member)
    entry = Entry.objects.filter(journal=journal, kind="message").order_by("seq").first()
    quote = entry.text.split()[0] + " " + entry.text.split()[1]
    item = support_item(entry_hash=entry.entry_hash, content=entry.content, quote=quote)
    assert item["range"][1] - item["range"][0] == len(quote.encode())
    item.pop("quote", None)  # the range alone: the page must mark exactly those bytes
    (link,) = support_links({"support": [item]}, {entry.entry_hash: entry})
    body = client.get(link.url).content.decode()
    assert f'<mark id="bytes" class="cited">{quote}</mark>' in body


def test_it_marks_the_whole_entry_when_the_item_names_nothing_finer(client, member, journal):
    client.force_login(member)
    entry = Entry.objects.get(journal=journal, seq=2)
    body = client.get(_entry_url(entry, "?cited=entry")).content.decode()
    assert "the whole entry is cited" in body
    assert '<mark class="cited cited-whole">' in body
    plain = client.get(_entry_url(entry)).content.decode()
    assert "cited-whole" not in plain


# Timeline: jump, time, provider figures, cost ---------------------------------------------------


def test_jump_to_seq_redirects_to_its_page_and_row(client, member, acme):
    j = journal_build(tenant=acme, key="many", items=[message("user", f"m{i}") for i in range(250)])
    client.force_login(member)
    url = reverse("journal:timeline", args=["acme", "many", "main", "main"])
    response = client.get(url, {"seq": "201"})
    assert response.status_code == 302 and response["Location"] == url + "?page=3#seq-201"
    assert client.get(url, {"seq": "99999"})["Location"] == url + f"?page=3#seq-{j.head_seq}"
    htmx = client.get(url, {"seq": "5"}, **HTMX)
    assert htmx.status_code == 204 and htmx["HX-Redirect"] == url + "?page=1#seq-5"


def test_the_timeline_shows_source_times_gaps_durations_and_provider_figures(
    client, member, acme, settings
):
    settings.LEDGER_MODEL_PRICES = {"m-1": [2, 8]}
    items = [
        message("user", "Start."),
        message("assistant", "Working."),
    ]
    items[0].metadata["timestamp"] = "2025-01-01T10:00:00Z"
    items[1].metadata["timestamp"] = "2025-01-01T10:07:30Z"
    items[1].metadata["model"] = "m-1"
    items[1].usage = {"input_tokens": 1000, "output_tokens": 500}
    journal_build(tenant=acme, key="timed", items=items)
    client.force_login(member)
    body = _timeline(client, "timed")
    assert '<time class="entry-time" datetime="2025-01-01T10:07:30+00:00"' in body
    assert "+7 min" in body and "⏸ 7 min gap" in body
    assert "provider: in 1,000 · out 500" in body
    assert "$0.0060 computed" in body  # (1000 * 2 + 500 * 8) / 1e6
    assert "ours, tiktoken" in body
    overview = client.get(reverse("journal:session", args=["acme", "timed"])).content.decode()
    assert "<dt>Cost (computed)</dt>" in overview and ">$0.0060</span>" in overview


def test_anthropic_cache_writes_are_shown_beside_the_input(client, member, acme, settings):
    settings.LEDGER_MODEL_PRICES = {"m-1": [2, 8]}
    items = [message("user", "Start."), message("assistant", "Working.")]
    items[1].metadata["model"] = "m-1"
    items[1].usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 2000,
        "output_tokens": 5,
    }
    journal_build(tenant=acme, key="cached", items=items)
    client.force_login(member)
    body = _timeline(client, "cached")
    assert "in 10 · out 5 · cached 2,000 · cache write 1,000" in body
    # (10 + 1000) input at 2, 2000 cached at the input price (no cached price), 5 out at 8
    assert "$0.0061 computed" in body


def test_time_helpers():
    assert entry_time({"timestamp": "2025-09-25T01:22:20.083Z"}) == datetime(
        2025, 9, 25, 1, 22, 20, 83000, tzinfo=UTC
    )
    assert entry_time({"ts": 1_700_000_000_000}) == datetime.fromtimestamp(1_700_000_000, UTC)
    assert entry_time({"timestamp": "not a time"}) is None and entry_time({}) is None
    assert [span_text(timedelta(seconds=s)) for s in (0.25, 42, 300, 7500, 90000)] == [
        "250 ms",
        "42 s",
        "5 min",
        "2 h 05 min",
        "1 d 1 h",
    ]
    assert provider_usage({"usage": {"prompt_tokens": 7, "completion_tokens": 3}}) == {
        "input_tokens": 7,
        "output_tokens": 3,
    }
    assert source_model({"message": {"model": "claude-x"}}) == "claude-x"
    openhands_call = {"tool_call_metadata": {"model_response": {"model": "llama-4"}}}
    assert source_model(openhands_call) == "llama-4"
    assert source_model({"model": "", "extra": {"response": {"model": "gemini"}}}) == "gemini"
    price = Price(Decimal("1.25"), Decimal("10"))
    assert call_cost(price, {"input_tokens": 2_000_000, "output_tokens": 100_000}) == Decimal("3.5")


# Sessions list, overview --------------------------------------------------------------------------


def _blocker_fold(journal, text):
    entry = Entry.objects.get(journal=journal, seq=1)
    op = {
        "op": "add",
        "fact": {
            "id": "b1",
            "category": "blocker",
            "priority": "P1",
            "confidence": "reported",
            "text": text,
            "support": [{"entry": entry.entry_hash}],
            "author": "writer",
        },
    }
    assert ledger_fold(journal=journal, writer=ScriptedWriter([op], "w"), recover=False).fold


def test_the_sessions_list_sorts_totals_and_searches_fact_text(client, member, acme):
    small = journal_build(tenant=acme, key="small", items=[message("user", "one")])
    big = journal_build(tenant=acme, key="big", items=[message("user", f"m{i}") for i in range(5)])
    _blocker_fold(big, "The database migration is blocked on credentials.")
    client.force_login(member)
    body = client.get("/", {"sort": "entries"}).content.decode()
    assert body.index('href="/t/acme/big/"') < body.index('href="/t/acme/small/"')
    keyed = client.get("/", {"sort": "key"}).content.decode()
    assert keyed.index('href="/t/acme/big/"') < keyed.index('href="/t/acme/small/"')
    assert "Totals over 2 sessions" in body
    assert f'data-label="Entries">{small.head_seq + big.head_seq}</td>' in body
    assert "1 active blocker" in body
    found = client.get("/", {"q": "migration is blocked"}).content.decode()
    assert 'href="/t/acme/big/"' in found and 'href="/t/acme/small/"' not in found


def test_the_audit_link_is_shown_only_to_admins(client, acme, journal):
    operator = MembershipFactory(tenant=acme, user=UserFactory(username="op")).user
    admin = MembershipFactory(
        tenant=acme, user=UserFactory(username="boss"), role=Membership.Role.ADMIN
    ).user
    url = reverse("journal:session", args=["acme", "refunds"])
    audit = reverse("journal:audit_log", args=["acme"])
    client.force_login(operator)
    assert audit not in client.get(url).content.decode()
    client.force_login(admin)
    assert audit in client.get(url).content.decode()
    assert client.get(audit).status_code == 200  # the link it shows is not refused


def test_the_overview_chart_is_logarithmic_by_default(client, member, journal):
    client.force_login(member)
    url = reverse("journal:session", args=["acme", "refunds"])
    assert "(log scale)" in client.get(url).content.decode()
    assert "(linear scale)" in client.get(url, {"scale": "linear"}).content.decode()


def test_a_log_chart_keeps_a_small_ledger_off_the_floor():
    buckets = [(100, 10_000_000)]
    folds = [FoldPoint(1, 100, 2_000)]
    linear = token_chart(buckets, folds, head_seq=100)
    log = token_chart(buckets, folds, head_seq=100, scale="log")
    floor = log.plot_bottom
    assert floor - linear.markers[0].y < 1  # linear: 2k next to 10M sits on the axis
    assert floor - log.markers[0].y > (log.plot_bottom - log.plot_top) / 3  # log: well above it
    assert log.scale == "log" and [t for _, t in log.y_ticks][:3] == ["0", "1", "10"]


def test_audit_filters_and_receipt_filters_swap_their_region_only(client, acme, journal):
    admin = MembershipFactory(
        tenant=acme, user=UserFactory(username="boss"), role=Membership.Role.ADMIN
    ).user
    client.force_login(admin)
    audit = client.get(reverse("journal:audit_log", args=["acme"]), {"action": "x"}, **HTMX)
    assert audit.content.decode().lstrip().startswith('<section id="audit-events"')
    receipts = reverse("recovery:receipts", args=["acme", "refunds", "main", "main"])
    fragment = client.get(receipts, {"outcome": "failed"}, **HTMX).content.decode()
    assert fragment.lstrip().startswith('<section id="receipt-list"')
    assert "<html" in client.get(receipts).content.decode()


def test_a_quote_holding_double_quotes_or_a_tab_is_found_in_the_body(client, member, acme):
    """Fresh eyes, round 2: a support quote with ``"`` or a tab is stored
    JSON-escaped in the body; the page said the quote did not occur."""
    from journal_app.formats.base import tool_call
    from ledger_app.outcomes import support_item
    from ledger_app.selectors.links import support_links

    command = 'git commit -m "feat: faster\tsheet"'
    journal = journal_build(
        tenant=acme, key="quotes", items=[tool_call("c1", "exec", {"command": command})]
    )
    entry = Entry.objects.get(journal=journal, seq=1)
    item = support_item(entry_hash=entry.entry_hash, content=entry.content, quote=command)
    assert item["quote"] == command and "range" in item
    (link,) = support_links({"support": [item]}, {entry.entry_hash: entry})
    client.force_login(member)
    body = client.get(link.url).content.decode()
    assert "does not occur in this entry" not in body
    assert (
        '<mark id="quote" class="cited">git commit -m \\&quot;feat: faster\\tsheet\\&quot;</mark>'
        in body
    )


# Call and result link each other -----------------------------------------------------------


@pytest.mark.parametrize("debug", [True, False])
def test_a_failed_result_links_to_its_call_and_says_its_exit_code(
    client, member, acme, settings, debug
):
    """A failed result with no output shows its exit code, not "no readable text", and
    links to the call that ran it (and the call back to it); a call with no result says so."""
    from journal_app.formats.base import tool_call, tool_result

    settings.DEBUG = debug
    j = journal_build(
        tenant=acme,
        key="fails",
        items=[
            message("user", "run the tests"),
            tool_call("c1", "bash", {"command": "pytest -x"}),
            tool_result("c1", "", is_error=True, exit_code=1),
            tool_call("c2", "bash", {"command": "make slow"}),
        ],
    )
    call, result, lost = (Entry.objects.get(journal=j, seq=s) for s in (2, 3, 4))
    client.force_login(member)
    page = client.get(_entry_url(result)).content.decode()
    assert "No output; exit code 1 (an error)." in page
    assert "No readable text" not in page
    assert f'href="{_entry_url(call)}" class="paired">seq 2</a>' in page
    page = client.get(_entry_url(call)).content.decode()
    assert f'its result: <a href="{_entry_url(result)}" class="paired">seq 3</a>' in page
    assert "no result in the journal" in client.get(_entry_url(lost)).content.decode()


@pytest.mark.parametrize(
    "path, model",
    [
        (
            "mini-swe-agent-traj/minisweagent-gemini3-requests-1142-oversized-output.traj.json",
            "google/gemini-3-pro-preview",
        ),
    ],
)
def test_every_call_with_usage_names_its_model_in_the_corpus_formats(path, model):
    """mini-swe-agent names the model in ``extra.response``: a call with provider usage is
    priced, not "unpriced: the source names no model"."""
    parsed = parse_path(Path(__file__).parents[1] / "fixtures" / "corpus" / path)
    # the stored meta: the source's fields plus the usage (journal_app.chain)
    calls = [{**e.metadata, "usage": e.usage} for e in parsed.entries if e.usage is not None]
    assert calls
    assert {source_model(meta) for meta in calls} == {model}
    price = {model: Price(Decimal("1"), Decimal("2"))}
    assert all(entry_cost(price, meta) is not None for meta in calls)


def test_a_test_runners_colours_are_not_shown_as_codes(client, member, acme):
    """Terminal escape sequences are left out of what a page shows (the timeline's preview
    and the entry's text); the stored body and its hash keep them."""
    from journal_app.formats.base import tool_call, tool_result

    output = "\x1b[31m⎯⎯\x1b[39m\x1b[1m\x1b[41m Failed Tests 1 \x1b[49m\x1b[22m"
    j = journal_build(
        tenant=acme,
        key="colours",
        items=[tool_call("c1", "bash", {"command": "npx vitest"}), tool_result("c1", output)],
    )
    result = Entry.objects.get(journal=j, seq=2)
    assert "\\u001b[31m" in result.body  # stored as it came
    client.force_login(member)
    page = client.get(_entry_url(result)).content.decode()
    text = page[page.index('id="text-h"') : page.index('id="body-h"')]
    assert "Failed Tests 1" in text and "[31m" not in text and "\x1b" not in text
    shown = _timeline(client, "colours")
    assert "Failed Tests 1" in shown and "[31m" not in shown
    # a preview cut through an escape would leave half of it: the escapes go first
    from journal_app.views.timeline_page import PREVIEW_CHARS

    long_output = "x" * (PREVIEW_CHARS - 2) + "\x1b[31mred"
    j2 = journal_build(
        tenant=acme,
        key="colours-cut",
        items=[tool_call("c1", "bash", {"command": "make"}), tool_result("c1", long_output)],
    )
    assert j2.head_seq == 2
    cut = _timeline(client, "colours-cut")
    assert "\x1b" not in cut and "[3" not in cut


@pytest.mark.parametrize("debug", [True, False])
def test_a_mistyped_session_address_suggests_the_close_ones_you_can_read(
    client, member, acme, settings, debug
):
    settings.DEBUG = debug
    journal_build(tenant=acme, key="refund-rounding", items=[message("user", "hi")])
    journal_build(tenant=TenantFactory(slug="globex"), key="refund-roundings")  # not readable
    client.force_login(member)
    response = client.get(reverse("journal:session", args=["acme", "refund-roundin"]))
    assert response.status_code == 404
    body = response.content.decode()
    assert "did you mean &#x27;refund-rounding&#x27;?" in body
    assert "refund-roundings" not in body  # another tenant's session is never named
