"""The one root of every error a user can meet, and the whole tree drawn in one place.

The front ends (`cli.py`, `repl.py`) catch `AgentTutorialError` once: its `str()` is a
one-line message fit for the user, and `exit_code` is what the command exits with.

    AgentTutorialError                 exit 1 unless said otherwise
    ├── CommandFailed                  (commands.edge) a command stops: its message and exit code
    ├── ConfigError                    (config) settings missing or invalid: exit 2
    │   └── TrustStoreError            (folder_trust) the trust store is refused
    ├── McpConfigError                 (mcp_config) an MCP server entry is invalid: exit 2
    ├── ModelError                     (core.model) a model call failed
    │   ├── PromptTooLongError         the request does not fit the model's context window
    │   ├── AuthenticationError        401/403: wrong or missing key
    │   ├── RateLimitError             429 after the SDK's own retries
    │   ├── ModelNotFoundError         404: unknown model or endpoint path
    │   ├── BadRequestError            any other 4xx the provider rejected
    │   ├── ProviderError              5xx after retries, or a reply we cannot read
    │   ├── ConnectionFailedError      the endpoint could not be reached
    │   ├── IncompleteStreamError      the stream ended without a finish reason
    │   └── ReplyTimeoutError          no complete reply within request_timeout_s
    ├── AgentRunError                  (core.loop) the run cannot go on
    │   ├── MaxTurnsExceeded           the prompt used every model call it was allowed
    │   ├── ReplyCutOff                the reply was cut off at its output-token cap
    │   ├── ContextOverflowError       the request does not fit, even compacted
    │   ├── PromptBlocked              a UserPromptSubmit hook refused the prompt
    │   ├── RepeatedCallError          the same call again and again, nothing changed between
    │   └── TurnInterrupted            Ctrl-C during a turn (history stays paired)
    ├── ProcessorError                 (core.loop) a processor failed; the loop pairs it
    │   └── CompactionError            (features.compaction) compaction could not do its work
    │       ├── ArtifactPathError      an unsafe artifact id or directory
    │       └── ArtifactConflictError  the artifact already exists
    ├── HookError                      (core.hooks) a hook could not run or answered nonsense
    ├── SessionError                   (features.sessions) a session file cannot be used
    │   ├── SessionPathError, SessionLogError, SessionLoadError, SessionInUseError
    │   └── SessionLookupError         no session (or more than one) matches: exit 2
    │       └── NothingToContinue      (resuming) `--continue` found nothing to continue
    ├── ArtifactLookupError            (features.artifact_catalog) no artifact matches: exit 2
    ├── InstructionsError              (features.project_instructions) AGENTS.md unusable
    ├── PlotUnavailableError           (bench_report) matplotlib missing: exit 2
    ├── CheckpointStoreError           (adapters.checkpoint_store) the store or a restore failed
    ├── UndoError                      (features.checkpoints) undo cannot go ahead (bad input: 2)
    ├── SandboxUnavailableError        (adapters.sandbox) the sandbox asked for cannot run here
    ├── SandboxPathError               (adapters.sandbox_mounts) a path the policy needs is unusable
    └── WorkspacePathError             (core.paths) a path the model gave leads outside
        └── ProtectedPathError         a path the tools may not touch

Outside the tree on purpose: `ValueError` for invalid settings, arguments and constructor
misuse (a bug in the caller, or validation that pydantic reports), `ToolPairingError` (a
`ValueError`, public), and the signals that never leave their module: `ToolFailure` (a tool
tells the model why it failed; the registry turns it into a tool error), `SearchTimeout`,
`McpCallError` (an MCP call that did not return; its tool turns it into a tool error),
the adapter's private retry signals, and its transport's `ReplyOverLimit` signals, which
the adapter turns into `ModelError`s. `WorkspacePathError` is in the tree but is a
"tell the model" error: the tools turn it into a tool error; a user meets it only when the
CLI reads a path the same way.
"""

from __future__ import annotations

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130  # 130 = 128 + SIGINT
"""The command's exit codes: done, runtime failure, usage or configuration error, Ctrl-C."""


class AgentTutorialError(Exception):
    """Anything a user can meet; `str(error)` is one line fit to print after `error: `."""

    exit_code: int = EXIT_FAILURE
    """What the command exits with when this error ends it."""
