"""A session's workspace over REST (docs/protocol.md extensions "Workspace files"): list, read, preview,
upload, delete; owner only; confined to the workspace like the file tools; size-limited uploads."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

from agents.sandbox.site import workspace_dir
from tests import factories
from tests.test_rest_keys import assert_error

pytestmark = pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")
FILES = "/api/v1/chat/sessions/s/files"


@pytest.fixture
def workspace(alice: Any) -> Path:
    session = factories.session(alice, session_id="s")
    root = workspace_dir(user_id=alice.id, session_id=session.id)
    for leftover in root.iterdir():  # a workspace of an earlier test's session of the same name
        shutil.rmtree(leftover) if leftover.is_dir() and not leftover.is_symlink() else leftover.unlink()
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "README.md").write_text("# Title\n\n<script>alert(1)</script> *ok*\n")
    (root / "page.html").write_text("<script>alert(1)</script>")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)
    return root


def raw(client: Client, key: str, method: str, path: str, data: bytes = b"", **extra: Any) -> Any:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}", **extra}
    if method != "put":
        return getattr(client, method)(path, **headers)
    return client.put(path, data=data, content_type="application/octet-stream", **headers)


def body_of(response: Any) -> bytes:
    return b"".join(response) if response.streaming else response.content


def test_listing_is_one_folder_folders_first_and_paginated(api: Any, alice_key: str, workspace: Path) -> None:
    body = api(alice_key).get(FILES).json()

    assert [(e["name"], e["type"]) for e in body["results"]] == [
        ("src", "directory"),
        ("logo.png", "file"),
        ("page.html", "file"),
        ("README.md", "file"),
    ]
    assert body["next"] is None and body["path"] == "."
    first = api(alice_key).get(f"{FILES}?limit=2").json()
    rest = api(alice_key).get(f"{FILES}?limit=2&cursor={first['next']}").json()
    assert [e["name"] for e in first["results"] + rest["results"]] == [
        "src",
        "logo.png",
        "page.html",
        "README.md",
    ]
    for query in ("limit=0", "limit=", "limit=%202", "limit=1_0", "cursor=-1", "cursor=%D9%A7"):
        refused = api(alice_key).get(f"{FILES}?{query}")
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid", query
    inside = api(alice_key).get(f"{FILES}?path=src").json()
    assert inside["results"][0] == {**inside["results"][0], "path": "src/app.py", "size": 25, "type": "file"}
    assert inside["results"][0]["modified_at"].endswith("Z")


def test_a_file_comes_back_with_its_type_and_dangerous_types_never_inline(
    client: Client, alice_key: str, workspace: Path
) -> None:
    png = raw(client, alice_key, "get", f"{FILES}/logo.png")
    assert png.status_code == 200 and png["Content-Type"] == "image/png"
    assert png["Content-Disposition"].startswith("inline") and body_of(png).startswith(b"\x89PNG")
    page = raw(client, alice_key, "get", f"{FILES}/page.html")
    assert page["Content-Disposition"].startswith("attachment")
    assert page["X-Content-Type-Options"] == "nosniff" and "sandbox" in page["Content-Security-Policy"]
    download = raw(client, alice_key, "get", f"{FILES}/logo.png?download=1")
    assert download["Content-Disposition"] == 'attachment; filename="logo.png"'


def test_preview_gives_code_with_a_language_and_markdown_rendered_safely(
    api: Any, alice_key: str, workspace: Path
) -> None:
    code = api(alice_key).get(f"{FILES}/src/app.py?preview=1").json()
    assert (code["kind"], code["language"], code["truncated"]) == ("text", "python", False)
    assert code["content"].startswith("def main")
    md = api(alice_key).get(f"{FILES}/README.md?preview=1").json()
    assert md["kind"] == "markdown" and "<h1>Title</h1>" in md["html"] and "<script" not in md["html"]
    assert api(alice_key).get(f"{FILES}/logo.png?preview=1").json()["kind"] == "image"


def test_upload_creates_folders_replaces_and_delete_removes(
    client: Client, alice_key: str, workspace: Path
) -> None:
    created = raw(client, alice_key, "put", f"{FILES}/new/deep/data.bin", b"\x00\x01\x02")
    assert created.status_code == 201, created.content
    assert created.json()["path"] == "new/deep/data.bin" and created.json()["size"] == 3
    replaced = raw(client, alice_key, "put", f"{FILES}/new/deep/data.bin", b"four")
    assert replaced.status_code == 200
    assert (workspace / "new/deep/data.bin").read_bytes() == b"four"
    assert not [p for p in (workspace / "new/deep").iterdir() if p.name.startswith(".upload-")]

    assert raw(client, alice_key, "delete", f"{FILES}/new").json() == {"path": "new", "deleted": True}
    assert not (workspace / "new").exists()
    assert_error(raw(client, alice_key, "delete", f"{FILES}/new"), 404, "not_found")


@override_settings(AGENTSITE_MAX_UPLOAD_BYTES=1024)
def test_an_upload_over_the_limit_is_413_and_leaves_nothing(
    client: Client, alice_key: str, workspace: Path
) -> None:
    assert_error(raw(client, alice_key, "put", f"{FILES}/big.bin", b"x" * 2048), 413, "too_large")
    assert not (workspace / "big.bin").exists()
    assert not [p for p in workspace.iterdir() if p.name.startswith(".upload-")]


@pytest.mark.parametrize("path", ["../escape.txt", "src/../../escape.txt", "%2Fetc%2Fpasswd", "out/secret"])
def test_paths_out_of_the_workspace_are_refused(
    client: Client, alice_key: str, workspace: Path, tmp_path: Path, path: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("top secret")
    os.symlink(outside, workspace / "out")

    for method in ("get", "put", "delete"):
        response = raw(client, alice_key, method, f"{FILES}/{path}", b"data")
        assert response.status_code in (400, 404), (method, response.status_code)
        assert "top secret" not in body_of(response).decode(errors="replace")
    listing = raw(client, alice_key, "get", f"{FILES}?path=out")
    assert_error(listing, 400, "invalid_path")
    assert (outside / "secret").read_text() == "top secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]


def test_a_symlink_out_is_never_followed_only_replaced_or_removed_itself(
    client: Client, alice_key: str, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, workspace / "out")

    assert_error(raw(client, alice_key, "get", f"{FILES}/out"), 400, "invalid_path")
    assert raw(client, alice_key, "put", f"{FILES}/out", b"a file now").status_code == 200
    assert (workspace / "out").read_bytes() == b"a file now" and list(outside.iterdir()) == []
    os.unlink(workspace / "out")
    os.symlink(outside, workspace / "out")
    assert raw(client, alice_key, "delete", f"{FILES}/out").status_code == 200
    assert outside.is_dir() and not os.path.lexists(workspace / "out")


def test_deleting_a_symlink_removes_the_link_never_its_target(
    client: Client, alice_key: str, workspace: Path
) -> None:
    os.symlink(workspace / "src" / "app.py", workspace / "link.py")

    assert raw(client, alice_key, "delete", f"{FILES}/link.py").status_code == 200
    assert (workspace / "src" / "app.py").exists() and not os.path.lexists(workspace / "link.py")


def test_another_users_session_is_not_found_like_a_missing_one(
    api: Any, bob_key: str, workspace: Path
) -> None:
    theirs = assert_error(api(bob_key).get(FILES), 404, "not_found")
    missing = assert_error(api(bob_key).get("/api/v1/chat/sessions/nope/files"), 404, "not_found")
    assert theirs["message"] == missing["message"].replace("nope", "s")
    assert_error(api(bob_key).get(f"{FILES}/README.md"), 404, "not_found")


def test_a_closed_session_can_be_read_but_not_written(
    api: Any, client: Client, alice_key: str, workspace: Path
) -> None:
    api(alice_key).delete("/api/v1/chat/sessions/s")

    assert api(alice_key).get(FILES).status_code == 200
    assert_error(raw(client, alice_key, "put", f"{FILES}/x.txt", b"x"), 409, "session_closed")


def test_the_openapi_document_describes_the_file_endpoints(api: Any, alice_key: str) -> None:
    schema = api(alice_key).get("/api/v1/schema/?format=json").json()
    paths = schema["paths"]
    assert "/api/v1/chat/sessions/{session_id}/files" in paths
    item = paths["/api/v1/chat/sessions/{session_id}/files/{path}"]
    assert {"get", "put", "delete"} <= set(item)
    assert "application/octet-stream" in item["put"]["requestBody"]["content"]


def test_a_file_is_served_whatever_type_the_client_accepts(
    client: Client, alice_key: str, workspace: Path
) -> None:
    """An <img> may ask for `image/png` alone: the API's JSON-only negotiation answered 406 (issue 14)."""
    png = raw(client, alice_key, "get", f"{FILES}/logo.png", HTTP_ACCEPT="image/png")
    assert png.status_code == 200 and body_of(png).startswith(b"\x89PNG")
    missing = raw(client, alice_key, "get", f"{FILES}/nope.png", HTTP_ACCEPT="image/png")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("flag", ["preview=maybe", "download=2"])
