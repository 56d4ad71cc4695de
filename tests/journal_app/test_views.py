"""Operator UI pages of the journal: sessions, timeline, entry, artifact (docs/design.md section 8)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.core.files.storage import default_storage
from django.db import connection
from django.urls import reverse

from journal_app.formats.base import ParsedEntry, message, tool_call, tool_result
from journal_app.hashing import display
from journal_app.models import Artifact, Entry
from tests.factories import MembershipFactory, TenantFactory, UserFactory, fold_build, journal_build

pytestmark = pytest.mark.django_db


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
def outsider():
    return MembershipFactory(
        tenant=TenantFactory(slug="globex"), user=UserFactory(username="mallory")
    ).user


@pytest.fixture
def journal(acme):
    return journal_build(tenant=acme, key="refunds", title="Fix refund rounding")


def _timeline_url(journal):
    return reverse(
        "journal:timeline",
        args=[journal.session.tenant.slug, journal.session.key, journal.lane, journal.branch],
    )


def _entry_url(entry, **query):
    url = reverse("journal:entry", args=[display(entry.entry_hash)])
    if query:
        url += "?" + urlencode(query)
    return url


def _raw_update(sql, params):
    """Change a stored row behind the model layer (and, on PostgreSQL, the trigger)."""
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = replica")
        cur.execute(sql, params)
        if connection.vendor == "postgresql":
            cur.execute("SET session_replication_role = DEFAULT")


def _artifact_journal(settings, acme, size=45_000):
    settings.ARTIFACT_THRESHOLD_TOKENS = 50
    output = "".join(f"line {i:05d} of the build log\n" for i in range(size // 28 + 1))
    return journal_build(
        tenant=acme,
        key="build",
        items=[
            message("user", "Run the build."),
            tool_call("b1", "exec", {"command": "make"}),
            tool_result("b1", output),
        ],
    )


# Login and tenant isolation ---------------------------------------------------------------


def test_it_redirects_anonymous_users_to_login(client, journal):
    entry = Entry.objects.get(journal=journal, seq=1)
    for url in ["/", _timeline_url(journal), _entry_url(entry)]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_it_serves_the_login_page(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b'<label for="id_username">' in response.content


def test_it_answers_404_for_another_tenants_objects(client, settings, acme, outsider, journal):
    art_journal = _artifact_journal(settings, acme)
    artifact = Artifact.objects.get()
    entry = Entry.objects.get(journal=journal, seq=2)
    client.force_login(outsider)
    urls = [
        reverse("journal:session", args=["acme", "refunds"]),
        _timeline_url(journal),
        _timeline_url(art_journal),
        _entry_url(entry),
        reverse("journal:entry", args=[entry.entry_hash]),
        reverse("journal:artifact", args=["acme", artifact.content_hash]),
        reverse("journal:artifact", args=["globex", artifact.content_hash]),
    ]
    for url in urls:
        assert client.get(url).status_code == 404, url


def test_it_hides_other_tenants_sessions_from_the_list(client, acme, member, outsider, journal):
    journal_build(tenant=TenantFactory(slug="globex"), key="secret-session")
    client.force_login(member)
    body = client.get("/").content.decode()
    assert "refunds" in body
    assert "secret-session" not in body


def test_it_shows_every_tenant_to_a_superuser(client, journal):
    journal_build(tenant=TenantFactory(slug="globex"), key="secret-session")
    client.force_login(UserFactory(username="root", is_superuser=True))
    body = client.get("/").content.decode()
    assert "refunds" in body and "secret-session" in body


# Sessions list ----------------------------------------------------------------------------


def test_it_lists_sessions_with_counts(client, member, journal):
    fold_build(journal)
    client.force_login(member)
    response = client.get("/")
    body = response.content.decode()
    assert response.status_code == 200
    assert "Fix refund rounding" in body
    assert '<td class="num" data-label="Entries">11</td>' in body
    assert '<td class="num" data-label="Head seq">11</td>' in body
    assert '<td class="num" data-label="Folds">1</td>' in body  # one fold
    assert 'href="/t/acme/refunds/"' in body
    assert '<th scope="col" class="col-tenant">Tenant</th>' in body
    assert "Permalink" in body


def test_it_explains_how_to_import_when_empty(client, member):
    client.force_login(member)
    body = client.get("/").content.decode()
    assert "No sessions yet" in body
    assert "manage.py import_journal PATH" in body


def test_it_searches_key_and_title(client, acme, member, journal):
    journal_build(
        tenant=acme, key="deploy", title="Ship the release", items=[message("user", "go")]
    )
    client.force_login(member)
    body = client.get("/", {"q": "refund"}).content.decode()
    assert "/t/acme/refunds/" in body and "/t/acme/deploy/" not in body
    body = client.get("/", {"q": "RELEASE"}).content.decode()
    assert "/t/acme/deploy/" in body and "/t/acme/refunds/" not in body


def test_it_returns_only_the_session_table_to_htmx(client, member, journal):
    client.force_login(member)
    response = client.get("/", {"q": "refund"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="session-table"')
    assert "<html" not in body


def test_it_paginates_thirty_sessions(client, acme, member, django_assert_max_num_queries):
    for i in range(30):
        journal_build(tenant=acme, key=f"s{i:02d}", items=[message("user", f"task {i}")])
    client.force_login(member)
    # +3 over the table itself: source times of the heads, totals over every match
    with django_assert_max_num_queries(12):
        first = client.get("/").content.decode()
    assert first.count('<th scope="row" data-label="Key"><a href="/t/acme/') == 25
    assert "Page 1 of 2" in first
    assert 'href="?page=2"' in first
    second = client.get("/", {"page": 2}).content.decode()
    assert second.count('<th scope="row" data-label="Key"><a href="/t/acme/') == 5


def _row_of(body, key):
    start = body.index(f'<a href="/t/acme/{key}/">')
    return body[start : body.index("</tr>", start)]


def test_it_counts_open_obligations_and_pending_reviews(client, acme, member, journal):
    """The interrupted call ``t2``, once a later message closes it off, is folded as an open
    obligation; retiring the P0 pin with later user evidence queues a review."""
    from journal_app.services import journal_append
    from ledger_app.services import ledger_fold
    from tests.support.writers import ScriptedWriter

    journal_append(journal=journal, items=[message("user", "Leave the tests for now.")])
    fold_build(journal)  # seq 1-12: t2 "did not complete" is an open obligation
    journal_append(journal=journal, items=[message("user", "Stop; the payments rule is lifted.")])
    pin = next(f for f in journal.folds.get().state_dict["facts"].values() if f.get("pin"))
    lifted = Entry.objects.get(journal=journal, seq=13).entry_hash
    ledger_fold(
        journal=journal,
        writer=ScriptedWriter([{"op": "retire", "id": pin["id"], "evidence": [lifted]}]),
    )
    client.force_login(member)
    row = _row_of(client.get("/").content.decode(), "refunds")
    assert row.count('">13</td>') == 2  # entries and head seq
    assert '<td class="num" data-label="Folds">2</td>' in row  # two folds
    assert 'data-label="Open obligations"><strong>1</strong></td>' in row  # t2 did not complete
    assert ">1</a>" in row and "/ledger/reviews/?tenant=acme" in row  # one pending review


def test_it_filters_sessions_by_tenant_lane_and_activity(client, acme, member, journal):
    other = TenantFactory(slug="other")
    MembershipFactory(tenant=other, user=member)
    journal_build(tenant=other, key="elsewhere", lane="worker-2", items=[message("user", "x")])
    client.force_login(member)
    body = client.get("/", {"tenant": "other"}).content.decode()
    assert "/t/other/elsewhere/" in body and "/t/acme/refunds/" not in body
    body = client.get("/", {"lane": "worker-2"}).content.decode()
    assert "/t/other/elsewhere/" in body and "/t/acme/refunds/" not in body
    body = client.get("/", {"activity": "day"}).content.decode()
    assert "/t/other/elsewhere/" in body and "/t/acme/refunds/" in body
    body = client.get("/", {"activity": "idle"}).content.decode()
    assert "No session matches these filters" in body
    body = client.get("/", {"tenant": "globex"}).content.decode()  # not a member: nothing
    assert "No session matches these filters" in body
    assert '<option value="globex" selected>globex (not a tenant of yours)</option>' in body
    assert '<option value="other">other</option>' in client.get("/").content.decode()


def test_last_activity_sorts_and_filters_on_the_time_it_shows(client, acme, member, journal):
    """Fresh-eyes finding: the column showed the source's time while the sort
    and the activity filter used the import time. A session imported now whose source says
    2025 is idle, sorts last, and shows 2025."""
    old = journal_build(
        tenant=acme,
        key="from-2025",
        items=[message("user", "old work", metadata={"timestamp": "2025-09-25T02:10:00Z"})],
    )
    assert old.last_source_at is not None and old.last_source_at.year == 2025
    client.force_login(member)
    body = client.get("/", {"activity": "idle"}).content.decode()
    assert "/t/acme/from-2025/" in body and "/t/acme/refunds/" not in body
    body = client.get("/", {"activity": "day"}).content.decode()
    assert "/t/acme/from-2025/" not in body and "/t/acme/refunds/" in body
    body = client.get("/", {"sort": "activity"}).content.decode()
    assert body.index("/t/acme/refunds/") < body.index("/t/acme/from-2025/")
    assert "2025-09-25 02:10" in body


# Session overview -------------------------------------------------------------------------


def test_it_shows_the_session_overview_with_lanes_and_a_token_chart(client, acme, member, journal):
    fold_build(journal)
    journal_build(tenant=acme, key="refunds", lane="alpha", items=[message("user", "side job")])
    client.force_login(member)
    response = client.get(reverse("journal:session", args=["acme", "refunds"]))
    body = response.content.decode()
    assert response.status_code == 200
    assert "main/main" in body and "alpha/main" in body
    assert "/t/acme/refunds/alpha/main/" in body
    assert '<svg viewBox="0 0 760 260" role="group"' in body
    assert 'class="series-journal"' in body and 'class="fold-point fold-accepted"' in body
    assert reverse("ledger:fold", args=["acme", "refunds", "main", "main", 1]) in body
    assert "Tokens over the journal of main/main" in body
    # an operator may not export (stored bytes: admins only), so no button (fresh eyes)
    assert reverse("ledger:export", args=["acme", "refunds"]) not in body
    assert "Label this session" in body
    alpha = client.get(
        reverse("journal:session", args=["acme", "refunds"]), {"journal": "alpha/main"}
    ).content.decode()
    assert "Tokens over the journal of alpha/main" in alpha
    assert "No fold yet" in alpha
    missing = client.get(reverse("journal:session", args=["acme", "refunds"]), {"journal": "x/y"})
    assert missing.status_code == 404


def test_the_overview_chart_sums_tokens_in_the_database(member, journal):
    from journal_app.selectors import token_buckets

    buckets = token_buckets(journal, buckets=4)
    assert [last for last, _ in buckets] == [3, 6, 9, 11]
    assert sum(t for _, t in buckets) == sum(journal.entries.values_list("token_count", flat=True))


def test_it_records_an_annotation(client, member, journal):
    from audit_app.models import Annotation

    client.force_login(member)
    url = reverse("journal:annotate", args=["acme", "refunds"])
    response = client.post(url, {"verdict": "good", "note": "kept every pin"})
    assert response.status_code == 302
    assert response["Location"] == "/t/acme/refunds/#annotations"
    body = client.get(response["Location"]).content.decode()
    assert "good compaction example" in body and "kept every pin" in body
    assert "Annotation recorded." in body
    assert Annotation.objects.get().author == member
    client.post(url, {"verdict": "so-so"})
    assert Annotation.objects.count() == 1
    assert client.get(url).status_code == 405


# Timeline ---------------------------------------------------------------------------------


def test_it_shows_the_timeline_grouped_by_round(client, member, journal):
    client.force_login(member)
    response = client.get(_timeline_url(journal))
    body = response.content.decode()
    assert response.status_code == 200
    entry = Entry.objects.get(journal=journal, seq=4)
    assert entry.short_hash in body
    assert _entry_url(entry) in body
    assert 'id="seq-4"' in body
    assert '<h2 id="round-3">' in body and "API round" in body  # the parallel round, by seq
    assert "parallel · 2 calls" in body  # r1 and r2 in one response
    assert "interrupted: no result" in body  # t2 never answered
    assert "read_file" in body
    assert "o200k_base" in body  # token source label
    assert "Never modify the payments tables" in body
    assert reverse("ledger:facts", args=["acme", "refunds", "main", "main"]) in body
    assert reverse("ledger:folds", args=["acme", "refunds", "main", "main"]) in body


def test_it_labels_derived_entries(client, acme, member):
    summary = ParsedEntry(
        kind="event", role="runtime", content={"type": "summary", "text": "so far"}, derived=True
    )
    j = journal_build(tenant=acme, key="sum", items=[message("user", "hi"), summary])
    client.force_login(member)
    body = client.get(_timeline_url(j)).content.decode()
    assert "derived (summary/marker: never support)" in body


def test_it_escapes_and_clips_entry_previews(client, acme, member):
    text = "<script>alert(1)</script>" + "x" * 400
    j = journal_build(tenant=acme, key="xss", items=[message("user", text)])
    client.force_login(member)
    body = client.get(_timeline_url(j)).content.decode()
    assert "<script>alert(1)" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" + "x" * 275 + "…" in body


def test_it_shows_artifact_receipts_in_the_timeline(client, settings, acme, member):
    j = _artifact_journal(settings, acme)
    artifact = Artifact.objects.get()
    client.force_login(member)
    body = client.get(_timeline_url(j)).content.decode()
    assert '<details class="receipt">' in body
    assert artifact.reference in body
    assert reverse("journal:artifact", args=["acme", artifact.content_hash]) in body
    assert "text/plain" in body


def test_it_paginates_the_timeline_with_bounded_queries(
    client, acme, member, django_assert_max_num_queries
):
    items = []
    for i in range(75):
        items += [
            tool_call(f"c{i}", "exec", {"command": f"echo {i}"}),
            tool_result(f"c{i}", str(i)),
        ]
    j = journal_build(tenant=acme, key="long", items=[message("user", "go"), *items])
    url = _timeline_url(j)
    client.force_login(member)
    with django_assert_max_num_queries(9):
        first = client.get(url).content.decode()
    assert "Entries 1–100 of 151" in first
    assert 'id="seq-100"' in first and 'id="seq-101"' not in first
    # c49's call is seq 100 and its result seq 101, on the next page: not interrupted.
    assert "interrupted: no result" not in first
    assert "continues on another page" in first
    second = client.get(url, {"page": 2}).content.decode()
    assert 'id="seq-151"' in second


# Entry page -------------------------------------------------------------------------------


def test_it_shows_an_entry_with_a_verified_badge(client, member, journal):
    entry = Entry.objects.get(journal=journal, seq=3)
    parent = Entry.objects.get(journal=journal, seq=2)
    client.force_login(member)
    response = client.get(_entry_url(entry))
    body = response.content.decode()
    assert response.status_code == 200
    assert "Entry 3" in body
    assert "hash verified" in body
    assert "entry, body, chunks recomputed and matched" in body
    assert "sha256:" + entry.entry_hash in body
    assert "sha256:" + entry.body_hash in body
    assert 'href="' + _entry_url(parent) + '"' in body  # parent hash links to the parent
    assert "Reading the two files first." in body
    assert '<th scope="col" class="num">Position</th>' in body
    assert '<h2 id="meta-h">Metadata</h2>' in body
    nxt = Entry.objects.get(journal=journal, seq=4)
    assert _entry_url(nxt) in body


def test_it_accepts_bare_hex_hashes(client, member, journal):
    entry = Entry.objects.get(journal=journal, seq=1)
    client.force_login(member)
    response = client.get(reverse("journal:entry", args=[entry.entry_hash]))
    assert response.status_code == 200
    assert entry.short_hash in response.content.decode()
    assert client.get(reverse("journal:entry", args=["sha256:nothex"])).status_code == 404


def test_it_shows_a_red_badge_naming_body_hash_when_the_body_was_tampered(client, member, journal):
    entry = Entry.objects.get(journal=journal, seq=2)
    tampered = entry.body.replace("refund rounding", "refund ROUNDING")
    _raw_update("UPDATE journal_app_entry SET body = %s WHERE id = %s", [tampered, entry.pk])
    client.force_login(member)
    body = client.get(_entry_url(entry)).content.decode()
    assert "hash check failed" in body
    assert "verify-bad" in body
    assert "body_hash: stored" in body
    assert "hash verified" not in body


def test_it_highlights_a_quote(client, member, journal):
    entry = Entry.objects.get(journal=journal, seq=2)
    client.force_login(member)
    body = client.get(_entry_url(entry, quote="refund rounding")).content.decode()
    assert '<mark id="quote" class="cited">refund rounding</mark>' in body
    missing = client.get(_entry_url(entry, quote="not in here")).content.decode()
    assert "does not occur in this entry" in missing
    assert '<mark id="quote"' not in missing


def test_it_highlights_a_chunk(client, settings, acme, member):
    settings.JOURNAL_CHUNK_BYTES = 32
    j = journal_build(tenant=acme, key="chunky", items=[message("user", "abcdefghij" * 10)])
    entry = Entry.objects.get(journal=j, seq=1)
    assert entry.chunks.count() > 2
    client.force_login(member)
    body = client.get(_entry_url(entry, chunk=1)).content.decode()
    assert '<mark id="chunk-1"' in body
    assert '<span id="chunk-0"' in body and '<span id="chunk-2"' in body
    assert "hash verified" in body


# Artifact page ----------------------------------------------------------------------------


def test_it_shows_an_artifact_paginated_with_a_verified_badge(client, settings, acme, member):
    _artifact_journal(settings, acme)
    artifact = Artifact.objects.get()
    url = reverse("journal:artifact", args=["acme", artifact.content_hash])
    client.force_login(member)
    body = client.get(url).content.decode()
    assert "hash verified" in body
    assert artifact.reference in body
    assert "Page 1 of 3" in body
    assert "line 00000 of the build log" in body
    assert "line 01000 of the build log" not in body
    second = client.get(url, {"page": 2}).content.decode()
    assert "line 01000 of the build log" in second
    assert "characters 20,001–40,000" in second


def test_it_shows_a_red_badge_when_artifact_bytes_changed(client, settings, acme, member):
    _artifact_journal(settings, acme)
    artifact = Artifact.objects.get()
    with default_storage.open(artifact.storage_name, "wb") as fh:
        fh.write(b"something else entirely")
    client.force_login(member)
    body = client.get(
        reverse("journal:artifact", args=["acme", artifact.content_hash])
    ).content.decode()
    assert "hash check failed" in body
    assert "hash verified" not in body


# Timeline: filter expression and parallel calls -------------------------------------------


def test_it_lays_parallel_calls_side_by_side_with_their_results(client, member, journal):
    client.force_login(member)
    body = client.get(_timeline_url(journal)).content.decode()
    start = body.index('<div class="parallel-calls">')
    grid = body[start : body.index("</section>", start)]
    assert grid.count('<article class="call-column') == 2
    r1 = grid.index('aria-label="Call r1"')
    r2 = grid.index('aria-label="Call r2"')
    # each column holds its call (seq 4 / 5) and then its result (seq 6 / 7)
    assert r1 < grid.index('id="seq-4"') < grid.index('id="seq-6"') < r2
    assert r2 < grid.index('id="seq-5"') < grid.index('id="seq-7"')
    assert "billing/refunds.py" in grid and "def test_refund" in grid


def test_it_flags_an_interrupted_call(client, member, journal):
    client.force_login(member)
    body = client.get(_timeline_url(journal)).content.decode()
    row = body[body.index('id="seq-11"') :]
    assert "interrupted: no result" in row[: row.index("</tr>")]
    assert "interrupted · run stopped mid-turn" in body


def test_it_filters_entries_with_an_expression(client, member, journal):
    client.force_login(member)
    body = client.get(_timeline_url(journal), {"q": "kind:tool_result error:true"}).content.decode()
    assert "1 entry match <code>kind:tool_result error:true</code>" in body
    assert 'id="seq-9"' in body and 'id="seq-6"' not in body
    body = client.get(
        _timeline_url(journal), {"q": 'text:"refund rounding" role:user'}
    ).content.decode()
    assert 'id="seq-2"' in body and 'id="seq-10"' not in body
    body = client.get(_timeline_url(journal), {"q": "-kind:message seq:4..7"}).content.decode()
    assert all(f'id="seq-{n}"' in body for n in (4, 5, 6, 7))
    assert 'id="seq-3"' not in body and 'id="seq-8"' not in body
    body = client.get(_timeline_url(journal), {"q": "tool:read_file"}).content.decode()
    assert "2 entries match" in body


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL plan")
def test_the_kind_and_error_filter_is_answered_by_one_index(journal):
    # migration journal_app 0011: the count of ``kind:tool_result error:true`` reads the
    # (journal, kind, is_error, seq) index, not every entry of the kind from the heap
    from journal_app.filters import parse_entries
    from journal_app.selectors import entry_filter

    matched = Entry.objects.filter(journal=journal).filter(
        entry_filter(parse_entries("kind:tool_result error:true"))
    )
    sql, params = matched.order_by().values("pk").query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute("ANALYZE journal_app_entry")
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("SET LOCAL enable_bitmapscan = off")
        cur.execute(f"EXPLAIN SELECT COUNT(*) FROM ({sql}) AS m", params)
        plan = "\n".join(row[0] for row in cur.fetchall())
    assert "using entry_journal_kind_error" in plan and "Filter" not in plan, plan
    assert matched.count() == 1


def test_it_shows_a_bad_entry_expression_with_its_position(client, member, journal):
    client.force_login(member)
    response = client.get(_timeline_url(journal), {"q": "kind:tool_call colour:red"})
    body = response.content.decode()
    assert response.status_code == 200
    assert "Bad filter expression</strong> at position 16, token <code>colour:red</code>" in body
    assert "unknown field &#x27;colour&#x27;" in body
    assert "<code>kind:tool_call <mark>colour:red</mark></code>" in body
    assert 'id="seq-4"' not in body  # nothing filtered with half an expression


def test_it_returns_only_the_entry_list_to_htmx(client, member, journal):
    client.force_login(member)
    response = client.get(_timeline_url(journal), {"q": "role:user"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="entry-list"')
    assert "<html" not in body and 'id="entry-filter"' not in body
    assert 'id="seq-10"' in body


def test_it_says_what_to_do_when_the_journal_is_empty(client, acme, member):
    from journal_app.services import journal_ensure, session_ensure

    j = journal_ensure(session=session_ensure(tenant=acme, key="empty"))
    client.force_login(member)
    body = client.get(_timeline_url(j)).content.decode()
    assert "This journal has no entries yet" in body
    assert "import_journal PATH --tenant acme --session empty --lane main --branch main" in body


# Comments on entries ----------------------------------------------------------------------


def test_it_adds_a_comment_to_an_entry(client, member, journal):
    from audit_app.models import AuditEvent, Comment

    entry = Entry.objects.get(journal=journal, seq=9)
    client.force_login(member)
    url = reverse("journal:entry_comment", args=[display(entry.entry_hash)])
    response = client.post(url, {"text": "this failure is the real blocker"})
    assert response.status_code == 302
    assert response["Location"] == _entry_url(entry) + "#comments"
    body = client.get(_entry_url(entry)).content.decode()
    assert "this failure is the real blocker" in body and "<strong>alice</strong>" in body
    assert Comment.objects.get().entry == entry
    assert AuditEvent.objects.get().action == "comment.add"
    timeline = client.get(_timeline_url(journal)).content.decode()
    assert "1 comment</a>" in timeline


def test_htmx_gets_the_comment_region_back_with_errors_in_it(client, member, journal):
    entry = Entry.objects.get(journal=journal, seq=2)
    client.force_login(member)
    url = reverse("journal:entry_comment", args=[display(entry.entry_hash)])
    response = client.post(url, {"text": "  "}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="comments"')
    assert "a comment needs text" in body
    response = client.post(url, {"text": "ok"}, HTTP_HX_REQUEST="true")
    assert "<strong>alice</strong>" in response.content.decode()
    assert client.get(url).status_code == 405


def test_comment_forms_are_csrf_protected(member, journal):
    from django.test import Client

    entry = Entry.objects.get(journal=journal, seq=2)
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    url = reverse("journal:entry_comment", args=[display(entry.entry_hash)])
    assert client.post(url, {"text": "no token"}).status_code == 403
    page = client.get(_entry_url(entry)).content.decode()
    token = page.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    assert client.post(url, {"text": "with token", "csrfmiddlewaretoken": token}).status_code == 302


# Audit log --------------------------------------------------------------------------------


def test_only_tenant_admins_read_the_audit_log(client, acme, member, outsider, journal):
    from audit_app.services import annotation_add
    from journal_app.models import Membership

    annotation_add(session=journal.session, author=member, verdict="good")
    url = reverse("journal:audit_log", args=["acme"])
    client.force_login(member)  # an operator
    assert client.get(url).status_code == 403
    client.force_login(outsider)
    assert client.get(url).status_code == 404
    boss = MembershipFactory(
        tenant=acme, user=UserFactory(username="boss"), role=Membership.Role.ADMIN
    ).user
    client.force_login(boss)
    body = client.get(url).content.decode()
    assert "<code>annotation.add</code>" in body and "alice" in body
    assert "verdict=good" in body


def test_a_page_groups_rounds_from_a_window_not_the_whole_journal(acme, monkeypatch):
    from journal_app.selectors import entries

    items = [message("user", "go")]
    for i in range(60):
        items += [tool_call(f"c{i}", "exec", {"i": i}), tool_result(f"c{i}", str(i))]
    j = journal_build(tenant=acme, key="window", items=items)
    monkeypatch.setattr(entries, "ROUND_WINDOW", 10)
    rounds = entries.page_rounds(j, 101, 110)
    assert [r.seqs for r in rounds] == [
        [100, 101],
        [102, 103],
        [104, 105],
        [106, 107],
        [108, 109],
        [110, 111],
    ]
    assert all(r.status == "complete" for r in rounds)  # 111, past the page, is in the window
    assert not rounds[-1].at_tail
    tail = entries.page_rounds(j, 119, 121)
    assert tail[-1].at_tail and tail[-1].seqs == [120, 121]
    assert min(s for r in tail for s in r.seqs) >= 118


def test_the_export_button_is_shown_to_the_admins_the_export_serves(client, acme, journal):
    from django.contrib.auth.models import Permission

    from journal_app.models import Membership

    url = reverse("journal:session", args=["acme", "refunds"])
    export = reverse("ledger:export", args=["acme", "refunds"])
    admin = MembershipFactory(tenant=acme, role=Membership.Role.ADMIN).user
    admin.user_permissions.add(Permission.objects.get(codename="export_session"))
    reviewer = MembershipFactory(tenant=acme, role=Membership.Role.REVIEWER).user
    client.force_login(reviewer)
    assert export not in client.get(url).content.decode()
    assert client.get(export).status_code == 403  # what the hidden button would have given
    client.force_login(admin)
    assert export in client.get(url).content.decode()
    assert client.get(export).status_code == 200


def test_an_entry_whose_stored_body_is_not_json_is_shown_raw_with_a_warning(
    client, member, journal
):
    entry = Entry.objects.get(journal=journal, seq=2)
    _raw_update(
        "UPDATE journal_app_entry SET body = %s WHERE id = %s", ["not json {refund", entry.pk]
    )
    client.force_login(member)
    r = client.get(_entry_url(entry))
    assert r.status_code == 200
    page = r.content.decode()
    assert 'id="body-not-json"' in page
    assert "not json {refund" in page


def test_a_secret_in_the_session_title_is_filtered_on_every_page_that_shows_it(
    client, member, acme
):
    secret = "Tr0ub4dor&3Horse"
    journal = journal_build(tenant=acme, key="leaky", title=f"Deploy; my password is {secret}")
    client.force_login(member)
    pages = [
        reverse("journal:session_list"),
        _timeline_url(journal),
    ]
    for url in pages:
        page = client.get(url).content.decode()
        assert secret not in page and "&amp;3Horse" not in page, url
        assert "[filtered: " in page, url
    assert journal.session.title.endswith(secret)  # stored verbatim
