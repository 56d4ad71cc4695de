"""A secret a user typed in prose becomes a verbatim P0 pin (docs/design.md 5.2): the ledger's
stored state and the context sent to the model keep it (the conversation already holds it),
and every display surface shows it filtered by the one detector (:mod:`journal_app.privacy`):
the facts, fact, fold, diff and context pages (the failure's explanation too), the ledger,
fact and retirement APIs, the MCP ``ledger`` tool, the review pages, the session title on
the session list, session page, timeline and audit log, and the writer's raw proposals (API
and verifier page). One row per surface, run with the one secret and with every credential
form of the detector's one table (tests/journal_app/test_privacy_forms.py), whose ordinary
identifiers stay as they are. A search for a secret finds nothing."""

from __future__ import annotations

import html
import json
from collections.abc import Callable

import pytest
from django.test import Client

from audit_app.reads import RawReadDenied, raw_export_allow
from journal_app.auth import api_key_create
from journal_app.formats.base import message
from journal_app.models import ApiKey, Membership
from ledger_app.models import Fold
from ledger_app.services.context import context_preview
from proxy_app.mcp_server import ledger_read
from tests.factories import TenantFactory, UserFactory, fold_build, journal_build
from tests.journal_app.test_privacy_forms import ORDINARY
from tests.journal_app.test_privacy_forms import SECRETS as FORMS

pytestmark = pytest.mark.django_db

SECRET = "Tr0ub4dor&3Horse"
PROSE = f"Deploy the billing service to staging. My password is {SECRET}, never print it."
SCOPE = "/ledger/acme/billing/main/main/"
API = "/api/v1/sessions/billing/main/main"


#: every credential form of the detector's one table (tests/journal_app/test_privacy_forms.py)
#: typed by a user into one rule that becomes a verbatim pin, with the ordinary identifiers
ALL_FORMS = "Deploy the billing service to staging; never print any of these:\n" + "\n".join(
    [text for text, _ in FORMS] + ORDINARY
)


def _world(settings, tmp_path, prose: str) -> dict:
    settings.MEDIA_ROOT = tmp_path / "media"
    tenant = TenantFactory(slug="acme")
    journal = journal_build(
        tenant=tenant,
        key="billing",
        title=prose.replace("\n", " "),
        items=[message("user", prose), message("assistant", "Deploying to staging now.")],
    )
    fold = fold_build(journal)
    operator = UserFactory(username="otto")
    Membership.objects.create(user=operator, tenant=tenant, role=Membership.Role.OPERATOR)
    ui = Client()
    ui.force_login(operator)
    _, key = api_key_create(tenant=tenant, name="client", role=ApiKey.Role.CLIENT)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    return {"journal": journal, "fold": fold, "ui": ui, "api": api, "operator": operator}


@pytest.fixture
def world(settings, tmp_path):
    return _world(settings, tmp_path, PROSE)


@pytest.fixture
def every_form(settings, tmp_path):
    """A session whose title and whose pin hold every form of the table (and each
    ordinary identifier)."""
    w = _world(settings, tmp_path, ALL_FORMS)
    pins = [f["text"] for f in w["fold"].state_dict["facts"].values() if f.get("pin")]
    assert any(all(s in p for _, s in FORMS) for p in pins), "one pin holds every form"
    return w


def _pin_id(world) -> str:
    state = world["fold"].state_dict
    pins = [f for f in state["facts"].values() if f.get("pin") and SECRET in f.get("text", "")]
    assert pins, "the user's message is a pin holding the secret verbatim"
    return pins[0]["id"]


