"""The Tyr language server and `tyr shapes` (see docs/editor.md)."""
