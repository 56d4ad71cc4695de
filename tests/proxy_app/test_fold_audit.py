"""A fold the proxy runs (a request over its working budget) is audited as ``proxy``."""

from __future__ import annotations

from audit_app.models import AuditEvent
from ledger_app.models import Fold
from tests.proxy_app.test_openai_proxy import SYSTEM, client


def test_a_fold_made_by_the_proxy_is_recorded_as_proxy(live_server, key, upstream):
    for n in range(6):
        upstream.push(calls=[(f"call_{n}a", "grep", {"q": n}), (f"call_{n}b", "cat", {"f": n})])
    upstream.push(text="done")
    c = client(live_server, key, **{"X-Ledgerkeep-Session": "long"})
    messages: list = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Find the flaky test."},
    ]
    for _ in range(6):
        answer = c.chat.completions.create(model="m", messages=messages).choices[0].message
        messages.append(answer)
        messages += [
            {
                "role": "tool",
                "tool_call_id": t.id,
                "content": f"output {t.id} " + "lorem ipsum " * 150,
            }
            for t in answer.tool_calls
        ]
    small = client(
        live_server, key, **{"X-Ledgerkeep-Session": "long", "X-Ledgerkeep-Working-Budget": "1500"}
    )
    raw = small.chat.completions.with_raw_response.create(model="m", messages=messages)

    assert raw.headers["X-Ledgerkeep-Compacted"] == "true"
    folds = Fold.objects.filter(journal__session__key="long", kind="fold").count()
    events = AuditEvent.objects.filter(action="fold.store")
    assert folds >= 1
    assert [e.details["surface"] for e in events] == ["proxy"] * folds
