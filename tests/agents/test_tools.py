"""The tool registry and the built-in tools, run for real against a temporary workspace."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import jsonschema
import pytest
from pydantic import BaseModel

from agents.tools import (
    Tool,
    ToolContext,
    ToolError,
    ToolParams,
    ToolRegistry,
    registry,
    resolve_in_workspace,
)
from agents.tools.base import json_schema_for
from agents.tools.files import MAX_LIST_ENTRIES, MAX_READ_BYTES


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


@pytest.fixture
def real_workspace(workspace: Path) -> str:
    return os.path.realpath(workspace)


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace, session_id="session-1")


async def call(ctx: ToolContext, name: str, arguments: dict[str, Any] | str) -> str:
    """What the turn loop does with a model's tool call: parse, validate, run."""
    tool, params = registry.parse(name, arguments)
    return await tool.run(params, ctx)


# --- registry -------------------------------------------------------------------------------------


def test_default_registry_holds_the_builtins_sorted_by_name() -> None:
    # delegate_external_agent is registered by the ACP app (acp/apps.py) when Django starts.
    assert [tool.name for tool in registry.all()] == [
        "delegate_external_agent",
        "get_current_time",
        "list_files",
        "read_file",
        "shell",
        "write_file",
    ]


def test_builtin_risks_and_defaults_follow_the_protocol() -> None:
    risks = {tool.name: (tool.risk, tool.default_enabled) for tool in registry.all()}
    assert risks == {
        "get_current_time": ("safe", True),
        "list_files": ("safe", True),
        "read_file": ("safe", True),
        "write_file": ("dangerous", True),
        "shell": ("dangerous", True),
        "delegate_external_agent": ("dangerous", False),
    }


def test_registering_a_second_tool_with_the_same_name_is_refused() -> None:
    own = ToolRegistry()
    tool = registry.get("shell")
    assert tool is not None
    own.register(tool)
    with pytest.raises(ValueError, match="already registered"):
        own.register(tool)


@pytest.mark.parametrize("tool", registry.all(), ids=lambda tool: tool.name)
def test_every_tool_schema_is_a_valid_plain_object_schema(tool: Tool) -> None:
    schema = tool.parameters()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) <= set(schema["properties"])
    text = json.dumps(schema)
    assert "$defs" not in text and "$ref" not in text and '"title"' not in text and "anyOf" not in text
    spec = tool.openai_spec()
    assert spec == {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": schema},
    }


def test_schema_inlines_nested_models_and_keeps_a_field_called_title() -> None:
    class Inner(ToolParams):
        depth: int

    class Outer(ToolParams):
        title: str
        inner: Inner | None = None

    schema = json_schema_for(Outer)
    assert schema["properties"]["title"] == {"type": "string"}
    assert schema["properties"]["inner"]["properties"] == {"depth": {"type": "integer"}}
    assert schema["required"] == ["title"]
    assert "$defs" not in json.dumps(schema)


