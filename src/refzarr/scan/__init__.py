"""Placeholder: filled by a later issue (see DESIGN.md)."""