def test_a_flag_that_is_not_true_or_false_is_400(
    client: Client, alice_key: str, workspace: Path, flag: str
) -> None:
    assert_error(raw(client, alice_key, "get", f"{FILES}/README.md?{flag}"), 400, "invalid")


def test_a_file_whose_name_holds_a_newline_is_reached_like_any_other(
    client: Client, alice_key: str, workspace: Path
) -> None:
    """The API fuzzer's case: such a path fell through the URLs to Django's HTML 404 page."""
    (workspace / "two\nlines.txt").write_text("made by an agent")
    path = f"{FILES}/two%0Alines.txt"
    assert body_of(raw(client, alice_key, "get", path)) == b"made by an agent"
    assert raw(client, alice_key, "delete", path).json() == {"path": "two\nlines.txt", "deleted": True}
    assert_error(raw(client, alice_key, "delete", path), 404, "not_found")
    assert_error(raw(client, alice_key, "delete", f"{FILES}/missing%0A"), 404, "not_found")


def test_links_inside_are_walked_and_odd_paths_are_4xx_never_500(
    api: Any, client: Client, alice_key: str, workspace: Path
) -> None:
    os.symlink("src", workspace / "code")  # relative, inside
    os.symlink("loop", workspace / "loop")
    listing = api(alice_key).get(f"{FILES}?path=code").json()
    assert listing["path"] == "src" and [e["path"] for e in listing["results"]] == ["src/app.py"]
    root = {e["name"]: e for e in api(alice_key).get(FILES).json()["results"]}
    assert root["code"]["type"] == "symlink" and root["code"]["size"] is None
    assert body_of(raw(client, alice_key, "get", f"{FILES}/code/app.py")).startswith(b"def main")

    assert_error(raw(client, alice_key, "get", f"{FILES}?path=README.md"), 400, "not_a_directory")
    assert_error(raw(client, alice_key, "get", f"{FILES}?path=loop"), 400, "invalid_path")
    assert_error(raw(client, alice_key, "get", f"{FILES}/src"), 400, "not_a_file")
    assert_error(raw(client, alice_key, "get", f"{FILES}/README.md/x"), 404, "not_found")
    assert_error(raw(client, alice_key, "put", f"{FILES}/README.md/x", b"x"), 409, "conflict")
    assert_error(raw(client, alice_key, "put", f"{FILES}/src", b"x"), 409, "is_a_directory")
    assert_error(raw(client, alice_key, "delete", f"{FILES}/README.md/x"), 404, "not_found")
    for path in ("..", "src/..", "a/../.."):
        for method in ("get", "put", "delete"):
            response = raw(client, alice_key, method, f"{FILES}/{path}", b"x")
            assert 400 <= response.status_code < 500, (method, path, response.status_code)
