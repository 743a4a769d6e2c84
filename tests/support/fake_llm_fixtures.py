"""Pytest fixtures around the fake OpenAI-compatible server (agentsite/dev/fake_llm.py).

Use them from any test module with ``pytest_plugins = ["tests.support.fake_llm_fixtures"]``
(or from a conftest.py). They give:

- ``fake_llm``: a started in-process :class:`FakeLLMServer` on a free loopback port; script it
  with ``fake_llm.script(Reply(...))`` and read ``fake_llm.chat_requests`` afterwards.
- ``fake_llm_url``: its ``base_url`` (``http://127.0.0.1:PORT/v1``).
- ``model_client``: an :class:`OpenAIModelClient` on it (no retries, short timeout).
- ``fake_llm_process``: the same server as a real subprocess (``python -m agentsite.dev.fake_llm``),
  for end-to-end tests whose server runs in another process; script it over HTTP with
  :func:`agentsite.dev.fake_llm.script_remote` and read what it got with
  :func:`agentsite.dev.fake_llm.remote_requests`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.llm import OpenAIModelClient
from agentsite.dev.fake_llm import FakeLLMServer

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKE_API_KEY = "sk-fake-test-key"


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as server:
        yield server


@pytest.fixture
def fake_llm_url(fake_llm: FakeLLMServer) -> str:
    return fake_llm.base_url


@pytest.fixture
async def model_client(fake_llm: FakeLLMServer) -> AsyncIterator[OpenAIModelClient]:
    client = OpenAIModelClient(
        base_url=fake_llm.base_url,
        api_key=FAKE_API_KEY,
        provider_name="fake",
        timeout=5.0,
        max_retries=0,
    )
    yield client
    await client.aclose()


@dataclass
class FakeLLMProcess:
    """A fake LLM server running as a subprocess."""

    base_url: str
    process: subprocess.Popen[str]


@contextmanager
def fake_llm_subprocess() -> Iterator[FakeLLMProcess]:
    """The fake model as a real subprocess (`python -m agentsite.dev.fake_llm --port 0`), stopped on exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "agentsite.dev.fake_llm", "--port", "0"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "fake LLM listening on http://127.0.0.1:PORT/v1"
        if "listening on " not in line:
            raise RuntimeError(f"fake LLM did not start: {line!r}")
        yield FakeLLMProcess(base_url=line.rsplit(" ", 1)[-1].strip(), process=process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
def fake_llm_process() -> Iterator[FakeLLMProcess]:
    with fake_llm_subprocess() as fake:
        yield fake