def _get(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


def _audit_log(world) -> str:
    with pytest.raises(RawReadDenied):
        raw_export_allow(session=world["journal"].session, actor=world["operator"])
    admin = UserFactory(username="ada")
    Membership.objects.create(
        user=admin, tenant=world["journal"].session.tenant, role=Membership.Role.ADMIN
    )
    client = Client()
    client.force_login(admin)
    page = _get(client, "/audit/acme/")
    assert "session.export_raw.denied" in page
    return page


def _retirement(world):
    """A later user message retires the pin: a P0 retirement request for review."""
    from journal_app.models import Entry
    from journal_app.services import journal_append
    from ledger_app.models import RetirementRequest
    from ledger_app.services import ledger_fold
    from tests.support.writers import ScriptedWriter

    journal = world["journal"]
    journal_append(journal=journal, items=[message("user", "The staging rule no longer applies.")])
    evidence = Entry.objects.get(journal=journal, seq=3).entry_hash
    op = {"op": "retire", "id": _pin_id(world), "evidence": [evidence]}
    ledger_fold(journal=journal, writer=ScriptedWriter([op]))
    request = RetirementRequest.objects.get()
    assert SECRET in request.fact_text  # stored verbatim
    return request


SURFACES: dict[str, Callable[[dict], str]] = {
    "facts page": lambda w: _get(w["ui"], SCOPE),
    "fact page": lambda w: _get(w["ui"], f"{SCOPE}facts/{_pin_id(w)}/"),
    "fold page": lambda w: _get(w["ui"], f"{SCOPE}folds/{w['fold'].number}/"),
    "context page": lambda w: _get(w["ui"], f"{SCOPE}context/"),
    "context page, debug trace": lambda w: _get(w["ui"], f"{SCOPE}context/?view=debug"),
    "context page, failure explanation": lambda w: _failed_context(w),
    "fold diff page": lambda w: _get(w["ui"], f"{SCOPE}folds/0/diff/{w['fold'].number}/"),
    "ledger API": lambda w: _get(w["api"], f"{API}/ledger"),
    "fact API": lambda w: _get(w["api"], f"{API}/ledger/facts/{_pin_id(w)}"),
    "MCP ledger tool": lambda w: json.dumps(ledger_read(w["journal"])),
    "audit log": _audit_log,
    "review page": lambda w: _get(w["ui"], f"/ledger/reviews/{_retirement(w).pk}/"),
    "review queue": lambda w: (_retirement(w), _get(w["ui"], "/ledger/reviews/"))[1],
    "retirement API": lambda w: _get(w["api"], f"/api/v1/retirements/{_retirement(w).pk}"),
    "session list (title)": lambda w: _get(w["ui"], "/"),
    "session page (title)": lambda w: _get(w["ui"], "/t/acme/billing/"),
    "timeline (title)": lambda w: _get(w["ui"], "/t/acme/billing/main/main/"),
    "proposals API": lambda w: _raw_answers(w, w["api"], f"{API}/folds/{{}}/proposals"),
    "verifier page": lambda w: _raw_answers(w, w["ui"], f"{SCOPE}folds/{{}}/verifier/"),
    "fold API (delta)": lambda w: _get(w["api"], f"{API}/folds/{w['fold'].number}"),
    "sessions API (title)": lambda w: _get(w["api"], "/api/v1/sessions"),
    "session API (title)": lambda w: _get(w["api"], "/api/v1/sessions/billing"),
    "dashboard (title)": lambda w: _dashboard(w),
}


def _dashboard(world) -> str:
    """The dashboard's sessions table: the title cut at 60 characters, so the page shows its
    start (before any secret) and never the secret."""
    page = _get(world["ui"], "/ledger/dashboard/")
    start = world["journal"].session.shown_title[:20]
    assert html.escape(start) in page, start
    return page


#: surfaces whose cut leaves the filter mark out (the dashboard shows a title's first 60
#: characters, the debug trace only the pin's first line): the secret is checked, not the mark
NO_MARK = {"dashboard (title)", "context page, debug trace"}


def _failed_context(world) -> str:
    """The context page of a request too small for the pins: the failure's explanation
    lists the facts holding the space."""
    page = _get(world["ui"], f"{SCOPE}context/?working_budget=20&hard_limit=30")
    held = page[page.index('class="held-facts"') :]
    held = held[: held.index("</ol>")]
    assert _pin_id(world) in held
    return held


def _raw_answers(world, client: Client, url: str) -> str:
    """A model writer's and verifier's raw answers quoting the user's message (the mechanical
    writer's hold no text): stored on the fold's proposals, then the surface read."""
    from ledger_app.models import Proposal

    prose = world["journal"].entries.get(seq=1).content["text"]
    fold = world["fold"]
    assert Proposal.objects.filter(attempt__fold=fold).update(raw=prose, verifier_raw=prose)
    return _get(client, url.format(fold.number))


@pytest.mark.parametrize("surface", list(SURFACES))
def test_a_pinned_secret_is_filtered_on_every_display_surface(world, surface):
    shown = SURFACES[surface](world)
    assert SECRET not in shown and html.escape(SECRET) not in shown and "3Horse" not in shown
    assert "[filtered: " in shown or surface in NO_MARK
    # stored and sent to the model verbatim
    stored = Fold.objects.get(pk=world["fold"].pk).state_dict
    assert any(SECRET in f.get("text", "") for f in stored["facts"].values() if f.get("pin"))
    preview = context_preview(journal=world["journal"], views=("model",))
    assert SECRET in json.dumps(preview.model_view["messages"])


def _leaks(shown: str, secret: str) -> bool:
    """The secret, whole or HTML-escaped, or its second half (a partial filter) is shown."""
    half = secret[len(secret) // 2 :]
    return any(x in shown for x in (secret, html.escape(secret), half, html.escape(half)))


def _kept(shown: str, text: str) -> bool:
    """An ordinary identifier shown as it is (raw, HTML-escaped, or JSON-escaped)."""
    forms = {text, html.escape(text), html.escape(text, quote=False), json.dumps(text)[1:-1]}
    return any(x in shown for x in forms)


#: surfaces that show a long title or pin cut short (the session list cuts the title at
#: its first filter mark, the debug trace the objective after its first line, ...): every
#: secret is checked on them, the ordinary identifiers on the surfaces showing it whole
CUT = {
    "context page",
    "context page, failure explanation",
    "context page, debug trace",
    "audit log",
    "review queue",
    "session list (title)",
    "session page (title)",
    "timeline (title)",
    "sessions API (title)",
    "session API (title)",
    "dashboard (title)",
}


@pytest.mark.parametrize("surface", list(SURFACES))
def test_every_credential_form_is_filtered_on_every_display_surface(every_form, surface):
    shown = SURFACES[surface](every_form)
    assert [s for _, s in FORMS if _leaks(shown, s)] == []
    if surface not in NO_MARK:
        assert "[filtered" in shown
    if surface not in CUT:  # the ordinary identifiers are shown as they are
        assert [o for o in ORDINARY if not _kept(shown, o)] == []


def test_a_search_for_a_pinned_secret_finds_nothing(world):
    for url in (f"{SCOPE}?q=text:{SECRET[:10]}", f"{SCOPE}?q={SECRET[:10]}"):
        page = _get(world["ui"], url)
        assert _pin_id(world) not in page, url
        assert (
            SECRET[:10]
            not in page.replace(f"q={SECRET[:10]}", "").replace(f"text:{SECRET[:10]}", "")
            or "0 of" in page
        ), url
    api = world["api"].get(f"{API}/ledger", {"q": f"text:{SECRET[:10]}"}).json()
    assert api["facts"] == [], api
    # the filtered text is still found by what it shows
    found = world["api"].get(f"{API}/ledger", {"q": "text:staging"}).json()["facts"]
    assert [f["id"] for f in found if f["pin"]] == [_pin_id(world)]
