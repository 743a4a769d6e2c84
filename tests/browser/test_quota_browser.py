"""A disk quota hit is shown in the portal (docs/protocol.md §6.6): the files panel says why an upload was
refused, with the quota's size, and the chat shows the refused tool call with the same words. A server of
its own, with a 1 MB workspace quota."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import FakeModel, log_in, serve_portal
from tests.browser.test_chat_browser import new_chat, send
from tests.support.server import RunningServer


@pytest.fixture(scope="module")
def quota_server(
    chromium_path: Path, fake_model: FakeModel, tmp_path_factory: Any
) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("quota")
    with serve_portal(folder, fake_model, AGENTSITE_WORKSPACE_QUOTA_MB="1") as server:
        yield server


def test_the_files_panel_and_the_chat_say_when_the_disk_quota_is_hit(
    browser: Any, quota_server: RunningServer, fake_model: FakeModel, tmp_path: Path
) -> None:
    context = browser.new_context(base_url=quota_server.base_url, viewport={"width": 1280, "height": 860})
    context.set_default_timeout(10_000)
    page = context.new_page()
    log_in(page, quota_server.base_url)
    fake_model.script({"text": "Ready."})
    new_chat(page)
    send(page, "hello")
    expect(page.locator("#transcript .markdown").last).to_have_text("Ready.")
    page.get_by_role("button", name="Files").click()
    panel = page.get_by_role("complementary", name="Workspace")

    status = panel.locator("#files-status")
    fits = tmp_path / "fits.bin"
    fits.write_bytes(os.urandom(800 * 1024))
    panel.locator("#file-upload").set_input_files(str(fits))
    expect(status).to_have_text("Uploaded fits.bin.")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(2 * 1024 * 1024))
    panel.locator("#file-upload").set_input_files(str(big))
    expect(status).to_contain_text("Could not upload big.bin: Writing 2097152 more bytes would pass")
    expect(status).to_contain_text("the workspace holds 804 KB of its 1 MB quota")
    expect(panel.get_by_role("button", name="big.bin", exact=True)).to_have_count(0)

    page.get_by_label("Approvals").select_option("full_access")
    content = "x" * (300 * 1024)
    fake_model.script(
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "w.txt", "content": content}}]},
        {"text": "The disk is full."},
    )
    send(page, "write a big file")
    expect(page.locator("#transcript .markdown").last).to_have_text("The disk is full.")
    refused = page.locator("#transcript details.tool.error")
    expect(refused).to_have_count(1)
    refused.locator("summary").click()
    expect(refused).to_contain_text("disk quota")
    context.close()
