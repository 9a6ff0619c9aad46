"""Tools: typed definitions, results the model can read, and a registry that never crashes
the loop on bad input.

Every problem with a call (arguments that are not JSON, not an object, or invalid; an
unknown tool; a handler that reports a failure) becomes a `tool_error` result, which the
loop pairs with the call so the model can read it and try again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, TypeAlias

import orjson
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from agent_tutorial.core.messages import AssistantMessage, ToolCall
from agent_tutorial.core.model import ToolSpec
from agent_tutorial.core.sandbox import SandboxPolicy
from agent_tutorial.core.text import encodable

Effect: TypeAlias = Literal["read", "write", "execute"]

MAX_TOOL_ARGUMENT_BYTES = 1024 * 1024
"""Arguments of one tool call larger than this are refused (the settings' default)."""


class WholeOutput(Protocol):
    """The complete text of a result whose `content` had to be cut to fit in memory (bash
    spools long output to a file as it arrives). Chapter 8 persists it in place of the cut
    content; the loop closes it once the batch is recorded."""

    @property
    def total_bytes(self) -> int:
        """UTF-8 bytes of the whole text, bytes dropped at the disk cap included."""
        ...

    def chunks(self) -> Iterator[bytes]:
        """The text as stored (a note stands for bytes dropped at the disk cap), in order."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class FileChange:
    """What a call would do to one file, for the approval prompt to show as a diff."""

    path: str
    before: str | None
    """The file's text now; None for a file the call would create."""
    after: str


@dataclass(frozen=True, slots=True)
class CommandOutcome:
    """How a shell command ended, as data, so the front ends show it without reading it
    back out of the text the model gets."""

    exit_code: int | None
    """The command's exit status; None when it timed out and was killed."""
    signal: int | None = None
    """The signal that killed it, if one did."""
    sandbox_denied: bool = False
    """It failed, and its output bears a sign of one of the sandbox's denials."""
    output_tail: tuple[str, ...] = ()
    """Its last lines of output (redacted, each shortened), for the activity line."""

    @property
    def failed(self) -> bool:
        return self.exit_code != 0 or self.signal is not None


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced. `redactions` counts the secrets masked in it;
    `whole_output`, when set, is the complete text that `content` shows only part of;
    `sandboxed` says the call ran confined by the operating system's sandbox; `command`,
    how the shell command of a bash call ended; `change`, what an edit did to its file."""

    content: str
    is_error: bool = False
    error_code: str | None = None
    redactions: int = 0
    whole_output: WholeOutput | None = None
    sandboxed: bool = False
    command: CommandOutcome | None = None
    change: FileChange | None = None


# Both builders make the text `encodable`: a file name that is not UTF-8 reaches the model,
# the log and the terminal as `caf\\xe9.txt`, the form the file tools accept back.
def tool_success(content: str) -> ToolResult:
    return ToolResult(content=encodable(content))


def tool_error(code: str, message: str) -> ToolResult:
    return ToolResult(
        content=encodable(f"Error [{code}]: {message}"), is_error=True, error_code=code
    )


class ToolFailure(Exception):
    """Raised by a tool handler for an expected failure the model should read and handle."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_result(self) -> ToolResult:
        return tool_error(self.code, self.message)


Handler: TypeAlias = Callable[[Any], ToolResult]


Preview: TypeAlias = Callable[[Any], FileChange | None]


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool: its name, what it is for, its pydantic input model and its handler.

    `effect` feeds the permission policy; `subject_field` names the input field (a command
    or a path) that permission rules and activity lines show; `sandbox`, the operating
    system's confinement of every call (bash's), which the policy and the approval prompt
    take into account.
    """

    name: str
    description: str
    input_model: type[BaseModel]
    handler: Handler
    effect: Effect = "read"
    subject_field: str | None = None
    sandbox: SandboxPolicy | None = None
    unconfined: Handler | None = None
    """The same tool outside the sandbox, for a denied command the user lets run outside
    it once (bash in a sandbox); None for a tool the sandbox does not confine."""
    preview: Preview | None = None
    """The change a call would make to a file (write_file, edit_file), read without making
    it; None when it cannot tell (the call will then fail and say why)."""
    parameters: Mapping[str, Any] | None = None
    """The JSON schema shown to the model when it is not the input model's: an MCP tool's
    own schema, which its server validates."""

    def spec(self) -> ToolSpec:
        if self.parameters is not None:
            return ToolSpec(self.name, self.description, dict(self.parameters))
        schema = self.input_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """A call whose tool exists and whose arguments validated."""

    call: ToolCall
    tool: ToolDefinition
    arguments: BaseModel

    @property
    def subject(self) -> str:
        field_name = self.tool.subject_field
        return str(getattr(self.arguments, field_name, "")) if field_name else ""

    def arguments_dict(self) -> dict[str, Any]:
        return self.arguments.model_dump(mode="json")


class ToolRegistry:
    """Tools in registration order (the order the model sees them)."""

    def __init__(
        self,
        tools: Iterable[ToolDefinition] = (),
        *,
        max_argument_bytes: int = MAX_TOOL_ARGUMENT_BYTES,
    ) -> None:
        if max_argument_bytes < 2:
            raise ValueError(f"max_argument_bytes must be at least 2, got {max_argument_bytes}")
        self.max_argument_bytes = max_argument_bytes
        """Calls with larger arguments (UTF-8 bytes) get an `arguments_too_large` error."""
        self._tools: dict[str, ToolDefinition] = {}
        self._specs: tuple[ToolSpec, ...] | None = None
        for tool in tools:
            self.register(tool)

    def register(self, tool: ToolDefinition) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._specs = None

    def __iter__(self) -> Iterator[ToolDefinition]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        """Built once: generating pydantic JSON schemas costs milliseconds per request."""
        if self._specs is None:
            self._specs = tuple(tool.spec() for tool in self._tools.values())
        return self._specs

    def without(self, *names: str) -> ToolRegistry:
        return ToolRegistry(
            (tool for tool in self if tool.name not in names),
            max_argument_bytes=self.max_argument_bytes,
        )

    def parse(self, call: ToolCall) -> ParsedCall | ToolResult:
        """Validate a call; on any problem return the `tool_error` the model should see."""
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return tool_error("unknown_tool", f"no tool named {call.name!r}; available: {known}")
        size = utf8_size(call.arguments)
        if size > self.max_argument_bytes:
            return tool_error(
                "arguments_too_large",
                f"the arguments are {size} bytes; a tool call may carry at most "
                f"{self.max_argument_bytes}. Split the work into several smaller calls.",
            )
        try:
            raw = orjson.loads(call.arguments or "{}")
        except orjson.JSONDecodeError as error:
            return tool_error("invalid_json", f"arguments for {call.name} are not JSON: {error}")
        if not isinstance(raw, dict):
            kind = type(raw).__name__
            return tool_error("invalid_arguments", f"arguments must be a JSON object, got {kind}")
        try:
            arguments = tool.input_model.model_validate(raw)
        except ValidationError as error:
            return tool_error("invalid_arguments", describe_validation_error(error))
        return ParsedCall(call=call, tool=tool, arguments=arguments)

    def invoke(self, parsed: ParsedCall) -> ToolResult:
        try:
            return parsed.tool.handler(parsed.arguments)
        except ToolFailure as failure:
            return failure.to_result()
        except OSError as error:  # full disk, vanished file: tell the model, never crash
            return tool_error("io_error", f"{type(error).__name__}: {error}")

    def run(self, call: ToolCall) -> ToolResult:
        """Parse and invoke in one step (chapters without policy or hooks)."""
        parsed = self.parse(call)
        return parsed if isinstance(parsed, ToolResult) else self.invoke(parsed)


def utf8_size(text: str) -> int:
    """UTF-8 bytes of `text`; a lone surrogate (JSON can carry `\\udce9`) counts as the three
    bytes it would take, instead of failing to encode."""
    # Counting characters first spares encoding text that is clearly small enough.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def shorten_oversized_arguments(message: AssistantMessage, cap: int) -> AssistantMessage:
    """`message` with every tool call's arguments over `cap` UTF-8 bytes shortened: its
    largest values are replaced by a note until the JSON fits (or, if it cannot, the whole
    arguments become one note). Such calls are refused by `ToolRegistry.parse`."""
    if all(utf8_size(call.arguments) <= cap for call in message.tool_calls):
        return message
    calls = tuple(
        replace(call, arguments=_shortened(call.arguments, cap))
        if utf8_size(call.arguments) > cap
        else call
        for call in message.tool_calls
    )
    return replace(message, tool_calls=calls)


def _shortened(arguments: str, cap: int) -> str:
    note = f"[omitted: {utf8_size(arguments)} bytes of arguments, over the {cap}-byte cap]"
    try:
        values = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        values = None
    if isinstance(values, dict):
        by_size = sorted(values, key=lambda key: len(orjson.dumps(values[key])), reverse=True)
        for key in by_size:
            values[key] = note
            shortened = orjson.dumps(values)
            if len(shortened) <= cap:
                return shortened.decode()
    return orjson.dumps({"omitted": note}).decode()


def describe_validation_error(
    error: ValidationError,
    *,
    whole: str = "arguments",
    problem: Callable[[ErrorDetails], str] | None = None,
) -> str:
    """`field.path: problem; …` on one line; `whole` names a problem with no field.
    `problem` words one item (pydantic's own message if not given)."""
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or whole
        problems.append(f"{where}: {problem(item) if problem else item['msg']}")
    return "; ".join(problems)
