"""Specification of tool definitions and the registry: the schema the model sees, and every
bad call turned into a `tool_error` the model can read instead of a crash."""

from __future__ import annotations

import errno

import pytest
from pydantic import BaseModel, Field

from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.tools import (
    Handler,
    ParsedCall,
    ToolDefinition,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    tool_error,
    tool_success,
)


class ReadInput(BaseModel):
    path: str = Field(description="File to read, relative to the workspace.")
    limit: int = Field(default=100, description="Most lines to return.")


class NoInput(BaseModel):
    pass


def read_handler(arguments: ReadInput) -> ToolResult:
    return tool_success(f"read {arguments.path} (limit {arguments.limit})")


def missing_file_handler(arguments: ReadInput) -> ToolResult:
    raise ToolFailure("not_found", f"no file named {arguments.path}")


def disk_handler(arguments: ReadInput) -> ToolResult:
    raise OSError(errno.ENOSPC, "No space left on device")


def buggy_handler(arguments: ReadInput) -> ToolResult:
    raise RuntimeError("a bug in the tool")


def define(
    name: str, handler: Handler = read_handler, model: type[BaseModel] = ReadInput
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"The {name} tool.",
        input_model=model,
        handler=handler,
        subject_field="path" if model is ReadInput else None,
    )


def registry(*tools: ToolDefinition) -> ToolRegistry:
    return ToolRegistry(tools or [define("read_file"), define("grep")])


def run(registry_: ToolRegistry, arguments: str, name: str = "read_file") -> ToolResult:
    return registry_.run(tool_call("call_1", name, arguments))


# Results


def test_tool_error_content_names_the_code() -> None:
    assert tool_error("not_found", "no such file") == ToolResult(
        content="Error [not_found]: no such file", is_error=True, error_code="not_found"
    )


def test_tool_success_is_not_an_error() -> None:
    assert tool_success("ok") == ToolResult(content="ok", is_error=False, error_code=None)


# Schema


def test_schema_comes_from_the_input_model() -> None:
    spec = define("read_file").spec()

    assert spec.name == "read_file"
    assert spec.description == "The read_file tool."
    assert spec.parameters["type"] == "object"
    assert set(spec.parameters["properties"]) == {"path", "limit"}
    assert spec.parameters["required"] == ["path"]


def test_schema_has_no_title() -> None:
    assert "title" not in define("read_file").spec().parameters


def test_schema_keeps_field_descriptions() -> None:
    properties = define("read_file").spec().parameters["properties"]

    assert properties["path"]["description"] == "File to read, relative to the workspace."
    assert properties["limit"]["description"] == "Most lines to return."


def test_spec_wire_shape_is_an_openai_function() -> None:
    spec = define("read_file").spec()

    assert spec.to_wire() == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "The read_file tool.",
            "parameters": spec.parameters,
        },
    }


# Registration and order


def test_specs_follow_registration_order() -> None:
    names = ["write_file", "bash", "grep", "read_file"]

    assert [spec.name for spec in registry(*map(define, names)).specs()] == names


def test_duplicate_registration_is_rejected() -> None:
    tools = registry()

    with pytest.raises(ValueError, match="read_file"):
        tools.register(define("read_file"))


def test_duplicate_names_in_the_constructor_are_rejected() -> None:
    with pytest.raises(ValueError, match="grep"):
        ToolRegistry([define("grep"), define("grep")])


def test_without_keeps_the_order_of_the_rest() -> None:
    tools = registry(*map(define, ["bash", "read_file", "task", "grep", "glob"]))

    assert tools.without("task", "read_file").names() == ["bash", "grep", "glob"]


def test_without_leaves_the_original_registry_alone() -> None:
    tools = registry()

    tools.without("grep")

    assert tools.names() == ["read_file", "grep"]


def test_registry_reports_membership_and_size() -> None:
    tools = registry()

    assert "grep" in tools
    assert "bash" not in tools
    assert len(tools) == 2


# Parsing and running calls


def test_valid_call_reaches_the_handler_with_validated_arguments() -> None:
    assert run(registry(), '{"path": "a.txt", "limit": 5}').content == "read a.txt (limit 5)"


def test_parse_returns_the_tool_and_typed_arguments() -> None:
    parsed = registry().parse(tool_call("call_1", "read_file", '{"path": "a.txt"}'))

    assert isinstance(parsed, ParsedCall)
    assert parsed.tool.name == "read_file"
    assert parsed.arguments == ReadInput(path="a.txt")
    assert parsed.subject == "a.txt"
    assert parsed.arguments_dict() == {"path": "a.txt", "limit": 100}


def test_empty_arguments_text_counts_as_an_empty_object() -> None:
    tools = registry(define("list_todos", handler=lambda _: tool_success("none"), model=NoInput))

    assert run(tools, "", name="list_todos").content == "none"


def test_unknown_tool_lists_the_available_tools() -> None:
    result = run(registry(), "{}", name="delete_everything")

    assert result.error_code == "unknown_tool"
    assert result.content.startswith("Error [unknown_tool]: ")
    assert "'delete_everything'" in result.content
    assert "available: read_file, grep" in result.content


def test_arguments_that_are_not_json_are_invalid_json() -> None:
    result = run(registry(), '{"path": "a.txt"')

    assert result.is_error
    assert result.error_code == "invalid_json"
    assert result.content.startswith("Error [invalid_json]: ")


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [('["a.txt"]', "list"), ('"a.txt"', "str"), ("42", "int"), ("4.5", "float")],
)
def test_json_that_is_not_an_object_is_invalid_arguments(arguments: str, kind: str) -> None:
    result = run(registry(), arguments)

    assert result.error_code == "invalid_arguments"
    assert (
        result.content == f"Error [invalid_arguments]: arguments must be a JSON object, got {kind}"
    )


def test_wrong_field_type_is_invalid_arguments_naming_the_field() -> None:
    result = run(registry(), '{"path": "a.txt", "limit": "many"}')

    assert result.error_code == "invalid_arguments"
    assert result.content.startswith("Error [invalid_arguments]: limit: ")


def test_missing_field_is_invalid_arguments_naming_the_field() -> None:
    result = run(registry(), '{"limit": 3}')

    assert result.error_code == "invalid_arguments"
    assert "path: Field required" in result.content


def test_handler_tool_failure_becomes_a_tool_error_with_its_code() -> None:
    result = run(registry(define("read_file", missing_file_handler)), '{"path": "gone.txt"}')

    assert result == tool_error("not_found", "no file named gone.txt")


def test_handler_os_error_becomes_an_io_error() -> None:
    result = run(registry(define("write_file", disk_handler)), '{"path": "a"}', "write_file")

    assert result.error_code == "io_error"
    assert result.content.startswith("Error [io_error]: OSError: ")
    assert "No space left on device" in result.content


def test_a_bug_in_a_handler_is_not_hidden_as_a_tool_error() -> None:
    with pytest.raises(RuntimeError, match="a bug in the tool"):
        run(registry(define("read_file", buggy_handler)), '{"path": "a"}')


def test_arguments_holding_a_lone_surrogate_are_a_tool_error_not_a_crash() -> None:
    """JSON can carry `\\udce9`; the size check counts it as three bytes instead of raising
    UnicodeEncodeError out of the registry, and the parser (orjson, which refuses lone
    surrogates) answers the model."""
    result = run(registry(), '{"path": "caf\udce9.txt"}')

    assert result.error_code == "invalid_json"
