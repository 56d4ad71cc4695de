"""One table of credential forms and ordinary identifiers: every form is filtered whole by
the one detector (``journal_app.privacy``), every ordinary identifier left as it is. Add a
row here when a form is added; the false-positive rows grow with them."""

from __future__ import annotations

import pytest

from journal_app.privacy import MARK_PREFIX, filter_text, secret_spans

A36 = "Ab3dEf5hIj7lMn9pQr1tUv3xYz5bCd7fGh9k"  # 36 mixed characters
HEX32 = "0123456789abcdef0123456789abcdef"
HEX40 = "0123456789abcdef0123456789abcdef01234567"

#: (text, the secret in it): each secret must be gone from the filtered text
SECRETS: list[tuple[str, str]] = [
    ("my password is Tr0ub4dor&3Horse, keep it", "Tr0ub4dor&3Horse"),
    ("password: Tr0ub4dor&3Horse", "Tr0ub4dor&3Horse"),
    ("mysql -u root -pS3cretPw9 billing", "S3cretPw9"),
    ("mysql -u root -p'QuotedPass9' billing", "QuotedPass9"),
    ("docker login -u ci -p DockerPassw0rd registry.example.com", "DockerPassw0rd"),
    ("docker login --password=Dock3rSecretX registry.example.com", "Dock3rSecretX"),
    ("mysqldump -h db -u app -pHunter2Pass shop > dump.sql", "Hunter2Pass"),
    ("Authorization: Basic dXNlcjpodW50ZXIyLXBhc3N3b3Jk", "dXNlcjpodW50ZXIyLXBhc3N3b3Jk"),
    ("Authorization: Token 9f8e7d6c5b4a39281706aa", "9f8e7d6c5b4a39281706aa"),
    ("registry token npm_" + A36, "npm_" + A36),
    ("HF token hf_" + A36[:34], "hf_" + A36[:34]),
    ("db_pass: Zq8!kLmN2x", "Zq8!kLmN2x"),
    ("DB_PASS=Zq8kLmN2x7w", "Zq8kLmN2x7w"),
    ('{"pwd": "Pa55w0rd!x"}', "Pa55w0rd!x"),
    ("sshpass -p Hunter2Pass ssh deploy@host", "Hunter2Pass"),
    ("curl -u admin:S3cr3tPass https://api.example.com", "S3cr3tPass"),
    ("export GITHUB_TOKEN=ghp_" + A36, "ghp_" + A36),
    ("shopify shpat_" + HEX32, "shpat_" + HEX32),
    ("GROQ gsk_" + A36 + A36[:12], "gsk_" + A36 + A36[:12]),
    ("google ya29.a0AfH6SMBx3kQz9-Lm_Np7Rt", "ya29.a0AfH6SMBx3kQz9-Lm_Np7Rt"),
    ("databricks dapi" + HEX32, "dapi" + HEX32),
    ("linear lin_api_" + A36 + "Ab3d", "lin_api_" + A36 + "Ab3d"),
    ("pulumi pul-" + HEX40, "pul-" + HEX40),
    ("key sk-proj-" + A36, "sk-proj-" + A36),
    ("anthropic sk-ant-api03-" + A36, "sk-ant-api03-" + A36),
    ("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("gitlab glpat-" + A36[:20], "glpat-" + A36[:20]),
    ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
    ("stripe sk_live_" + A36[:24], "sk_live_" + A36[:24]),
    ("postgres://app:Hunter2Pass@db:5432/shop", "Hunter2Pass"),
    ("curl -H 'Authorization: Bearer " + A36 + "'", A36),
    ("PGPASSWORD=Zq8kLmN2x7w psql", "Zq8kLmN2x7w"),
]

#: ordinary identifiers: nothing filtered
ORDINARY: list[str] = [
    "sha256:" + "ab" * 32,
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "md5 d41d8cd98f00b204e9800998ecf8427e",
    "request id 3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "/home/dev/project/src/passwords/reset_view.py",
    "./node_modules/.bin/tsc --project tsconfig.json",
    "~/.config/gcloud/application_default_credentials.json",
    "max_tokens: 4096",
    "totalTokens: usage.totalTokens",
    "password: required",
    "5 passed, 2 skipped in 3.21s",
    "bypass_cache=true for_path1",
    "the token is stored in process.env.API_TOKEN",
    "mysql -u root -p billing",
    "docker login --password-stdin registry.example.com",
    "docker login -u ci -p $CI_REGISTRY_PASSWORD registry.example.com",
    "git push origin feature/password-reset",
    "Authorization: Bearer $TOKEN",
    "docker run -e PASSWORD=${DB_PASSWORD} app",
    "hf_hub_download(repo_id='gpt2')",
    "npm_config_cache=/tmp/npm",
    "https://example.com/api/v1/users?page=2&limit=50",
    "curl -u $USER:$PASS https://api.example.com",
]


@pytest.mark.parametrize(("text", "secret"), SECRETS, ids=[s[:24] for s, _ in SECRETS])
def test_each_credential_form_is_filtered_whole(text, secret):
    shown = filter_text(text).text
    assert secret not in shown, shown
    assert MARK_PREFIX in shown
    # and no part of it stays: a leftover of 4+ characters of the secret's tail
    assert secret[-4:] not in shown.replace(MARK_PREFIX, ""), shown


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_identifiers_are_left_alone(text):
    assert secret_spans(text) == [], secret_spans(text)
    assert filter_text(text).text == text


def test_the_writers_raw_answers_are_filtered_for_the_api_and_the_verifier_page():
    from ledger_app.models import Proposal
    from ledger_app.selectors.verifier import ProposalRow

    text, secret = SECRETS[0]
    proposal = Proposal(round=0, kind="proposal", raw=text, verifier_raw=text, ops=[])
    shown = ProposalRow(proposal, "proposal", [], filter_text(text).text).to_dict()
    assert secret not in shown["raw"] and secret not in shown["verifier_raw"]
    assert MARK_PREFIX in shown["raw"]
    assert proposal.raw == text  # stored verbatim
