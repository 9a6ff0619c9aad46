"""Capabilities the chapters add on top of the core loop."""
