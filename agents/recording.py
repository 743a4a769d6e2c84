"""What a turn writes down as it goes, so that a reload shows what the user saw live.

Each model step streams text (and maybe reasoning). While it streams, the text so far is written down
at most once a second (`progress`): a process that dies mid-answer leaves it behind, and the next one
marks it `interrupted`. A step then ends in exactly one way: it completed (`assistant_message`), or it
was cancelled or failed (`partial` with status `cancelled` or `error`) — the text streamed so far is
kept either way (docs/protocol.md). Plain asyncio; chat/store.py writes the rows.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

PROGRESS_SECONDS = 1.0


class TurnRecorder(Protocol):
    async def progress(self, content: str, reasoning: str) -> None: ...

    async def assistant_message(
        self,
        content: str,
        tool_calls: list[dict[str, Any]],
        usage: dict[str, int] | None,
        reasoning: str = "",
    ) -> None: ...

    async def partial(self, content: str, reasoning: str, status: str) -> None: ...

    async def tool_result(self, call_id: str, name: str, output: str, is_error: bool) -> None: ...


class StepText:
    """The text and reasoning of the model step that streams now, and what of it was written down."""

    def __init__(self, recorder: TurnRecorder | None) -> None:
        self._recorder = recorder
        self.parts: list[str] = []
        self.reasoning: list[str] = []
        self.open = False  # a step streams and has not been written down as ended
        self._written_at = 0.0

    def start(self) -> None:
        self.parts, self.reasoning, self.open = [], [], True
        self._written_at = time.monotonic()
        # The step's row takes its place in the conversation when the step starts, not when it is first
        # written down: input steered while it streams comes after it, as the model saw it.
        step_started = getattr(self._recorder, "step_started", None)
        if step_started is not None:
            step_started()

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def progress_due(self) -> bool:
        """A second has passed since the text was last written down (checked per chunk: no await)."""
        return self._recorder is not None and time.monotonic() - self._written_at >= PROGRESS_SECONDS

    async def progress(self) -> None:
        """Write the text so far down."""
        self._written_at = time.monotonic()
        if self._recorder is not None:
            await self._recorder.progress(self.text, "".join(self.reasoning))

    async def completed(self, tool_calls: list[dict[str, Any]], usage: dict[str, int] | None) -> None:
        self.open = False
        if self._recorder is not None:
            await self._recorder.assistant_message(self.text, tool_calls, usage, "".join(self.reasoning))

    async def ended(self, status: str) -> None:
        """The step was cancelled or failed: keep what it streamed (nothing to keep: nothing written)."""
        if not self.open:
            return
        self.open = False
        if self._recorder is not None and (self.parts or self.reasoning):
            await self._recorder.partial(self.text, "".join(self.reasoning), status)