def test_unknown_tool_is_a_tool_error_naming_the_available_tools() -> None:
    with pytest.raises(ToolError, match=r"Unknown tool 'rm_everything'.*get_current_time, list_files"):
        registry.parse("rm_everything", "{}")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object, not list"),
        ('"ls"', "must be a JSON object, not str"),
    ],
)
def test_arguments_that_are_not_a_json_object_are_refused_clearly(raw: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        registry.parse("shell", raw)


def test_empty_arguments_mean_no_arguments() -> None:
    tool, params = registry.parse("get_current_time", "")
    assert tool.name == "get_current_time"
    assert params.model_dump() == {"timezone": None}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, r"Invalid arguments for tool 'shell': command: Field required"),
        ({"command": 42}, r"command: Input should be a valid string"),
        (
            {"command": "ls", "timeout_seconds": 601},
            r"timeout_seconds: Input should be less than or equal to 600",
        ),
        (
            {"command": "ls", "timeout_seconds": 0},
            r"timeout_seconds: Input should be greater than or equal to 1",
        ),
        ({"command": "ls", "cwd": "/"}, r"cwd: unknown argument"),
        ({"command": ""}, r"command: String should have at least 1 character"),
    ],
)
def test_validation_errors_name_the_field_and_the_reason(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        registry.parse("shell", json.dumps(arguments))


def test_dict_arguments_are_validated_like_json_ones() -> None:
    _, params = registry.parse("shell", {"command": "ls", "timeout_seconds": 5})
    assert params.model_dump() == {"command": "ls", "timeout_seconds": 5}


def test_confirmation_summaries_show_what_will_happen() -> None:
    shell, shell_params = registry.parse("shell", {"command": "make test"})
    write, write_params = registry.parse("write_file", {"path": "a.txt", "content": "hello"})
    assert shell.describe(shell_params) == "make test"
    assert write.describe(write_params) == "write 5 characters to a.txt"


# --- workspace confinement ------------------------------------------------------------------------


def test_paths_inside_the_workspace_resolve_even_through_inner_dotdot(workspace: Path) -> None:
    (workspace / "a").mkdir()
    assert resolve_in_workspace(workspace, "a/../b.txt") == workspace.resolve() / "b.txt"
    assert resolve_in_workspace(workspace, ".") == workspace.resolve()


@pytest.mark.parametrize(
    "path", ["../outside.txt", "a/../../outside.txt", "/etc/passwd", "~/x", "..", "x\x00y"]
)
def test_escaping_paths_are_refused(workspace: Path, path: str) -> None:
    with pytest.raises(ToolError):
        resolve_in_workspace(workspace, path)


async def test_read_file_refuses_dotdot_and_absolute_paths(ctx: ToolContext, workspace: Path) -> None:
    (workspace.parent / "secret.txt").write_text("top secret")
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(ctx, "read_file", {"path": "../secret.txt"})
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(ctx, "read_file", {"path": str(workspace.parent / "secret.txt")})


async def test_read_file_refuses_a_symlink_to_etc_passwd(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "passwd").symlink_to("/etc/passwd")
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(ctx, "read_file", {"path": "passwd"})


async def test_file_tools_refuse_a_symlinked_directory_pointing_out(
    ctx: ToolContext, workspace: Path
) -> None:
    outside = workspace.parent / "outside"
    outside.mkdir()
    (workspace / "etc").symlink_to("/etc")
    (workspace / "out").symlink_to(outside)
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(ctx, "read_file", {"path": "etc/passwd"})
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(ctx, "list_files", {"path": "etc"})
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(ctx, "write_file", {"path": "out/new/planted.txt", "content": "x"})
    assert list(outside.iterdir()) == []


async def test_write_file_refuses_a_dangling_symlink_pointing_out(ctx: ToolContext, workspace: Path) -> None:
    target = workspace.parent / "planted.txt"
    (workspace / "note.txt").symlink_to(target)
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(ctx, "write_file", {"path": "note.txt", "content": "x"})
    assert not target.exists()


async def test_symlinks_that_stay_inside_the_workspace_work(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "real.txt").write_text("inside")
    (workspace / "alias.txt").symlink_to(workspace / "real.txt")
    assert await call(ctx, "read_file", {"path": "alias.txt"}) == "inside"


# --- get_current_time -----------------------------------------------------------------------------


async def test_current_time_defaults_to_utc(ctx: ToolContext) -> None:
    output = await call(ctx, "get_current_time", {})
    stamp = datetime.fromisoformat(output.split(" ")[0])
    assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 5
    assert output.endswith(", UTC)")


async def test_current_time_in_an_iana_zone_has_that_zones_offset(ctx: ToolContext) -> None:
    output = await call(ctx, "get_current_time", {"timezone": "Asia/Kolkata"})
    stamp = datetime.fromisoformat(output.split(" ")[0])
    assert stamp.utcoffset() == datetime.now(ZoneInfo("Asia/Kolkata")).utcoffset()
    assert "Asia/Kolkata" in output


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd", "Europe"])
async def test_an_unknown_time_zone_is_a_tool_error(ctx: ToolContext, zone: str) -> None:
    with pytest.raises(ToolError, match="Unknown time zone"):
        await call(ctx, "get_current_time", {"timezone": zone})


# --- list_files -----------------------------------------------------------------------------------


async def test_list_files_shows_sorted_entries_with_type_and_size(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "b.txt").write_text("hello")
    (workspace / "a_dir").mkdir()
    (workspace / "c_link").symlink_to("/etc")
    output = await call(ctx, "list_files", {})
    assert output.splitlines() == [
        "Contents of '.' (3 entries):",
        "directory  a_dir/",
        "file       b.txt (5 bytes)",
        "symlink    c_link",
    ]


async def test_list_files_of_a_subfolder_and_of_an_empty_one(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "sub" / "empty").mkdir(parents=True)
    assert "directory  empty/" in await call(ctx, "list_files", {"path": "sub"})
    assert await call(ctx, "list_files", {"path": "sub/empty"}) == "'sub/empty' is empty."


async def test_list_files_is_capped_with_a_note(ctx: ToolContext, workspace: Path) -> None:
    for index in range(MAX_LIST_ENTRIES + 7):
        (workspace / f"f{index:04d}").touch()
    lines = (await call(ctx, "list_files", {})).splitlines()
    assert lines[0] == f"Contents of '.' ({MAX_LIST_ENTRIES + 7} entries):"
    assert len(lines) == MAX_LIST_ENTRIES + 2
    assert lines[-1] == "[... 7 more entries not shown]"


async def test_list_files_of_a_missing_folder_or_a_file_is_a_tool_error(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("x")
    with pytest.raises(ToolError, match="no directory 'nope'"):
        await call(ctx, "list_files", {"path": "nope"})
    with pytest.raises(ToolError, match="is a file"):
        await call(ctx, "list_files", {"path": "a.txt"})


# --- read_file ------------------------------------------------------------------------------------


async def test_read_file_returns_the_text(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "notes.md").write_text("héllo\nwörld\n", encoding="utf-8")
    assert await call(ctx, "read_file", {"path": "notes.md"}) == "héllo\nwörld\n"


async def test_read_file_truncates_big_files_with_a_note(ctx: ToolContext, workspace: Path) -> None:
    # A two-byte character straddles the cap: it is dropped, not turned into an error.
    content = "a" * (MAX_READ_BYTES - 1) + "é" + "b" * 1000
    (workspace / "big.txt").write_text(content, encoding="utf-8")
    output = await call(ctx, "read_file", {"path": "big.txt"})
    text, note = output.split("\n[truncated: ", 1)
    assert text == "a" * (MAX_READ_BYTES - 1)
    size = len(content.encode())
    assert note.startswith(f"showing the first {MAX_READ_BYTES} of {size} bytes of 'big.txt'")


@pytest.mark.parametrize("data", [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", b"caf\xe9 latin-1"])
async def test_read_file_refuses_binary_content(ctx: ToolContext, workspace: Path, data: bytes) -> None:
    (workspace / "blob").write_bytes(data)
    with pytest.raises(ToolError, match="read_file only reads text"):
        await call(ctx, "read_file", {"path": "blob"})


async def test_read_file_of_a_folder_or_missing_file_is_a_tool_error(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "dir").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        await call(ctx, "read_file", {"path": "dir"})
    with pytest.raises(ToolError, match=r"no file 'missing\.txt'"):
        await call(ctx, "read_file", {"path": "missing.txt"})


# --- write_file -----------------------------------------------------------------------------------


async def test_write_file_creates_parent_folders(ctx: ToolContext, workspace: Path) -> None:
    output = await call(ctx, "write_file", {"path": "src/pkg/mod.py", "content": "x = 'é'\n"})
    assert (workspace / "src" / "pkg" / "mod.py").read_text(encoding="utf-8") == "x = 'é'\n"
    assert output == "Wrote 9 bytes to 'src/pkg/mod.py'."


async def test_write_file_overwrites_and_refuses_a_folder(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("old content")
    await call(ctx, "write_file", {"path": "a.txt", "content": "new"})
    assert (workspace / "a.txt").read_text() == "new"
    (workspace / "dir").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        await call(ctx, "write_file", {"path": "dir", "content": "x"})


def test_params_models_forbid_unknown_fields() -> None:
    for tool in registry.all():
        assert tool.Params.model_config.get("extra") == "forbid", tool.name
        assert issubclass(tool.Params, BaseModel)


def test_write_file_preview_is_bounded_and_says_when_the_old_file_is_binary(tmp_path: Path) -> None:
    from agents.tools.files import MAX_PREVIEW_CHARS, WriteFileParams, WriteFileTool

    (tmp_path / "blob.bin").write_bytes(b"\x00\x01binary")
    tool = WriteFileTool()

    big = tool.preview(WriteFileParams(path="big.txt", content="x" * (MAX_PREVIEW_CHARS + 10)), tmp_path)
    binary = tool.preview(WriteFileParams(path="blob.bin", content="text"), tmp_path)
    outside = tool.preview(WriteFileParams(path="../x.txt", content="text"), tmp_path)

    assert big is not None and len(big["new"]) == MAX_PREVIEW_CHARS and big["truncated"] is True
    assert len(big["diff"]) <= MAX_PREVIEW_CHARS
    assert binary is not None and binary["old_binary"] is True and "old" not in binary
    assert outside is None  # the call itself fails with the reason; no preview of a refused path
    assert tool.describe(WriteFileParams(path="a.txt", content="1")) == "write 1 character to a.txt"
