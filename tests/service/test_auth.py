"""Tokens: nothing answers without one, scopes are enforced, tokens are kept hashed, local-only is 127.0.0.1 only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgrad.errors import ConfigError
from agentgrad.service.app import build_service
from agentgrad.service.auth import TOKENS_ENV, TokenBook, add_to_file, hash_token, load_tokens, new_entry
from agentgrad.service.settings import Settings
from tests.service.support import READ_TOKEN, WRITE_TOKEN, auth, client, world


def _api_operations(spec: dict[str, object]) -> list[tuple[str, str]]:
    paths = spec["paths"]
    assert isinstance(paths, dict)
    return [(method, path) for path, item in paths.items() for method in item]


def test_no_api_endpoint_answers_without_a_token(tmp_path: Path) -> None:
    with client(tmp_path) as api:
        operations = _api_operations(api.app.openapi())  # type: ignore[attr-defined]
        assert len(operations) >= 15
        for method, path in operations:
            url = path.replace("{job_id}", "r000000000000").replace("{diff_id}", "p1")
            response = api.request(method.upper(), url, params={"artifact": "a"}, json={"config": world()})
            assert response.status_code == 401, (method, path, response.text)
            assert response.json()["error"]["type"] == "unauthorized"
            assert response.headers["www-authenticate"] == "Bearer"
        assert api.get("/").status_code == 200  # the dashboard sends a browser to its login page
        assert api.get("/", follow_redirects=False).headers["location"] == "/login"


def test_a_wrong_token_is_refused_and_a_read_token_cannot_write(tmp_path: Path) -> None:
    with client(tmp_path) as api:
        assert api.get("/api/runs", headers=auth("not-a-token")).status_code == 401
        assert api.get("/api/runs", headers=auth(READ_TOKEN)).status_code == 200
        refused = api.post("/api/runs", json={"config": world()}, headers=auth(READ_TOKEN))
        assert refused.status_code == 403
        assert "lacks the 'write' scope" in refused.json()["error"]["message"]
        assert api.get("/api/runs", headers=auth()).json()["total"] == 0


def test_a_cookie_can_read_but_writes_with_it_need_the_csrf_header(tmp_path: Path) -> None:
    with client(tmp_path) as api:
        login = api.post("/login", content=f"token={WRITE_TOKEN}",
                         headers={"Content-Type": "application/x-www-form-urlencoded"}, follow_redirects=False)
        assert login.status_code == 303 and "httponly" in login.headers["set-cookie"].lower()
        assert api.get("/api/runs").status_code == 200
        refused = api.post("/api/runs", json={"config": "x"})
        assert refused.status_code == 403 and "x-agentgrad-csrf" in refused.json()["error"]["message"]
        invalid = api.post("/api/runs", json={"config": "not toml ["}, headers={"X-Agentgrad-CSRF": "1"})
        assert invalid.status_code == 422  # past authentication: the config itself is what is wrong


def test_tokens_are_read_from_a_file_and_the_environment_and_kept_only_as_hashes(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    token, entry = new_entry("ci", ["read"], max_jobs=2)
    add_to_file(path, entry)
    assert token not in path.read_text() and hash_token(token) in path.read_text()
    other = "env-" + "z" * 40
    env = {TOKENS_ENV: json.dumps({"tokens": [{"name": "env", "sha256": hash_token(other), "scopes": ["write"]}]})}
    entries = load_tokens(path, env)
    assert [e.name for e in entries] == ["ci", "env"]
    assert all(token not in repr(e) and other not in repr(e) for e in entries)
    book = TokenBook(entries, default_max_jobs=4)
    ci, from_env = book.check(token), book.check(other)
    assert ci is not None and ci.max_jobs == 2 and ci.can("read") and not ci.can("write")
    assert from_env is not None and from_env.max_jobs == 4 and from_env.can("read")
    assert book.check(token + "x") is None


@pytest.mark.parametrize("text", ['{"tokens": [{"name": "x", "sha256": "abc"}]}', "[]", "{not json",
                                  '{"tokens": [{"name": "x", "sha256": "' + "a" * 64 + '", "scopes": ["admin"]}]}'])
def test_a_malformed_tokens_file_is_refused_saying_why(tmp_path: Path, text: str) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=str(path)):
        load_tokens(path, {})


def test_local_only_is_allowed_only_on_127_0_0_1_and_otherwise_a_token_is_required(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"127\.0\.0\.1"):
        Settings(home=tmp_path, host="0.0.0.0", local_only=True)
    with pytest.raises(ConfigError, match="no tokens"):
        build_service(Settings(home=tmp_path), TokenBook([], default_max_jobs=1))
    with client(tmp_path, tokens=[], local_only=True) as api:
        assert api.get("/api/runs").status_code == 200
