"""`agent-tutorial mcp list`: the configured MCP servers (chapter 9), each started, asked
for its tools and stopped, with no session and no model settings."""

from __future__ import annotations

from typing import Annotated

import typer

from agent_tutorial.commands.process import current_project

mcp_app = typer.Typer(help="MCP servers (chapter 9).")


@mcp_app.command("list", short_help="The MCP servers and their tools.")
def mcp_list(
    as_json: Annotated[
        bool, typer.Option("--json", help='One JSON object: {"mcp_servers": [...]}.')
    ] = False,
) -> None:
    """Each configured MCP server: connected with its tools (and the names the model
    sees), failed with why, or disabled. A project's servers count only in a trusted
    folder (`agent-tutorial trust`)."""
    from contextlib import ExitStack

    from agent_tutorial.bootstrap import open_sandbox
    from agent_tutorial.commands.trust import FolderTrust
    from agent_tutorial.config import load_settings, read_project_settings
    from agent_tutorial.headless import json_text
    from agent_tutorial.mcp_session import describe_servers, list_servers, servers_record
    from agent_tutorial.profiles import P09
    from agent_tutorial.render import make_consoles

    out, err = make_consoles()
    project = current_project()
    files = read_project_settings(project.root)
    trust = FolderTrust(project, files, for_this_run=False)
    warning = trust.warning()
    if warning is not None:
        err.print(f"warning: {warning}", markup=False, highlight=False)
    settings = load_settings(project.root, project=files, trusted=trust.trusted)
    with ExitStack() as opened:  # each server in the sandbox a session would give it
        sandbox = open_sandbox(settings, project, P09, opened)
        statuses = list_servers(settings, project, sandbox.policy)
    if as_json:
        out.file.write(json_text({"mcp_servers": servers_record(statuses)}) + "\n")
        return
    for line in describe_servers(statuses):
        out.print(line, markup=False, highlight=False)
